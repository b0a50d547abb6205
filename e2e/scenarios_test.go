package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

// The scenarios below run the library against a real API server and
// controller-manager. Each one asserts on what the API server holds (GET and
// LIST) and on the requests it counted (/metrics), not only on what the
// library reports.

// TestScenarioNodeFailure: a workload's only pod dies with its node. Without
// the library it stays Terminating; with the example operator running, it is
// force-deleted with one DELETE and replaced.
func TestScenarioNodeFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, nodes := startCluster(ctx, t, "node-a", "node-b")
	lost, healthy := nodes[0], nodes[1]
	c := cp.Client()
	const w = "registry"

	old := cp.CreatePod(ctx, workloadPod("registry-0", lost.Name(), w, 2))
	failAndWaitEvicted(ctx, t, c, lost, old)

	// The library is off: nothing completes the deletion.
	if _, err := harness.ConsistentlyPod(ctx, c, ns, old.Name, 6*time.Second, harness.PodAll(taintEvicted, hasUID(old.UID))); err != nil {
		t.Fatalf("without the operator: %v", err)
	}

	before := readRequests(ctx, t, cp)
	selector := corev1.LabelHostname + "=" + healthy.Name()
	op := cp.StartOperator(t, bins, operatorArgs(w, "--node-selector="+selector)...)
	started := time.Now()

	if _, err := harness.WaitForPod(ctx, c, ns, old.Name, harness.PodGone); err != nil {
		t.Fatalf("the operator did not remove the dead pod: %v", err)
	}
	t.Logf("dead pod gone %v after the operator started", time.Since(started).Round(100*time.Millisecond))

	var replacement corev1.Pod
	err := pollUntil(ctx, func() bool {
		pods, err := listWorkload(ctx, c, w)
		if err != nil || len(pods) != 1 || pods[0].UID == old.UID {
			return false
		}
		replacement = pods[0]
		return true
	})
	if err != nil {
		pods, _ := listWorkload(ctx, c, w)
		t.Fatalf("no replacement pod: %v; pods %s", err, describePods(pods))
	}
	t.Logf("replacement %s created %v after the operator started", replacement.Name, time.Since(started).Round(100*time.Millisecond))
	if replacement.DeletionTimestamp != nil || replacement.Labels[workloadLabel] != w {
		t.Fatalf("replacement %s: deletionTimestamp %v, labels %v", replacement.Name, replacement.DeletionTimestamp, replacement.Labels)
	}
	want := map[string]string{corev1.LabelHostname: healthy.Name()}
	if !maps.Equal(replacement.Spec.NodeSelector, want) {
		t.Fatalf("replacement's node selector %v, want %v", replacement.Spec.NodeSelector, want)
	}
	if replacement.Spec.NodeName != "" {
		t.Fatalf("replacement already bound to %q", replacement.Spec.NodeName)
	}

	// The harness runs no scheduler: the test binds the replacement to the
	// node its selector names, through the binding subresource, as
	// kube-scheduler would.
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: replacement.Name, UID: replacement.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: healthy.Name()},
	}
	if err := c.CoreV1().Pods(ns).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("binding the replacement: %v", err)
	}
	if _, err := harness.ConsistentlyPod(ctx, c, ns, replacement.Name, 4*time.Second,
		harness.PodAll(hasUID(replacement.UID), notTerminating, onNode(healthy.Name()))); err != nil {
		t.Fatalf("replacement on the healthy node: %v", err)
	}

	checker := newChecker(t, c, w)
	report, err := checker.CheckReport(ctx)
	if err != nil || !report.Healthy {
		t.Fatalf("check after recovery: healthy %v, err %v; report %+v", report.Healthy, err, report.Pods)
	}
	if len(report.Pods) != 1 || report.Pods[0].Pod.UID != replacement.UID || report.Pods[0].Verdict.State != health.Alive {
		t.Fatalf("check after recovery saw %+v, want only the replacement, alive", report.Pods)
	}

	after := readRequests(ctx, t, cp)
	if n := after.since(before, "DELETE", "pods", ""); n != 1 {
		t.Errorf("pod DELETEs since the operator started: %v %s, want exactly 1", n, after.codesSince(before, "DELETE", "pods"))
	}
	if n := after.since(before, "DELETE", "pods", "200"); n != 1 {
		t.Errorf("pod DELETEs answered 200 since the operator started: %v, want 1", n)
	}
	if n := after.since(before, "POST", "pods", "201"); n != 1 {
		t.Errorf("pods created since the operator started: %v %s, want 1 (the replacement)", n, after.codesSince(before, "POST", "pods"))
	}
	if got := len(op.LogLines("force-deleted pod")); got != 1 {
		t.Errorf("operator logged %d force deletes, want 1", got)
	}
}

