package health_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// ephemeralVolume mounts a generic ephemeral volume whose claim template
// asks for modes (none: a template whose modes cannot be read).
func ephemeralVolume(modes ...corev1.PersistentVolumeAccessMode) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{
			Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes}}}}})
	}
}

// TestClaimWhoseAccessModesCannotBeReadNeedsFencing: a claim that a
// ClaimGetter answers with no access modes (a getter that swallows
// NotFound, a cache transform that strips the spec), or an ephemeral
// volume whose claim template has none, counts as stateful: a taint-evicted
// pod with it is held back for fencing, and under ReplaceUnreachable a
// running pod with it stays Alive, so that no second writer is started.
// A claim whose modes are read as ReadWriteMany lets both go, so the test
// can fail either way.
func TestClaimWhoseAccessModesCannotBeReadNeedsFencing(t *testing.T) {
	noModes := claim("data") // no modes in spec or status
	shared := claim("shared", corev1.ReadWriteMany)
	tests := []struct {
		name       string
		volume     podOption
		wantHeld   bool
		wantReplay health.State // the running pod on the unreachable node
	}{
		{"claim the getter answers without modes", claimVolume("data"), true, health.Alive},
		{"ephemeral volume whose template has no modes", ephemeralVolume(), true, health.Alive},
		{"ephemeral volume asking for ReadWriteOnce", ephemeralVolume(corev1.ReadWriteOnce), true, health.Alive},
		{"claim read as ReadWriteMany", claimVolume("shared"), false, health.Unreachable},
		{"ephemeral volume asking for ReadWriteMany", ephemeralVolume(corev1.ReadWriteMany), false, health.Unreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims := fake.NewClaims(noModes, shared)
			lost := newNode("node-lost", markedUnreachable)

			evicted := taintEvicted("evicted")
			ownedByReplicaSet(evicted)
			tt.volume(evicted)
			pods := fake.New(fake.Options{}, evicted)
			checker := newChecker(t, pods, health.Options{Nodes: fake.NewNodes(lost), Claims: claims})
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			got := report.Pods[0]
			require.Equal(t, health.Dead, got.Verdict.State)
			if tt.wantHeld {
				require.Equal(t, health.HeldBack, got.Outcome)
				require.Equal(t, health.HeldForFencing, got.HeldBack.Reason, got.HeldBack.String())
				require.Empty(t, pods.Deletes(), "no force delete without fencing evidence")
			} else {
				require.Equal(t, health.ForceDeleted, got.Outcome, "held back: %s", got.HeldBack)
			}

			running := newPod("running", onNode("node-lost"))
			ownedByReplicaSet(running)
			tt.volume(running)
			pods = fake.New(fake.Options{}, running)
			checker = newChecker(t, pods, health.Options{Nodes: fake.NewNodes(lost), Claims: claims, ReplaceUnreachable: true})
			report, err = checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, tt.wantReplay, report.Pods[0].Verdict.State, "%+v", report.Pods[0].Verdict)
		})
	}
}

// TestEachNewFailureWaitsAfreshWithOrWithoutATransitionTime: a node that
// flaps (4 s unreachable, 4 s Ready) never makes its pod Unreachable with
// UnreachableFor 30 s, whether or not its Ready condition carries a
// lastTransitionTime (the field is optional): a check that sees the node
// Ready in between starts a new wait. A real outage is still replaced 30 s
// in, with or without it.
func TestEachNewFailureWaitsAfreshWithOrWithoutATransitionTime(t *testing.T) {
	var flapping []flap
	flapping = append(flapping, flap{10 * time.Second, false})
	for range 12 { // 96 s of flapping: three times UnreachableFor
		flapping = append(flapping, flap{4 * time.Second, true}, flap{4 * time.Second, false})
	}
	outage := []flap{{10 * time.Second, false}, {90 * time.Second, true}, {10 * time.Second, false}}
	for _, transitionTimes := range []bool{true, false} {
		t.Run(fmt.Sprintf("lastTransitionTime set: %v", transitionTimes), func(t *testing.T) {
			unhealthy, episodes := runNodeTimelineOf(t, 30*time.Second, flapping, transitionTimes)
			require.Zero(t, unhealthy, "a flapping node's pod is never Unreachable")
			require.Zero(t, episodes)

			unhealthy, episodes = runNodeTimelineOf(t, 30*time.Second, outage, transitionTimes)
			require.Equal(t, 60, unhealthy, "a 90 s outage is replaced 30 s in")
			require.Equal(t, 1, episodes)
		})
	}
}

