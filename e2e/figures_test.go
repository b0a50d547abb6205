package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/e2e/harness"
)

// figWorkloadLabel is the label key of examples/operator's workloads.
const figWorkloadLabel = "podhealth.example/workload"

// figFiguresFile is where TestFigures writes its figures, relative to the
// e2e module.
const figFiguresFile = "FIGURES.md"

// figWriteEnv is the environment variable that makes TestFigures rewrite
// figFiguresFile: PODHEALTH_WRITE_FIGURES=1. Without it the test measures,
// asserts and logs the figures, and leaves the tracked file alone.
const figWriteEnv = "PODHEALTH_WRITE_FIGURES"

const (
	figFailures    = 5               // node failures whose recovery is timed
	figResync      = time.Second     // the operators' --resync
	figHealthyWait = 10 * figResync  // how long the healthy phase lasts
	figWatchDelay  = 4 * time.Second // how far the lagging operator's informer is behind
)

// figFailure is what was measured for one failed node and its one pod.
type figFailure struct {
	node, pod             string
	evictedAfterBeat      time.Duration // last heartbeat -> DisruptionTarget seen
	transitionToSeen      time.Duration // condition's lastTransitionTime -> seen (whole-second stamp)
	gone, replaced        time.Duration // DisruptionTarget seen -> pod deleted / replacement created
	deletes, creates      float64       // DELETE and POST requests for pods during the failure
	forceDeleteLogLines   int           // the operator's "force-deleted pod" lines for the pod
	operatorSawEvictionAt time.Duration // DisruptionTarget seen -> operator logged "pod died" (lag phase)
}

