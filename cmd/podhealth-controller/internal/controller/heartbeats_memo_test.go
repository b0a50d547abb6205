package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/podhealth/podhealth/health"
	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

// memoCluster is a store of nodes and Leases, with two views of it: one
// memoized, told of each change as the informers' handlers would be, and
// one that lists afresh every time.
type memoCluster struct {
	t        *testing.T
	store    client.Client
	clock    *clocktesting.FakeClock
	memo     *viewMemo
	memoized heartbeatNodes
	fresh    heartbeatNodes
	listings atomic.Int64 // Lease listings: one per view listed
}

func newMemoCluster(t *testing.T, objs ...client.Object) *memoCluster {
	t.Helper()
	store, err := fakeapi.NewClient(objs...)
	require.NoError(t, err)
	m := &memoCluster{t: t, clock: clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))}
	m.store = interceptor.NewClient(store, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*coordinationv1.LeaseList); ok {
				m.listings.Add(1)
			}
			return c.List(ctx, list, opts...)
		},
	})
	nodes, err := podhealthcr.NewNodes(m.store)
	require.NoError(t, err)
	m.memo = &viewMemo{clock: m.clock}
	m.fresh = heartbeatNodes{nodes: nodes, leases: m.store, clock: m.clock}
	m.memoized = m.fresh
	m.memoized.memo = m.memo
	return m
}

func (m *memoCluster) handler(obj client.Object) toolscache.ResourceEventHandler {
	if _, ok := obj.(*corev1.Node); ok {
		return m.memo.nodeHandler()
	}
	return m.memo.leaseHandler()
}

// update writes the object that change makes of the stored one (change
// must give the same result when applied twice), then tells
// the memo as an informer would: after its store has it.
func (m *memoCluster) update(old client.Object, change func(client.Object)) {
	m.t.Helper()
	updated := old.DeepCopyObject().(client.Object)
	change(updated)
	require.NoError(m.t, m.store.Update(context.Background(), updated))
	if _, ok := updated.(*corev1.Node); ok {
		// An Update leaves a node's status as it was, as an API server's
		// does: write it through the status subresource.
		change(updated)
		require.NoError(m.t, m.store.Status().Update(context.Background(), updated))
	}
	m.handler(old).OnUpdate(old, updated)
}

func (m *memoCluster) create(obj client.Object) {
	m.t.Helper()
	require.NoError(m.t, m.store.Create(context.Background(), obj))
	m.handler(obj).OnAdd(obj, false)
}

func (m *memoCluster) delete(obj client.Object) {
	m.t.Helper()
	require.NoError(m.t, m.store.Delete(context.Background(), obj))
	m.handler(obj).OnDelete(obj)
}

