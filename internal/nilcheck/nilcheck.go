// Package nilcheck tells a nil dependency from a real one, for the
// constructors of package health and of its bindings, so that they refuse
// exactly the same values.
package nilcheck

import "reflect"

// IsNil reports whether v is nil, or a nil pointer, map, slice, channel,
// function or interface held in an interface: what a constructor returns
// on error when its caller ignored the error (a typed nil).
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