// TestRetryAfterIsSetOnlyForAPodThatWillChange: a pod on an unreachable
// node that needs fencing (a StatefulSet's) can never become Unreachable,
// so its wait sets no RetryAfter; a stateless pod's wait does.
func TestRetryAfterIsSetOnlyForAPodThatWillChange(t *testing.T) {
	tests := []struct {
		name      string
		pod       *corev1.Pod
		wantRetry time.Duration
	}{
		{"StatefulSet pod: never Unreachable, no RetryAfter", newPod("db-0", onNode("n1"), ownedByStatefulSet), 0},
		{"stateless pod: Unreachable once the wait ends", newPod("web", onNode("n1")), 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(unreachableSince)
			pods := fake.New(fake.Options{}, tt.pod)
			checker := newChecker(t, pods, health.Options{Nodes: fake.NewNodes(newNode("n1", markedUnreachable)),
				ReplaceUnreachable: true, UnreachableFor: 30 * time.Second, Clock: clk})
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, health.Alive, report.Pods[0].Verdict.State)
			require.Equal(t, tt.wantRetry, report.RetryAfter)
		})
	}
}

// countingUnavailableNodes answers every GetNode with an error wrapping
// health.ErrNodesUnavailable, as a node cache that never syncs does, and
// counts the calls.
type countingUnavailableNodes struct {
	mu    sync.Mutex
	calls int
}

func (n *countingUnavailableNodes) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls++
	return nil, fmt.Errorf("waiting 10s for the node cache to sync for node %q: %w", name, health.ErrNodesUnavailable)
}

func (n *countingUnavailableNodes) ListNodes(context.Context) ([]*corev1.Node, error) {
	return nil, fmt.Errorf("listing nodes: %w", health.ErrNodesUnavailable)
}

// TestUnavailableNodeEvidenceIsPaidForOncePerCheck: with a node getter that
// cannot answer about any node (an unsynced cache), a check asks it once,
// however many nodes its pods are on, counts every node as unknown (a
// taint-evicted pod then waits for its deadline, a stateful one is held
// back), says so in Report.NodeEvidence, and logs it once over many
// checks, and once more when node evidence is back.
func TestUnavailableNodeEvidenceIsPaidForOncePerCheck(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	getter := &countingUnavailableNodes{}
	clk := clocktesting.NewFakePassiveClock(deletedAt.Add(-10 * time.Second)) // before the pods' deadline
	pods := fake.New(fake.Options{},
		newPod("evicted-1", onNode("n1"), deleting, disruption("DeletionByTaintManager")),
		newPod("evicted-2", onNode("n2"), deleting, disruption("DeletionByTaintManager")),
		newPod("db-0", onNode("n3"), deleting, disruption("DeletionByTaintManager"), ownedByStatefulSet),
		newPod("web", onNode("n4")))
	nodes := &switchableNodes{down: getter}
	checker := newChecker(t, pods, health.Options{Nodes: nodes, LiveNodes: nodes, Clock: clk, Logger: log})

	for i := range 3 {
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		require.Equal(t, i+1, getter.calls, "check %d: one read of the unavailable getter per check, not one per node", i+1)
		require.ErrorIs(t, report.NodeEvidence, health.ErrNodesUnavailable)
		got := byName(report)
		for _, name := range []string{"evicted-1", "evicted-2", "db-0"} {
			require.Equal(t, health.Terminating, got[name].Verdict.State, "every node is unknown: taint-evicted pod %s waits for its deadline", name)
		}
		require.Equal(t, health.Alive, got["web"].Verdict.State)
		require.Equal(t, 10*time.Second, report.RetryAfter, "the deadline is 10 s away")
	}
	clk.SetTime(deletedAt.Time)
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.HeldForFencing, byName(report)["db-0"].HeldBack.Reason, "past the deadline the stateful pod needs fencing evidence")
	require.ElementsMatch(t, []string{"evicted-1", "evicted-2"}, deletedNames(pods))
	require.Equal(t, 1, countContaining(lines, "node evidence unavailable"), "logged once over four checks:\n%s", strings.Join(lines, "\n"))

	nodes.setUp(fake.NewNodes(newNode("n1"), newNode("n2"), newNode("n3"), newNode("n4")))
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.NoError(t, report.NodeEvidence)
	require.Equal(t, 1, countContaining(lines, "node evidence available again"))
}

