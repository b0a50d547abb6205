package controllerruntime

import (
	"context"
	"reflect"
	"time"
)

// readTimeout bounds every read of this package. controller-runtime's cache
// starts an informer on the first read of a kind and waits for it to sync,
// for as long as the read's context lasts; without RBAC for that kind it
// never syncs, and a reconcile's context has no deadline. A read that times
// out is an error, which a Checker takes for unknown evidence, never for a
// missing node.
const readTimeout = 10 * time.Second

// bounded returns ctx with readTimeout as its deadline, unless it ends
// sooner.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, readTimeout)
}

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
