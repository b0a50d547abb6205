package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/e2e/harness"
)

// crRegistryLabel marks the ConfigMaps that examples/controllerruntime
// reconciles as registries; their pods carry workloadLabel=<ConfigMap name>
// and are owned by the ConfigMap.
const crRegistryLabel = "podhealth.example/registry"

// crArgs are the flags of examples/controllerruntime in the scenarios.
func crArgs(resync time.Duration) []string {
	return []string{"--namespace=" + ns, "--resync=" + resync.String(), "--toleration-seconds=2"}
}

// crRegistry creates the registry ConfigMap name.
func crRegistry(ctx context.Context, t *testing.T, cp *harness.ControlPlane, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cp.Client().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{crRegistryLabel: "true"}},
		Data:       map[string]string{"image": operatorImage},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating registry %s: %v", name, err)
	}
	return cm
}

// crRegistryPod is the pod name of registry cm, bound to node, owned by cm
// as the example's own pods are, tolerating its node's failure for 2 s.
func crRegistryPod(name string, cm *corev1.ConfigMap, node string) *corev1.Pod {
	pod := workloadPod(name, node, cm.Name, 2)
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}
	return pod
}

// crWaitStarted waits until the controller's workers run.
func crWaitStarted(ctx context.Context, t *testing.T, op *harness.Operator) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := pollUntil(wctx, func() bool { return len(op.LogLines("Starting workers")) > 0 }); err != nil {
		t.Fatalf("examples/controllerruntime did not start its workers: %v\n%s", err, op.Log())
	}
}

// crTimeFailure fails node, on which orig (registry w's only pod) runs,
// and waits until the pod is gone and a replacement exists; it binds the
// replacement to healthy, brings node back, and returns what it measured.
// The watch must have been opened before.
func crTimeFailure(ctx context.Context, t *testing.T, cp *harness.ControlPlane, watch *harness.PodWatch, node, healthy *harness.Node, w string, orig *corev1.Pod) figFailure {
	t.Helper()
	r := figFailure{node: node.Name(), pod: orig.Name}
	deletes0, creates0 := figCount(ctx, t, cp, "DELETE"), figCount(ctx, t, cp, "POST")
	node.Fail()
	lastBeat := node.LastHeartbeat()
	fctx, fcancel := context.WithTimeout(ctx, 90*time.Second)
	pods, err := watch.WaitFor(fctx, "pod "+orig.Name+" gone and replaced", func(ps []harness.PodHistory) bool {
		gone := false
		for _, p := range ps {
			if p.UID == orig.UID && !p.Deleted.IsZero() {
				gone = true
			}
		}
		return gone && figReplacement(ps, w, orig.Name) != nil
	})
	fcancel()
	if err != nil {
		t.Fatalf("node %s: %v", node.Name(), err)
	}
	h, _ := watch.Pod(orig.UID)
	repl := figReplacement(pods, w, orig.Name)
	if h.Evicted.IsZero() {
		t.Fatalf("pod %s was deleted without being seen with DisruptionTarget (DeletionByTaintManager)", h.Name)
	}
	r.evictedAfterBeat = h.Evicted.Sub(lastBeat)
	r.transitionToSeen = h.Evicted.Sub(h.EvictedTransition)
	r.gone = h.Deleted.Sub(h.Evicted)
	r.replaced = repl.Added.Sub(h.Evicted)
	if err := cp.BindPod(ctx, ns, repl.Name, healthy.Name()); err != nil {
		t.Fatal(err)
	}
	node.Recover()
	if _, err := harness.WaitForNode(ctx, cp.Client(), node.Name(), figNodeBackToNormal); err != nil {
		t.Fatal(err)
	}
	r.deletes = figCount(ctx, t, cp, "DELETE") - deletes0
	r.creates = figCount(ctx, t, cp, "POST") - creates0
	if r.deletes != 2 {
		t.Errorf("node %s: %v pod DELETEs, want 2 (taint eviction + one force delete)", node.Name(), r.deletes)
	}
	if r.creates != 1 {
		t.Errorf("node %s: %v pod creations, want exactly 1 replacement", node.Name(), r.creates)
	}
	return r
}

