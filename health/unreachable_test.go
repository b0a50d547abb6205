package health_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// unreachableSince is when the test nodes' Ready condition last changed.
var unreachableSince = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// markedUnreachable is what the node-lifecycle controller does to a node
// that stopped heartbeating: Ready=Unknown since unreachableSince, and the
// unreachable taint, NoSchedule and NoExecute.
func markedUnreachable(n *corev1.Node) {
	n.Status.Conditions[0].Status = corev1.ConditionUnknown
	n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(unreachableSince)
	n.Spec.Taints = append(n.Spec.Taints,
		corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
}

func readyStatus(s corev1.ConditionStatus) nodeOption {
	return func(n *corev1.Node) { n.Status.Conditions[0].Status = s }
}

func taintWithEffect(key string, effect corev1.TaintEffect) nodeOption {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
}

func noReadyCondition(n *corev1.Node) { n.Status.Conditions = nil }

// unreachableOptions is ReplaceUnreachable over a node cache holding nodes.
func unreachableOptions(nodes ...*corev1.Node) health.Options {
	return health.Options{Nodes: fake.NewNodes(nodes...), ReplaceUnreachable: true}
}

// TestUnreachableVerdictForEachNodeAndPod gives each kind of pod on each
// kind of node its verdict under ReplaceUnreachable: only a running pod
// that needs no fencing, on a node whose Ready is Unknown or False and
// that carries the node-lifecycle controller's NoExecute taint, is
// Unreachable; the dead rules win, and nothing is force-deleted for being
// unreachable.
func TestUnreachableVerdictForEachNodeAndPod(t *testing.T) {
	errDown := apierrors.NewServiceUnavailable("apiserver down")
	lost := newNode("n1", markedUnreachable)
	tests := []struct {
		name     string
		pod      *corev1.Pod
		nodes    []*corev1.Node
		live     []*corev1.Node // not nil: a live getter holding these
		cacheErr error
		opts     func(*health.Options)
		want     podOutcome
	}{
		{name: "running pod, node marked unreachable: Unreachable, not deleted",
			pod: newPod("p", onNode("n1")), nodes: []*corev1.Node{lost},
			want: podOutcome{"p", health.Unreachable, health.RuleNodeUnreachable, health.NoAction, false}},
		{name: "the real lost node of a control plane: Unreachable",
			pod: newPod("p", onNode("node-lost")), nodes: []*corev1.Node{fixtureNode(t, "node-lost.json")},
			want: podOutcome{"p", health.Unreachable, health.RuleNodeUnreachable, health.NoAction, false}},
		{name: "Ready=False with the not-ready NoExecute taint: Unreachable",
			pod: newPod("p", onNode("n1")), nodes: []*corev1.Node{newNode("n1", readyStatus(corev1.ConditionFalse), taintWithEffect(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute))},
			want: podOutcome{"p", health.Unreachable, health.RuleNodeUnreachable, health.NoAction, false}},
		{name: "Ready=True with a stale unreachable NoExecute taint: alive",
			pod: newPod("p", onNode("n1")), nodes: []*corev1.Node{newNode("n1", taintWithEffect(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute))},
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "Ready=Unknown before the NoExecute taint (only NoSchedule): alive",
			pod: newPod("p", onNode("n1")), nodes: []*corev1.Node{newNode("n1", notReady, taintWithEffect(corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule))},
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "Ready=Unknown without any taint: alive",
			pod: newPod("p", onNode("n1")), nodes: []*corev1.Node{newNode("n1", notReady)},
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "NoExecute taint without a Ready condition: alive",
			pod: newPod("p", onNode("n1")), nodes: []*corev1.Node{newNode("n1", noReadyCondition, taintWithEffect(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute))},
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "another NoExecute taint on a node that is not Ready: alive",
			pod: newPod("p", onNode("n1")), nodes: []*corev1.Node{newNode("n1", notReady, taintWithEffect("example.com/maintenance", corev1.TaintEffectNoExecute))},
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "node missing from the cache, not confirmed gone: alive",
			pod:  newPod("p", onNode("n1")),
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "node cache not synced (the lookup fails): alive",
			pod: newPod("p", onNode("n1")), nodes: []*corev1.Node{lost}, cacheErr: errDown,
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "node gone, confirmed by a live read: NodeGone wins, dead and force-deleted",
			pod: newPod("p", onNode("n1")), live: []*corev1.Node{},
			want: podOutcome{"p", health.Dead, health.RuleNodeGone, health.ForceDeleted, false}},
		{name: "node missing from the cache, the live read finds it unreachable: Unreachable",
			pod: newPod("p", onNode("n1")), live: []*corev1.Node{lost},
			want: podOutcome{"p", health.Unreachable, health.RuleNodeUnreachable, health.NoAction, false}},
		{name: "pod not bound to a node: alive",
			pod: newPod("p", onNode("")), nodes: []*corev1.Node{lost},
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "taint-evicted pod there: TaintEvicted wins, force-deleted",
			pod: newPod("p", onNode("n1"), deleting, disruption("DeletionByTaintManager")), nodes: []*corev1.Node{lost},
			want: podOutcome{"p", health.Dead, health.RuleTaintEvicted, health.ForceDeleted, false}},
		{name: "graceful delete in progress there: still Terminating",
			pod: newPod("p", onNode("n1"), deleting), nodes: []*corev1.Node{lost},
			want: podOutcome{"p", health.Terminating, health.RuleGracefulDeletion, health.NoAction, false}},
		{name: "finished pod there: still Finished",
			pod: newPod("p", onNode("n1"), phase(corev1.PodSucceeded)), nodes: []*corev1.Node{lost},
			want: podOutcome{"p", health.Finished, health.RuleFinishedPod, health.NoAction, false}},
		{name: "pod with a stale DisruptionTarget there: Unreachable",
			pod: newPod("p", onNode("n1"), disruption("DeletionByTaintManager")), nodes: []*corev1.Node{lost},
			want: podOutcome{"p", health.Unreachable, health.RuleNodeUnreachable, health.NoAction, false}},
		{name: "StatefulSet pod there: stays alive, no second writer",
			pod: newPod("p", onNode("n1"), ownedByStatefulSet), nodes: []*corev1.Node{lost},
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "pod with a claim of unknown access modes there: stays alive",
			pod: newPod("p", onNode("n1"), claimVolume("data")), nodes: []*corev1.Node{lost},
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "pod with a ReadWriteOnce claim there: stays alive",
			pod: newPod("p", onNode("n1"), claimVolume("data")), nodes: []*corev1.Node{lost},
			opts: func(o *health.Options) { o.Claims = fake.NewClaims(claim("data", corev1.ReadWriteOnce)) },
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "a ReplicaSet's pod with a ReadWriteMany claim there: Unreachable",
			pod: newPod("p", onNode("n1"), claimVolume("data"), ownedByReplicaSet), nodes: []*corev1.Node{lost},
			opts: func(o *health.Options) { o.Claims = fake.NewClaims(claim("data", corev1.ReadWriteMany)) },
			want: podOutcome{"p", health.Unreachable, health.RuleNodeUnreachable, health.NoAction, false}},
		{name: "a bare pod with a ReadWriteMany claim there: Alive, nobody vouches for its writers",
			pod: newPod("p", onNode("n1"), claimVolume("data")), nodes: []*corev1.Node{lost},
			opts: func(o *health.Options) { o.Claims = fake.NewClaims(claim("data", corev1.ReadWriteMany)) },
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "StatefulSet pod under FenceNever: Unreachable",
			pod: newPod("p", onNode("n1"), ownedByStatefulSet), nodes: []*corev1.Node{lost},
			opts: func(o *health.Options) { o.Fencing = health.FenceNever },
			want: podOutcome{"p", health.Unreachable, health.RuleNodeUnreachable, health.NoAction, false}},
		{name: "stateless pod under FenceAlways: stays alive",
			pod: newPod("p", onNode("n1")), nodes: []*corev1.Node{lost},
			opts: func(o *health.Options) { o.Fencing = health.FenceAlways },
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
		{name: "policy off: alive",
			pod: newPod("p", onNode("n1")), nodes: []*corev1.Node{lost},
			opts: func(o *health.Options) { o.ReplaceUnreachable = false },
			want: podOutcome{"p", health.Alive, "", health.NoAction, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := fake.NewNodes(tt.nodes...)
			if tt.cacheErr != nil {
				cache.FailWith(tt.cacheErr)
			}
			opts := health.Options{Nodes: cache, ReplaceUnreachable: true}
			if tt.live != nil {
				opts.LiveNodes = fake.NewNodes(tt.live...)
			}
			if tt.opts != nil {
				tt.opts(&opts)
			}
			pods := fake.New(fake.Options{}, tt.pod)
			checker := newChecker(t, pods, opts)
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Empty(t, cmp.Diff([]podOutcome{tt.want}, podOutcomes(report)))
			require.Equal(t, tt.want.State == health.Alive, report.Healthy, "healthy exactly when the one pod is alive")
			require.Equal(t, tt.want.State, checker.Classify(context.Background(), tt.pod).State, "Classify agrees with the check")
			if tt.want.State == health.Unreachable {
				require.Contains(t, report.Pods[0].Verdict.Reason, "not force-deleted")
				require.False(t, report.Pods[0].Verdict.Fenced)
			}
		})
	}
}

// TestUnreachablePodIsNeverForceDeleted checks an Unreachable pod over and
// over, for an hour on the Checker's clock, and in a dry run: no DELETE is
// ever sent, and the dry run would delete nothing either.
func TestUnreachablePodIsNeverForceDeleted(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		t.Run(fmt.Sprintf("dryRun=%v", dryRun), func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(unreachableSince)
			pods := fake.New(fake.Options{}, newPod("p", onNode("n1")))
			opts := unreachableOptions(newNode("n1", markedUnreachable))
			opts.Clock, opts.DryRun = clk, dryRun
			checker := newChecker(t, pods, opts)
			for range 60 {
				clk.SetTime(clk.Now().Add(time.Minute))
				report, err := checker.CheckReport(context.Background())
				require.NoError(t, err)
				require.False(t, report.Healthy)
				require.Equal(t, []health.Outcome{health.NoAction}, outcomes(report))
			}
			require.Empty(t, pods.Deletes())
		})
	}
}

