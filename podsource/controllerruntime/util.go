package controllerruntime

import "reflect"

// isNil reports whether v is nil or an interface holding a nil pointer,
// map, slice, channel or func, so that constructors refuse a typed nil
// (a nil *T in an interface) as they refuse a nil interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
