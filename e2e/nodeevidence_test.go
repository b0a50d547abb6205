package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
)

// Scenarios where the pod alone does not tell whether it died with its
// node: only its node does. The example operator runs with node evidence
// (a node informer and a live GET), its default.

// maintenanceTaint is an admin's NoExecute taint on a node that is up and
// running: its pods are evicted, and the node's kubelet stops them.
var maintenanceTaint = corev1.Taint{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoExecute}

// TestScenarioMaintenanceTaintOnReadyNode: an admin puts a NoExecute taint
// on a Ready, heartbeating node. The taint-eviction controller marks the
// pod DisruptionTarget (reason DeletionByTaintManager, as for a lost node)
// and deletes it gracefully; the node's kubelet is alive and finishes the
// deletion once the containers stopped. The library must leave that
// graceful deletion alone: for several resyncs the operator sends no
// DELETE, and the pod stays Terminating until the kubelet (the test, here)
// removes it with grace 0 and the pod's UID.
func TestScenarioMaintenanceTaintOnReadyNode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp, nodes := startCluster(ctx, t, "node-a")
	node := nodes[0]
	c := cp.Client()
	const w = "maint"

	pod := markRunning(ctx, t, c, cp.CreatePod(ctx, workloadPod("maint-0", node.Name(), w, 2)))
	op := cp.StartOperator(t, bins, operatorArgs(w)...)
	waitForOperator(ctx, t, op)
	watch, err := cp.WatchPods(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	before := readRequests(ctx, t, cp)

	if err := cp.AddNodeTaint(ctx, node.Name(), maintenanceTaint); err != nil {
		t.Fatal(err)
	}
	taintedAt := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = watch.WaitFor(wctx, "pod "+pod.Name+" taint-evicted", func([]harness.PodHistory) bool {
		h, _ := watch.Pod(pod.UID)
		return !h.Evicted.IsZero() && !h.Terminating.IsZero()
	})
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	h, _ := watch.Pod(pod.UID)
	t.Logf("pod %s taint-evicted %v after the taint", pod.Name, h.Evicted.Sub(taintedAt).Round(time.Millisecond))
	first, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		first = nil // gone already; the window below reports it
	}

	// The window: three resyncs of the operator, and the pod update that
	// enqueued the workload at once. The kubelet is stopping the
	// containers meanwhile.
	window := 3 * operatorResync
	evicted := harness.PodAll(hasUID(pod.UID), taintEvicted)
	kept, keptErr := harness.ConsistentlyPod(ctx, c, ns, pod.Name, window, evicted)
	during := readRequests(ctx, t, cp)
	if n := during.since(before, "DELETE", "pods", ""); n != 1 {
		t.Errorf("pod DELETEs in the %v after the taint: %v %s, want exactly 1 (the taint-eviction controller's graceful one)",
			window, n, during.codesSince(before, "DELETE", "pods"))
	}
	if lines := op.LogLines("force-deleted pod"); len(lines) != 0 {
		t.Errorf("the operator force-deleted a pod whose node is Ready: %q", lines)
	}
	if n, err := c.CoreV1().Nodes().Get(ctx, node.Name(), metav1.GetOptions{}); err != nil || !harness.NodeReadyIs(corev1.ConditionTrue)(n) {
		t.Errorf("node %s not Ready at the end of the window (err %v): the scenario needs a live node", node.Name(), err)
	}
	if keptErr != nil {
		h, _ := watch.Pod(pod.UID)
		if !h.Deleted.IsZero() {
			t.Fatalf("pod %s on the Ready node was deleted %v after its eviction, before its kubelet finished: %v",
				pod.Name, h.Deleted.Sub(h.Evicted).Round(time.Millisecond), keptErr)
		}
		t.Fatalf("pod %s during the window: %v", pod.Name, keptErr)
	}
	if first == nil || !first.DeletionTimestamp.Equal(kept.DeletionTimestamp) {
		var was *metav1.Time
		if first != nil {
			was = first.DeletionTimestamp
		}
		t.Errorf("deletionTimestamp changed during the window: from %v to %v", was, kept.DeletionTimestamp)
	}

	// The kubelet finishes: the containers stopped, then a DELETE with
	// grace 0 and the pod's UID, as its status manager sends.
	playKubeletFinish(ctx, t, c, kept)
	if _, err := harness.WaitForPod(ctx, c, ns, pod.Name, harness.PodGone); err != nil {
		t.Fatal(err)
	}
	// A little longer: the operator's next resync finds nothing to delete.
	time.Sleep(operatorResync + time.Second)
	after := readRequests(ctx, t, cp)
	if n := after.since(before, "DELETE", "pods", ""); n != 2 || after.since(before, "DELETE", "pods", "200") != 2 {
		t.Errorf("pod DELETEs in all: %s, want 2 answered 200 (the taint-eviction controller's, then the kubelet's)",
			after.codesSince(before, "DELETE", "pods"))
	}
	// A workload whose only pod is terminating has no live pod: the
	// operator creates one replacement, as a ReplicaSet would.
	if n := after.since(before, "POST", "pods", ""); n > 1 {
		t.Errorf("pods created: %v %s, want at most one replacement", n, after.codesSince(before, "POST", "pods"))
	}
	t.Logf("pod requests since the taint: DELETE %s, POST %s", after.codesSince(before, "DELETE", "pods"), after.codesSince(before, "POST", "pods"))
}

