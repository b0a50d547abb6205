package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

var (
	cloudShutdownTaint = corev1.Taint{Key: health.TaintCloudShutdown, Effect: corev1.TaintEffectNoSchedule}
	cloudShutdown30s   = []health.ShutdownTaint{{Key: health.TaintCloudShutdown, After: 30 * time.Second}}
	oosStart           = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
)

// reasonLog records the reasons of the events it is given, with the
// regarded object's name.
type reasonLog struct{ eventLog }

func (l *reasonLog) Eventf(regarding, _ runtime.Object, _, reason, _, _ string, _ ...interface{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	name := ""
	switch o := regarding.(type) {
	case client.Object:
		name = o.GetName()
	case *corev1.ObjectReference:
		name = o.Name
	}
	l.events = append(l.events, reason+" "+name)
}

func (l *reasonLog) reasons() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// oosReconciler is a Reconciler that applies the out-of-service taint, on
// a fake clock at oosStart.
func oosReconciler(t *testing.T, m fakeManager, opts Options) (*Reconciler, *clocktesting.FakePassiveClock, *reasonLog) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(oosStart)
	events := &reasonLog{}
	opts.Clock, opts.Recorder, opts.ApplyOutOfService = clk, events, true
	if opts.ShutdownTaints == nil {
		opts.ShutdownTaints = cloudShutdown30s
	}
	r, err := New(m, opts)
	require.NoError(t, err)
	return r, clk, events
}

func reconcileNode(t *testing.T, r *Reconciler, name string) ctrl.Result {
	t.Helper()
	res, err := r.reconcileOutOfService(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	require.NoError(t, err)
	return res
}

func getNode(t *testing.T, m fakeManager, name string) *corev1.Node {
	t.Helper()
	var n corev1.Node
	require.NoError(t, m.client.Get(context.Background(), client.ObjectKey{Name: name}, &n))
	return &n
}

func outOfServiceTaintOf(n *corev1.Node) *corev1.Taint {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == corev1.TaintNodeOutOfService {
			return &n.Spec.Taints[i]
		}
	}
	return nil
}

// A node that is not Ready and carries the cloud's shutdown taint gets
// out-of-service=nodeshutdown:NoExecute once the taint has been seen for
// its After, with the controller's mark and an event on the node; before
// that, the reconcile asks to come back when the wait ends.
func TestOutOfServiceIsAppliedOnceTheShutdownTaintHasBeenSeenForItsAfter(t *testing.T) {
	m := newFakeManager(t, node("lost", corev1.ConditionUnknown, unreachable, cloudShutdownTaint))
	r, clk, events := oosReconciler(t, m, Options{})

	require.Equal(t, 30*time.Second, reconcileNode(t, r, "lost").RequeueAfter)
	clk.SetTime(oosStart.Add(20 * time.Second))
	require.Equal(t, 10*time.Second, reconcileNode(t, r, "lost").RequeueAfter)
	require.Nil(t, outOfServiceTaintOf(getNode(t, m, "lost")))

	clk.SetTime(oosStart.Add(30 * time.Second))
	require.Zero(t, reconcileNode(t, r, "lost"))
	lost := getNode(t, m, "lost")
	taint := outOfServiceTaintOf(lost)
	require.NotNil(t, taint)
	require.Equal(t, "nodeshutdown", taint.Value)
	require.Equal(t, corev1.TaintEffectNoExecute, taint.Effect)
	require.Equal(t, "2026-12-02T08:00:30Z", lost.Annotations[AnnotationOutOfServiceApplied])
	require.Contains(t, lost.Spec.Taints, cloudShutdownTaint, "the other taints stay")
	require.Equal(t, []string{ReasonOutOfServiceApplied + " lost"}, events.reasons())
	stats := r.OutOfServiceStats()
	require.Equal(t, OutOfServiceStats{Applied: 1, Tainted: 1}, stats)

	reconcileNode(t, r, "lost")
	require.Equal(t, uint64(1), r.OutOfServiceStats().Applied, "applied once")
}