// switchableNodes answers with down until setUp gives it a working getter.
type switchableNodes struct {
	mu   sync.Mutex
	down health.NodeGetter
	up   health.NodeGetter
}

func (s *switchableNodes) setUp(up health.NodeGetter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up = up
}

func (s *switchableNodes) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	s.mu.Lock()
	up := s.up
	s.mu.Unlock()
	if up != nil {
		return up.GetNode(ctx, name)
	}
	return s.down.GetNode(ctx, name)
}

func byName(r health.Report) map[string]health.PodReport {
	m := make(map[string]health.PodReport, len(r.Pods))
	for _, p := range r.Pods {
		m[p.Pod.Name] = p
	}
	return m
}

func countContaining(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// TestADeadPodWithoutNameOrUIDIsHeldBackAndFailsTheCheck: a dead pod
// without a name or a UID, which only fake clientsets serve (they ignore
// generateName, or set no UIDs), is held back (HeldUnidentified) and the
// check fails with ErrUnidentifiedPod, in the pod's report too, as in row
// D5: the caller's source is wrong, and a silent hold hid it. No DELETE is
// sent.
func TestADeadPodWithoutNameOrUIDIsHeldBackAndFailsTheCheck(t *testing.T) {
	noUID := taintEvicted("no-uid")
	noUID.UID = ""
	noName := taintEvicted("")
	tests := []struct {
		name        string
		pods        []*corev1.Pod
		wantHealthy bool
	}{
		{"no name, nothing alive", []*corev1.Pod{noName}, false},
		{"no UID, nothing alive", []*corev1.Pod{noUID}, false},
		{"no UID, a pod alive", []*corev1.Pod{newPod("alive"), noUID}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deletes := 0
			source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return tt.pods, nil })
			deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { deletes++; return nil })
			checker, err := health.New(source, deleter, health.Options{Clock: clocktesting.NewFakePassiveClock(deletedAt.Add(time.Hour))})
			require.NoError(t, err)
			report, err := checker.CheckReport(context.Background())
			require.ErrorIs(t, err, health.ErrUnidentifiedPod)
			require.Contains(t, err.Error(), "does the source's client set UIDs?")
			require.Equal(t, tt.wantHealthy, report.Healthy)
			last := report.Pods[len(report.Pods)-1]
			require.Equal(t, health.Dead, last.Verdict.State)
			require.Equal(t, health.HeldBack, last.Outcome)
			require.Equal(t, health.HeldUnidentified, last.HeldBack.Reason)
			require.ErrorIs(t, last.Err, health.ErrUnidentifiedPod)
			require.Zero(t, deletes)

			healthy, err := checker.Check(context.Background())
			require.ErrorIs(t, err, health.ErrUnidentifiedPod, "the quiet check answers the same")
			require.Equal(t, tt.wantHealthy, healthy)
		})
	}
}