// TestScenarioDrainIsNotCutShort: a pod on a healthy node evicted through
// the Eviction API (a drain) is Terminating too, but the library must leave
// its graceful deletion alone.
func TestScenarioDrainIsNotCutShort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, nodes := startCluster(ctx, t, "node-a")
	node := nodes[0]
	c := cp.Client()
	const w = "web"

	pod := cp.CreatePod(ctx, workloadPod("web-0", node.Name(), w, 2))
	pod = markRunning(ctx, t, c, pod)

	op := cp.StartOperator(t, bins, operatorArgs(w)...)
	waitForOperator(ctx, t, op)
	before := readRequests(ctx, t, cp)

	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name}}
	if err := c.PolicyV1().Evictions(ns).Evict(ctx, eviction); err != nil {
		t.Fatalf("evicting %s: %v", pod.Name, err)
	}
	drained := harness.PodAll(
		hasUID(pod.UID),
		harness.PodHasCondition(corev1.DisruptionTarget, corev1.ConditionTrue, "EvictionByEvictionAPI"),
		harness.PodTerminating,
	)
	evicted, err := harness.WaitForPod(ctx, c, ns, pod.Name, drained)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod %s evicted: deletionTimestamp %s, grace %ds", evicted.Name,
		evicted.DeletionTimestamp.UTC().Format(time.RFC3339), ptrValue(evicted.DeletionGracePeriodSeconds))

	// The operator checks the workload on the pod's update and every 2 s;
	// an in-process checker checks it too, every 500 ms.
	checker := newChecker(t, c, w)
	var checks int
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		report, err := checker.CheckReport(ctx)
		if err != nil {
			t.Fatalf("check: %v", err)
		}
		checks++
		r := podReport(t, report, pod.UID)
		if r.Verdict.State != health.Terminating || r.Outcome != health.NoAction {
			t.Fatalf("checker judged the drained pod %v (rule %s), outcome %v; want Terminating, NoAction", r.Verdict.State, r.Verdict.Rule, r.Outcome)
		}
		if _, err := harness.ConsistentlyPod(ctx, c, ns, pod.Name, 500*time.Millisecond, drained); err != nil {
			t.Fatalf("drained pod: %v", err)
		}
	}
	got, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || !drained(got) || !got.DeletionTimestamp.Equal(evicted.DeletionTimestamp) {
		t.Fatalf("drained pod after %d checks: %v, err %v; want it unchanged", checks, got, err)
	}

	after := readRequests(ctx, t, cp)
	if n := after.since(before, "DELETE", "pods", ""); n != 0 {
		t.Errorf("pod DELETEs since the eviction: %v %s, want none", n, after.codesSince(before, "DELETE", "pods"))
	}
	if n := after.since(before, "POST", "pods/eviction", "201"); n != 1 {
		t.Errorf("evictions: %v %s, want 1", n, after.codesSince(before, "POST", "pods/eviction"))
	}
	if got := op.LogLines("force-deleted pod"); len(got) != 0 {
		t.Errorf("operator force-deleted pods: %q", got)
	}
}

// markRunning sets a pod's status as a kubelet would once its containers
// run: phase Running, Ready.
func markRunning(ctx context.Context, t *testing.T, c kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	pod = pod.DeepCopy()
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = append(pod.Status.Conditions,
		corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	)
	updated, err := c.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("marking %s running: %v", pod.Name, err)
	}
	return updated
}