// The controller never taints on silence, on a stale taint, on a provider
// that infers shutdowns, or over someone else's out-of-service taint.
func TestOutOfServiceIsNeverAppliedWithoutAuthoritativeEvidence(t *testing.T) {
	for _, tt := range []struct {
		name string
		node *corev1.Node
	}{
		{"unreachable for an hour, no shutdown taint", node("n", corev1.ConditionUnknown, unreachable)},
		{"Ready with a stale shutdown taint", node("n", corev1.ConditionTrue, cloudShutdownTaint)},
		{"no Ready condition", func() *corev1.Node {
			n := node("n", corev1.ConditionUnknown, cloudShutdownTaint)
			n.Status.Conditions = nil
			return n
		}()},
		{"kubevirt", func() *corev1.Node {
			n := node("n", corev1.ConditionUnknown, unreachable, cloudShutdownTaint)
			n.Spec.ProviderID = "kubevirt://vm-1"
			return n
		}()},
		{"already out of service by an admin", node("n", corev1.ConditionUnknown, cloudShutdownTaint, outOfService)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.node.DeepCopy()
			m := newFakeManager(t, tt.node)
			r, clk, events := oosReconciler(t, m, Options{})
			reconcileNode(t, r, "n")
			clk.SetTime(oosStart.Add(time.Hour))
			reconcileNode(t, r, "n")
			after := getNode(t, m, "n")
			require.Equal(t, before.Spec.Taints, after.Spec.Taints)
			require.Empty(t, after.Annotations)
			require.Empty(t, events.reasons())
			require.Zero(t, r.OutOfServiceStats())
		})
	}
}

// The Breaker and the budget guard taints as they guard force deletes: an
// open Breaker holds the taint back (one event, however many reconciles)
// and asks to come back within the re-check interval; a budget used up
// holds it until its window frees a slot; a dry run writes nothing and
// says once what it would do.
func TestOutOfServiceIsHeldByTheBreakerTheBudgetAndADryRun(t *testing.T) {
	t.Run("breaker", func(t *testing.T) {
		objs := []client.Object{node("lost", corev1.ConditionUnknown, unreachable, cloudShutdownTaint)}
		for _, n := range []string{"a", "b", "c"} {
			objs = append(objs, node(n, corev1.ConditionUnknown, unreachable))
		}
		m := newFakeManager(t, objs...)
		r, clk, events := oosReconciler(t, m, Options{Breaker: health.Breaker{UnhealthyShare: 0.3, MinUnhealthy: 3}, BreakerRecheck: time.Minute})
		reconcileNode(t, r, "lost")
		clk.SetTime(oosStart.Add(time.Minute))
		require.Equal(t, time.Minute, reconcileNode(t, r, "lost").RequeueAfter)
		reconcileNode(t, r, "lost")
		require.Nil(t, outOfServiceTaintOf(getNode(t, m, "lost")))
		require.Equal(t, []string{ReasonOutOfServiceHeld + " lost"}, events.reasons())
	})
	t.Run("budget", func(t *testing.T) {
		m := newFakeManager(t, node("lost", corev1.ConditionUnknown, unreachable, cloudShutdownTaint))
		budget, err := health.NewDeleteBudget(1, time.Hour)
		require.NoError(t, err)
		ok, _ := budget.Take(oosStart)
		require.True(t, ok)
		r, clk, _ := oosReconciler(t, m, Options{Budget: budget})
		reconcileNode(t, r, "lost")
		clk.SetTime(oosStart.Add(time.Minute))
		require.Equal(t, 59*time.Minute, reconcileNode(t, r, "lost").RequeueAfter)
		require.Nil(t, outOfServiceTaintOf(getNode(t, m, "lost")))
		clk.SetTime(oosStart.Add(time.Hour))
		reconcileNode(t, r, "lost")
		require.NotNil(t, outOfServiceTaintOf(getNode(t, m, "lost")), "the window freed a slot")
	})
	t.Run("dry run", func(t *testing.T) {
		m := newFakeManager(t, node("lost", corev1.ConditionUnknown, unreachable, cloudShutdownTaint))
		r, clk, events := oosReconciler(t, m, Options{DryRun: true})
		reconcileNode(t, r, "lost")
		clk.SetTime(oosStart.Add(time.Minute))
		reconcileNode(t, r, "lost")
		clk.SetTime(oosStart.Add(2 * time.Minute))
		reconcileNode(t, r, "lost") // the evidence is older, the event the same
		lost := getNode(t, m, "lost")
		require.Nil(t, outOfServiceTaintOf(lost))
		require.Empty(t, lost.Annotations)
		require.Equal(t, []string{ReasonOutOfServiceWouldApply + " lost"}, events.reasons())
		require.Equal(t, OutOfServiceStats{WouldApply: 1}, r.OutOfServiceStats())
	})
}