func (m *memoCluster) get(obj client.Object) client.Object {
	m.t.Helper()
	require.NoError(m.t, m.store.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	return obj
}

// view returns what the Breaker reads of each node of a view.
func (m *memoCluster) view(h heartbeatNodes) map[string]breakerFacts {
	m.t.Helper()
	nodes, err := h.ListNodes(context.Background())
	require.NoError(m.t, err)
	out := make(map[string]breakerFacts, len(nodes))
	for _, n := range nodes {
		out[n.Name] = breakerFactsOf(n)
	}
	return out
}

// requireSameView checks that the memoized view is the fresh one, and
// returns how many listings the memoized view made.
func (m *memoCluster) requireSameView(msg string) int64 {
	m.t.Helper()
	before := m.listings.Load()
	memoized := m.view(m.memoized)
	listed := m.listings.Load() - before
	require.Equal(m.t, m.view(m.fresh), memoized, msg)
	return listed
}

// TestTheBreakersViewIsListedOnceForABurstOfChecksAndAgainAfterEachChange:
// with no change, a thousand checks list the nodes and Leases once; each
// change that the view shows (a node's state, maintenance or zone; a
// Lease stale with time, renewed after it went stale, added, deleted, or
// cut short; a clock that went back; a view older than viewMaxAge) makes
// the next check list again and see it, and the changes it does not show
// (a heartbeat, a renewal of a fresh Lease) do not.
func TestTheBreakersViewIsListedOnceForABurstOfChecksAndAgainAfterEachChange(t *testing.T) {
	m := newMemoCluster(t)
	now := m.clock.Now()
	for _, n := range []string{"n1", "n2", "n3"} {
		m.create(node(n, corev1.ConditionTrue))
		m.create(nodeLease(n, now, 40))
	}
	require.EqualValues(t, 1, m.requireSameView("first check"))
	for range 1000 {
		require.Zero(t, m.requireSameView("a burst of checks"))
	}

	steps := []struct {
		name   string
		change func()
		lists  bool
	}{
		{name: "a heartbeat that changes no state", change: func() {
			m.update(m.get(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}), func(o client.Object) {
				o.(*corev1.Node).Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(m.clock.Now())
			})
		}},
		{name: "a node goes not Ready", lists: true, change: func() {
			m.update(m.get(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}), func(o client.Object) {
				o.(*corev1.Node).Status.Conditions[0].Status = corev1.ConditionUnknown
			})
		}},
		{name: "a node's drain starts", lists: true, change: func() {
			m.update(m.get(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}), func(o client.Object) {
				n := o.(*corev1.Node)
				n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "DrainInProgress", Status: corev1.ConditionTrue})
			})
		}},
		{name: "a node moves to another zone", lists: true, change: func() {
			m.update(m.get(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3"}}), func(o client.Object) {
				o.SetLabels(map[string]string{corev1.LabelTopologyZone: "b"})
			})
		}},
		{name: "a fresh Lease renewed", change: func() {
			m.clock.Step(500 * time.Millisecond)
			m.update(m.get(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "n3"}}), func(o client.Object) {
				o.(*coordinationv1.Lease).Spec.RenewTime = &metav1.MicroTime{Time: m.clock.Now()}
			})
		}},
		{name: "past viewMaxAge, half a second before the oldest renewals are half their duration old", lists: true, change: func() { m.clock.SetTime(now.Add(19500 * time.Millisecond)) }},
		{name: "exactly half their duration old", change: func() { m.clock.SetTime(now.Add(20 * time.Second)) }},
		{name: "just past it: the Leases of n1 and n2 are stale", lists: true, change: func() { m.clock.SetTime(now.Add(20*time.Second + time.Millisecond)) }},
		{name: "the stale Lease renewed", lists: true, change: func() {
			m.update(m.get(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "n2"}}), func(o client.Object) {
				o.(*coordinationv1.Lease).Spec.RenewTime = &metav1.MicroTime{Time: m.clock.Now()}
			})
		}},
		{name: "a fresh Lease's duration cut", lists: true, change: func() {
			m.update(m.get(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "n3"}}), func(o client.Object) {
				o.(*coordinationv1.Lease).Spec.LeaseDurationSeconds = ptrTo(int32(10))
			})
		}},
		{name: "a Lease deleted", lists: true, change: func() {
			m.delete(m.get(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "n1"}}))
		}},
		{name: "a node added with a Lease never renewed", lists: true, change: func() {
			m.create(node("n4", corev1.ConditionTrue))
			m.create(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "n4"}})
		}},
		{name: "a node deleted", lists: true, change: func() {
			m.delete(m.get(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n4"}}))
		}},
		{name: "the clock goes back", lists: true, change: func() { m.clock.SetTime(m.clock.Now().Add(-time.Second)) }},
		{name: "past viewMaxAge", lists: true, change: func() { m.clock.Step(viewMaxAge + time.Millisecond) }},
	}
	for _, step := range steps {
		step.change()
		want := int64(0)
		if step.lists {
			want = 1
		}
		require.Equal(t, want, m.requireSameView(step.name), step.name)
		require.Zero(t, m.requireSameView(step.name+", checked again"), step.name)
	}
}