// TestScenarioSameNameNewPod: a lagging cache still lists a dead pod whose
// name a new pod has taken. The force delete's UID precondition fails and
// the new pod survives.
func TestScenarioSameNameNewPod(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, nodes := startCluster(ctx, t, "node-a", "node-b")
	healthy, lost := nodes[0], nodes[1]
	c := cp.Client()
	const w = "cache"

	old := cp.CreatePod(ctx, workloadPod("cache-0", lost.Name(), w, 2))
	stale := failAndWaitEvicted(ctx, t, c, lost, old)[0]

	// Someone else removes the dead pod and a new pod takes its name.
	if err := c.CoreV1().Pods(ns).Delete(ctx, old.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(old.UID)),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.WaitForPod(ctx, c, ns, old.Name, harness.PodGone); err != nil {
		t.Fatal(err)
	}
	newer := cp.CreatePod(ctx, workloadPod(old.Name, healthy.Name(), w, 2))
	if newer.UID == old.UID {
		t.Fatalf("new pod has the old UID %s", old.UID)
	}

	// The checker's source is a cache that has not seen any of that: it
	// still returns the dead pod.
	source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) {
		return []*corev1.Pod{stale.DeepCopy()}, nil
	})
	checker := newCheckerOver(t, c, w, source)

	before := readRequests(ctx, t, cp)
	report, err := checker.CheckReport(ctx)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	r := podReport(t, report, old.UID)
	if r.Verdict.State != health.Dead || r.Verdict.Rule != "TaintEvicted" || r.Outcome != health.NameReused {
		t.Fatalf("stale pod: verdict %v (rule %s), outcome %v; want Dead by %s, NameReused", r.Verdict.State, r.Verdict.Rule, r.Outcome, "TaintEvicted")
	}
	// The stale list holds no live pod and one removed dead pod: row D4.
	if report.Healthy {
		t.Errorf("healthy from a list with only a dead pod")
	}

	after := readRequests(ctx, t, cp)
	if n := after.since(before, "DELETE", "pods", ""); n != 1 {
		t.Errorf("pod DELETEs: %v %s, want exactly 1", n, after.codesSince(before, "DELETE", "pods"))
	}
	if n := after.since(before, "DELETE", "pods", "409"); n != 1 {
		t.Errorf("pod DELETEs answered 409: %v %s, want 1", n, after.codesSince(before, "DELETE", "pods"))
	}

	got, err := c.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the new pod is gone: %v", err)
	}
	if got.UID != newer.UID || got.DeletionTimestamp != nil {
		t.Fatalf("pod %s: UID %s, deletionTimestamp %v; want the new pod %s, not terminating", got.Name, got.UID, got.DeletionTimestamp, newer.UID)
	}

	// The same checker remembers the outcome: a second check over the same
	// stale list sends nothing.
	report, err = checker.CheckReport(ctx)
	if err != nil {
		t.Fatalf("second check: %v", err)
	}
	if r := podReport(t, report, old.UID); r.Outcome != health.DeletedEarlier {
		t.Errorf("second check: outcome %v, want DeletedEarlier", r.Outcome)
	}
	final := readRequests(ctx, t, cp)
	if n := final.since(after, "DELETE", "pods", ""); n != 0 {
		t.Errorf("second check sent %v pod DELETEs, want none", n)
	}
}

