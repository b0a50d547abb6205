package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

// The early-replacement scenario: workloads of examples/operator whose pods
// tolerate their node's failure for unrTolerationSeconds, on two nodes whose
// heartbeats stop at the same moment.
const (
	unrTolerationSeconds = 60
	unrOff               = "unr-off"  // on node-a, operator without --replace-unreachable
	unrOn                = "unr-on"   // on node-a, operator with it
	unrDB                = "unr-db"   // on node-a, a StatefulSet's pod, operator with it
	unrBack              = "unr-back" // on node-b, which comes back; operator with it
)

// unrEnv is a control plane set up for the early-replacement scenario:
// nodes, pods, both operators, and a pod watch opened before any failure.
type unrEnv struct {
	cp           *harness.ControlPlane
	nodeA, nodeB *harness.Node
	healthy      *harness.Node
	opOff, opOn  *harness.Operator
	orig         map[string]*corev1.Pod // by workload
	watch        *harness.PodWatch
	settled      time.Time // when the first failure may be timed
}

// unrRun is what the scenario measured. Durations start at node-a's last
// heartbeat.
type unrRun struct {
	marked time.Duration // node-a seen with the NoExecute unreachable taint (polled every harness.PollInterval)
	// markedB is the same for node-b, which fails when node-a is seen
	// marked: the node-lifecycle controller taints at most one node per
	// 10 s by default (--node-eviction-rate 0.1), so it waits its turn.
	markedB    time.Duration
	onReplaced time.Duration // replacement of unr-on exists (policy on)
	offEvicted time.Duration // unr-off's pod seen taint-evicted
	offGone    time.Duration // unr-off's pod gone (force-deleted by the library)
	offReplace time.Duration // replacement of unr-off exists (policy off)
	dbEvicted  time.Duration // the StatefulSet pod seen taint-evicted
	// backSurplus is from node-b's heartbeat resuming to its old pod seen
	// terminating (the operator's graceful delete of the surplus).
	backSurplus time.Duration
	// deletesBeforeRecovery are the pod DELETEs the API server answered
	// from the failure until node-b came back; deletesRecovery those from
	// then until the surplus pod was seen terminating, by response code.
	deletesBeforeRecovery float64
	deletesRecovery       string
}

// setupUnreachable starts a control plane with a healthy node and the two
// nodes that will fail, creates one pod per workload, starts the two
// operators and waits until they have synced. It must run on the test's
// goroutine.
func setupUnreachable(ctx context.Context, t *testing.T) *unrEnv {
	t.Helper()
	cp := harness.Start(t, bins, harness.Options{})
	e := &unrEnv{cp: cp, orig: map[string]*corev1.Pod{}}
	e.healthy, e.nodeA, e.nodeB = cp.AddNode(ctx, "node-healthy"), cp.AddNode(ctx, "node-a"), cp.AddNode(ctx, "node-b")
	for _, n := range []*harness.Node{e.healthy, e.nodeA, e.nodeB} {
		if _, err := harness.WaitForNode(ctx, cp.Client(), n.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatal(err)
		}
	}
	for w, node := range map[string]string{unrOff: e.nodeA.Name(), unrOn: e.nodeA.Name(), unrDB: e.nodeA.Name(), unrBack: e.nodeB.Name()} {
		pod := workloadPod(w+"-orig", node, w, unrTolerationSeconds)
		if w == unrDB {
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "0b5e8a62-5d3b-4f0e-9a57-1f1e3c0d2a11"}}
		}
		e.orig[w] = cp.CreatePod(ctx, pod)
	}
	e.opOff = cp.StartOperator(t, bins, operatorArgs(unrOff)...)
	e.opOn = cp.StartOperator(t, bins, operatorArgs(strings.Join([]string{unrOn, unrDB, unrBack}, ","), "--replace-unreachable")...)
	waitForOperator(ctx, t, e.opOff)
	waitForOperator(ctx, t, e.opOn)
	var err error
	if e.watch, err = cp.WatchPods(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// The first failure is timed only once the node-lifecycle controller
	// has registered every node and run for unrSettle: a node that fails
	// sooner is marked unreachable seconds later than one that fails
	// in steady state.
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	for _, n := range []*harness.Node{e.healthy, e.nodeA, e.nodeB} {
		if err := cp.WaitForRegisteredNode(wctx, n.Name()); err != nil {
			t.Fatal(err)
		}
	}
	e.settled = time.Now().Add(unrSettle)
	return e
}

