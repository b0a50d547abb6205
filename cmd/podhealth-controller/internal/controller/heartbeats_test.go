package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

// holds records the hold reason of every dead pod a check reports.
type holds struct {
	mu      sync.Mutex
	reasons []string
}

func (h *holds) Observe(_ context.Context, r health.PodReport) {
	if r.Verdict.State != health.Dead {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reasons = append(h.reasons, r.HeldBack.Reason.String())
}

func nodeLease(name string, renewed time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renewed}, LeaseDurationSeconds: &seconds},
	}
}

// TestBreakerCountsANodeWhoseLeaseIsStaleAsNotReady: with 11 nodes, one
// of them failed and marked Unknown, the Breaker (30 %, at least 3) lets
// a dead pod of the failed node go; when three more nodes have missed two
// renewals of their Leases, though their conditions still say Ready, it
// holds the pod back, and it fails closed when the Leases cannot be read.
func TestBreakerCountsANodeWhoseLeaseIsStaleAsNotReady(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	healthy := []string{"h1", "h2", "h3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"} // h1 to h3: newFakeManager's
	leases := func(renewed func(name string) time.Time, seconds int32) []client.Object {
		var out []client.Object
		for _, n := range append(healthy, "lost") {
			out = append(out, nodeLease(n, renewed(n), seconds))
		}
		return out
	}
	fresh := func(string) time.Time { return now.Add(-5 * time.Second) }
	threeStopped := func(ago time.Duration) func(string) time.Time {
		return func(n string) time.Time {
			if n == "n4" || n == "n5" || n == "n6" || n == "lost" {
				return now.Add(-ago)
			}
			return now.Add(-5 * time.Second)
		}
	}
	listFails := errors.New("leases: the cache did not sync")
	for _, tc := range []struct {
		name      string
		leases    []client.Object
		listErr   error
		unsynced  bool
		clockSkew time.Duration
		want      string // the dead pod's hold reason
		deleted   bool
	}{
		{name: "every other Lease fresh", leases: leases(fresh, 40), want: "NotHeld", deleted: true},
		{name: "three healthy-looking nodes stopped renewing", leases: leases(threeStopped(50*time.Second), 40), want: "HeldByBreaker"},
		{name: "two of a kubelet's renewals missed, before their Leases' duration", leases: leases(threeStopped(25*time.Second), 40), want: "HeldByBreaker"},
		{name: "one renewal missed: not yet past half their Leases' duration", leases: leases(threeStopped(15*time.Second), 40), want: "NotHeld", deleted: true},
		{name: "no Leases: the conditions alone count", want: "NotHeld", deleted: true},
		{name: "Leases cannot be read: fail closed", leases: leases(fresh, 40), listErr: listFails, want: "HeldByBreaker"},
		{name: "the Lease cache has not synced: fail closed", leases: leases(fresh, 40), unsynced: true, want: "HeldByBreaker"},
		{name: "controller clock an hour ahead: every Lease stale", leases: leases(fresh, 40), clockSkew: time.Hour, want: "HeldByBreaker"},
		{name: "controller clock an hour behind: the conditions alone count", leases: leases(threeStopped(50*time.Second), 40), clockSkew: -time.Hour, want: "NotHeld", deleted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{namespace("shop", true), node("lost", corev1.ConditionUnknown, unreachable), evicted("shop", "web-1", "lost", "ReplicaSet", "web")}
			for _, n := range healthy[3:] {
				objs = append(objs, node(n, corev1.ConditionTrue))
			}
			m := newFakeManager(t, append(objs, tc.leases...)...)
			if tc.listErr != nil {
				m.client = interceptor.NewClient(m.client.(client.WithWatch), interceptor.Funcs{
					List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
						if _, ok := list.(*coordinationv1.LeaseList); ok {
							return tc.listErr
						}
						return c.List(ctx, list, opts...)
					},
				})
			}
			seen := &holds{}
			r, err := New(m, Options{Breaker: health.Breaker{UnhealthyShare: 0.3, MinUnhealthy: 3}, Observer: seen, Clock: clocktesting.NewFakePassiveClock(now.Add(tc.clockSkew))})
			require.NoError(t, err)
			if tc.unsynced {
				r.breaker.synced = func() bool { return false }
			}
			_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "ReplicaSet.apps/web"}})
			require.NoError(t, err)
			require.Equal(t, []string{tc.want}, seen.reasons)
			require.Equal(t, tc.deleted, len(*m.deletes) == 1, "deletes: %v", *m.deletes)
		})
	}
}