// TestScenarioAlivePlusDead: a workload keeps a live pod on a healthy node
// while another dies with its node. The operator removes the dead one and
// creates nothing.
func TestScenarioAlivePlusDead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, nodes := startCluster(ctx, t, "node-a", "node-b")
	healthy, lost := nodes[0], nodes[1]
	c := cp.Client()
	const w = "api"

	live := cp.CreatePod(ctx, workloadPod("api-live", healthy.Name(), w, 2))
	dead := cp.CreatePod(ctx, workloadPod("api-dead", lost.Name(), w, 2))

	op := cp.StartOperator(t, bins, operatorArgs(w)...)
	waitForOperator(ctx, t, op)
	before := readRequests(ctx, t, cp)

	final := watchFinalState(ctx, t, c, dead.Name)
	lost.Fail()
	failedAt := time.Now()
	var last *corev1.Pod
	select {
	case last = <-final:
	case <-ctx.Done():
		t.Fatal("the dead pod was never deleted")
	}
	t.Logf("dead pod deleted %v after its node's last heartbeat", time.Since(failedAt).Round(100*time.Millisecond))
	if !taintEvicted(last) || last.UID != dead.UID {
		t.Fatalf("pod %s deleted in state %+v; want it taint-evicted first", dead.Name, last.Status.Conditions)
	}

	consistentlyWorkload(ctx, t, c, w, 6*time.Second, func(pods []corev1.Pod) error {
		if len(pods) != 1 || pods[0].UID != live.UID || pods[0].DeletionTimestamp != nil {
			return errors.New("want only the live pod, not terminating")
		}
		return nil
	})

	checker := newChecker(t, c, w)
	if healthy, err := checker.Check(ctx); !healthy || err != nil {
		t.Fatalf("check: healthy %v, err %v; want true, nil", healthy, err)
	}

	after := readRequests(ctx, t, cp)
	// Two DELETEs reach the API server: the taint-eviction controller's
	// graceful one, then the operator's force delete. /metrics does not
	// tell clients apart; the operator's log does.
	if n := after.since(before, "DELETE", "pods", "200"); n != 2 {
		t.Errorf("pod DELETEs answered 200: %v %s, want 2 (graceful by the taint-eviction controller, then one force delete)", n, after.codesSince(before, "DELETE", "pods"))
	}
	if n := after.since(before, "DELETE", "pods", ""); n != 2 {
		t.Errorf("pod DELETEs: %v %s, want 2", n, after.codesSince(before, "DELETE", "pods"))
	}
	if n := after.since(before, "POST", "pods", ""); n != 0 {
		t.Errorf("pod creations: %v %s, want none", n, after.codesSince(before, "POST", "pods"))
	}
	if got := len(op.LogLines("force-deleted pod")); got != 1 {
		t.Errorf("operator logged %d force deletes, want 1", got)
	}
	if got := op.LogLines("created replacement pod"); len(got) != 0 {
		t.Errorf("operator created replacements: %q", got)
	}
}