// playKubeletFinish does what a live node's kubelet does when a pod it runs
// is deleted gracefully and its containers have stopped: it reports the
// containers terminated and the pod in a terminal phase, then deletes the
// pod with grace 0 and a precondition on its UID. It fails the test if the
// API server does not answer the DELETE with success.
func playKubeletFinish(ctx context.Context, t *testing.T, c kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	pod = pod.DeepCopy()
	now := metav1.Now()
	pod.Status.Phase = corev1.PodSucceeded
	var statuses []corev1.ContainerStatus
	for _, ctr := range pod.Spec.Containers {
		statuses = append(statuses, corev1.ContainerStatus{
			Name:  ctr.Name,
			Image: ctr.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: *pod.Status.StartTime, FinishedAt: now,
			}},
		})
	}
	pod.Status.ContainerStatuses = statuses
	for i := range pod.Status.Conditions {
		switch pod.Status.Conditions[i].Type {
		case corev1.PodReady, corev1.ContainersReady:
			pod.Status.Conditions[i].Status = corev1.ConditionFalse
			pod.Status.Conditions[i].Reason = "PodCompleted"
			pod.Status.Conditions[i].LastTransitionTime = now
		}
	}
	if _, err := c.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("reporting the containers of %s stopped: %v", pod.Name, err)
	}
	if err := c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	}); err != nil {
		t.Fatalf("the kubelet's final DELETE of %s: %v", pod.Name, err)
	}
}

// orphanDeadline is how soon after its node's deletion the library must
// have removed an orphaned pod: a few resyncs, well inside PodGC's 40 s
// quarantine.
const orphanDeadline = 10 * time.Second

// TestScenarioNodeDeleted: two nodes are deleted while their pods run (no
// deletionTimestamp on the pods). The operator manages one pod's workload:
// with node evidence, it confirms the node gone with a live GET,
// force-deletes the orphan and creates a replacement within seconds. The
// other pod is left to Kubernetes alone: the controller-manager's PodGC
// removes it after its 40 s quarantine.
func TestScenarioNodeDeleted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cp, nodes := startCluster(ctx, t, "node-healthy", "node-on", "node-off")
	healthy, onNode, offNode := nodes[0], nodes[1], nodes[2]
	c := cp.Client()
	const onW, offW = "orphan-on", "orphan-off"

	onPod := markRunning(ctx, t, c, cp.CreatePod(ctx, workloadPod("orphan-on-0", onNode.Name(), onW, 2)))
	offPod := markRunning(ctx, t, c, cp.CreatePod(ctx, workloadPod("orphan-off-0", offNode.Name(), offW, 2)))
	op := cp.StartOperator(t, bins, operatorArgs(onW, "--node-selector="+corev1.LabelHostname+"="+healthy.Name())...)
	waitForOperator(ctx, t, op)

	r := runNodeDeleted(ctx, t, cp, op, onW, onNode, offNode, onPod, offPod, 3*time.Minute)
	t.Logf("node deleted → pod gone: library on %v (removed by %s), PodGC alone %v (removed by %s); replacement %v after the node's deletion",
		r.onGone.Round(time.Millisecond), r.onRemovedBy, r.offGone.Round(time.Millisecond), r.offRemovedBy, r.replaced.Round(time.Millisecond))

	// Kubernetes alone: PodGC.
	if r.offRemovedBy != removedByPodGC {
		t.Errorf("the unmanaged orphan was removed by %s, want PodGC", r.offRemovedBy)
	}
	// The library: within seconds, by the operator.
	if r.onGone > orphanDeadline || r.onRemovedBy != removedByLibrary {
		t.Errorf("the managed orphan was removed %v after its node's deletion by %s; want the operator to remove it within %v (PodGC took %v)",
			r.onGone.Round(time.Millisecond), r.onRemovedBy, orphanDeadline, r.offGone.Round(time.Millisecond))
	}
	if lines := op.LogLines(`"force-deleted pod"`); len(lines) != 1 || !strings.Contains(lines[0], `pod="`+ns+"/"+onPod.Name+`"`) {
		t.Errorf("operator's force deletes: %q, want one, of %s", lines, onPod.Name)
	}
	if r.deletes != 2 || r.deletesOK != 2 {
		t.Errorf("pod DELETEs after the nodes' deletion: %s, want 2 answered 200 (one per orphan, whoever sent it)", r.deleteCodes)
	}
	if r.creates != 1 {
		t.Errorf("pods created after the nodes' deletion: %v, want 1 (the replacement of %s)", r.creates, onW)
	}
	if pods, err := listWorkload(ctx, c, offW); err != nil || len(pods) != 0 {
		t.Errorf("workload %s: %s (err %v), want no pod: nothing replaces it", offW, describePods(pods), err)
	}
}

