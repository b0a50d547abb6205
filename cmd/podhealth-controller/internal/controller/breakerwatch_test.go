package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/podhealth/podhealth/health"
)

func requestNames(reqs []reconcile.Request) []string {
	var out []string
	for _, req := range reqs {
		out = append(out, req.String())
	}
	slices.Sort(out)
	return out
}

// threeOfSixNodesDown returns a Reconciler on clk over d1 to d3 not Ready
// and h1 to h3 Ready, whose Breaker stops force deletes on every node
// while 3 are down (30 %, at least 3), and its manager.
func threeOfSixNodesDown(t *testing.T, clk *clocktesting.FakePassiveClock) (fakeManager, *Reconciler) {
	t.Helper()
	m := newFakeManager(t, node("d1", corev1.ConditionUnknown), node("d2", corev1.ConditionUnknown), node("d3", corev1.ConditionUnknown))
	r, err := New(m, Options{Clock: clk, Breaker: health.Breaker{UnhealthyShare: 0.3, MinUnhealthy: 3}})
	require.NoError(t, err)
	return m, r
}

// TestTheHeldGroupsComeBackWhenTheBreakerIsSeenClosedWhateverClosedIt: an
// event while the Breaker holds every node enqueues no held group; should
// the Breaker close with no event that a check after it reads (here a
// node's change that no handler reports, as a stalled cache read that
// answers again), the held groups were judged again only at the re-check
// interval. The Breaker's own reading brings them back,
// once the shared view has ended (viewMaxAge), and only once it is closed.
func TestTheHeldGroupsComeBackWhenTheBreakerIsSeenClosedWhateverClosedIt(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	m, r := threeOfSixNodesDown(t, clk)
	r.breaker.memo = r.newViewMemo()
	ctx := context.Background()
	web := types.NamespacedName{Namespace: "shop", Name: "ReplicaSet.apps/web"}
	db := types.NamespacedName{Namespace: "shop", Name: "StatefulSet.apps/db"}

	require.Empty(t, r.breakerClosedGroups(ctx), "no group held")
	r.heldByBreaker(web, true)
	r.heldByBreaker(db, true)
	require.Empty(t, r.breakerHeldOnLease(ctx, nil), "an event while the Breaker holds every node")
	require.Empty(t, r.breakerClosedGroups(ctx), "3 of 6 nodes not Ready: the Breaker is open")

	// d1 comes back in the cache; no handler says so.
	var d1 corev1.Node
	require.NoError(t, m.client.Get(ctx, client.ObjectKey{Name: "d1"}, &d1))
	d1.Status = node("d1", corev1.ConditionTrue).Status
	require.NoError(t, m.client.Status().Update(ctx, &d1))
	require.Empty(t, r.breakerClosedGroups(ctx), "the shared view, listed before the change, holds until it ends")
	clk.SetTime(now.Add(viewMaxAge + time.Millisecond))
	require.Equal(t, []string{web.String(), db.String()}, requestNames(r.breakerClosedGroups(ctx)))

	// Once judged, a group that is not held is not brought back.
	r.heldByBreaker(web, false)
	require.Equal(t, []string{db.String()}, requestNames(r.breakerClosedGroups(ctx)))

	// db waits in the queue: a node event need not enqueue it again, until
	// its check ends held once more.
	require.Empty(t, r.breakerHeldOnLease(ctx, nil), "a group the Breaker's reading enqueued")
	r.heldByBreaker(db, true)
	require.Equal(t, []string{db.String()}, requestNames(r.breakerHeldOnLease(ctx, nil)))
}

// TestTheBreakerWatchEnqueuesTheHeldGroupsUntilItsContextEnds: the source
// reads the Breaker every interval and adds the groups to the queue.
func TestTheBreakerWatchEnqueuesTheHeldGroupsUntilItsContextEnds(t *testing.T) {
	r, err := New(newFakeManager(t), Options{})
	require.NoError(t, err)
	web := types.NamespacedName{Namespace: "shop", Name: "ReplicaSet.apps/web"}
	r.heldByBreaker(web, true)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, r.breakerWatch(time.Millisecond).Start(ctx, queue))
	got, shutdown := queue.Get()
	require.False(t, shutdown)
	require.Equal(t, web, got.NamespacedName)
	queue.Done(got)
	cancel()
	// Once its context has ended, it adds nothing more: an item added by a
	// tick already under way is drained first.
	time.Sleep(10 * time.Millisecond)
	for queue.Len() > 0 {
		item, _ := queue.Get()
		queue.Done(item)
	}
	time.Sleep(20 * time.Millisecond)
	require.Zero(t, queue.Len(), "items added after the context ended")
}