// TestRetryAfterIsTheDeadlineOfATaintEvictedPodWithoutNodeEvidence: a
// taint-evicted pod whose node is unknown is dead once its deletion
// deadline passes on the Checker's clock; until then RetryAfter says when,
// so that a caller that requeues only on pod events (no event comes after
// the eviction) checks again at the right time. On a Ready node, where the
// kubelet finishes the deletion, and past the deadline, RetryAfter is zero.
// TerminatingTooLong's wait sets it too.
func TestRetryAfterIsTheDeadlineOfATaintEvictedPodWithoutNodeEvidence(t *testing.T) {
	evicted := func() *corev1.Pod { return newPod("p", onNode("n1"), deleting, disruption("DeletionByTaintManager")) }
	drainedOnDownNode := func() *corev1.Pod { return newPod("p", onNode("n1"), deleting, disruption("EvictionByEvictionAPI")) }
	tests := []struct {
		name      string
		pod       *corev1.Pod
		opts      health.Options
		now       time.Time
		wantState health.State
		wantRetry time.Duration
	}{
		{"no node evidence, 25 s before the deadline", evicted(), health.Options{}, deletedAt.Add(-25 * time.Second), health.Terminating, 25 * time.Second},
		{"node lookup fails, 1 s before the deadline", evicted(), health.Options{Nodes: fake.NewNodes()}, deletedAt.Add(-time.Second), health.Terminating, time.Second},
		{"no node evidence, at the deadline: dead", evicted(), health.Options{}, deletedAt.Time, health.Dead, 0},
		{"Ready node: the kubelet finishes it, no RetryAfter", evicted(), health.Options{Nodes: fake.NewNodes(newNode("n1"))}, deletedAt.Add(-25 * time.Second), health.Terminating, 0},
		{"drained on a node that is down: TerminatingTooLong's margin", drainedOnDownNode(), health.Options{Nodes: fake.NewNodes(newNode("n1", notReady))}, deletedAt.Time, health.Terminating, 5*time.Minute + 30*time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(tt.now)
			opts := tt.opts
			opts.Clock = clk
			pods := fake.New(fake.Options{}, tt.pod)
			checker := newChecker(t, pods, opts)
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, tt.wantState, report.Pods[0].Verdict.State, "%+v", report.Pods[0].Verdict)
			require.Equal(t, tt.wantRetry, report.RetryAfter)
			if tt.wantRetry > 0 {
				clk.SetTime(clk.Now().Add(tt.wantRetry))
				report, err = checker.CheckReport(context.Background())
				require.NoError(t, err)
				require.Equal(t, health.Dead, report.Pods[0].Verdict.State, "dead when RetryAfter has passed")
			}
		})
	}
}