// withOurTaint is a node that the controller tainted at oosStart.
func withOurTaint(n *corev1.Node) *corev1.Node {
	n.Spec.Taints = append(n.Spec.Taints, outOfService)
	n.Annotations = map[string]string{AnnotationOutOfServiceApplied: oosStart.Format(time.RFC3339)}
	return n
}

// The taint it applied comes off only once the node is Ready again and no
// pod from before the taint that the taint evicts is bound to it: a pod
// that tolerates the taint, or one created since, does not keep it; the
// deletion of the last old pod does end the wait.
func TestOutOfServiceIsRemovedOnceTheNodeIsReadyAndEmptyOfItsOldPods(t *testing.T) {
	old := alive("shop", "db-0", "n", "StatefulSet", "db")
	old.CreationTimestamp = metav1.NewTime(oosStart.Add(-time.Hour))
	tolerant := alive("kube-system", "agent", "n", "DaemonSet", "agent")
	tolerant.CreationTimestamp = metav1.NewTime(oosStart.Add(-time.Hour))
	tolerant.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	fresh := alive("shop", "web-1", "n", "ReplicaSet", "web")
	fresh.CreationTimestamp = metav1.NewTime(oosStart.Add(time.Minute))

	m := newFakeManager(t, withOurTaint(node("n", corev1.ConditionUnknown, cloudShutdownTaint)), old, tolerant, fresh)
	r, clk, events := oosReconciler(t, m, Options{})
	clk.SetTime(oosStart.Add(10 * time.Minute))
	reconcileNode(t, r, "n")
	require.NotNil(t, outOfServiceTaintOf(getNode(t, m, "n")), "still down")
	require.Equal(t, 1, r.OutOfServiceStats().Tainted)
	require.Equal(t, 10*time.Minute, r.OutOfServiceStats().OldestAge)

	n := getNode(t, m, "n")
	n.Status.Conditions[0].Status = corev1.ConditionTrue
	require.NoError(t, m.client.Status().Update(context.Background(), n))
	n = getNode(t, m, "n")
	n.Spec.Taints = []corev1.Taint{outOfService} // the cloud took its taint off
	require.NoError(t, m.client.Update(context.Background(), n))
	require.Equal(t, health.NodeReady, health.NodeStateOf(getNode(t, m, "n")), "Ready again")
	reconcileNode(t, r, "n")
	require.NotNil(t, outOfServiceTaintOf(getNode(t, m, "n")), "Ready, but db-0 from before the taint is still bound")

	require.NoError(t, m.client.Delete(context.Background(), old))
	reconcileNode(t, r, "n")
	require.NotNil(t, outOfServiceTaintOf(getNode(t, m, "n")), "db-0 Terminating is still bound")
	require.NoError(t, m.client.Delete(context.Background(), old, client.GracePeriodSeconds(0))) // its kubelet finished it
	reconcileNode(t, r, "n")
	after := getNode(t, m, "n")
	require.Nil(t, outOfServiceTaintOf(after))
	require.NotContains(t, after.Annotations, AnnotationOutOfServiceApplied)
	require.Equal(t, []string{ReasonOutOfServiceRemoved + " n"}, events.reasons())
	require.Equal(t, OutOfServiceStats{Removed: 1, RemovedAge: 10 * time.Minute, MaxRemovedAge: 10 * time.Minute}, r.OutOfServiceStats())
}

// It never removes a taint it did not apply, and a mark whose taint
// someone else removed goes without counting as a removal.
func TestOutOfServiceNeverRemovesATaintItDidNotApply(t *testing.T) {
	t.Run("an admin's taint on a Ready, empty node", func(t *testing.T) {
		m := newFakeManager(t, node("n", corev1.ConditionTrue, outOfService))
		r, _, events := oosReconciler(t, m, Options{})
		reconcileNode(t, r, "n")
		require.NotNil(t, outOfServiceTaintOf(getNode(t, m, "n")))
		require.Empty(t, events.reasons())
	})
	t.Run("our mark, the taint removed by someone else", func(t *testing.T) {
		n := withOurTaint(node("n", corev1.ConditionUnknown))
		n.Spec.Taints = nil
		m := newFakeManager(t, n)
		r, _, events := oosReconciler(t, m, Options{})
		reconcileNode(t, r, "n")
		require.Empty(t, getNode(t, m, "n").Annotations)
		require.Equal(t, []string{ReasonOutOfServiceRemovedByOne + " n"}, events.reasons())
		require.Zero(t, r.OutOfServiceStats().Removed)
	})
}

