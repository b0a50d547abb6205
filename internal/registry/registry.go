package registry

import (
	"fmt"
	"reflect"
	"sync"
)

// DefaultCapacity is how many keys a Registry remembers by default: a
// process has one client or a few; past it, the oldest key is forgotten
// and its state made anew when next asked for.
const DefaultCapacity = 64

// Registry maps keys to state made on first use. The zero Registry is
// ready to use with DefaultCapacity. It is safe for concurrent use.
type Registry[K comparable, V any] struct {
	mu    sync.Mutex
	byKey map[K]V
	order []K
}

// Get returns the state of key, made by build on first use. A key that
// holds a value of a type that cannot be compared (a struct with a map, a
// slice or a func in it) is refused with an error, never a panic: its
// state could not be found again.
func (r *Registry[K, V]) Get(key K, build func() (V, error)) (V, error) {
	var zero V
	if err := Comparable(key); err != nil {
		return zero, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.byKey[key]; ok {
		return v, nil
	}
	v, err := build()
	if err != nil {
		return zero, err
	}
	if r.byKey == nil {
		r.byKey = map[K]V{}
	}
	if len(r.order) >= DefaultCapacity {
		delete(r.byKey, r.order[0])
		r.order = r.order[1:]
	}
	r.byKey[key] = v
	r.order = append(r.order, key)
	return v, nil
}

// Len returns how many keys are remembered.
func (r *Registry[K, V]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byKey)
}

// Comparable returns an error when key, or a value within it (a field of
// a struct, an interface's dynamic value), has a type that cannot be
// compared, so that using key in a map would panic.
func Comparable(key any) error {
	if bad := incomparable(reflect.ValueOf(key)); bad != nil {
		return fmt.Errorf("a %T cannot be told apart from another: it holds a %s, which cannot be compared: pass a pointer", key, bad)
	}
	return nil
}

// incomparable returns the first type within v that cannot be compared.
func incomparable(v reflect.Value) reflect.Type {
	if !v.IsValid() {
		return nil
	}
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return incomparable(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if bad := incomparable(v.Field(i)); bad != nil {
				return bad
			}
		}
		return nil
	case reflect.Array:
		for i := range v.Len() {
			if bad := incomparable(v.Index(i)); bad != nil {
				return bad
			}
		}
		return nil
	}
	if !v.Type().Comparable() {
		return v.Type()
	}
	return nil
}
