package controller

import (
	"context"
	"time"

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

// putBackAfter is how soon a group that firstNoLonger puts back is ready
// again in the queue: any delay above zero, which is how a check asks for
// it (reconcile.Result.RequeueAfter), with the default priority.
const putBackAfter = time.Millisecond

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
	onNodeDown := r.onNodeDown(ctx)
	return func(group types.NamespacedName) bool {
		r.heldMu.Lock()
		nodes := r.breakerHeld[group].nodes
		r.heldMu.Unlock()
		return onNodeDown(nodes)
	}
}

// onNodeDown returns whether one of the named nodes is down (not Ready in
// the cache, or not in it). Each node is read once in the returned func's
// life, from the cache, without a copy.
func (r *Reconciler) onNodeDown(ctx context.Context) func(nodes []string) bool {
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
	return func(nodes []string) bool {
		for _, name := range nodes {
			if nodeDown(name) {
				return true
			}
		}
		return false
	}
}

// firstNoLonger reports whether the group was put first (enqueueHeldFirst)
// for a node that is no longer down: its check then puts it back in the
// queue at the default priority instead of judging it now.
//
// Why: a node that comes back is down until it reports, within a
// kubelet's 10 s status period, so the Breaker's letting go puts first the
// groups of every node not yet back, and the queue cannot lower a
// priority once the node has reported. At 5,000 nodes the groups of the
// 4 nodes still down were judged 8.7 s after the last of 1,496 recovered
// nodes had reported, behind 14,000 groups put first for nodes that were
// down no longer.
//
// It orders the work only: the group is judged when its turn comes again,
// and an event that finds one of its nodes down puts it first again.
func (r *Reconciler) firstNoLonger(ctx context.Context, group types.NamespacedName) bool {
	r.heldMu.Lock()
	hold, ok := r.breakerHeld[group]
	if !ok || !hold.first {
		r.heldMu.Unlock()
		return false
	}
	hold.first = false
	r.breakerHeld[group] = hold
	r.heldMu.Unlock()
	return !r.onNodeDown(ctx)(hold.nodes)
}

// putFirst records that the group waits in the queue at deadPodPriority.
func (r *Reconciler) putFirst(group types.NamespacedName) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	if hold, ok := r.breakerHeld[group]; ok {
		hold.first = true
		r.breakerHeld[group] = hold
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
			r.putFirst(req.NamespacedName)
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
		} else {
			q.Add(req)
		}
	}
}