// TestScenarioAPIServerGoesAway: the API server disappears in the middle of
// a check, stays away, and hangs. Every check ends with an error within its
// deadline, and the first check after the API server is back converges.
func TestScenarioAPIServerGoesAway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cp, nodes := startCluster(ctx, t, "node-a", "node-b")
	healthy, lost := nodes[0], nodes[1]
	c := cp.Client()
	const w = "queue"

	// The live pod tolerates an unreachable node for long: while the API
	// server is away, the healthy node misses heartbeats too.
	live := cp.CreatePod(ctx, workloadPod("queue-live", healthy.Name(), w, 300))
	dead := cp.CreatePod(ctx, workloadPod("queue-dead", lost.Name(), w, 2))
	failAndWaitEvicted(ctx, t, c, lost, dead)

	cfg := cp.RESTConfig()
	cfg.Timeout = 2 * time.Second
	short, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	source, err := kube.NewClientSource(short.CoreV1(), ns, workloadSelector(w))
	if err != nil {
		t.Fatal(err)
	}
	deleter, err := kube.NewDeleter(short.CoreV1(), ns, kube.DeleterOptions{Selector: workloadSelector(w)})
	if err != nil {
		t.Fatal(err)
	}
	// The API server is stopped after the LIST, before the DELETE.
	stopOnce := make(chan struct{}, 1)
	stopOnce <- struct{}{}
	var stopTook time.Duration
	midCheck := deleterFunc(func(ctx context.Context, pod *corev1.Pod) error {
		select {
		case <-stopOnce:
			stopTook = timed(cp.StopAPIServer)
		default:
		}
		return deleter.ForceDelete(ctx, pod)
	})
	checker, err := health.New(source, midCheck, withLiveNodes(t, c, health.Options{}))
	if err != nil {
		t.Fatal(err)
	}

	// bounded runs one check with a deadline and fails the test if it does
	// not end within it, plus a little slack.
	const slack = 2 * time.Second
	bounded := func(name string, timeout time.Duration) (bool, error) {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, timeout)
		defer ccancel()
		var healthy bool
		var err error
		took := timed(func() { healthy, err = checker.Check(cctx) })
		t.Logf("%s: took %v; healthy %v, err %v", name, took.Round(time.Millisecond), healthy, err)
		if took > timeout+slack {
			t.Errorf("%s took %v, past its %v deadline", name, took, timeout)
		}
		return healthy, err
	}

	// 1. Stopped between the LIST and the DELETE: row D5.
	healthyNow, err := bounded("check while the API server stops", 20*time.Second)
	var deleteErr *health.DeleteError
	if healthyNow || !errors.As(err, &deleteErr) || deleteErr.UID != dead.UID {
		t.Errorf("check while the API server stops (stopping took %v): healthy %v, err %v; want false and a *health.DeleteError for %s", stopTook, healthyNow, err, dead.Name)
	}

	// 2. Stopped: the LIST fails, row D6.
	healthyNow, err = bounded("check while the API server is stopped", 5*time.Second)
	var listErr *health.ListError
	if healthyNow || !errors.As(err, &listErr) {
		t.Errorf("check while stopped: healthy %v, err %v; want false and a *health.ListError", healthyNow, err)
	}

	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	// The failed delete was not remembered: the next checks send it again
	// and converge to row D3.
	converge(ctx, t, checker)
	if _, err := harness.WaitForPod(ctx, c, ns, dead.Name, harness.PodGone); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.WaitForPod(ctx, c, ns, live.Name, harness.PodAll(hasUID(live.UID), notTerminating)); err != nil {
		t.Fatal(err)
	}
	// Metrics start afresh with the restarted API server.
	restarted := readRequests(ctx, t, cp)
	if n := restarted.count("DELETE", "pods", ""); n != 1 || restarted.count("DELETE", "pods", "200") != 1 {
		t.Errorf("pod DELETEs since the restart: %v %s, want one, answered 200", n, restarted.codesSince(nil, "DELETE", "pods"))
	}

	// 3. Frozen: connections are accepted and never answered. A client
	// without a timeout of its own is bounded by the check's context alone.
	unbounded := cp.RESTConfig()
	unbounded.Timeout = 0
	slow, err := kubernetes.NewForConfig(unbounded)
	if err != nil {
		t.Fatal(err)
	}
	slowSource, err := kube.NewClientSource(slow.CoreV1(), ns, workloadSelector(w))
	if err != nil {
		t.Fatal(err)
	}
	checker = newCheckerOver(t, slow, w, slowSource)
	if err := cp.FreezeAPIServer(); err != nil {
		t.Fatal(err)
	}
	healthyNow, err = bounded("check while the API server hangs", 3*time.Second)
	if healthyNow || !errors.As(err, &listErr) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("check while frozen: healthy %v, err %v; want false and a *health.ListError wrapping context.DeadlineExceeded", healthyNow, err)
	}
	if err := cp.ThawAPIServer(); err != nil {
		t.Fatal(err)
	}
	converge(ctx, t, checker)
}

// converge checks every PollInterval, each check with a 10 s deadline, until
// one answers (true, nil).
func converge(ctx context.Context, t *testing.T, checker *health.Checker) {
	t.Helper()
	start := time.Now()
	var healthy bool
	var err error
	if pollErr := pollUntil(ctx, func() bool {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		healthy, err = checker.Check(cctx)
		return healthy && err == nil
	}); pollErr != nil {
		t.Fatalf("checks did not converge: last healthy %v, err %v", healthy, err)
	}
	t.Logf("converged to (true, nil) in %v", time.Since(start).Round(time.Millisecond))
}

