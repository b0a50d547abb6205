package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

// laggingManager is a manager whose cache (stale) lags the API server
// (live): reads from the cache see stale, writes go to live, as a cache
// client's do.
func laggingManager(t *testing.T, stale, live []client.Object) (fakeManager, client.Client) {
	t.Helper()
	for _, n := range []string{"h1", "h2", "h3"} {
		stale, live = append(stale, node(n, corev1.ConditionTrue)), append(live, node(n, corev1.ConditionTrue))
	}
	cached, err := fakeapi.NewClient(stale...)
	require.NoError(t, err)
	server, err := fakeapi.NewClient(live...)
	require.NoError(t, err)
	liveClient := interceptor.NewClient(server, interceptor.Funcs{List: listByIndexes})
	cache := interceptor.NewClient(cached, interceptor.Funcs{
		List: listByIndexes,
		Patch: func(ctx context.Context, _ client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return server.Patch(ctx, obj, patch, opts...)
		},
	})
	return fakeManager{client: cache, live: liveClient, deletes: new([]string), lists: new([]string)}, liveClient
}

func liveNodeOf(t *testing.T, live client.Reader, name string) *corev1.Node {
	t.Helper()
	var n corev1.Node
	require.NoError(t, live.Get(context.Background(), client.ObjectKey{Name: name}, &n))
	return &n
}

func withTransition(n *corev1.Node, at time.Time) *corev1.Node {
	n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at)
	return n
}

// The wait is judged on the live node about to be written: a node that
// came back and failed again, which the cache has not shown yet, has a new
// Ready transition there, and is not tainted on the cache's old one. Once
// the cache shows the new transition, the wait starts afresh from its
// first sighting and ends only after the whole After.
func TestOutOfServiceWaitIsJudgedOnTheLiveNodeNotTheLaggingCache(t *testing.T) {
	cached := withTransition(node("lost", corev1.ConditionUnknown, unreachable, cloudShutdownTaint), oosStart.Add(-time.Hour))
	failedAgain := withTransition(node("lost", corev1.ConditionUnknown, unreachable, cloudShutdownTaint), oosStart.Add(59*time.Second))
	m, live := laggingManager(t, []client.Object{cached}, []client.Object{failedAgain})
	r, clk, events := oosReconciler(t, m, Options{})

	reconcileNode(t, r, "lost") // first seen at oosStart, on the cache's transition
	clk.SetTime(oosStart.Add(time.Minute))
	require.Equal(t, cacheLagRetry, reconcileNode(t, r, "lost").RequeueAfter, "the cache's wait is over, the live node's has just begun")
	require.Nil(t, outOfServiceTaintOf(liveNodeOf(t, live, "lost")), "tainted 1 s after the live node's new transition, with After 30 s")
	require.Empty(t, events.reasons())

	// The cache catches up: the whole After from its first sighting.
	r.cache = interceptor.NewClient(live.(client.WithWatch), interceptor.Funcs{List: listByIndexes})
	require.Equal(t, 30*time.Second, reconcileNode(t, r, "lost").RequeueAfter)
	clk.SetTime(oosStart.Add(time.Minute + 30*time.Second))
	reconcileNode(t, r, "lost")
	require.NotNil(t, outOfServiceTaintOf(liveNodeOf(t, live, "lost")))
}