func TestNewRefusesUnreachableOptionsThatCannotWork(t *testing.T) {
	pods := fake.New(fake.Options{})
	tests := []struct {
		name    string
		opts    health.Options
		wantErr string
	}{
		{"ReplaceUnreachable without node evidence", health.Options{ReplaceUnreachable: true}, "needs node evidence (Options.Nodes)"},
		{"UnreachableFor without ReplaceUnreachable", health.Options{Nodes: fake.NewNodes(), UnreachableFor: time.Minute}, "would have no effect"},
		{"negative UnreachableFor", health.Options{Nodes: fake.NewNodes(), ReplaceUnreachable: true, UnreachableFor: -time.Second}, "negative Options.UnreachableFor -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := health.New(pods, pods, tt.opts)
			require.Nil(t, c)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
	_, err := health.New(pods, pods, health.Options{Nodes: fake.NewNodes(), ReplaceUnreachable: true, UnreachableFor: time.Minute})
	require.NoError(t, err, "node evidence, the policy and a wait are accepted")
}

// TestUnreachableForWaitsOnTheCheckersClockToo measures UnreachableFor
// both from the Ready condition's lastTransitionTime and from the first
// time the Checker saw the node unreachable: a clock far ahead of the
// API server's, or a fresh Checker, cannot shorten the wait; a clock far
// behind only lengthens it. Report.RetryAfter says when to look again.
func TestUnreachableForWaitsOnTheCheckersClockToo(t *testing.T) {
	const wait = 30 * time.Second
	type step struct {
		at        time.Duration // the Checker's clock, from unreachableSince
		want      health.State
		wantRetry time.Duration
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"clock in step, watching from the failure on", []step{
			{0, health.Alive, wait},
			{10 * time.Second, health.Alive, 20 * time.Second},
			{29 * time.Second, health.Alive, time.Second},
			{30 * time.Second, health.Unreachable, 0},
		}},
		{"first check 10 s after the failure: waits its own full period", []step{
			{10 * time.Second, health.Alive, wait},
			{30 * time.Second, health.Alive, 10 * time.Second},
			{40 * time.Second, health.Unreachable, 0},
		}},
		{"clock an hour ahead: still waits the full period on its own clock", []step{
			{time.Hour, health.Alive, wait},
			{time.Hour + 29*time.Second, health.Alive, time.Second},
			{time.Hour + 30*time.Second, health.Unreachable, 0},
		}},
		{"clock five minutes behind: waits until the transition is UnreachableFor old on its clock", []step{
			{-5 * time.Minute, health.Alive, wait},
			{-4 * time.Minute, health.Alive, wait},
			{29 * time.Second, health.Alive, time.Second},
			{30 * time.Second, health.Unreachable, 0},
		}},
		{"clock before the year one: no overflow, no verdict", []step{
			{time.Duration(-1 << 63), health.Alive, wait},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(unreachableSince)
			pods := fake.New(fake.Options{}, newPod("p", onNode("n1")))
			opts := unreachableOptions(newNode("n1", markedUnreachable))
			opts.Clock, opts.UnreachableFor = clk, wait
			checker := newChecker(t, pods, opts)
			for _, s := range tt.steps {
				clk.SetTime(unreachableSince.Add(s.at))
				report, err := checker.CheckReport(context.Background())
				require.NoError(t, err)
				require.Equal(t, s.want, report.Pods[0].Verdict.State, "at %v", s.at)
				require.Equal(t, s.wantRetry, report.RetryAfter, "at %v", s.at)
				require.Empty(t, pods.Deletes())
			}
		})
	}
}

// TestCheckersSharingAMemoryShareTheUnreachableWait: a Checker built per
// reconcile with the operator's Memory counts the wait from the first
// sighting of any of them.
func TestCheckersSharingAMemoryShareTheUnreachableWait(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(unreachableSince)
	memory := health.NewMemory(health.MemoryOptions{})
	pods := fake.New(fake.Options{}, newPod("p", onNode("n1")))
	node := newNode("n1", markedUnreachable)
	check := func() health.State {
		opts := unreachableOptions(node)
		opts.Clock, opts.UnreachableFor, opts.Memory = clk, 30*time.Second, memory
		report, err := newChecker(t, pods, opts).CheckReport(context.Background())
		require.NoError(t, err)
		return report.Pods[0].Verdict.State
	}
	clk.SetTime(unreachableSince.Add(time.Hour)) // the first Checker starts late
	require.Equal(t, health.Alive, check())
	clk.SetTime(clk.Now().Add(30 * time.Second))
	require.Equal(t, health.Unreachable, check(), "a new Checker with the same Memory: the wait is over")
}

// flap is one node state over a span of time in the flapping tests.
type flap struct {
	for_        time.Duration
	unreachable bool
}

// runNodeTimeline checks a workload whose only pod runs on a node that
// goes through states, every second on the Checker's clock, as an
// operator on a 1 s resync would, and returns how many times a check
// answered (false, nil), each of which makes the operator create a
// replacement (unless the replacement it made before is alive, which
// this test leaves out: it counts the distinct episodes that would start
// one), and the number of such episodes.
func runNodeTimeline(t *testing.T, unreachableFor time.Duration, timeline []flap) (unhealthyChecks, episodes int) {
	t.Helper()
	return runNodeTimelineOf(t, unreachableFor, timeline, true)
}

// runNodeTimelineOf is runNodeTimeline, with the Ready condition's
// lastTransitionTime set at each change or, without transitionTimes, never
// (the field is optional).
func runNodeTimelineOf(t *testing.T, unreachableFor time.Duration, timeline []flap, transitionTimes bool) (unhealthyChecks, episodes int) {
	t.Helper()
	start := unreachableSince.Add(-time.Hour)
	clk := clocktesting.NewFakePassiveClock(start)
	nodes := fake.NewNodes(newNode("n1"))
	pods := fake.New(fake.Options{}, newPod("p", onNode("n1")))
	checker := newChecker(t, pods, health.Options{Nodes: nodes, ReplaceUnreachable: true, UnreachableFor: unreachableFor, Clock: clk})
	wasUnhealthy := false
	for _, f := range timeline {
		// The node controller sets Ready and the taint at the start of
		// each span; the transition time is that moment.
		n := newNode("n1")
		n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now())
		if f.unreachable {
			markedUnreachable(n)
			n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now())
		}
		if !transitionTimes {
			n.Status.Conditions[0].LastTransitionTime = metav1.Time{}
		}
		nodes.Set(n)
		for range int(f.for_ / time.Second) {
			healthy, err := checker.Check(context.Background())
			require.NoError(t, err)
			if !healthy {
				unhealthyChecks++
				if !wasUnhealthy {
					episodes++
				}
			}
			wasUnhealthy = !healthy
			clk.SetTime(clk.Now().Add(time.Second))
		}
	}
	require.Empty(t, pods.Deletes(), "nothing is force-deleted on unreachable evidence")
	return unhealthyChecks, episodes
}