// TestNodeStateIsDecidedInOnePlace reads each kind of node with
// NodeStateOf, then asks every rule that reads nodes about a pod on it:
// TaintEvicted calls its pod dead exactly on a node that is Down, early
// replacement calls its pod Unreachable exactly on an Unreachable or
// OutOfService node, OutOfService fires exactly on an OutOfService node,
// and the Breaker counts as Ready exactly the Ready nodes. A Ready node
// with a leftover unreachable taint is Ready for all of them.
func TestNodeStateIsDecidedInOnePlace(t *testing.T) {
	unknown := func(s corev1.ConditionStatus) nodeOption {
		return func(n *corev1.Node) { n.Status.Conditions[0].Status = s }
	}
	tests := []struct {
		name string
		node *corev1.Node
		want health.NodeState
	}{
		{"Ready", newNode("n1"), health.NodeReady},
		{"Ready with a leftover unreachable taint", newNode("n1", taint(corev1.TaintNodeUnreachable)), health.NodeReady},
		{"Ready with a leftover not-ready taint", newNode("n1", taint(corev1.TaintNodeNotReady)), health.NodeReady},
		{"Ready with the out-of-service taint", newNode("n1", outOfService), health.NodeReady},
		{"Ready False, no taint", newNode("n1", unknown(corev1.ConditionFalse)), health.NodeNotReady},
		{"Ready Unknown, unreachable NoSchedule only", newNode("n1", notReady, taintWithEffect(corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule)), health.NodeNotReady},
		{"marked unreachable", newNode("n1", markedUnreachable), health.NodeUnreachable},
		{"Ready False, not-ready NoExecute", newNode("n1", unknown(corev1.ConditionFalse), taintWithEffect(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)), health.NodeUnreachable},
		{"marked unreachable and out of service", newNode("n1", markedUnreachable, outOfService), health.NodeOutOfService},
		{"no Ready condition, tainted", newNode("n1", noReadyCondition, taint(corev1.TaintNodeUnreachable)), health.NodeUnknown},
		{"a Ready status the API does not define", newNode("n1", unknown("Maybe"), taint(corev1.TaintNodeUnreachable)), health.NodeUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := health.NodeStateOf(tt.node)
			require.Equal(t, tt.want, state)
			nodes := fake.NewNodes(tt.node, newNode("n2"), newNode("n3"), newNode("n4"))
			before := deletedAt.Add(-time.Second) // TaintEvicted's deadline fallback has not come

			evicted := newPod("evicted", onNode("n1"), deleting, disruption("DeletionByTaintManager"))
			drained := newPod("drained", onNode("n1"), deleting, disruption("EvictionByEvictionAPI"))
			running := newPod("running", onNode("n1"))
			pods := fake.New(fake.Options{}, evicted, drained, running)
			checker := newChecker(t, pods, health.Options{Nodes: nodes, ReplaceUnreachable: true, DryRun: true,
				Clock: clocktesting.NewFakePassiveClock(before), Breaker: health.Breaker{Nodes: nodes, MinUnhealthy: 1, UnhealthyShare: 0.25}})
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)

			got := byName(report)
			require.Equal(t, state.Down(), got["evicted"].Verdict.State == health.Dead, "TaintEvicted: %+v", got["evicted"].Verdict)
			require.Equal(t, state == health.NodeOutOfService, got["drained"].Verdict.Rule == health.RuleOutOfService, "OutOfService: %+v", got["drained"].Verdict)
			require.Equal(t, state == health.NodeUnreachable || state == health.NodeOutOfService, got["running"].Verdict.State == health.Unreachable, "early replacement: %+v", got["running"].Verdict)
			if dead := got["evicted"]; dead.Verdict.State == health.Dead {
				// One of four nodes not Ready trips a breaker at one node
				// and 25 %: the breaker counted n1 as not Ready.
				require.Equal(t, health.HeldByBreaker, dead.HeldBack.Reason, "breaker: %s", dead.HeldBack)
			}
			if state == health.NodeReady || state == health.NodeUnknown {
				// The same breaker over the same nodes with a dead pod on
				// a Ready node n2: it trips only when n1 is not Ready.
				other := fake.New(fake.Options{}, newPod("other", onNode("n2"), phase(corev1.PodFailed), disruption(corev1.PodReasonTerminationByKubelet)))
				c := newChecker(t, other, health.Options{DryRun: true, Breaker: health.Breaker{Nodes: nodes, MinUnhealthy: 1, UnhealthyShare: 0.25}})
				r, err := c.CheckReport(context.Background())
				require.NoError(t, err)
				require.Equal(t, state == health.NodeReady, r.Pods[0].Outcome == health.WouldForceDelete, "breaker with n1 %v: %s", state, r.Pods[0].HeldBack)
			}
		})
	}
	require.Equal(t, "Ready", health.NodeReady.String())
	require.Equal(t, "NodeState(?)", health.NodeState(99).String())
	require.True(t, health.NodeGone.Fences())
	require.True(t, health.NodeGone.Down())
	require.False(t, health.NodeUnreachable.Fences())
	require.False(t, health.NodeUnknown.Down())
}