// TestWhileTheBreakerHoldsEveryNodeAnEventEnqueuesNoHeldGroup: as the
// node-lifecycle controller marks the nodes of a mass failure one by one,
// each mark judged every held group again, to hold it again. While the
// Breaker stops force deletes on every node (the cluster is disrupted,
// or the nodes cannot be read), an event enqueues none; the event after
// which it no longer does enqueues them all. A disrupted zone stops only
// its own nodes: events still enqueue the held groups.
func TestWhileTheBreakerHoldsEveryNodeAnEventEnqueuesNoHeldGroup(t *testing.T) {
	inZone := func(n *corev1.Node, zone string) *corev1.Node {
		n.Labels = map[string]string{corev1.LabelTopologyZone: zone}
		return n
	}
	web := types.NamespacedName{Namespace: "shop", Name: "ReplicaSet.apps/web"}
	for _, tc := range []struct {
		name    string
		nodes   []*corev1.Node
		listErr bool
		want    int
	}{
		{name: "3 of 6 nodes not Ready", nodes: []*corev1.Node{node("d1", corev1.ConditionUnknown), node("d2", corev1.ConditionUnknown), node("d3", corev1.ConditionUnknown)}},
		{name: "the nodes cannot be read", listErr: true},
		{name: "2 of 6 nodes not Ready", nodes: []*corev1.Node{node("d1", corev1.ConditionUnknown), node("d2", corev1.ConditionUnknown), node("d3", corev1.ConditionTrue)}, want: 1},
		{name: "3 of the 4 nodes of zone b not Ready, 3 of 13 in all", want: 1, nodes: []*corev1.Node{
			inZone(node("b1", corev1.ConditionUnknown), "b"), inZone(node("b2", corev1.ConditionUnknown), "b"), inZone(node("b3", corev1.ConditionUnknown), "b"), inZone(node("b4", corev1.ConditionTrue), "b"),
			inZone(node("a1", corev1.ConditionTrue), "a"), inZone(node("a2", corev1.ConditionTrue), "a"), inZone(node("a3", corev1.ConditionTrue), "a"), inZone(node("a4", corev1.ConditionTrue), "a"),
			inZone(node("a5", corev1.ConditionTrue), "a"), inZone(node("a6", corev1.ConditionTrue), "a"), inZone(node("a7", corev1.ConditionTrue), "a")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			for _, n := range tc.nodes {
				objs = append(objs, n)
			}
			r, err := New(newFakeManager(t, objs...), Options{Breaker: health.Breaker{UnhealthyShare: 0.3, MinUnhealthy: 3}})
			require.NoError(t, err)
			if tc.listErr {
				r.breaker.nodes = failingNodes{}
			}
			r.heldByBreaker(web, true)
			ctx := context.Background()
			require.Len(t, r.breakerHeldOnLease(ctx, nil), tc.want)
			require.Len(t, r.breakerHeldOnLease(ctx, nil), 0, "enqueued once")
		})
	}
}

// failingNodes is a node lister that cannot list.
type failingNodes struct{}

func (failingNodes) ListNodes(context.Context) ([]*corev1.Node, error) {
	return nil, health.ErrNodesUnavailable
}

// countingNodes counts the listings of the nodes it wraps, and fails them
// while failing is set.
type countingNodes struct {
	health.NodeLister
	listings *int
	failing  *bool
}

func (c countingNodes) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	*c.listings++
	if *c.failing {
		return nil, health.ErrNodesUnavailable
	}
	return c.NodeLister.ListNodes(ctx)
}