// A restarted instance still carries the cloud's shutdown taint until the
// cloud controller sees it Ready. Its kubelet runs, so the node is never
// tainted out of service:
//   - while it posts Ready=False (the first seconds of a boot);
//   - while its Ready is still Unknown but its Lease was renewed after the
//     node went Unknown (read live; one event per hold), and a check of a
//     pod there force-deletes nothing on the taint.
//
// When the kubelet stops again (no renewal since a new transition), the
// taint comes after its After.
func TestOutOfServiceIsNeverAppliedToABootingNode(t *testing.T) {
	t.Run("Ready=False", func(t *testing.T) {
		booting := withTransition(node("n", corev1.ConditionFalse, cloudShutdownTaint), oosStart.Add(-time.Second))
		booting.Status.Conditions[0].Reason, booting.Status.Conditions[0].Message = "KubeletNotReady", "container runtime network not ready"
		m := newFakeManager(t, booting)
		r, clk, events := oosReconciler(t, m, Options{})
		reconcileNode(t, r, "n")
		clk.SetTime(oosStart.Add(time.Hour))
		require.Zero(t, reconcileNode(t, r, "n"))
		require.Nil(t, outOfServiceTaintOf(getNode(t, m, "n")))
		require.Empty(t, events.reasons())
	})
	t.Run("Unknown, the Lease renewed since", func(t *testing.T) {
		wentDown := oosStart.Add(-10 * time.Minute)
		n := withTransition(node("n", corev1.ConditionUnknown, unreachable, cloudShutdownTaint), wentDown)
		db := evicted("shop", "db-0", "n", "StatefulSet", "db")
		m := newFakeManager(t, n, nodeLease("n", oosStart.Add(-time.Second), 40), db, namespace("shop", true))
		r, clk, events := oosReconciler(t, m, Options{})
		reconcileNode(t, r, "n")
		clk.SetTime(oosStart.Add(time.Minute))
		require.Equal(t, DefaultBreakerRecheck, reconcileNode(t, r, "n").RequeueAfter)
		reconcileNode(t, r, "n")
		require.Nil(t, outOfServiceTaintOf(getNode(t, m, "n")))
		require.Equal(t, []string{ReasonOutOfServiceHeld + " n"}, events.reasons(), "one event per hold")

		_, err := r.Reconcile(context.Background(), reqFor(db))
		require.NoError(t, err)
		require.Empty(t, *m.deletes, "the Checker took no evidence from the taint either")

		// The kubelet stopped again: Unknown since a new transition, after
		// its last renewal.
		stopped := getNode(t, m, "n")
		withTransition(stopped, oosStart.Add(time.Minute))
		require.NoError(t, m.client.Status().Update(context.Background(), stopped))
		require.Equal(t, 30*time.Second, reconcileNode(t, r, "n").RequeueAfter)
		clk.SetTime(oosStart.Add(time.Minute + 30*time.Second))
		reconcileNode(t, r, "n")
		require.NotNil(t, outOfServiceTaintOf(getNode(t, m, "n")))
	})
	t.Run("a Lease that cannot be read", func(t *testing.T) {
		store, err := fakeapi.NewClient(node("n", corev1.ConditionUnknown, unreachable, cloudShutdownTaint), node("h1", corev1.ConditionTrue), node("h2", corev1.ConditionTrue), node("h3", corev1.ConditionTrue))
		require.NoError(t, err)
		c := interceptor.NewClient(store, interceptor.Funcs{
			List: func(ctx context.Context, s client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				// The live read of the one Lease fails; the Breaker's
				// cached list of them answers.
				if _, ok := list.(*coordinationv1.LeaseList); ok && (&client.ListOptions{}).ApplyOptions(opts).FieldSelector != nil {
					return errTooManyRequests
				}
				return listByIndexes(ctx, s, list, opts...)
			},
		})
		m := fakeManager{client: c, deletes: new([]string), lists: new([]string)}
		r, clk, _ := oosReconciler(t, m, Options{})
		reconcileNode(t, r, "n")
		clk.SetTime(oosStart.Add(time.Hour))
		_, err = r.reconcileOutOfService(context.Background(), reqNode("n"))
		require.ErrorIs(t, err, errTooManyRequests)
		require.Nil(t, outOfServiceTaintOf(getNode(t, m, "n")))
	})
}

// Removal takes exactly the taint the controller applied: an admin's
// out-of-service taint of another effect, on the same Ready, empty node,
// stays (Kubernetes keeps one taint per key and effect).
func TestOutOfServiceRemovalLeavesAnAdminsTaintOfTheSameKey(t *testing.T) {
	admins := corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoSchedule}
	n := withOurTaint(node("n", corev1.ConditionTrue))
	n.Spec.Taints = append(n.Spec.Taints, admins)
	m := newFakeManager(t, n)
	r, _, events := oosReconciler(t, m, Options{})
	reconcileNode(t, r, "n")
	after := getNode(t, m, "n")
	require.Equal(t, []corev1.Taint{admins}, after.Spec.Taints)
	require.NotContains(t, after.Annotations, AnnotationOutOfServiceApplied)
	require.Equal(t, []string{ReasonOutOfServiceRemoved + " n"}, events.reasons())

	t.Run("only the admin's left under our mark: the mark goes, the taint stays", func(t *testing.T) {
		n := withOurTaint(node("n", corev1.ConditionTrue))
		n.Spec.Taints = []corev1.Taint{admins}
		m := newFakeManager(t, n)
		r, _, events := oosReconciler(t, m, Options{})
		reconcileNode(t, r, "n")
		require.Equal(t, []corev1.Taint{admins}, getNode(t, m, "n").Spec.Taints)
		require.Equal(t, []string{ReasonOutOfServiceRemovedByOne + " n"}, events.reasons())
	})
}