// unrSettle is how long the scenario lets the control plane run in steady
// state before the first failure.
const unrSettle = 10 * time.Second

// run stops the heartbeat of node-a, then, once node-a is marked
// unreachable, node-b's (the node-lifecycle controller taints one node at
// a time, at most one per 10 s by default), and follows the
// recovery: the replacement of unr-on (policy on) as soon as node-a is
// marked unreachable, none for the StatefulSet's pod, node-b back and its
// surplus pod deleted gracefully, and the replacement of unr-off (policy
// off) once taint eviction removed its pod. It may run on another
// goroutine than the test's: it reports failed expectations with t.Errorf
// and returns an error when it cannot go on.
func (e *unrEnv) run(ctx context.Context, t *testing.T) (unrRun, error) {
	var r unrRun
	c := e.cp.Client()
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(time.Until(e.settled)):
	}
	before := readRequestsErr(ctx, e.cp)
	if before == nil {
		return r, errors.New("reading the API server's request counts")
	}
	e.nodeA.Fail()
	lastBeat := e.nodeA.LastHeartbeat()
	if _, err := harness.WaitForNode(ctx, c, e.nodeA.Name(), harness.NodeHasTaint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)); err != nil {
		return r, err
	}
	r.marked = time.Since(lastBeat)
	e.nodeB.Fail()
	lastBeatB := e.nodeB.LastHeartbeat()
	if _, err := harness.WaitForNode(ctx, c, e.nodeB.Name(), harness.NodeHasTaint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)); err != nil {
		return r, err
	}
	r.markedB = time.Since(lastBeatB)

	pods, err := e.watch.WaitFor(ctx, "early replacements of "+unrOn+" and "+unrBack, func(ps []harness.PodHistory) bool {
		return figReplacement(ps, unrOn, e.orig[unrOn].Name) != nil && figReplacement(ps, unrBack, e.orig[unrBack].Name) != nil
	})
	if err != nil {
		return r, fmt.Errorf("%w\noperator log:\n%s", err, e.opOn.Log())
	}
	r.onReplaced = figReplacement(pods, unrOn, e.orig[unrOn].Name).Added.Sub(lastBeat)

	// The old pods are still there, untouched: nothing was deleted, and
	// the StatefulSet's pod got no early replacement.
	for _, w := range []string{unrOn, unrBack, unrDB} {
		if h, _ := e.watch.Pod(e.orig[w].UID); !h.Terminating.IsZero() || !h.Deleted.IsZero() {
			t.Errorf("pod %s was deleted while its node was only unreachable", h.Name)
		}
	}
	if repl := figReplacement(pods, unrDB, e.orig[unrDB].Name); repl != nil {
		t.Errorf("the StatefulSet's pod got an early replacement %s", repl.Name)
	}
	if err := e.requireVerdicts(ctx, t, map[string]health.State{unrOn: health.Unreachable, unrDB: health.Alive, unrOff: health.Unreachable}); err != nil {
		return r, err
	}

	// node-b comes back: its old pod is alive again, next to the
	// replacement; the operator deletes the older one gracefully.
	mid := readRequestsErr(ctx, e.cp)
	if mid == nil {
		return r, errors.New("reading the API server's request counts")
	}
	r.deletesBeforeRecovery = mid.since(before, "DELETE", "pods", "")
	if r.deletesBeforeRecovery != 0 {
		t.Errorf("%v pod DELETEs while the nodes were only unreachable %s, want none", r.deletesBeforeRecovery, mid.codesSince(before, "DELETE", "pods"))
	}
	e.nodeB.Recover()
	recovered := time.Now()
	if _, err := harness.WaitForNode(ctx, c, e.nodeB.Name(), figNodeBackToNormal); err != nil {
		return r, err
	}
	if _, err := e.watch.WaitFor(ctx, "surplus pod of "+unrBack+" terminating", func([]harness.PodHistory) bool {
		h, _ := e.watch.Pod(e.orig[unrBack].UID)
		return !h.Terminating.IsZero()
	}); err != nil {
		return r, fmt.Errorf("%w\noperator log:\n%s", err, e.opOn.Log())
	}
	h, _ := e.watch.Pod(e.orig[unrBack].UID)
	r.backSurplus = h.Terminating.Sub(recovered)
	after := readRequestsErr(ctx, e.cp)
	if after == nil {
		return r, errors.New("reading the API server's request counts")
	}
	r.deletesRecovery = after.codesSince(mid, "DELETE", "pods")
	if off, _ := e.watch.Pod(e.orig[unrOff].UID); off.Evicted.IsZero() {
		// Taint eviction has not started on node-a: the one DELETE is the
		// operator's graceful one.
		if n := after.since(mid, "DELETE", "pods", "200"); n != 1 || after.since(mid, "DELETE", "pods", "") != 1 {
			t.Errorf("pod DELETEs after node-b came back: %s, want one answered 200", r.deletesRecovery)
		}
	} else {
		t.Logf("taint eviction began on node-a before the surplus delete was counted; DELETEs %s not checked", r.deletesRecovery)
	}
	old, err := c.CoreV1().Pods(ns).Get(ctx, e.orig[unrBack].Name, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("the surplus pod must be deleted gracefully and stay Terminating without a kubelet: %v", err)
	case old.DeletionTimestamp == nil || old.DeletionGracePeriodSeconds == nil || *old.DeletionGracePeriodSeconds != 30:
		t.Errorf("surplus pod deleted with grace %v, want its own 30 s", old.DeletionGracePeriodSeconds)
	}
	if lines := e.opOn.LogLines(`"deleted surplus pod"`); len(lines) != 1 || !strings.Contains(lines[0], `name="`+e.orig[unrBack].Name+`"`) {
		t.Errorf("operator's surplus deletes: %q, want one, of %s", lines, e.orig[unrBack].Name)
	}
	for _, line := range e.opOn.LogLines(`"force-deleted pod"`) {
		if strings.Contains(line, e.orig[unrBack].Name) {
			t.Errorf("the pod of the node that came back was force-deleted: %s", line)
		}
	}
	if err := e.requireAlive(ctx, unrBack, 1); err != nil {
		t.Error(err)
	}

	// Policy off: unr-off is replaced only after taint eviction.
	pods, err = e.watch.WaitFor(ctx, "replacement of "+unrOff+" and eviction of the StatefulSet's pod", func(ps []harness.PodHistory) bool {
		db, _ := e.watch.Pod(e.orig[unrDB].UID)
		return figReplacement(ps, unrOff, e.orig[unrOff].Name) != nil && !db.Evicted.IsZero()
	})
	if err != nil {
		return r, fmt.Errorf("%w\noperator log:\n%s", err, e.opOff.Log())
	}
	off, _ := e.watch.Pod(e.orig[unrOff].UID)
	db, _ := e.watch.Pod(e.orig[unrDB].UID)
	r.offEvicted = off.Evicted.Sub(lastBeat)
	r.offReplace = figReplacement(pods, unrOff, e.orig[unrOff].Name).Added.Sub(lastBeat)
	r.dbEvicted = db.Evicted.Sub(lastBeat)
	if !off.Deleted.IsZero() {
		r.offGone = off.Deleted.Sub(lastBeat)
	}
	if repl := figReplacement(pods, unrDB, e.orig[unrDB].Name); repl != nil && repl.Added.Before(db.Evicted) {
		t.Errorf("the StatefulSet's pod was replaced %v before its eviction", db.Evicted.Sub(repl.Added))
	}
	// Every workload of the operator with the policy ends with one live
	// pod: unr-on's old pod, taint-evicted as well, is removed, not
	// counted.
	if err := pollUntil(ctx, func() bool { return e.requireAlive(ctx, unrOn, 1) == nil }); err != nil {
		t.Errorf("%s: %v", unrOn, e.requireAlive(ctx, unrOn, 1))
	}
	return r, nil
}