// TestAnEventListsTheNodesOnlyWhileTheLastListingFoundTheBreakerOpenEverywhere:
// as a mass failure's nodes come back, each node event read the Breaker
// afresh, a listing of every node and Lease, to learn whether to enqueue
// the held groups. Once a listing (an event's or a check's) has found the
// Breaker closed on some node, an event enqueues them with no listing;
// while the last one found it open everywhere, or could not list, an event
// lists afresh, so that it enqueues nothing while no check could let a
// pod go. A stale finding that it is closed costs one round of checks,
// whose listings record that it is open again.
func TestAnEventListsTheNodesOnlyWhileTheLastListingFoundTheBreakerOpenEverywhere(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	m, r := threeOfSixNodesDown(t, clk)
	var listings int
	var failing bool
	r.breaker.nodes = countingNodes{NodeLister: r.breaker.nodes, listings: &listings, failing: &failing}
	r.breaker.memo = r.newViewMemo()
	ctx := context.Background()
	web := types.NamespacedName{Namespace: "shop", Name: "ReplicaSet.apps/web"}
	setState := func(name string, status corev1.ConditionStatus) {
		var n corev1.Node
		require.NoError(t, m.client.Get(ctx, client.ObjectKey{Name: name}, &n))
		n.Status = node(name, status).Status
		require.NoError(t, m.client.Status().Update(ctx, &n))
	}
	event := func(wantListings int) []string {
		t.Helper()
		got := requestNames(r.breakerHeldOnLease(ctx, nil))
		require.Equal(t, wantListings, listings, "listings after this event")
		return got
	}

	r.heldByBreaker(web, true)
	require.Empty(t, event(1), "nothing listed yet: an event lists, and finds 3 of 6 nodes not Ready")
	require.Empty(t, event(2), "the last listing found the Breaker open everywhere: the next event lists again")

	setState("d1", corev1.ConditionTrue)
	require.Equal(t, []string{web.String()}, event(3), "d1 came back: the listing finds the Breaker closed")
	r.heldByBreaker(web, true) // its check is held again (say, by the budget)
	require.Equal(t, []string{web.String()}, event(3), "closed when last listed: no listing")

	// d1 fails again. The event trusts the last listing and enqueues the
	// group; its check's listing (the Breaker's) finds it open everywhere.
	setState("d1", corev1.ConditionUnknown)
	r.heldByBreaker(web, true)
	require.Equal(t, []string{web.String()}, event(3), "a stale finding of closed costs a check")
	_, err := r.breaker.ListNodes(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, listings, "the check lists: the event ended the shared view")
	r.heldByBreaker(web, true)
	require.Empty(t, event(5), "open everywhere when last listed: the event lists again")

	// A listing that fails leaves nothing known: the next event lists.
	setState("d1", corev1.ConditionTrue)
	require.Equal(t, []string{web.String()}, event(6))
	failing = true
	clk.SetTime(now.Add(2 * viewMaxAge)) // the shared view has ended
	_, err = r.breaker.ListNodes(ctx)
	require.Error(t, err)
	require.Equal(t, 7, listings)
	r.heldByBreaker(web, true)
	require.Empty(t, event(8), "the nodes cannot be read: the Breaker holds every node")
	failing = false
	require.Equal(t, []string{web.String()}, event(9))
}

// TestAnUpdateIsMappedByItsNewObjectOnly: EnqueueRequestsFromMapFunc maps
// an update's old object and its new one, so each node or Lease event ran
// breakerHeldGroups twice; mapNewObject maps each event once.
func TestAnUpdateIsMappedByItsNewObjectOnly(t *testing.T) {
	r, err := New(newFakeManager(t), Options{})
	require.NoError(t, err)
	var mapped []string
	h := r.mapNewObject(func(_ context.Context, obj client.Object) []reconcile.Request {
		mapped = append(mapped, obj.GetName())
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "for-" + obj.GetName()}}}
	})
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: node("created", corev1.ConditionTrue)}, queue)
	h.Update(ctx, event.UpdateEvent{ObjectOld: node("old", corev1.ConditionUnknown), ObjectNew: node("new", corev1.ConditionTrue)}, queue)
	h.Delete(ctx, event.DeleteEvent{Object: node("deleted", corev1.ConditionTrue)}, queue)
	h.Generic(ctx, event.GenericEvent{Object: node("generic", corev1.ConditionTrue)}, queue)
	require.Equal(t, []string{"created", "new", "deleted", "generic"}, mapped)
	var queued []string
	for queue.Len() > 0 {
		req, _ := queue.Get()
		queued = append(queued, req.Name)
		queue.Done(req)
	}
	slices.Sort(queued)
	require.Equal(t, []string{"for-created", "for-deleted", "for-generic", "for-new"}, queued)
}