// TestScenarioControllerRuntimeNodeFailure: examples/controllerruntime, a
// controller-runtime manager, keeps a registry at one pod. Its pod dies
// with its node: the dead pod is force-deleted with one DELETE, exactly one
// replacement is created (owned by the registry, with generateName), and
// none more while the controller goes on resyncing.
func TestScenarioControllerRuntimeNodeFailure(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, nodes := startCluster(ctx, t, "node-a", "node-b")
	lost, healthy := nodes[0], nodes[1]
	const w = "catalog"
	cm := crRegistry(ctx, t, cp, w)
	orig := cp.CreatePod(ctx, crRegistryPod("catalog-orig", cm, lost.Name()))

	const resync = time.Second
	before := readRequests(ctx, t, cp)
	op := cp.StartControllerRuntime(t, bins, crArgs(resync)...)
	crWaitStarted(ctx, t, op)
	watch, err := cp.WatchPods(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	// A healthy registry: several resyncs, and no write.
	time.Sleep(3 * resync)
	if n := readRequests(ctx, t, cp).since(before, "POST", "pods", ""); n != 0 {
		t.Fatalf("%v pods created while the registry was healthy", n)
	}

	r := crTimeFailure(ctx, t, cp, watch, lost, healthy, w, orig)
	t.Logf("DisruptionTarget → dead pod gone %v, → replacement %v", r.gone, r.replaced)

	// Several more resyncs: still one replacement, and nothing deleted.
	time.Sleep(3 * resync)
	after := readRequests(ctx, t, cp)
	if n := after.since(before, "POST", "pods", "201"); n != 1 {
		t.Errorf("pods created: %v %s, want exactly 1 (the replacement)", n, after.codesSince(before, "POST", "pods"))
	}
	if n := after.since(before, "DELETE", "pods", "200"); n != 2 {
		t.Errorf("pod DELETEs answered 200: %v %s, want 2 (the taint eviction's and one force delete)", n, after.codesSince(before, "DELETE", "pods"))
	}
	pods, err := listWorkload(ctx, cp.Client(), w)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0].UID == orig.UID {
		t.Fatalf("registry pods %s, want one replacement", describePods(pods))
	}
	repl := pods[0]
	if repl.GenerateName != w+"-" || !metav1.IsControlledBy(&repl, cm) {
		t.Errorf("replacement %s: generateName %q, owners %v; want generateName %q and the registry as controller", repl.Name, repl.GenerateName, repl.OwnerReferences, w+"-")
	}
	if repl.Spec.NodeName != healthy.Name() || repl.DeletionTimestamp != nil {
		t.Errorf("replacement %s on node %q, deletionTimestamp %v", repl.Name, repl.Spec.NodeName, repl.DeletionTimestamp)
	}
	// The events went through the events.k8s.io API, on the registry.
	events, err := cp.Client().EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for _, e := range events.Items {
		if e.Regarding.Kind == "ConfigMap" && e.Regarding.Name == w && e.ReportingController == "podhealth-registry" {
			reasons[e.Reason]++
		}
	}
	if reasons["ForceDeletedDeadPod"] != 1 || reasons["CreatedRegistryPod"] != 1 {
		t.Errorf("events on registry %s by reason: %v, want one ForceDeletedDeadPod and one CreatedRegistryPod", w, reasons)
	}
}

