package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/podhealth/podhealth/health"
)

// deadPodPriority is the queue priority of the groups that judgedFirst
// picks; every other request has the default, 0 (the initial listing's
// events handler.LowPriority).
const deadPodPriority = 10

// judgedFirst returns, for the requests of one event, whether a request is
// for a group whose last check the Breaker held back a pod on a node that
// is down now (not Ready in the cache, or not in it at all).
//
// Why: when the Breaker lets go after a mass failure, every group it held
// is enqueued, tens of thousands, with the groups on every node that came
// back; most find their pods alive again. The few whose pods are on the
// nodes still down are the ones with a pod to force-delete, and in the
// order of the queue they waited behind the others: at 2,500 nodes the
// last of them was judged 36 s after the Breaker closed, with 15,000
// groups still queued.
//
// It orders the work only: a group it does not pick is judged all the
// same, and every check reads the Breaker and the pods itself. A node
// that cannot be read counts as down (judged sooner, which costs
// nothing). Each node is read once per event, from the cache, without a
// copy.
func (r *Reconciler) judgedFirst(ctx context.Context) func(types.NamespacedName) bool {
	down := map[string]bool{}
	nodeDown := func(name string) bool {
		if d, ok := down[name]; ok {
			return d
		}
		var node corev1.Node
		err := r.cache.Get(ctx, client.ObjectKey{Name: name}, &node, client.UnsafeDisableDeepCopy)
		d := err != nil || health.NodeStateOf(&node) != health.NodeReady
		down[name] = d
		return d
	}
	return func(group types.NamespacedName) bool {
		r.heldMu.Lock()
		nodes := r.breakerHeld[group].nodes
		r.heldMu.Unlock()
		for _, name := range nodes {
			if nodeDown(name) {
				return true
			}
		}
		return false
	}
}

// enqueueHeldFirst adds reqs to q, those that judgedFirst picks at
// deadPodPriority when q is a priority queue (the controller's is).
func (r *Reconciler) enqueueHeldFirst(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok || len(reqs) == 0 {
		for _, req := range reqs {
			q.Add(req)
		}
		return
	}
	first, priority := r.judgedFirst(ctx), deadPodPriority
	for _, req := range reqs {
		if first(req.NamespacedName) {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
		} else {
			q.Add(req)
		}
	}
}