// TestFigures measures, with examples/operator running against a real
// control plane: how fast a pod that died with its node is removed and
// replaced (and the same for examples/controllerruntime, a
// controller-runtime manager, next to it); that the library sends exactly one DELETE per dead pod, also
// when the operator's informer lags several resyncs behind; that a
// healthy workload costs no write request at all; and how soon a running
// pod whose node object is deleted is gone, with the operator and with
// Kubernetes' PodGC alone; and, on a second control plane at the same
// time (see TestScenarioReplaceUnreachable), how soon a pod whose node
// stops heartbeating is replaced with and without --replace-unreachable.
// It logs the figures, and writes them to FIGURES.md only when
// PODHEALTH_WRITE_FIGURES=1 is set and the test passed.
func TestFigures(t *testing.T) {
	testStart := time.Now()
	loadStart := figLoadAverage()
	ctx, cancel := context.WithTimeout(context.Background(), 11*time.Minute)
	defer cancel()
	// The early-replacement measurement needs a minute and more of node
	// failure with realistic tolerations: it runs meanwhile, on a control
	// plane of its own, so that its requests and failed nodes do not mix
	// with the figures below.
	unr := setupUnreachable(ctx, t)
	var unrResult unrRun
	var unrErr error
	unrDone := make(chan struct{})
	go func() {
		defer close(unrDone)
		unrResult, unrErr = unr.run(ctx, t)
	}()
	defer func() {
		cancel() // ends the measurement if the test stops early
		<-unrDone
	}()

	cp := harness.Start(t, bins, harness.Options{})
	c := cp.Client()
	const ns = metav1.NamespaceDefault

	// One node that never fails, one node per timed failure, and one node
	// for the lagging operator's two workloads.
	healthy := cp.AddNode(ctx, "node-healthy")
	var failing []*harness.Node
	var workloads []string
	for i := 1; i <= figFailures; i++ {
		failing = append(failing, cp.AddNode(ctx, fmt.Sprintf("node-%d", i)))
		workloads = append(workloads, fmt.Sprintf("w%d", i))
	}
	lagNode := cp.AddNode(ctx, "node-lag")
	lagWorkloads := []string{"lag-a", "lag-b"}
	// Two nodes whose objects are deleted while their pods run: one pod
	// of a workload of the operator, one of a workload nothing manages.
	goneOn, goneOff := cp.AddNode(ctx, "node-gone-on"), cp.AddNode(ctx, "node-gone-off")
	const orphanOn, orphanOff = "orphan", "podgc"
	// One node per timed failure of examples/controllerruntime's registries.
	var crFailing []*harness.Node
	var crRegistries []string
	for i := 1; i <= figFailures; i++ {
		crFailing = append(crFailing, cp.AddNode(ctx, fmt.Sprintf("cr-node-%d", i)))
		crRegistries = append(crRegistries, fmt.Sprintf("cr%d", i))
	}
	allNodes := append(append(append([]*harness.Node{healthy}, failing...), lagNode, goneOn, goneOff), crFailing...)
	for _, n := range allNodes {
		if _, err := harness.WaitForNode(ctx, c, n.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatal(err)
		}
	}
	// The node-lifecycle controller records a RegisteredNode event per new
	// node; let those writes happen before the healthy phase is counted.
	if err := figWaitRegistered(ctx, cp, allNodes); err != nil {
		t.Fatal(err)
	}

	orig := map[string]*corev1.Pod{} // by workload
	for i, w := range workloads {
		orig[w] = cp.CreatePod(ctx, figWorkloadPod(ns, w+"-orig", w, failing[i].Name()))
	}
	for _, w := range lagWorkloads {
		orig[w] = cp.CreatePod(ctx, figWorkloadPod(ns, w+"-orig", w, lagNode.Name()))
	}
	orig[orphanOn] = cp.CreatePod(ctx, figWorkloadPod(ns, orphanOn+"-orig", orphanOn, goneOn.Name()))
	orig[orphanOff] = cp.CreatePod(ctx, figWorkloadPod(ns, orphanOff+"-orig", orphanOff, goneOff.Name()))
	opWorkloads := append(append([]string(nil), workloads...), orphanOn)
	for i, w := range crRegistries {
		orig[w] = cp.CreatePod(ctx, crRegistryPod(w+"-orig", crRegistry(ctx, t, cp, w), crFailing[i].Name()))
	}

	// Phase 1: everything healthy. The operators and
	// examples/controllerruntime start and resync every second; none may
	// write a pod or an event.
	writesBefore := figPodAndEventWrites(ctx, t, cp)
	op := cp.StartOperator(t, bins, "--namespace="+ns, "--workloads="+strings.Join(opWorkloads, ","),
		"--image=registry.example/x:1", "--resync="+figResync.String())
	proxy, err := cp.StartWatchDelayProxy(figWatchDelay)
	if err != nil {
		t.Fatal(err)
	}
	cp.StartOperator(t, bins, "--namespace="+ns, "--workloads="+strings.Join(lagWorkloads, ","),
		"--image=registry.example/x:1", "--resync="+figResync.String(),
		"--kubeconfig="+proxy.KubeconfigPath())
	crOp := cp.StartControllerRuntime(t, bins, crArgs(figResync)...)
	crWaitStarted(ctx, t, crOp)
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	err = pollUntil(syncCtx, func() bool { return len(op.LogLines(`"pod cache synced"`)) >= 2 })
	syncCancel()
	if err != nil {
		t.Fatalf("operators did not sync their caches: %v\n%s", err, op.Log())
	}
	time.Sleep(figHealthyWait)
	writesAfter := figPodAndEventWrites(ctx, t, cp)
	healthyWrites := writesAfter - writesBefore
	if healthyWrites != 0 {
		t.Errorf("%v writes to pods or events while every workload was healthy, want 0", healthyWrites)
	}
	if lines := op.LogLines("force-deleted pod"); len(lines) > 0 {
		t.Errorf("operator force-deleted while everything was healthy: %q", lines)
	}

	watch, err := cp.WatchPods(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}

	// Phase 2: one node after the other fails; its workload's pod is
	// taint-evicted, force-deleted by the operator and replaced. The node
	// comes back before the next one fails, so the node-lifecycle
	// controller never sees a mass failure (it would stop evicting).
	var results []figFailure
	for i, node := range failing {
		w := workloads[i]
		r := figFailure{node: node.Name(), pod: orig[w].Name}
		deletes0, creates0 := figCount(ctx, t, cp, "DELETE"), figCount(ctx, t, cp, "POST")

		node.Fail()
		lastBeat := node.LastHeartbeat()
		fctx, fcancel := context.WithTimeout(ctx, 90*time.Second)
		pods, err := watch.WaitFor(fctx, "pod "+orig[w].Name+" gone and replaced", func(ps []harness.PodHistory) bool {
			gone := false
			for _, p := range ps {
				if p.UID == orig[w].UID && !p.Deleted.IsZero() {
					gone = true
				}
			}
			return gone && figReplacement(ps, w, orig[w].Name) != nil
		})
		fcancel()
		if err != nil {
			t.Fatalf("failure %d (node %s): %v", i+1, node.Name(), err)
		}
		h, _ := watch.Pod(orig[w].UID)
		repl := figReplacement(pods, w, orig[w].Name)
		if h.Evicted.IsZero() {
			t.Fatalf("pod %s was deleted without being seen with DisruptionTarget (DeletionByTaintManager)", h.Name)
		}
		r.evictedAfterBeat = h.Evicted.Sub(lastBeat)
		r.transitionToSeen = h.Evicted.Sub(h.EvictedTransition)
		r.gone = h.Deleted.Sub(h.Evicted)
		r.replaced = repl.Added.Sub(h.Evicted)

		// Act as the scheduler for the replacement, then bring the node back.
		if err := cp.BindPod(ctx, ns, repl.Name, healthy.Name()); err != nil {
			t.Fatal(err)
		}
		node.Recover()
		if _, err := harness.WaitForNode(ctx, c, node.Name(), figNodeBackToNormal); err != nil {
			t.Fatal(err)
		}
		r.deletes = figCount(ctx, t, cp, "DELETE") - deletes0
		r.creates = figCount(ctx, t, cp, "POST") - creates0
		r.forceDeleteLogLines = len(op.LogLines(`"force-deleted pod"`)) - figSumLogLines(results)
		results = append(results, r)
		// One graceful DELETE by the taint-eviction controller, one force
		// delete by the operator; one replacement.
		if r.deletes != 2 {
			t.Errorf("failure %d: %v pod DELETEs, want 2 (taint eviction + one force delete)", i+1, r.deletes)
		}
		if r.creates != 1 {
			t.Errorf("failure %d: %v pod creations, want exactly 1 replacement", i+1, r.creates)
		}
		if r.forceDeleteLogLines != 1 {
			t.Errorf("failure %d: operator logged %d force deletes, want 1", i+1, r.forceDeleteLogLines)
		}
	}
	for _, line := range op.LogLines(`"force-deleted pod"`) {
		if !strings.Contains(line, `outcome="ForceDeleted"`) {
			t.Errorf("force delete with another outcome: %s", line)
		}
	}

	// Phase 2b: the same failures for examples/controllerruntime's
	// registries, one node after the other.
	var crResults []figFailure
	for i, node := range crFailing {
		w := crRegistries[i]
		crResults = append(crResults, crTimeFailure(ctx, t, cp, watch, node, healthy, w, orig[w]))
	}

	// Phase 3: the lagging operator. Its informer learns of every change
	// figWatchDelay late, so it runs several resyncs while its cache still
	// lists the pods it has just force-deleted. It must not send their
	// DELETE again, nor create a second replacement.
	deletes0, creates0 := figCount(ctx, t, cp, "DELETE"), figCount(ctx, t, cp, "POST")
	lagNode.Fail()
	lagBeat := lagNode.LastHeartbeat()
	fctx, fcancel := context.WithTimeout(ctx, 90*time.Second)
	lagPods, err := watch.WaitFor(fctx, "lagging operator's pods gone and replaced", allGoneAndReplaced(orig, lagWorkloads))
	fcancel()
	if err != nil {
		t.Fatal(err)
	}
	// Let the informer catch up, and several more resyncs run.
	time.Sleep(figWatchDelay + 3*figResync)
	lagDeletes := figCount(ctx, t, cp, "DELETE") - deletes0
	lagCreates := figCount(ctx, t, cp, "POST") - creates0
	if lagDeletes != 2*float64(len(lagWorkloads)) {
		t.Errorf("lagging informer: %v pod DELETEs for %d dead pods, want %d (one taint eviction and one force delete each)",
			lagDeletes, len(lagWorkloads), 2*len(lagWorkloads))
	}
	if lagCreates != float64(len(lagWorkloads)) {
		t.Errorf("lagging informer: %v pod creations, want %d (one replacement per workload)", lagCreates, len(lagWorkloads))
	}
	if proxy.Watches() == 0 {
		t.Error("the lagging operator's watches did not go through the delaying proxy")
	}
	var lagResults []figFailure
	now := time.Now()
	for _, w := range lagWorkloads {
		h, _ := watch.Pod(orig[w].UID)
		repl := figReplacement(lagPods, w, orig[w].Name)
		r := figFailure{
			node: lagNode.Name(), pod: h.Name,
			evictedAfterBeat: h.Evicted.Sub(lagBeat),
			transitionToSeen: h.Evicted.Sub(h.EvictedTransition),
			gone:             h.Deleted.Sub(h.Evicted),
			replaced:         repl.Added.Sub(h.Evicted),
		}
		for _, line := range op.LogLines(`"pod died with its node"`) {
			if strings.Contains(line, `pod="`+ns+"/"+h.Name+`"`) {
				if at, ok := harness.KlogTime(line, now); ok {
					r.operatorSawEvictionAt = at.Sub(h.Evicted)
				}
			}
		}
		// The informer's lag must show: the operator learnt of the
		// eviction about figWatchDelay after the API server had it.
		if r.operatorSawEvictionAt < figWatchDelay-time.Second {
			t.Errorf("lagging operator noticed pod %s %v after its eviction, want about %v", h.Name, r.operatorSawEvictionAt, figWatchDelay)
		}
		lagResults = append(lagResults, r)
	}
	// No DELETE was repeated afterwards either.
	if total := figCount(ctx, t, cp, "DELETE") - deletes0; total != lagDeletes {
		t.Errorf("pod DELETEs went on after the lag phase: %v, then %v", lagDeletes, total)
	}

	// Phase 4: the node objects of two running pods are deleted, as an
	// admin or a cloud provider does for a machine that is gone. The pods
	// carry no deletionTimestamp; the operator manages one of them, and
	// Kubernetes' PodGC alone is left with the other.
	orphans := runNodeDeleted(ctx, t, cp, op, orphanOn, goneOn, goneOff, orig[orphanOn], orig[orphanOff], 3*time.Minute)
	if orphans.offRemovedBy != removedByPodGC {
		t.Errorf("the unmanaged orphan was removed by %s, want PodGC", orphans.offRemovedBy)
	}
	// One successful DELETE per orphan, whoever sent it. An operator whose
	// check runs while PodGC's DELETE is under way may send one more, to
	// a pod already gone.
	if orphans.deletesOK != 2 || orphans.deletes > 3 {
		t.Errorf("pod DELETEs for the two orphans: %s, want 2 answered 200 and at most one more", orphans.deleteCodes)
	}
	if orphans.creates != 1 {
		t.Errorf("pods created after the nodes' deletion: %v, want 1 (the replacement of %s)", orphans.creates, orphanOn)
	}

	<-unrDone
	if unrErr != nil {
		t.Fatalf("early replacement: %v", unrErr)
	}
	checkUnreachableTimes(t, unrResult)

	version, err := harness.KubernetesVersion()
	if err != nil {
		t.Fatal(err)
	}
	doc := figRender(figReport{
		date:          testStart.UTC().Format("2006-01-02"),
		load:          [2]string{loadStart, figLoadAverage()},
		version:       version,
		failures:      results,
		crFailures:    crResults,
		lag:           lagResults,
		lagDeletes:    lagDeletes,
		lagCreates:    lagCreates,
		healthyWrites: healthyWrites,
		healthyLoad:   len(opWorkloads) + len(lagWorkloads) + len(crRegistries),
		orphans:       orphans,
		unreachable:   unrResult,
		duration:      time.Since(testStart),
	})
	t.Log("\n" + doc)
	if os.Getenv(figWriteEnv) != "1" {
		t.Logf("%s left as it is; set %s=1 to rewrite it", figFiguresFile, figWriteEnv)
		return
	}
	if t.Failed() {
		return // keep the last good figures
	}
	if err := figWriteDocument(figFiguresFile, doc); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", figFiguresFile)
}