// Who removed an orphaned pod, as its last state tells.
const (
	removedByPodGC   = "PodGC"       // DisruptionTarget reason DeletionByPodGC
	removedByLibrary = "the library" // no DeletionByPodGC condition: the operator's force delete
)

// removedBy tells from a pod's last state who removed it.
func removedBy(final *corev1.Pod) string {
	if harness.PodHasCondition(corev1.DisruptionTarget, corev1.ConditionTrue, "DeletionByPodGC")(final) {
		return removedByPodGC
	}
	return removedByLibrary
}

// nodeDeletedRun is what runNodeDeleted measured.
type nodeDeletedRun struct {
	onGone, offGone           time.Duration // node deleted → its pod deleted, as the test's watch saw it
	replaced                  time.Duration // onNode deleted → replacement created
	onRemovedBy, offRemovedBy string
	deletes, deletesOK        float64 // pod DELETEs (any code, 200) from the nodes' deletion until both pods were gone
	deleteCodes               string
	creates                   float64 // pod POSTs over the same span
}

// runNodeDeleted deletes onNode and offNode, which must each run one pod
// (onPod, offPod), at the same moment, and waits until both pods are gone
// and workload onW, which op manages, has a replacement. offPod's workload
// is managed by nothing. Both orphans are removed in the same PodGC pass
// unless the library is faster.
func runNodeDeleted(ctx context.Context, t *testing.T, cp *harness.ControlPlane, op *harness.Operator, onW string,
	onNode, offNode *harness.Node, onPod, offPod *corev1.Pod, timeout time.Duration) nodeDeletedRun {
	t.Helper()
	watch, err := cp.WatchPods(ctx, onPod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	before := readRequests(ctx, t, cp)

	if err := onNode.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	onDeleted := time.Now()
	if err := offNode.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	offDeleted := time.Now()

	wctx, wcancel := context.WithTimeout(ctx, timeout)
	pods, err := watch.WaitFor(wctx, "both orphans gone and "+onW+" replaced", func(ps []harness.PodHistory) bool {
		on, _ := watch.Pod(onPod.UID)
		off, _ := watch.Pod(offPod.UID)
		return !on.Deleted.IsZero() && !off.Deleted.IsZero() && figReplacement(ps, onW, onPod.Name) != nil
	})
	wcancel()
	if err != nil {
		t.Fatalf("%v\noperator log:\n%s", err, strings.Join(op.LogLines(""), "\n"))
	}
	on, _ := watch.Pod(onPod.UID)
	off, _ := watch.Pod(offPod.UID)
	r := nodeDeletedRun{
		onGone:   on.Deleted.Sub(onDeleted),
		offGone:  off.Deleted.Sub(offDeleted),
		replaced: figReplacement(pods, onW, onPod.Name).Added.Sub(onDeleted),
	}
	r.onRemovedBy, r.offRemovedBy = removedBy(on.Final), removedBy(off.Final)
	after := readRequests(ctx, t, cp)
	r.deletes = after.since(before, "DELETE", "pods", "")
	r.deletesOK = after.since(before, "DELETE", "pods", "200")
	r.deleteCodes = after.codesSince(before, "DELETE", "pods")
	r.creates = after.since(before, "POST", "pods", "")
	return r
}
