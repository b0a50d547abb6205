package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/podhealth/podhealth/health"
)

// drain returns the names of the requests in q in the order it gives them.
func drain(t *testing.T, q workqueue.TypedRateLimitingInterface[reconcile.Request]) []string {
	t.Helper()
	var out []string
	for q.Len() > 0 { // a priority queue's Len takes in what was added
		req, shutdown := q.Get()
		require.False(t, shutdown)
		out = append(out, req.Name)
		q.Done(req)
	}
	return out
}

// recoveredAfterAMassFailure returns a Reconciler whose Breaker lets go
// (one node of four is down: d1), with 300 groups held on h1 (back up),
// and the groups held on a node still down: one on d1, one on h2 and d1,
// one on a node the cache does not hold (gone).
func recoveredAfterAMassFailure(t *testing.T) (r *Reconciler, first []string) {
	t.Helper()
	r, err := New(newFakeManager(t, node("d1", corev1.ConditionUnknown)), Options{Breaker: health.Breaker{UnhealthyShare: 0.5, MinUnhealthy: 3}})
	require.NoError(t, err)
	held := func(name string, nodes ...string) {
		r.heldByBreaker(types.NamespacedName{Namespace: "shop", Name: name}, true, nodes...)
	}
	for i := range 150 {
		held(fmt.Sprintf("ReplicaSet.apps/up-%03d", i), "h1")
	}
	held("ReplicaSet.apps/on-d1", "d1")
	held("ReplicaSet.apps/on-h2-and-d1", "h2", "d1")
	held("ReplicaSet.apps/on-gone", "gone")
	for i := 150; i < 300; i++ {
		held(fmt.Sprintf("ReplicaSet.apps/up-%03d", i), "h1")
	}
	return r, []string{"ReplicaSet.apps/on-d1", "ReplicaSet.apps/on-gone", "ReplicaSet.apps/on-h2-and-d1"}
}

// TestOnceTheBreakerLetsGoTheGroupsHeldOnANodeStillDownAreJudgedFirst:
// when the Breaker lets go after a mass failure, every group it held is
// enqueued, and most find their pods alive again on the nodes that came
// back. The groups with a pod held on a node still down, the ones with
// a pod to force-delete, are judged before them, whether a node's event
// or the Breaker's own reading brings them; every held group is judged.
func TestOnceTheBreakerLetsGoTheGroupsHeldOnANodeStillDownAreJudgedFirst(t *testing.T) {
	ctx := context.Background()
	for name, bring := range map[string]func(r *Reconciler, q workqueue.TypedRateLimitingInterface[reconcile.Request]){
		"a node's event": func(r *Reconciler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.mapNewObject(r.groupsOnNodeAndBreakerHeld).Update(ctx, event.UpdateEvent{ObjectOld: node("h1", corev1.ConditionUnknown), ObjectNew: node("h1", corev1.ConditionTrue)}, q)
		},
		"the Breaker's reading": func(r *Reconciler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			watchCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			require.NoError(t, r.breakerWatch(time.Millisecond).Start(watchCtx, q))
			require.Eventually(t, func() bool { return q.Len() == 303 }, 5*time.Second, time.Millisecond)
		},
	} {
		t.Run(name, func(t *testing.T) {
			r, first := recoveredAfterAMassFailure(t)
			q := priorityqueue.New[reconcile.Request]("podhealth-test")
			defer q.ShutDown()
			bring(r, q)
			got := drain(t, q)
			// A tick of the watch under way as it stopped may add a group
			// drained already: each is judged, once or more.
			require.Len(t, sets.New(got...), 303, "every held group is judged")
			require.ElementsMatch(t, first, got[:3], "the groups held on a node still down come first")
		})
	}
}

// TestAGroupAlreadyQueuedMovesAheadWhenTheBreakerLetsGo: a node's event
// enqueued the held groups in the order of the queue while the Breaker
// was open on some nodes only; once it lets go on every node, its own
// reading moves the groups held on a node still down ahead of them.
func TestAGroupAlreadyQueuedMovesAheadWhenTheBreakerLetsGo(t *testing.T) {
	ctx := context.Background()
	r, first := recoveredAfterAMassFailure(t)
	q := priorityqueue.New[reconcile.Request]("podhealth-test")
	defer q.ShutDown()
	for _, req := range r.breakerHeldOnLease(ctx, nil) {
		q.Add(req) // as EnqueueRequestsFromMapFunc would: in no order
	}
	require.Equal(t, 303, q.Len())
	r.enqueueHeldFirst(ctx, q, r.breakerClosedGroups(ctx))
	got := drain(t, q)
	require.Len(t, got, 303, "the queue holds each group once")
	require.ElementsMatch(t, first, got[:3])
}