// figWorkloadPod is a pod of examples/operator's workload w, bound to node,
// that tolerates its node's failure for 2 s.
func figWorkloadPod(ns, name, workload, node string) *corev1.Pod {
	pod := harness.BoundPod(ns, name, node, 2)
	pod.Labels = map[string]string{figWorkloadLabel: workload}
	return pod
}

// allGoneAndReplaced reports whether, for every one of workloads, its
// original pod orig[w] was deleted and a replacement exists.
func allGoneAndReplaced(orig map[string]*corev1.Pod, workloads []string) func([]harness.PodHistory) bool {
	return func(ps []harness.PodHistory) bool {
		for _, w := range workloads {
			gone := false
			for _, p := range ps {
				if p.UID == orig[w].UID && !p.Deleted.IsZero() {
					gone = true
				}
			}
			if !gone || figReplacement(ps, w, orig[w].Name) == nil {
				return false
			}
		}
		return true
	}
}

// figReplacement returns the first pod of workload w other than orig that
// the watch saw being created, or nil.
func figReplacement(ps []harness.PodHistory, w, orig string) *harness.PodHistory {
	for i := range ps {
		p := &ps[i]
		if p.Labels[figWorkloadLabel] == w && p.Name != orig && !p.Listed {
			return p
		}
	}
	return nil
}