// TestFlappingNodeCausesNoReplacementPerFlap: a node that the node
// controller marks unreachable for a few seconds at a time (heartbeats
// that stop for just over its grace period, then resume) makes a workload
// unhealthy once per flap with no UnreachableFor, and never with an
// UnreachableFor longer than the flaps; a real outage still is replaced,
// UnreachableFor after it began.
func TestFlappingNodeCausesNoReplacementPerFlap(t *testing.T) {
	flapping := []flap{
		{10 * time.Second, false},
		{3 * time.Second, true}, {5 * time.Second, false},
		{4 * time.Second, true}, {2 * time.Second, false},
		{5 * time.Second, true}, {10 * time.Second, false},
		{3 * time.Second, true}, {10 * time.Second, false},
	}
	outage := []flap{{10 * time.Second, false}, {90 * time.Second, true}, {10 * time.Second, false}}
	tests := []struct {
		name           string
		timeline       []flap
		unreachableFor time.Duration
		wantUnhealthy  int
		wantEpisodes   int
	}{
		{"4 flaps, no extra wait: one replacement episode per flap", flapping, 0, 3 + 4 + 5 + 3, 4},
		{"4 flaps, UnreachableFor 30 s: no replacement", flapping, 30 * time.Second, 0, 0},
		{"4 flaps of at most 5 s, UnreachableFor 5 s: none lasts long enough", flapping, 5 * time.Second, 0, 0},
		{"90 s outage, no extra wait: replaced at once", outage, 0, 90, 1},
		{"90 s outage, UnreachableFor 30 s: replaced 30 s in", outage, 30 * time.Second, 60, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unhealthy, episodes := runNodeTimeline(t, tt.unreachableFor, tt.timeline)
			require.Equal(t, tt.wantUnhealthy, unhealthy, "checks that answered (false, nil)")
			require.Equal(t, tt.wantEpisodes, episodes, "episodes of (false, nil)")
		})
	}
}