// TestWithoutAPriorityQueueEveryHeldGroupIsStillEnqueued: a queue that
// cannot order loses nothing.
func TestWithoutAPriorityQueueEveryHeldGroupIsStillEnqueued(t *testing.T) {
	r, _ := recoveredAfterAMassFailure(t)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	r.enqueueHeldFirst(context.Background(), q, r.breakerClosedGroups(context.Background()))
	require.Len(t, drain(t, q), 303)
}

// TestAHoldRecordsTheNodesOfThePodsItHeld: the check's report gives the
// nodes that judgedFirst reads; a pod without a node adds none.
func TestAHoldRecordsTheNodesOfThePodsItHeld(t *testing.T) {
	r, err := New(newFakeManager(t), Options{})
	require.NoError(t, err)
	group := types.NamespacedName{Namespace: "shop", Name: "ReplicaSet.apps/web"}
	heldOn := func(name, node string) health.PodReport {
		pod := evicted("shop", name, node, "ReplicaSet", "web")
		return health.PodReport{Pod: pod, Outcome: health.HeldBack, HeldBack: health.Hold{Reason: health.HeldByBreaker}}
	}
	report := health.Report{Pods: []health.PodReport{heldOn("a", "d1"), heldOn("b", "d2"), heldOn("c", "d1"), heldOn("d", ""), {Pod: alive("shop", "e", "h1", "ReplicaSet", "web")}}}
	r.retryAfter(group, report)
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	require.Equal(t, []string{"d1", "d2"}, r.breakerHeld[group].nodes)
}

// TestAGroupPutFirstForANodeThatHasReportedSinceGoesBackBehindTheOthers:
// the Breaker lets go while d2 has not yet reported, so its group is put
// first with those of the nodes still down; d2 reports before the group's
// turn. Its check puts it back at the default priority, behind the 300
// groups that came back with h1, and it is judged after them, once; the
// groups on nodes still down are judged first as before.
func TestAGroupPutFirstForANodeThatHasReportedSinceGoesBackBehindTheOthers(t *testing.T) {
	ctx := context.Background()
	r, first := recoveredAfterAMassFailure(t)
	require.NoError(t, r.cache.Create(ctx, node("d2", corev1.ConditionUnknown)))
	onD2 := types.NamespacedName{Namespace: "shop", Name: "ReplicaSet.apps/on-d2"}
	r.heldByBreaker(onD2, true, "d2")
	q := priorityqueue.New[reconcile.Request]("podhealth-test")
	defer q.ShutDown()
	r.enqueueHeldFirst(ctx, q, r.breakerClosedGroups(ctx))
	require.Equal(t, 304, q.Len())

	reported := node("d2", corev1.ConditionTrue)
	reported.ResourceVersion = ""
	require.NoError(t, r.cache.Delete(ctx, reported))
	require.NoError(t, r.cache.Create(ctx, reported))

	// What controller-runtime does with each request and its result.
	var judged []string
	putBack := 0
	for len(judged) < 304 {
		// A group put back is ready again after a moment, not at once.
		require.Eventually(t, func() bool { return q.Len() > 0 }, 5*time.Second, time.Millisecond, "%d groups judged, none ready", len(judged))
		req, _, shutdown := q.GetWithPriority()
		require.False(t, shutdown)
		res, err := r.Reconcile(ctx, req)
		require.NoError(t, err)
		q.Done(req)
		if res.Priority != nil {
			require.Equal(t, onD2.Name, req.Name, "only the group whose node reported is put back")
			require.Positive(t, res.RequeueAfter)
			q.AddWithOpts(priorityqueue.AddOpts{After: res.RequeueAfter, Priority: res.Priority}, req)
			putBack++
			continue
		}
		judged = append(judged, req.Name)
	}
	require.Equal(t, 1, putBack)
	require.Len(t, sets.New(judged...), 304, "every held group is judged, once")
	require.Zero(t, q.Len())
	require.ElementsMatch(t, first, judged[:3], "the groups held on a node still down come first")
	require.Equal(t, onD2.Name, judged[len(judged)-1], "the group whose node reported comes after those that came back before it")
}