// A write that meets a node changed since its live read fails with the
// API server's Conflict and writes nothing; the reconcile returns the
// error, so that the node is judged again.
func TestOutOfServiceWriteIsPreconditionedOnTheLiveRead(t *testing.T) {
	store, err := fakeapi.NewClient(node("lost", corev1.ConditionUnknown, unreachable, cloudShutdownTaint), node("h1", corev1.ConditionTrue), node("h2", corev1.ConditionTrue), node("h3", corev1.ConditionTrue))
	require.NoError(t, err)
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "lost", errors.New("the object has been modified"))
	c := interceptor.NewClient(store, interceptor.Funcs{
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return conflict
		},
		List: listByIndexes,
	})
	m := fakeManager{client: c, deletes: new([]string), lists: new([]string)}
	r, clk, events := oosReconciler(t, m, Options{})
	reconcileNode(t, r, "lost")
	clk.SetTime(oosStart.Add(time.Minute))
	_, err = r.reconcileOutOfService(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "lost"}})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.Nil(t, outOfServiceTaintOf(getNode(t, m, "lost")))
	require.Empty(t, events.reasons())
	require.Zero(t, r.OutOfServiceStats().Applied)
}

func TestNewRefusesAnOutOfServiceControllerThatCouldNotWork(t *testing.T) {
	m := newFakeManager(t)
	_, err := New(m, Options{ApplyOutOfService: true})
	require.ErrorContains(t, err, "without Options.ShutdownTaints")
	_, err = New(m, Options{ApplyOutOfService: true, ShutdownTaints: cloudShutdown30s, WatchNamespaces: []string{"shop"}})
	require.ErrorContains(t, err, "namespaced mode")
	_, err = New(m, Options{ShutdownTaints: []health.ShutdownTaint{{Key: corev1.TaintNodeUnreachable, After: time.Second}}})
	require.ErrorContains(t, err, "Kubernetes' own taint", "the library's refusal reaches the controller at start")
}

// The deletion of a pod, or its end, on a node the controller tainted
// brings that node back, since it may be the last old pod; pods elsewhere,
// and pods that are created or keep running, do not.
func TestAPodLeavingATaintedNodeBringsTheNodeBack(t *testing.T) {
	m := newFakeManager(t, withOurTaint(node("n", corev1.ConditionUnknown)))
	r, _, _ := oosReconciler(t, m, Options{})
	reconcileNode(t, r, "n") // learns that n carries its taint
	pred := r.podLeftTaintedNode()
	onN, elsewhere := alive("shop", "db-0", "n", "StatefulSet", "db"), alive("shop", "web-1", "h1", "ReplicaSet", "web")
	done := onN.DeepCopy()
	done.Status.Phase = corev1.PodFailed
	require.True(t, pred.Delete(event.DeleteEvent{Object: onN}))
	require.False(t, pred.Delete(event.DeleteEvent{Object: elsewhere}))
	require.True(t, pred.Update(event.UpdateEvent{ObjectOld: onN, ObjectNew: done}))
	require.False(t, pred.Update(event.UpdateEvent{ObjectOld: onN, ObjectNew: onN}))
	require.False(t, pred.Create(event.CreateEvent{Object: onN}))
	require.Equal(t, []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "n"}}}, podNode(context.Background(), onN))
}

// The cache's transform keeps what the out-of-service controller reads: a
// node's provider ID and the controller's mark (no other annotation), and
// of a pod's tolerations only one that tolerates the taint.
func TestTransformKeepsWhatTheOutOfServiceControllerReads(t *testing.T) {
	n := withOurTaint(node("n", corev1.ConditionUnknown))
	n.Annotations["other"] = "x"
	n.Spec.ProviderID = "aws:///eu-west-1a/i-0abc"
	got, err := Transform(n)
	require.NoError(t, err)
	require.Equal(t, map[string]string{AnnotationOutOfServiceApplied: oosStart.Format(time.RFC3339)}, got.(*corev1.Node).Annotations)
	require.Equal(t, n.Spec.ProviderID, got.(*corev1.Node).Spec.ProviderID)

	pod := alive("kube-system", "agent", "n", "DaemonSet", "agent")
	exists := corev1.Toleration{Operator: corev1.TolerationOpExists}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}, exists}
	got, err = Transform(pod)
	require.NoError(t, err)
	require.Equal(t, []corev1.Toleration{exists}, got.(*corev1.Pod).Spec.Tolerations)
	pod.Spec.Tolerations = pod.Spec.Tolerations[:1]
	got, err = Transform(pod)
	require.NoError(t, err)
	require.Nil(t, got.(*corev1.Pod).Spec.Tolerations)
}