// TestPodIsAliveAgainWhenItsNodeComesBack: once the node is Ready again
// the old pod counts as alive, next to the replacement created meanwhile,
// so the Report lists two live pods.
func TestPodIsAliveAgainWhenItsNodeComesBack(t *testing.T) {
	nodes := fake.NewNodes(newNode("n1", markedUnreachable), newNode("n2"))
	pods := fake.New(fake.Options{}, newPod("old", onNode("n1")))
	checker := newChecker(t, pods, health.Options{Nodes: nodes, ReplaceUnreachable: true})

	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.False(t, report.Healthy, "D10: replace it")
	require.NoError(t, pods.Add(newPod("new", onNode("n2")))) // the caller's replacement

	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.True(t, report.Healthy, "D11")
	require.Equal(t, []health.State{health.Alive, health.Unreachable}, states(report), "new, old")

	nodes.Set(newNode("n1")) // heartbeats resume: Ready, taints removed
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.True(t, report.Healthy)
	require.Equal(t, []health.State{health.Alive, health.Alive}, states(report), "one live pod more than wanted: the caller scales back")
	require.Empty(t, pods.Deletes())
}

func states(r health.Report) []health.State {
	var out []health.State
	for _, p := range r.Pods {
		out = append(out, p.Verdict.State)
	}
	return out
}