// figNodeBackToNormal is true of a Ready node without the unreachable
// NoExecute taint.
func figNodeBackToNormal(n *corev1.Node) bool {
	return harness.NodeReadyIs(corev1.ConditionTrue)(n) &&
		!harness.NodeHasTaint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)(n) &&
		!harness.NodeHasTaint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)(n)
}

func figSumLogLines(rs []figFailure) int {
	n := 0
	for _, r := range rs {
		n += r.forceDeleteLogLines
	}
	return n
}

// figCount returns the API server's count of requests with verb on pods.
func figCount(ctx context.Context, t *testing.T, cp *harness.ControlPlane, verb string) float64 {
	t.Helper()
	n, err := cp.RequestCount(ctx, verb, "pods")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// figPodAndEventWrites returns the API server's count of write requests to
// pods (with their subresources) and events.
func figPodAndEventWrites(ctx context.Context, t *testing.T, cp *harness.ControlPlane) float64 {
	t.Helper()
	counts, err := cp.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for k, v := range counts {
		if (k.Resource == "pods" || strings.HasPrefix(k.Resource, "pods/") || k.Resource == "events") && harness.IsWriteVerb(k.Verb) {
			n += v
		}
	}
	return n
}

// figWaitRegistered waits for the node-lifecycle controller's RegisteredNode
// event of every node.
func figWaitRegistered(ctx context.Context, cp *harness.ControlPlane, nodes []*harness.Node) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := cp.WaitForRegisteredNode(wctx, n.Name()); err != nil {
			return err
		}
	}
	return nil
}

