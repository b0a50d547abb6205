package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

// stsCheck is one report of the in-process checker loop.
type stsCheck struct {
	start, at time.Time // when the check started and ended
	report    health.Report
	err       error
}

// stsLoop runs a checker every interval, and at once when kicked (as an
// operator checks when an informer reports a change), and keeps every
// report.
type stsLoop struct {
	kick chan struct{}

	mu     sync.Mutex
	checks []stsCheck
}

func newStsLoop() *stsLoop { return &stsLoop{kick: make(chan struct{}, 1)} }

// pokeOnUpdates makes every update the informers deliver ask for a
// check, as an operator's event handlers would.
func (l *stsLoop) pokeOnUpdates(t *testing.T, infs ...cache.SharedIndexInformer) {
	t.Helper()
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) { l.poke() }}); err != nil {
			t.Fatal(err)
		}
	}
}

// poke asks for a check now; it never blocks.
func (l *stsLoop) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *stsLoop) run(ctx context.Context, checker *health.Checker, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		start := time.Now()
		report, err := checker.CheckReport(ctx)
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		l.checks = append(l.checks, stsCheck{start: start, at: time.Now(), report: report, err: err})
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-l.kick:
		}
	}
}

// waitForCheckAfter waits until a check has started after t, so that every
// check that started before t has been recorded.
func (l *stsLoop) waitForCheckAfter(ctx context.Context, t time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pollUntil(ctx, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := len(l.checks)
		return n > 0 && l.checks[n-1].start.After(t)
	})
}

// reportsOf returns, for every check that listed the pod with the given
// UID, when the check ended and what it reported about the pod.
func (l *stsLoop) reportsOf(uid types.UID) (ats []time.Time, prs []health.PodReport) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.checks {
		for _, p := range c.report.Pods {
			if p.Pod.UID == uid {
				ats = append(ats, c.at)
				prs = append(prs, p)
			}
		}
	}
	return ats, prs
}

func (l *stsLoop) errors() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, c := range l.checks {
		if c.err != nil {
			errs = append(errs, c.err)
		}
	}
	return errs
}