// TestHeldBackReasonsAreTyped: each reason a dead pod is held back for has
// its own HoldReason, so that code switches on it, never on the words.
func TestHeldBackReasonsAreTyped(t *testing.T) {
	budget, err := health.NewDeleteBudget(1, time.Minute)
	require.NoError(t, err)
	allDown := fake.NewNodes(newNode("node-lost", notReady), newNode("n2", notReady), newNode("n3", notReady))
	noUID := taintEvicted("no-uid")
	noUID.UID = ""
	dupConditions := taintEvicted("malformed")
	disruption("DeletionByTaintManager")(dupConditions)
	tests := []struct {
		name string
		pods []*corev1.Pod
		opts health.Options
		want health.HoldReason
	}{
		{"annotation", []*corev1.Pod{newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), annotated(health.AnnotationForceDelete, "never"))}, health.Options{}, health.HeldByAnnotation},
		{"malformed", []*corev1.Pod{dupConditions}, health.Options{}, health.HeldMalformed},
		{"needs fencing", []*corev1.Pod{newPod("db-0", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ownedByStatefulSet)}, health.Options{}, health.HeldForFencing},
		{"breaker open", []*corev1.Pod{taintEvicted("p")}, health.Options{Nodes: allDown, Breaker: health.Breaker{Nodes: allDown}}, health.HeldByBreaker},
		{"budget spent", []*corev1.Pod{taintEvicted("p1"), taintEvicted("p2")}, health.Options{Budget: budget}, health.HeldByBudget},
		{"unidentified", []*corev1.Pod{noUID}, health.Options{}, health.HeldUnidentified},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Clock = clocktesting.NewFakePassiveClock(deletedAt.Add(time.Hour))
			// A plain source keeps the list as it is (the fake would give
			// the unidentified pod a UID).
			source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return tt.pods, nil })
			checker, err := health.New(source, health.DeleterFunc(func(context.Context, *corev1.Pod) error { return nil }), opts)
			require.NoError(t, err)
			report, err := checker.CheckReport(context.Background())
			if tt.want == health.HeldUnidentified {
				require.ErrorIs(t, err, health.ErrUnidentifiedPod)
			} else {
				require.NoError(t, err)
			}
			last := report.Pods[len(report.Pods)-1]
			require.Equal(t, health.HeldBack, last.Outcome)
			require.Equal(t, tt.want, last.HeldBack.Reason, last.HeldBack.String())
			require.NotEmpty(t, last.HeldBack.Detail)
			require.True(t, strings.HasSuffix(last.HeldBack.String(), last.HeldBack.Detail))
		})
	}
	require.Empty(t, health.Hold{}.String(), "the zero Hold is not held back")
	require.Equal(t, "NotHeld", health.NotHeld.String())
	require.Equal(t, "HoldReason(?)", health.HoldReason(-1).String())
}

// TestRuleNamesAreExportedConstants: every built-in rule's Name is one of
// the exported constants, in the documented order, so that a caller can
// drop one by its name.
func TestRuleNamesAreExportedConstants(t *testing.T) {
	var names []string
	for _, r := range health.DefaultRules() {
		names = append(names, r.Name)
	}
	want := []string{health.RuleTaintEvicted, health.RuleTerminatedByKubelet, health.RuleNodeGone, health.RuleOutOfService,
		health.RuleTerminatingTooLong, health.RuleGracefulDeletion, health.RuleFinishedPod, health.RuleStaleDisruptionTarget}
	require.Empty(t, cmp.Diff(want, names))
	require.Equal(t, health.RuleFinishedPodIsDead, health.FinishedPodIsDead().Name)

	// Dropping TaintEvicted by its name leaves a taint-evicted pod to
	// GracefulDeletion.
	rules := slices.DeleteFunc(health.DefaultRules(), func(r health.Rule) bool { return r.Name == health.RuleTaintEvicted })
	require.Len(t, rules, len(want)-1)
	pods := fake.New(fake.Options{}, taintEvicted("p"))
	checker := newChecker(t, pods, health.Options{Rules: rules, Clock: clocktesting.NewFakePassiveClock(deletedAt.Add(time.Hour))})
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.RuleGracefulDeletion, report.Pods[0].Verdict.Rule)
	require.Empty(t, pods.Deletes())
}