type figReport struct {
	date, version string
	failures, lag []figFailure
	crFailures    []figFailure // examples/controllerruntime's node failures
	lagDeletes    float64
	lagCreates    float64
	healthyWrites float64
	load          [2]string // 1-minute load average at the start and the end; empty if unknown
	healthyLoad   int       // workloads of the three controllers in the healthy phase
	orphans       nodeDeletedRun
	unreachable   unrRun
	duration      time.Duration
}

func figMs(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// figSec prints d in seconds, or in milliseconds when it is under a second.
func figSec(d time.Duration) string {
	if d < time.Second {
		return figMs(d)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func figRender(r figReport) string {
	var b strings.Builder
	pick := func(rs []figFailure, f func(figFailure) time.Duration) []time.Duration {
		var out []time.Duration
		for _, x := range rs {
			out = append(out, f(x))
		}
		return out
	}
	_, goneMed, goneMax := harness.Durations(pick(r.failures, func(x figFailure) time.Duration { return x.gone }))
	_, replMed, replMax := harness.Durations(pick(r.failures, func(x figFailure) time.Duration { return x.replaced }))
	_, evMed, evMax := harness.Durations(pick(r.failures, func(x figFailure) time.Duration { return x.evictedAfterBeat }))
	_, crGoneMed, crGoneMax := harness.Durations(pick(r.crFailures, func(x figFailure) time.Duration { return x.gone }))
	_, crReplMed, crReplMax := harness.Durations(pick(r.crFailures, func(x figFailure) time.Duration { return x.replaced }))
	var deletes, creates, crDeletes, crCreates float64
	for _, x := range r.failures {
		deletes += x.deletes
		creates += x.creates
	}
	for _, x := range r.crFailures {
		crDeletes += x.deletes
		crCreates += x.creates
	}
	lagDeletes := r.lagDeletes

	fmt.Fprintf(&b, "# End-to-end figures\n\n")
	fmt.Fprintf(&b, "Measured by `TestFigures` (`cd e2e && %s=1 go test -count=1 -run TestFigures -v .`) on %s: "+
		"etcd, kube-apiserver and kube-controller-manager %s on 127.0.0.1, nodes whose heartbeat the test plays, "+
		"and `examples/operator` and `examples/controllerruntime` (a controller-runtime manager) (`--resync=%v`) as separate processes; "+
		"%d CPUs, %s/%s, %s. The test took %s.\n\n",
		figWriteEnv, r.date, r.version, figResync, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), figSec(r.duration))
	fmt.Fprintf(&b, "Latencies start when the test's pod watch (opened before the failure) first delivers the pod "+
		"with `DisruptionTarget=True` reason `DeletionByTaintManager`; the condition's own `lastTransitionTime` "+
		"has whole-second resolution, so it is only shown for comparison. There is no scheduler: the replacement "+
		"exists (Pending) when the API server has created it. Request counts come from the API server's "+
		"`apiserver_request_total`. The orphan rows start when the API server has answered the node's DELETE "+
		"and end when the test's pod watch delivers the pod's deletion; who removed the pod comes from its last "+
		"state (PodGC leaves `DisruptionTarget=True` reason `DeletionByPodGC`).\n\n")
	if r.load[0] != "" && r.load[1] != "" {
		fmt.Fprintf(&b, "The machine was shared: its 1-minute load average was %s at the start and %s at the end "+
			"(latencies in milliseconds grow with it).\n\n", r.load[0], r.load[1])
	}

	fmt.Fprintf(&b, "| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| node failures timed (one at a time, one healthy node always up) | %d |\n", len(r.failures))
	fmt.Fprintf(&b, "| last heartbeat → pod marked `DisruptionTarget` (Kubernetes: 6 s grace, 2 s toleration) | median %s, max %s |\n", figSec(evMed), figSec(evMax))
	fmt.Fprintf(&b, "| (a) `DisruptionTarget` → dead pod gone from the API server: `examples/operator` | median %s, max %s |\n", figMs(goneMed), figMs(goneMax))
	fmt.Fprintf(&b, "| (b) `DisruptionTarget` → replacement pod exists: `examples/operator` | median %s, max %s |\n", figMs(replMed), figMs(replMax))
	fmt.Fprintf(&b, "| (a) the same, `examples/controllerruntime` (%d failures) | median %s, max %s |\n", len(r.crFailures), figMs(crGoneMed), figMs(crGoneMax))
	fmt.Fprintf(&b, "| (b) the same, `examples/controllerruntime` | median %s, max %s |\n", figMs(crReplMed), figMs(crReplMax))
	fmt.Fprintf(&b, "| pod DELETEs during the %d failures / of them the taint-eviction controller's graceful ones / the library's force deletes | %.0f / %d / %.0f (%.2f per dead pod) |\n",
		len(r.failures), deletes, len(r.failures), deletes-float64(len(r.failures)), (deletes-float64(len(r.failures)))/float64(len(r.failures)))
	fmt.Fprintf(&b, "| replacement pods created by `examples/operator` during the %d failures | %.0f |\n", len(r.failures), creates)
	fmt.Fprintf(&b, "| `examples/controllerruntime`'s %d failures: pod DELETEs / the library's force deletes / replacement pods created | %.0f / %.0f / %.0f |\n",
		len(r.crFailures), crDeletes, crDeletes-float64(len(r.crFailures)), crCreates)
	fmt.Fprintf(&b, "| informer %v behind the API server (resync %v), %d dead pods: pod DELETEs / the library's | %.0f / %.0f |\n",
		figWatchDelay, figResync, len(r.lag), lagDeletes, lagDeletes-float64(len(r.lag)))
	fmt.Fprintf(&b, "| informer %v behind: replacement pods created | %.0f |\n", figWatchDelay, r.lagCreates)
	fmt.Fprintf(&b, "| healthy workloads, %d resyncs of 2 operators and `examples/controllerruntime` over %d workloads: writes to pods and events | %.0f |\n",
		int(figHealthyWait/figResync), r.healthyLoad, r.healthyWrites)
	fmt.Fprintf(&b, "| node object deleted while its pod runs (no `deletionTimestamp`) → pod gone: `examples/operator` with node evidence | %s (removed by %s) |\n",
		figSec(r.orphans.onGone), r.orphans.onRemovedBy)
	fmt.Fprintf(&b, "| the same, library off: Kubernetes' PodGC alone (40 s quarantine, a pass every 20 s) | %s (removed by %s) |\n",
		figSec(r.orphans.offGone), r.orphans.offRemovedBy)
	fmt.Fprintf(&b, "| node object deleted → replacement pod exists (`examples/operator`) | %s |\n", figSec(r.orphans.replaced))
	fmt.Fprintf(&b, "| the two deleted nodes' pods: pod DELETEs by response code / replacement pods created | %s / %.0f |\n", r.orphans.deleteCodes, r.orphans.creates)
	u := r.unreachable
	fmt.Fprintf(&b, "| node heartbeat stops, pods tolerate it %d s (`TestScenarioReplaceUnreachable`, second control plane): node marked unreachable (`NoExecute` taint seen, polled every %v) | %s |\n",
		unrTolerationSeconds, harness.PollInterval, figSec(u.marked))
	fmt.Fprintf(&b, "| the same: replacement pod exists, `examples/operator` without `--replace-unreachable` (library on, default rules) | %s (pod taint-evicted at %s, force-deleted at %s) |\n",
		figSec(u.offReplace), figSec(u.offEvicted), figSec(u.offGone))
	fmt.Fprintf(&b, "| the same: replacement pod exists, with `--replace-unreachable` | %s |\n", figSec(u.onReplaced))
	fmt.Fprintf(&b, "| the same: a StatefulSet's pod on that node, with `--replace-unreachable`: replacements before its eviction (at %s) | 0 |\n", figSec(u.dbEvicted))
	fmt.Fprintf(&b, "| pod DELETEs while the nodes were unreachable, before any eviction | %.0f |\n", u.deletesBeforeRecovery)
	fmt.Fprintf(&b, "| a second node failing once the first is marked: marked unreachable after its last heartbeat (the node-lifecycle controller taints one node per 10 s by default) | %s |\n", figSec(u.markedB))
	fmt.Fprintf(&b, "| the other failed node comes back: heartbeat resumed → surplus pod deleted gracefully (the older, kept: the replacement) / pod DELETEs by response code | %s / %s |\n",
		figSec(u.backSurplus), u.deletesRecovery)

	fmt.Fprintf(&b, "\n`examples/operator`, per failure:\n\n")
	fmt.Fprintf(&b, "| node | pod | heartbeat → `DisruptionTarget` | `lastTransitionTime` → seen | (a) → gone | (b) → replacement | pod DELETEs | pod POSTs |\n|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.failures {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.0f | %.0f |\n", x.node, x.pod, figSec(x.evictedAfterBeat), figMs(x.transitionToSeen), figMs(x.gone), figMs(x.replaced), x.deletes, x.creates)
	}
	fmt.Fprintf(&b, "\n`examples/controllerruntime`, per failure:\n\n")
	fmt.Fprintf(&b, "| node | pod | heartbeat → `DisruptionTarget` | `lastTransitionTime` → seen | (a) → gone | (b) → replacement | pod DELETEs | pod POSTs |\n|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.crFailures {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.0f | %.0f |\n", x.node, x.pod, figSec(x.evictedAfterBeat), figMs(x.transitionToSeen), figMs(x.gone), figMs(x.replaced), x.deletes, x.creates)
	}
	fmt.Fprintf(&b, "\nWith the informer %v behind (its operator notices the eviction late, so (a) and (b) include the lag):\n\n", figWatchDelay)
	fmt.Fprintf(&b, "| node | pod | heartbeat → `DisruptionTarget` | operator noticed it after | (a) → gone | (b) → replacement |\n|---|---|---|---|---|---|\n")
	for _, x := range r.lag {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", x.node, x.pod, figSec(x.evictedAfterBeat), figMs(x.operatorSawEvictionAt), figMs(x.gone), figMs(x.replaced))
	}
	return b.String()
}

// figLoadAverage returns the 1-minute load average from /proc/loadavg, or
// "" where there is none.
func figLoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}