// TestScenarioStatefulPodWaitsForFencing: a StatefulSet's pod on a failed
// node is taint-evicted like any other, but the checker does not
// force-delete it (two copies of a stateful pod could both write) until the
// node carries the out-of-service taint, which says the machine is off. A
// stateless pod on the same node is force-deleted at once.
func TestScenarioStatefulPodWaitsForFencing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := harness.Start(t, bins, harness.Options{})
	c := cp.Client()
	const ns = metav1.NamespaceDefault

	healthy := cp.AddNode(ctx, "node-healthy")
	lost := cp.AddNode(ctx, "node-lost")
	for _, n := range []*harness.Node{healthy, lost} {
		if _, err := harness.WaitForNode(ctx, c, n.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatal(err)
		}
	}

	group := map[string]string{"e2e.podhealth.io/group": "fencing"}
	sts := createStatefulSetOwner(ctx, t, c, ns)
	statefulPod := harness.BoundPod(ns, "db-0", lost.Name(), 2)
	statefulPod.Labels = map[string]string{"app": "db", "e2e.podhealth.io/group": "fencing"}
	statefulPod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion:         "apps/v1",
		Kind:               "StatefulSet",
		Name:               sts.Name,
		UID:                sts.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}}
	stateful := cp.CreatePod(ctx, statefulPod)
	statelessPod := harness.BoundPod(ns, "web-0", lost.Name(), 2)
	statelessPod.Labels = map[string]string{"app": "web", "e2e.podhealth.io/group": "fencing"}
	stateless := cp.CreatePod(ctx, statelessPod)

	// The checker, as an operator would wire it: informer listers for pods
	// and nodes, a live read to confirm a missing node.
	podFactory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	nodeFactory := informers.NewSharedInformerFactory(c, 0)
	podLister := podFactory.Core().V1().Pods().Lister()
	loop := newStsLoop()
	// A change to a node can be the evidence a held-back pod waits for.
	loop.pokeOnUpdates(t, nodeFactory.Core().V1().Nodes().Informer())
	loopCtx, stopLoop := context.WithCancel(ctx)
	podFactory.Start(loopCtx.Done())
	nodeFactory.Start(loopCtx.Done())
	defer func() {
		stopLoop()
		podFactory.Shutdown()
		nodeFactory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), podFactory.Core().V1().Pods().Informer().HasSynced, nodeFactory.Core().V1().Nodes().Informer().HasSynced) {
		t.Fatal("informer caches did not sync")
	}
	selector := labels.SelectorFromSet(group)
	source, err := kube.NewListerSource(podLister, ns, selector)
	if err != nil {
		t.Fatal(err)
	}
	deleter, err := kube.NewDeleter(c.CoreV1(), ns, kube.DeleterOptions{Selector: selector})
	if err != nil {
		t.Fatal(err)
	}
	nodeSource, err := kube.NewNodeSource(nodeFactory.Core().V1().Nodes())
	if err != nil {
		t.Fatal(err)
	}
	live, err := kube.NewLiveNodes(c.CoreV1())
	if err != nil {
		t.Fatal(err)
	}
	checker, err := health.New(source, deleter, health.Options{
		Logger:    testr.New(t),
		Nodes:     nodeSource,
		LiveNodes: live,
	})
	if err != nil {
		t.Fatal(err)
	}

	watch, err := cp.WatchPods(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	var loopDone sync.WaitGroup
	loopDone.Go(func() { loop.run(loopCtx, checker, time.Second) })
	// Deferred calls run last first: stop the loop, then wait for it.
	defer loopDone.Wait()
	defer stopLoop()

	lost.Fail()

	// Both pods are taint-evicted; the stateless one is force-deleted.
	wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
	_, err = watch.WaitFor(wctx, "stateless pod force-deleted and stateful pod evicted", func(ps []harness.PodHistory) bool {
		var statelessGone, statefulEvicted bool
		for _, p := range ps {
			statelessGone = statelessGone || (p.UID == stateless.UID && !p.Deleted.IsZero())
			statefulEvicted = statefulEvicted || (p.UID == stateful.UID && !p.Evicted.IsZero())
		}
		return statelessGone && statefulEvicted
	})
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	statelessHist, _ := watch.Pod(stateless.UID)
	statefulHist, _ := watch.Pod(stateful.UID)
	if statelessHist.Evicted.IsZero() {
		t.Fatal("the stateless pod was deleted before it was taint-evicted")
	}
	t.Logf("stateless pod %s: evicted, gone %v later", stateless.Name, statelessHist.Deleted.Sub(statelessHist.Evicted).Round(time.Millisecond))
	if err := loop.waitForCheckAfter(ctx, statelessHist.Deleted); err != nil {
		t.Fatalf("checker loop stalled: %v", err)
	}
	if _, prs := loop.reportsOf(stateless.UID); !stsHasOutcome(prs, health.ForceDeleted) {
		t.Errorf("the checker never reported ForceDeleted for the stateless pod; reports: %v", stsOutcomes(prs))
	}

	// The stateful pod stays: several checks hold it back for lack of
	// fencing evidence.
	evicted := harness.PodAll(
		harness.PodHasCondition(corev1.DisruptionTarget, corev1.ConditionTrue, "DeletionByTaintManager"),
		harness.PodTerminating,
		func(p *corev1.Pod) bool { return p.UID == stateful.UID },
	)
	if _, err := harness.ConsistentlyPod(ctx, c, ns, stateful.Name, 6*time.Second, evicted); err != nil {
		t.Fatalf("stateful pod without fencing evidence: %v", err)
	}
	ats, prs := loop.reportsOf(stateful.UID)
	heldBack := 0
	for i, pr := range prs {
		if !ats[i].After(statefulHist.Evicted) {
			continue
		}
		switch pr.Outcome {
		case health.HeldBack:
			if pr.Verdict.State != health.Dead || pr.HeldBack.Reason != health.HeldForFencing {
				t.Errorf("stateful pod held back with verdict %v and reason %q, want Dead and a fencing reason", pr.Verdict.State, pr.HeldBack)
			}
			heldBack++
		case health.NoAction:
			// A check that ran before its cache saw the eviction.
		default:
			t.Errorf("stateful pod reported %v before the out-of-service taint: %+v", pr.Outcome, pr)
		}
	}
	if heldBack < 3 {
		t.Fatalf("the checker held the stateful pod back in %d checks after its eviction, want at least 3; outcomes %v", heldBack, stsOutcomes(prs))
	}
	t.Logf("stateful pod %s held back in %d checks: %s", stateful.Name, heldBack, prs[len(prs)-1].HeldBack)

	// Fencing evidence: the out-of-service taint on the not-Ready node.
	if err := cp.AddNodeTaint(ctx, lost.Name(), corev1.Taint{
		Key:    corev1.TaintNodeOutOfService,
		Value:  "nodeshutdown",
		Effect: corev1.TaintEffectNoExecute,
	}); err != nil {
		t.Fatal(err)
	}
	taintedAt := time.Now()
	wctx, wcancel = context.WithTimeout(ctx, 60*time.Second)
	_, err = watch.WaitFor(wctx, "stateful pod gone", func([]harness.PodHistory) bool {
		h, _ := watch.Pod(stateful.UID)
		return !h.Deleted.IsZero()
	})
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	statefulHist, _ = watch.Pod(stateful.UID)
	goneAfter := statefulHist.Deleted.Sub(taintedAt)
	if err := loop.waitForCheckAfter(ctx, statefulHist.Deleted); err != nil {
		t.Fatalf("checker loop stalled: %v", err)
	}
	_, prs = loop.reportsOf(stateful.UID)
	forced := stsHasOutcome(prs, health.ForceDeleted)
	t.Logf("stateful pod gone %v after the out-of-service taint; checker outcomes %v", goneAfter.Round(time.Millisecond), stsOutcomes(prs))
	// The controller-manager's pod GC also removes terminating pods of
	// out-of-service nodes, but only every 20 s; the checker runs every
	// second and when a node changes.
	if !forced && goneAfter > 5*time.Second {
		t.Errorf("stateful pod gone %v after the taint and not by the checker (outcomes %v), want the checker to force-delete it within seconds", goneAfter, stsOutcomes(prs))
	}
	if !statelessHist.Deleted.Before(taintedAt) {
		t.Errorf("stateless pod gone at %v, not before the taint at %v", statelessHist.Deleted, taintedAt)
	}
	for _, err := range loop.errors() {
		t.Errorf("check failed: %v", err)
	}
}

func stsHasOutcome(prs []health.PodReport, o health.Outcome) bool {
	for _, pr := range prs {
		if pr.Outcome == o {
			return true
		}
	}
	return false
}

// stsOutcomes compresses a pod's outcomes over the checks: runs of the
// same outcome once, with their length.
func stsOutcomes(prs []health.PodReport) []string {
	var out []string
	for i := 0; i < len(prs); {
		j := i
		for j < len(prs) && prs[j].Outcome == prs[i].Outcome {
			j++
		}
		out = append(out, fmt.Sprintf("%v×%d", prs[i].Outcome, j-i))
		i = j
	}
	return out
}