// A Breaker hold sends one event however its count moves: an outage that
// grows from 3 to 6 of 9 nodes is one hold of the node's taint.
func TestOutOfServiceBreakerHoldSendsOneEventAsTheOutageGrows(t *testing.T) {
	objs := []client.Object{node("lost", corev1.ConditionUnknown, unreachable, cloudShutdownTaint),
		node("a", corev1.ConditionUnknown, unreachable), node("b", corev1.ConditionUnknown, unreachable)}
	for _, name := range []string{"c", "d", "e"} {
		objs = append(objs, node(name, corev1.ConditionTrue))
	}
	m := newFakeManager(t, objs...)
	r, clk, events := oosReconciler(t, m, Options{Breaker: health.Breaker{UnhealthyShare: 0.3, MinUnhealthy: 3}})
	reconcileNode(t, r, "lost")
	clk.SetTime(oosStart.Add(time.Minute))
	reconcileNode(t, r, "lost") // 3 of 9
	for _, failing := range []string{"c", "d", "e"} {
		n := getNode(t, m, failing)
		n.Status.Conditions[0].Status = corev1.ConditionUnknown
		require.NoError(t, m.client.Status().Update(context.Background(), n))
		reconcileNode(t, r, "lost")
	}
	require.Nil(t, outOfServiceTaintOf(getNode(t, m, "lost")))
	require.Equal(t, []string{ReasonOutOfServiceHeld + " lost"}, events.reasons())
}

// errTooManyRequests is the API server's answer to a client over its
// priority and fairness share.
var errTooManyRequests = apierrors.NewTooManyRequests("the server has received too many requests", 1)

func reqFor(pod *corev1.Pod) ctrl.Request { return ctrl.Request{NamespacedName: GroupOf(pod)} }

func reqNode(name string) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}
}

// A namespace that opts out brings its groups back (the label's removal
// is an event the controller watches), so that their next check forgets
// the pods they held for fencing: podhealth_fencing_held_pods and
// PodhealthPodsWaitForFencing no longer name a namespace the controller
// does not act in. A change of another label brings nothing.
func TestANamespaceThatOptsOutBringsItsGroupsBackAndTheirHoldsGo(t *testing.T) {
	queue := evicted("tools", "mq-0", "lost", "StatefulSet", "mq")
	m := newFakeManager(t, namespace("tools", true), node("lost", corev1.ConditionUnknown, unreachable), queue)
	r, err := New(m, Options{})
	require.NoError(t, err)
	reconcileAll(t, r, queue)
	pods, _ := r.FencingHolds()
	require.Equal(t, 1, pods)

	in, out := namespace("tools", true), namespace("tools", false)
	relabelled := namespace("tools", true)
	relabelled.Labels["team"] = "queues"
	pred := r.namespaceOptedIn()
	require.True(t, pred.Update(event.UpdateEvent{ObjectOld: in, ObjectNew: out}), "opting out is an event")
	require.True(t, pred.Update(event.UpdateEvent{ObjectOld: out, ObjectNew: in}), "opting in is one")
	require.False(t, pred.Update(event.UpdateEvent{ObjectOld: in, ObjectNew: relabelled}))

	var tools corev1.Namespace
	require.NoError(t, m.client.Get(context.Background(), client.ObjectKey{Name: "tools"}, &tools))
	tools.Labels = nil
	require.NoError(t, m.client.Update(context.Background(), &tools))
	requests := r.groupsInNamespace(context.Background(), &tools)
	require.Equal(t, []ctrl.Request{reqFor(queue)}, requests)
	for _, req := range requests {
		_, err := r.Reconcile(context.Background(), req)
		require.NoError(t, err)
	}
	pods, _ = r.FencingHolds()
	require.Zero(t, pods)
}
