package controller

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// breakerWatchInterval is how often, while the Breaker holds a group
// back, the controller reads the Breaker itself (see breakerClosedGroups).
const breakerWatchInterval = 5 * time.Second

// breakerClosedGroups returns every group whose last check the Breaker
// held back, when any is and the Breaker, read now, stops force deletes
// on no node; nil otherwise.
//
// Why: the node and Lease events that can close the Breaker bring the
// groups it held back (breakerHeldGroups), but the Breaker can close with
// no such event: a node read that stalled fails at once until a probe in
// the background finds the cache answering (podhealthcr.Nodes), and the
// Breaker, unable to read, holds every node until then; no informer event
// marks that moment. And a CI run waited for the re-check interval after
// a closing whose missed event could not be found. Read every
// breakerWatchInterval, the Breaker's closing is an event of its own,
// whatever closed it. Each read is one listing of the nodes at most (the
// shared view); none while no group is held.
//
// It enqueues every held group, including those an event has already
// enqueued: the queue holds each once, and a group that judgedFirst picks
// moves ahead of the others.
func (r *Reconciler) breakerClosedGroups(ctx context.Context) []reconcile.Request {
	r.heldMu.Lock()
	held := len(r.breakerHeld)
	r.heldMu.Unlock()
	if held == 0 {
		return nil
	}
	breaker := r.opts.Breaker
	breaker.Nodes = r.breaker
	if breaker.Open(ctx) != "" {
		return nil
	}
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	out := make([]reconcile.Request, 0, len(r.breakerHeld))
	for group := range r.breakerHeld {
		out = append(out, reconcile.Request{NamespacedName: group})
	}
	clear(r.notEnqueued)
	return out
}

// breakerWatch is the source that enqueues breakerClosedGroups every
// interval until its context ends. It runs with the controller: on the
// leader only.
func (r *Reconciler) breakerWatch(interval time.Duration) source.Source {
	return source.Func(func(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				r.enqueueHeldFirst(ctx, queue, r.breakerClosedGroups(ctx))
			}
		}()
		return nil
	})
}