// TestUnreachableNodeIsLookedUpOncePerCheck: many pods on one unreachable
// node cost one node lookup per check, with or without a report.
func TestUnreachableNodeIsLookedUpOncePerCheck(t *testing.T) {
	var lookups int
	nodes := fake.NewNodes(newNode("n1", markedUnreachable), newNode("node-a"))
	counting := nodeGetterFunc(func(ctx context.Context, name string) (*corev1.Node, error) {
		lookups++
		return nodes.GetNode(ctx, name)
	})
	var list []*corev1.Pod
	for i := range 20 {
		list = append(list, newPod(fmt.Sprintf("p%d", i), onNode("n1")), newPod(fmt.Sprintf("q%d", i)))
	}
	pods := fake.New(fake.Options{}, list...)
	checker := newChecker(t, pods, health.Options{Nodes: counting, ReplaceUnreachable: true})
	healthy, err := checker.Check(context.Background())
	require.NoError(t, err)
	require.True(t, healthy)
	require.Equal(t, 2, lookups, "one per node")
	lookups = 0
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, lookups, "one per node")
	unreachable := 0
	for _, p := range report.Pods {
		if p.Verdict.State == health.Unreachable {
			unreachable++
		}
	}
	require.Equal(t, 20, unreachable)
}

func TestUnreachableStateHasAName(t *testing.T) {
	require.Equal(t, "Unreachable", health.Unreachable.String())
	require.Equal(t, "State(?)", health.State(5).String())
}