// TestALeaseIsStaleOnceTwoOfAKubeletsRenewalsAreMissed: a kubelet renews
// every quarter of its Lease's duration; the Lease counts as stale from
// just past half of it, so that every node that failed at one moment is
// counted before the node-lifecycle controller, which waits the whole
// duration after each one's last renewal, marks the first of them.
func TestALeaseIsStaleOnceTwoOfAKubeletsRenewalsAreMissed(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		lease   *coordinationv1.Lease
		wantAge time.Duration
		stale   bool
	}{
		{name: "renewed a quarter ago", lease: nodeLease("n", now.Add(-10*time.Second), 40), wantAge: 10 * time.Second},
		{name: "renewed exactly half ago", lease: nodeLease("n", now.Add(-20*time.Second), 40), wantAge: 20 * time.Second},
		{name: "renewed just past half ago", lease: nodeLease("n", now.Add(-20*time.Second-time.Millisecond), 40), wantAge: 20*time.Second + time.Millisecond, stale: true},
		{name: "a long Lease renewed 25 s ago", lease: nodeLease("n", now.Add(-25*time.Second), 60), wantAge: 25 * time.Second},
		{name: "no duration: the kubelet's 40 s", lease: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-21 * time.Second)}}}, wantAge: 21 * time.Second, stale: true},
		{name: "a zero duration: the kubelet's 40 s", lease: nodeLease("n", now.Add(-19*time.Second), 0), wantAge: 19 * time.Second},
		{name: "never renewed", lease: &coordinationv1.Lease{}, stale: true},
		{name: "renewed in the future (a clock behind)", lease: nodeLease("n", now.Add(time.Hour), 40), wantAge: -time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			age, stale := leaseStale(tc.lease, now)
			require.Equal(t, tc.wantAge, age)
			require.Equal(t, tc.stale, stale)
		})
	}
}

func TestTheBreakersViewOfANodeLeavesTheCachedNodeAsItIs(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m := newFakeManager(t, nodeLease("h1", now.Add(-time.Minute), 40))
	r, err := New(m, Options{Clock: clocktesting.NewFakePassiveClock(now)})
	require.NoError(t, err)
	nodes, err := r.breaker.ListNodes(context.Background())
	require.NoError(t, err)
	states := map[string]string{}
	for _, n := range nodes {
		states[n.Name] = health.NodeStateOf(n).String()
	}
	require.Equal(t, map[string]string{"h1": "NotReady", "h2": "Ready", "h3": "Ready"}, states, "h1 stopped renewing its Lease a minute ago")
	var cached corev1.Node
	require.NoError(t, m.client.Get(context.Background(), client.ObjectKey{Name: "h1"}, &cached))
	require.Equal(t, "Ready", health.NodeStateOf(&cached).String(), "the cache's node is not changed")
	for _, n := range nodes {
		if n.Name == "h1" {
			ready := n.Status.Conditions[0]
			require.Equal(t, StaleLeaseReason, ready.Reason)
			require.Contains(t, ready.Message, fmt.Sprint(time.Minute))
		}
	}
}

func TestTransformKeepsWhatMakesALeaseStale(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lease := nodeLease("n1", now.Add(-50*time.Second), 40)
	lease.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	lease.Spec.HolderIdentity = ptrTo("n1")
	o, err := Transform(lease)
	require.NoError(t, err)
	stripped := o.(*coordinationv1.Lease)
	require.Empty(t, stripped.ManagedFields)
	require.Nil(t, stripped.Spec.HolderIdentity)
	for _, at := range []time.Time{now, now.Add(-20 * time.Second)} {
		age, stale := leaseStale(lease, at)
		strippedAge, strippedStale := leaseStale(stripped, at)
		require.Equal(t, []any{age, stale}, []any{strippedAge, strippedStale})
	}
	require.Equal(t, "n1", stripped.Name)
}

// handlerOnly is a Lease informer that hands its one handler to the test.
type handlerOnly struct {
	handler toolscache.ResourceEventHandler
}

func (h *handlerOnly) AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	h.handler = handler
	return nil, nil
}

// The Lease watch of --fence-lease reads the controller's cache, whose
// transform strips Leases: a workload's Lease keeps its holder, acquire
// time and transitions, so that the watch sees who held it and when a
// takeover came (without them a takeover would free nobody), while a
// node Lease keeps only what makes it stale.
func TestTheLeaseWatchReadsWhatTheCacheKeepsOfAWorkloadsLease(t *testing.T) {
	acquired := metav1.NewMicroTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "pg", ResourceVersion: "7"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo("pg-1"), AcquireTime: &acquired, LeaseTransitions: ptrTo[int32](3),
			RenewTime: &acquired, LeaseDurationSeconds: ptrTo[int32](15)},
	}
	informer := &handlerOnly{}
	watch, err := kube.NewLeaseWatch(informer, nil)
	require.NoError(t, err)
	cached, err := Transform(lease)
	require.NoError(t, err)
	informer.handler.OnAdd(cached, false)
	require.True(t, watch.HolderSeen("shop", "pg", "pg-1"))
	_, ok := watch.AcquisitionSeen("shop", "pg", "pg-1", acquired.Time, 3)
	require.True(t, ok)

	node := nodeLease("n1", acquired.Time, 40)
	node.Spec.HolderIdentity = ptrTo("n1")
	stripped, err := Transform(node)
	require.NoError(t, err)
	require.Nil(t, stripped.(*coordinationv1.Lease).Spec.HolderIdentity, "a node Lease keeps only what makes it stale")
}
