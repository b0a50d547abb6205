package controllerruntime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/podhealth/podhealth/internal/nilcheck"
)

// readTimeout bounds every read of this package. controller-runtime's cache
// starts an informer on the first read of a kind and waits for it to sync,
// for as long as the read's context lasts; without RBAC for that kind it
// never syncs, and a reconcile's context has no deadline. A read that times
// out is an error, which a Checker takes for unknown evidence, never for a
// missing node. It is a variable for the tests only.
var readTimeout atomic.Int64 // a time.Duration; atomic, since a probe outlives its caller

func init() { readTimeout.Store(int64(10 * time.Second)) }

var isNil = nilcheck.IsNil

// errCacheNotSynced is the error of a read that waited readTimeout for the
// cache to sync, and of every read after it until a probe finds it synced.
var errCacheNotSynced = errors.New("the cache did not sync within the read timeout (is RBAC for this kind missing?)")

// stallGuard makes a reader over a cache that never syncs cost one
// timeout, not one per read: after a read times out waiting for the cache,
// reads fail at once with errCacheNotSynced, and one probe at a time reads
// in the background, with the full timeout, until the cache answers; then
// reads go to the cache again. The zero stallGuard is ready; it is safe
// for concurrent use.
type stallGuard struct {
	mu      sync.Mutex
	stalled bool
	probing bool
}

// read runs get with the read timeout, unless the cache is stalled, in
// which case it starts a probe with get and returns errCacheNotSynced. A
// read that times out while its caller's ctx is still live stalls the
// cache; its error wraps errCacheNotSynced and the reader's own error.
func (g *stallGuard) read(ctx context.Context, get func(context.Context) error) error {
	g.mu.Lock()
	stalled := g.stalled
	startProbe := stalled && !g.probing
	if startProbe {
		g.probing = true
	}
	g.mu.Unlock()
	if startProbe {
		// The probe outlives the caller's read, never its own timeout; it
		// keeps the caller's values (the logger), not its cancellation.
		go g.probe(context.WithoutCancel(ctx), get)
	}
	if stalled {
		return errCacheNotSynced
	}
	readCtx, cancel := bounded(ctx)
	defer cancel()
	err := get(readCtx)
	if err != nil && ctx.Err() == nil && readCtx.Err() != nil {
		g.mu.Lock()
		g.stalled = true
		g.mu.Unlock()
		return errors.Join(errCacheNotSynced, err)
	}
	return err
}

// probe reads once with the full timeout, and lifts the stall when the
// cache answered in time, whatever the answer (a node, NotFound).
func (g *stallGuard) probe(ctx context.Context, get func(context.Context) error) {
	probeCtx, cancel := bounded(ctx)
	defer cancel()
	_ = get(probeCtx)
	answered := probeCtx.Err() == nil
	g.mu.Lock()
	defer g.mu.Unlock()
	g.probing = false
	if answered {
		g.stalled = false
	}
}

// bounded returns ctx with readTimeout as its deadline, unless it ends
// sooner.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, time.Duration(readTimeout.Load()))
}