// requireVerdicts checks, with a checker of the test's own that reads node
// evidence live and replaces unreachable pods, that each workload's
// original pod has the given state.
func (e *unrEnv) requireVerdicts(ctx context.Context, t *testing.T, want map[string]health.State) error {
	for w, state := range want {
		checker, err := e.checker(w)
		if err != nil {
			return err
		}
		r, err := checker.CheckReport(logr.NewContext(ctx, testr.New(t)))
		if err != nil {
			return err
		}
		for _, p := range r.Pods {
			if p.Pod.UID == e.orig[w].UID && p.Verdict.State != state {
				t.Errorf("%s: pod %s is %v (%s), want %v", w, p.Pod.Name, p.Verdict.State, p.Verdict.Reason, state)
			}
		}
	}
	return nil
}

// requireAlive returns an error unless workload w has n live pods, by a
// check of the test's own that deletes nothing.
func (e *unrEnv) requireAlive(ctx context.Context, w string, n int) error {
	checker, err := e.checker(w)
	if err != nil {
		return err
	}
	r, err := checker.CheckReport(ctx)
	if err != nil {
		return err
	}
	alive := 0
	var states []string
	for _, p := range r.Pods {
		states = append(states, p.Pod.Name+"="+p.Verdict.State.String())
		if p.Verdict.State == health.Alive {
			alive++
		}
	}
	if alive != n {
		return fmt.Errorf("workload %s has %d live pods %v, want %d", w, alive, states, n)
	}
	return nil
}