// TestScenarioFinalizerHoldsDeadPod: a dead pod held by a finalizer
// survives its force delete. The checker sends the DELETE once, then
// reports the pod BlockedByFinalizers without sending it again.
func TestScenarioFinalizerHoldsDeadPod(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, nodes := startCluster(ctx, t, "node-a", "node-b")
	healthy, lost := nodes[0], nodes[1]
	c := cp.Client()
	const w = "store"
	const finalizer = "example.com/hold"

	live := cp.CreatePod(ctx, workloadPod("store-live", healthy.Name(), w, 2))
	held := workloadPod("store-held", lost.Name(), w, 2)
	held.Finalizers = []string{finalizer}
	held = cp.CreatePod(ctx, held)
	failAndWaitEvicted(ctx, t, c, lost, held)

	checker := newChecker(t, c, w)
	before := readRequests(ctx, t, cp)
	report, err := checker.CheckReport(ctx)
	if err != nil || !report.Healthy {
		t.Fatalf("first check: healthy %v, err %v; want true, nil", report.Healthy, err)
	}
	if r := podReport(t, report, held.UID); r.Verdict.State != health.Dead || r.Outcome != health.ForceDeleted {
		t.Fatalf("first check: held pod %v, outcome %v; want Dead, ForceDeleted", r.Verdict.State, r.Outcome)
	}
	if r := podReport(t, report, live.UID); r.Verdict.State != health.Alive {
		t.Fatalf("first check: live pod %v, want Alive", r.Verdict.State)
	}
	afterFirst := readRequests(ctx, t, cp)
	if n := afterFirst.since(before, "DELETE", "pods", "200"); n != 1 || afterFirst.since(before, "DELETE", "pods", "") != 1 {
		t.Fatalf("first check: pod DELETEs %s, want one, answered 200", afterFirst.codesSince(before, "DELETE", "pods"))
	}

	// The finalizer holds the pod, now with a grace period of 0.
	heldNow := harness.PodAll(taintEvicted, hasUID(held.UID), func(pod *corev1.Pod) bool {
		return ptrValue(pod.DeletionGracePeriodSeconds) == 0 && len(pod.Finalizers) == 1 && pod.Finalizers[0] == finalizer
	})
	if _, err := harness.WaitForPod(ctx, c, ns, held.Name, heldNow); err != nil {
		t.Fatal(err)
	}

	const n = 5
	for i := range n {
		report, err := checker.CheckReport(ctx)
		if err != nil || !report.Healthy {
			t.Fatalf("check %d: healthy %v, err %v; want true, nil", i+2, report.Healthy, err)
		}
		if r := podReport(t, report, held.UID); r.Outcome != health.BlockedByFinalizers {
			t.Fatalf("check %d: held pod outcome %v, want BlockedByFinalizers", i+2, r.Outcome)
		}
	}
	if _, err := harness.ConsistentlyPod(ctx, c, ns, held.Name, time.Second, heldNow); err != nil {
		t.Fatal(err)
	}
	afterAll := readRequests(ctx, t, cp)
	if d := afterAll.since(afterFirst, "DELETE", "pods", ""); d != 0 {
		t.Errorf("%d more checks sent %v pod DELETEs %s, want none", n, d, afterAll.codesSince(afterFirst, "DELETE", "pods"))
	}

	// Whatever owns the finalizer lets go: the pod goes at once.
	patch := fmt.Appendf(nil, `[{"op":"test","path":"/metadata/finalizers","value":["%s"]},{"op":"remove","path":"/metadata/finalizers"}]`, finalizer)
	if _, err := c.CoreV1().Pods(ns).Patch(ctx, held.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("removing the finalizer: %v", err)
	}
	if _, err := harness.WaitForPod(ctx, c, ns, held.Name, harness.PodGone); err != nil {
		t.Fatal(err)
	}
	if healthy, err := checker.Check(ctx); !healthy || err != nil {
		t.Fatalf("check after the finalizer went: healthy %v, err %v", healthy, err)
	}
	got, err := c.CoreV1().Pods(ns).Get(ctx, live.Name, metav1.GetOptions{})
	if err != nil || got.UID != live.UID || got.DeletionTimestamp != nil {
		t.Fatalf("live pod: %v, err %v; want it untouched", got, err)
	}
}