// With --shutdown-taint, the cloud's taint coming to a node that is not
// Ready, or going, brings its pods' groups back, though the node's state
// stays Unreachable: it is the fencing evidence they wait for. Without the
// option it changes nothing.
func TestTheCloudsShutdownTaintBringsTheNodesGroupsBack(t *testing.T) {
	lost := node("n1", corev1.ConditionUnknown, unreachable)
	off := node("n1", corev1.ConditionUnknown, unreachable, cloudShutdownTaint)
	with := nodeChangedFor(cloudShutdown30s)
	require.True(t, with.Update(event.UpdateEvent{ObjectOld: lost, ObjectNew: off}), "the taint comes")
	require.True(t, with.Update(event.UpdateEvent{ObjectOld: off, ObjectNew: lost}), "the taint goes")
	require.False(t, with.Update(event.UpdateEvent{ObjectOld: off, ObjectNew: off.DeepCopy()}))
	require.False(t, nodeChanged.Update(event.UpdateEvent{ObjectOld: lost, ObjectNew: off}), "no shutdown taint named: nothing changed")
}

// The wait is measured from the first sighting under the Ready
// condition's last transition: a node that came back and failed again
// unseen has a new transition, and waits its whole After from the first
// sighting of it, however long ago the transition was (the cloud taints a
// grace period after it), and whatever this controller saw before.
func TestOutOfServiceWaitsItsWholeAfterFromTheFirstSightingOfANewTransition(t *testing.T) {
	lost := node("lost", corev1.ConditionUnknown, unreachable, cloudShutdownTaint)
	m := newFakeManager(t, lost)
	r, clk, _ := oosReconciler(t, m, Options{})
	reconcileNode(t, r, "lost") // first seen at oosStart
	n := getNode(t, m, "lost")
	n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(oosStart.Add(time.Hour - 50*time.Second))
	require.NoError(t, m.client.Status().Update(context.Background(), n))
	clk.SetTime(oosStart.Add(time.Hour))
	require.Equal(t, 30*time.Second, reconcileNode(t, r, "lost").RequeueAfter)
	clk.SetTime(oosStart.Add(time.Hour + 29*time.Second))
	require.Equal(t, time.Second, reconcileNode(t, r, "lost").RequeueAfter)
	require.Nil(t, outOfServiceTaintOf(getNode(t, m, "lost")))
	clk.SetTime(oosStart.Add(time.Hour + 30*time.Second))
	reconcileNode(t, r, "lost")
	require.NotNil(t, outOfServiceTaintOf(getNode(t, m, "lost")))
}

// proofOf is a fencer that proves every pod it is asked about fenced, by
// the kind it was given.
type proofOf health.Proof

func (p proofOf) Name() string { return "test-" + health.Proof(p).String() }
func (p proofOf) Fence(context.Context, health.FenceQuery) (health.Fence, error) {
	return health.Fence{Proves: health.Proof(p), By: "the test"}, nil
}

// A fencer's proof frees a StatefulSet pod on a node that is not Ready,
// whether it proves the pod or the node stopped, and never leads to the
// out-of-service taint: that follows the shutdown taints alone.
func TestAFencersProofFreesThePodAndNeverTaintsTheNode(t *testing.T) {
	for _, proof := range []health.Proof{health.PodStopped, health.NodeStopped} {
		t.Run(proof.String(), func(t *testing.T) {
			db := evicted("shop", "db-0", "lost", "StatefulSet", "db")
			m := newFakeManager(t, namespace("shop", true), node("lost", corev1.ConditionUnknown, unreachable), db)
			r, clk, _ := oosReconciler(t, m, Options{Fencers: []health.Fencer{proofOf(proof)}})
			reconcileAll(t, r, db)
			require.False(t, exists(t, m, db), "the fencer's proof frees the pod")
			for range 3 {
				reconcileNode(t, r, "lost")
				clk.SetTime(clk.Now().Add(time.Hour))
			}
			require.Nil(t, outOfServiceTaintOf(getNode(t, m, "lost")), "no out-of-service taint without a shutdown taint")
		})
	}
}