// checker is a dry-run checker of workload w with live node evidence and
// ReplaceUnreachable: it deletes nothing, so it cannot disturb the
// operators' counts.
func (e *unrEnv) checker(w string) (*health.Checker, error) {
	c := e.cp.Client()
	source, err := kube.NewClientSource(c.CoreV1(), ns, workloadSelector(w))
	if err != nil {
		return nil, err
	}
	live, err := kube.NewLiveNodes(c.CoreV1())
	if err != nil {
		return nil, err
	}
	return health.New(source, nil, health.Options{DryRun: true, Nodes: live, LiveNodes: live, ReplaceUnreachable: true})
}

// readRequestsErr is readRequests for another goroutine than the test's:
// nil when the counts cannot be read.
func readRequestsErr(ctx context.Context, cp *harness.ControlPlane) requests {
	r, err := cp.Requests(ctx)
	if err != nil {
		return nil
	}
	return r
}

// TestScenarioReplaceUnreachable: pods that tolerate their node's failure
// for 60 s, on nodes whose heartbeats stop. With --replace-unreachable a
// stateless pod is replaced as soon as the node-lifecycle controller marks
// its node unreachable (node-monitor-grace-period, 6 s in the harness), not
// after its toleration too; nothing is force-deleted on that evidence; a
// StatefulSet's pod gets no early replacement; and when a node comes back
// its old pod is alive again and the operator deletes the surplus
// gracefully, ending with one live pod. Without the flag, the replacement
// comes after taint eviction (grace period + toleration).
func TestScenarioReplaceUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := setupUnreachable(ctx, t)
	r, err := e.run(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node-monitor-grace-period %v, toleration %d s; after the last heartbeat: node marked unreachable %v, "+
		"replacement with the policy %v, without it %v (pod evicted %v); node-b marked %v after its own; node-b back → surplus pod terminating %v",
		harness.NodeMonitorGracePeriod, unrTolerationSeconds, r.marked.Round(100*time.Millisecond), r.onReplaced.Round(10*time.Millisecond),
		r.offReplace.Round(100*time.Millisecond), r.offEvicted.Round(100*time.Millisecond), r.markedB.Round(100*time.Millisecond), r.backSurplus.Round(time.Millisecond))
	checkUnreachableTimes(t, r)
}

// checkUnreachableTimes requires the replacement times the policy promises:
// on, within a second of the node being marked unreachable; off, not before
// the pod's toleration ran out after that.
func checkUnreachableTimes(t *testing.T, r unrRun) {
	t.Helper()
	if r.onReplaced > r.marked+time.Second {
		t.Errorf("with the policy: replacement %v after the last heartbeat, node marked after %v: want at most 1 s more", r.onReplaced, r.marked)
	}
	if r.onReplaced < harness.NodeMonitorGracePeriod {
		t.Errorf("with the policy: replacement %v after the last heartbeat, before the node-monitor-grace-period %v", r.onReplaced, harness.NodeMonitorGracePeriod)
	}
	if least := harness.NodeMonitorGracePeriod + unrTolerationSeconds*time.Second; r.offReplace < least {
		t.Errorf("without the policy: replacement %v after the last heartbeat, want at least grace + toleration = %v", r.offReplace, least)
	}
}