// TestScenarioControllerRuntimeLaggingCache: the manager's cache learns of
// every change several resyncs late (its watches go through a proxy that
// delays them). Two registries lose their pods with their node; while the
// cache still lists the force-deleted pods and does not list the
// replacements, the controller reconciles again and again. It must send one
// force delete per dead pod and create one replacement per registry.
func TestScenarioControllerRuntimeLaggingCache(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// node-b stays up: the node-lifecycle controller sees no mass failure.
	cp, nodes := startCluster(ctx, t, "node-a", "node-b")
	lost := nodes[0]
	registries := []string{"lag-a", "lag-b"}
	orig := map[string]*corev1.Pod{}
	for _, w := range registries {
		orig[w] = cp.CreatePod(ctx, crRegistryPod(w+"-orig", crRegistry(ctx, t, cp, w), lost.Name()))
	}
	const resync, lag = time.Second, 4 * time.Second
	proxy, err := cp.StartWatchDelayProxy(lag)
	if err != nil {
		t.Fatal(err)
	}
	op := cp.StartControllerRuntime(t, bins, append(crArgs(resync), "--kubeconfig="+proxy.KubeconfigPath())...)
	crWaitStarted(ctx, t, op)
	watch, err := cp.WatchPods(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	before := readRequests(ctx, t, cp)

	lost.Fail()
	fctx, fcancel := context.WithTimeout(ctx, 90*time.Second)
	_, err = watch.WaitFor(fctx, "both registries' pods gone and replaced", allGoneAndReplaced(orig, registries))
	fcancel()
	if err != nil {
		t.Fatal(err)
	}
	// Let the cache catch up, and several more resyncs run.
	time.Sleep(lag + 3*resync)
	after := readRequests(ctx, t, cp)
	if n := after.since(before, "POST", "pods", ""); n != float64(len(registries)) {
		t.Errorf("pods created: %v %s, want %d (one replacement per registry)", n, after.codesSince(before, "POST", "pods"), len(registries))
	}
	if n := after.since(before, "DELETE", "pods", ""); n != 2*float64(len(registries)) {
		t.Errorf("pod DELETEs: %v %s, want %d (one taint eviction and one force delete per dead pod)", n, after.codesSince(before, "DELETE", "pods"), 2*len(registries))
	}
	if proxy.Watches() == 0 {
		t.Error("the controller's watches did not go through the delaying proxy")
	}
	for _, w := range registries {
		pods, err := listWorkload(ctx, cp.Client(), w)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 1 || pods[0].UID == orig[w].UID {
			t.Errorf("registry %s: pods %s, want one replacement", w, describePods(pods))
		}
	}
}

// TestScenarioControllerRuntimeNodeDeleted: the node object of a running
// registry pod is deleted. The pod itself does not change, and the
// controller resyncs only every 10 minutes: its watch on nodes must
// reconcile the registry, whose checker confirms with a live read that the
// node is gone, force-deletes the pod and creates one replacement, long
// before PodGC would.
func TestScenarioControllerRuntimeNodeDeleted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, nodes := startCluster(ctx, t, "node-healthy", "node-gone")
	gone := nodes[1]
	c := cp.Client()
	const w = "orphan"
	cm := crRegistry(ctx, t, cp, w)
	pod := markRunning(ctx, t, c, cp.CreatePod(ctx, crRegistryPod("orphan-orig", cm, gone.Name())))
	op := cp.StartControllerRuntime(t, bins, crArgs(10*time.Minute)...)
	crWaitStarted(ctx, t, op)
	watch, err := cp.WatchPods(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	before := readRequests(ctx, t, cp)

	if err := gone.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	pods, err := watch.WaitFor(wctx, "orphan gone and replaced", func(ps []harness.PodHistory) bool {
		h, _ := watch.Pod(pod.UID)
		return !h.Deleted.IsZero() && figReplacement(ps, w, pod.Name) != nil
	})
	wcancel()
	if err != nil {
		t.Fatalf("%v\n%s", err, op.Log())
	}
	h, _ := watch.Pod(pod.UID)
	goneAfter := h.Deleted.Sub(deleted)
	t.Logf("node deleted → orphan gone %v (removed by %s), → replacement %v",
		goneAfter.Round(time.Millisecond), removedBy(h.Final), figReplacement(pods, w, pod.Name).Added.Sub(deleted).Round(time.Millisecond))
	if by := removedBy(h.Final); by != removedByLibrary || goneAfter > orphanDeadline {
		t.Errorf("the orphan was removed %v after its node's deletion by %s; want the controller within %v", goneAfter, by, orphanDeadline)
	}
	time.Sleep(2 * time.Second) // a second replacement would be created by now
	after := readRequests(ctx, t, cp)
	if n := after.since(before, "DELETE", "pods", ""); n != 1 {
		t.Errorf("pod DELETEs: %v %s, want 1 (the force delete)", n, after.codesSince(before, "DELETE", "pods"))
	}
	if n := after.since(before, "POST", "pods", ""); n != 1 {
		t.Errorf("pods created: %v %s, want 1 (the replacement)", n, after.codesSince(before, "POST", "pods"))
	}
}