// TestZeroValuesWorkOrAreRefused: the zero Memory is one with the default
// bounds (it remembers a force delete, so a lagging cache gets no second
// DELETE); a zero DeleteBudget, which would hold back every force delete
// for ever, and a Breaker share outside 0 to 1 are refused by New; a
// Checker that New did not make answers an error instead of panicking.
func TestZeroValuesWorkOrAreRefused(t *testing.T) {
	t.Run("zero Memory", func(t *testing.T) {
		memory := &health.Memory{}
		pods := fake.New(fake.Options{ListLag: 3}, newPod("alive"), taintEvicted("dead"))
		for range 3 {
			checker := newChecker(t, pods, health.Options{Memory: memory, Clock: clocktesting.NewFakePassiveClock(deletedAt.Add(time.Hour))})
			healthy, err := checker.Check(context.Background())
			require.NoError(t, err)
			require.True(t, healthy)
		}
		require.Len(t, pods.Deletes(), 1, "the zero Memory remembered the force delete")
		require.Equal(t, 1, memory.Len())
	})
	refused := []struct {
		name string
		opts health.Options
		want string
	}{
		{"zero DeleteBudget", health.Options{Budget: &health.DeleteBudget{}}, "NewDeleteBudget"},
		{"Breaker share above 1", health.Options{Breaker: health.Breaker{UnhealthyShare: 1.5}}, "UnhealthyShare"},
		{"negative Breaker minimum", health.Options{Breaker: health.Breaker{MinUnhealthy: -1}}, "MinUnhealthy"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			pods := fake.New(fake.Options{})
			_, err := health.New(pods, pods, tt.opts)
			require.ErrorContains(t, err, tt.want)
		})
	}
	t.Run("zero Checker", func(t *testing.T) {
		var c health.Checker
		_, err := c.Check(context.Background())
		require.ErrorContains(t, err, "not made by New")
		_, err = c.CheckReport(context.Background())
		require.Error(t, err)
		require.Equal(t, health.Alive, c.Classify(context.Background(), taintEvicted("p")).State)
	})
}

// TestEachFileOfPackageHealthHoldsOneConceptInAtMost500Lines keeps the
// package readable: no source file (tests aside) grows past 500 lines.
func TestEachFileOfPackageHealthHoldsOneConceptInAtMost500Lines(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.LessOrEqual(t, strings.Count(string(data), "\n"), 500, "%s is over 500 lines: split it by concept", f)
	}
}

// TestTheBreakerHoldsOnlyPodsThePolicyLetsGo: the Breaker is the release
// stage's gate. A pod that the policy holds (its annotation, its malformed
// status, the fencing it needs) keeps that reason under an open breaker,
// and only the pods the policy lets go are held by the breaker, whose
// nodes are read once per check, when the first of them meets it.
func TestTheBreakerHoldsOnlyPodsThePolicyLetsGo(t *testing.T) {
	allDown := fake.NewNodes(newNode("node-lost", notReady), newNode("n2", notReady), newNode("n3", notReady))
	var lists int
	breaker := health.Breaker{Nodes: nodeListerFunc(func(ctx context.Context) ([]*corev1.Node, error) {
		lists++
		return allDown.ListNodes(ctx)
	})}
	optedOut := taintEvicted("opted-out")
	optedOut.Annotations = map[string]string{health.AnnotationForceDelete: "never"}
	malformed := taintEvicted("malformed")
	disruption("DeletionByTaintManager")(malformed)
	stateful := newPod("db-0", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ownedByStatefulSet)
	pods := []*corev1.Pod{optedOut, malformed, stateful, taintEvicted("free-1"), taintEvicted("free-2")}

	source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return pods, nil })
	var deletes int
	checker, err := health.New(source, health.DeleterFunc(func(context.Context, *corev1.Pod) error { deletes++; return nil }),
		health.Options{Nodes: allDown, Breaker: breaker, Clock: clocktesting.NewFakePassiveClock(deletedAt.Add(time.Hour))})
	require.NoError(t, err)
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)

	got := map[string]health.HoldReason{}
	for _, p := range report.Pods {
		require.Equal(t, health.HeldBack, p.Outcome, p.Pod.Name)
		got[p.Pod.Name] = p.HeldBack.Reason
	}
	require.Equal(t, map[string]health.HoldReason{
		"opted-out": health.HeldByAnnotation, "malformed": health.HeldMalformed, "db-0": health.HeldForFencing,
		"free-1": health.HeldByBreaker, "free-2": health.HeldByBreaker,
	}, got)
	require.Zero(t, deletes)
	require.Equal(t, 1, lists, "the breaker reads the nodes once per check")
}