// TestTheBreakersMemoizedViewIsTheFreshOne drives random changes of nodes
// and Leases, and of the clock, through the store and the handlers, and
// checks after each that the memoized view and the Breaker's verdict on
// it are those of a view listed afresh.
func TestTheBreakersMemoizedViewIsTheFreshOne(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			m := newMemoCluster(t)
			names := []string{"n0", "n1", "n2", "n3", "n4", "n5"}
			for _, n := range names {
				m.create(node(n, corev1.ConditionTrue))
				m.create(nodeLease(n, m.clock.Now(), 40))
			}
			breaker := func(h heartbeatNodes) string {
				return health.Breaker{Nodes: h, UnhealthyShare: 0.3, MinUnhealthy: 1}.Open(context.Background())
			}
			lists, checks := int64(0), 0
			for step := range 150 {
				name := names[rng.IntN(len(names))]
				nodeKey := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
				leaseKey := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name}}
				nodeExists := m.store.Get(context.Background(), client.ObjectKeyFromObject(nodeKey), nodeKey) == nil
				leaseExists := m.store.Get(context.Background(), client.ObjectKeyFromObject(leaseKey), leaseKey) == nil
				var did string
				switch action := rng.IntN(9); {
				case action == 0:
					d := time.Duration(rng.IntN(30_000)) * time.Millisecond
					m.clock.Step(d)
					did = fmt.Sprint("the clock moved ", d)
				case action == 1 && nodeExists:
					status := []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}[rng.IntN(3)]
					m.update(nodeKey, func(o client.Object) { o.(*corev1.Node).Status.Conditions[0].Status = status })
					did = fmt.Sprintf("%s Ready %s", name, status)
				case action == 2 && nodeExists:
					m.update(nodeKey, func(o client.Object) {
						o.(*corev1.Node).Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(m.clock.Now())
					})
					did = name + " heartbeat"
				case action == 3 && nodeExists:
					zone := []string{"a", "b"}[rng.IntN(2)]
					m.update(nodeKey, func(o client.Object) { o.SetLabels(map[string]string{corev1.LabelTopologyZone: zone}) })
					did = name + " zone " + zone
				case action == 4 && nodeExists:
					status := []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse}[rng.IntN(2)]
					m.update(nodeKey, func(o client.Object) {
						n := o.(*corev1.Node)
						n.Status.Conditions = append(n.Status.Conditions[:1], corev1.NodeCondition{Type: "GracefulNodeShutdownInProgress", Status: status})
					})
					did = fmt.Sprintf("%s shutting down %s", name, status)
				case action == 5 && leaseExists:
					back := time.Duration(rng.IntN(30_000)) * time.Millisecond
					m.update(leaseKey, func(o client.Object) {
						o.(*coordinationv1.Lease).Spec.RenewTime = &metav1.MicroTime{Time: m.clock.Now().Add(-back)}
					})
					did = fmt.Sprintf("%s's Lease renewed as of %v ago", name, back)
				case action == 6 && leaseExists:
					seconds := int32(10 + rng.IntN(50))
					m.update(leaseKey, func(o client.Object) { o.(*coordinationv1.Lease).Spec.LeaseDurationSeconds = &seconds })
					did = fmt.Sprintf("%s's Lease of %d s", name, seconds)
				case action == 7 && leaseExists:
					m.delete(leaseKey)
					did = name + "'s Lease deleted"
				case action == 7:
					m.create(nodeLease(name, m.clock.Now(), 40))
					did = name + "'s Lease created"
				case action == 8 && nodeExists && len(names) > 1:
					m.delete(nodeKey)
					did = name + " deleted"
				case action == 8:
					m.create(node(name, corev1.ConditionTrue))
					did = name + " created"
				default:
					did = "nothing"
				}
				msg := fmt.Sprintf("step %d: %s", step, did)
				lists += m.requireSameView(msg)
				require.Equal(t, breaker(m.fresh), breaker(m.memoized), msg)
				checks += 2
			}
			require.Less(t, lists, int64(checks), "the memo served some checks")
		})
	}
}

// TestTheChecksWaitingOnAListingShareTheNextOneThoughChangesKeepComing:
// as the nodes of a mass failure come back, the informers report a change
// every few milliseconds, about as often as a listing takes. The checks
// that wait while one lists need only the changes made before they asked:
// one more listing serves them all, instead of one each.
func TestTheChecksWaitingOnAListingShareTheNextOneThoughChangesKeepComing(t *testing.T) {
	memo := &viewMemo{clock: clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))}
	release := make(chan struct{})
	var listings atomic.Int64
	list := func(context.Context, time.Time) ([]*corev1.Node, time.Time, error) {
		if listings.Add(1) == 1 {
			<-release
		}
		memo.changed() // a node comes back while each listing runs
		return []*corev1.Node{node("n1", corev1.ConditionTrue)}, time.Time{}, nil
	}
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		_, err := memo.get(ctx, list)
		first <- err
	}()
	for listings.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// Five checks ask while the first listing runs, after a change it may
	// have missed; in whatever order they get the view.
	memo.changed()
	asked := memo.changes.Load()
	const waiting = 5
	done := make(chan error, waiting)
	for range waiting {
		go func() {
			_, err := memo.getAsOf(ctx, asked, list)
			done <- err
		}()
	}
	close(release)
	require.NoError(t, <-first)
	for range waiting {
		require.NoError(t, <-done)
	}
	require.EqualValues(t, 2, listings.Load(), "the first listing, then one for the five that asked after a change")
}
