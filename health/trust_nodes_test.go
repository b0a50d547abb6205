package health_test

// Node evidence and time: a taint eviction is a node failure only on a node
// that is not Ready or gone; without node evidence, only past the deletion
// deadline; a node is gone only when a live read says so; an orphan of a
// gone node is dead; no grace period or timestamp can shorten a wait.

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// realTaintEvicted is the real taint-evicted pod, moved to node.
func realTaintEvicted(t *testing.T, node string) *corev1.Pod {
	t.Helper()
	pod := fixturePod(t, "pod-taint-evicted.json")
	pod.Spec.NodeName = node
	return pod
}

// checkAt runs one CheckReport at now and returns it, requiring that
// Checker.Classify gives every pod the verdict the check gave it.
func checkAt(t *testing.T, checker *health.Checker, clk *clocktesting.FakePassiveClock, now time.Time) health.Report {
	t.Helper()
	clk.SetTime(now)
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	for _, p := range report.Pods {
		require.Equal(t, p.Verdict, checker.Classify(context.Background(), p.Pod), "Classify and the check disagree about %s", p.Pod.Name)
	}
	return report
}

// An admin's NoExecute taint on a Ready node taint-evicts pods too; there
// the kubelet finishes the graceful deletion, so the pod stays terminating,
// whatever the clock says. On the real lost node it is dead at once, before
// its deadline.
func TestTaintEvictionIsANodeFailureOnlyOnANodeThatIsNotReady(t *testing.T) {
	deadline := fixturePod(t, "pod-taint-evicted.json").DeletionTimestamp.Time
	tests := []struct {
		name      string
		node      string
		nodes     []*corev1.Node
		now       time.Time
		wantState health.State
		wantRule  string
	}{
		{"real healthy node, before the deadline: terminating", "node-healthy", []*corev1.Node{fixtureNode(t, "node-healthy.json")}, deadline.Add(-time.Second), health.Terminating, health.RuleGracefulDeletion},
		{"real healthy node, a day past the deadline: still terminating", "node-healthy", []*corev1.Node{fixtureNode(t, "node-healthy.json")}, deadline.Add(24 * time.Hour), health.Terminating, health.RuleGracefulDeletion},
		{"real lost node, before the deadline: dead at once", "node-lost", []*corev1.Node{fixtureNode(t, "node-lost.json")}, deadline.Add(-25 * time.Second), health.Dead, health.RuleTaintEvicted},
		{"Ready False: dead", "n1", []*corev1.Node{newNode("n1", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse })}, deadline.Add(-time.Second), health.Dead, health.RuleTaintEvicted},
		{"Ready True with a leftover not-ready taint is Ready: terminating, even past the deadline", "n1", []*corev1.Node{newNode("n1", taint(corev1.TaintNodeNotReady))}, deadline.Add(time.Hour), health.Terminating, health.RuleGracefulDeletion},
		{"Ready True with a leftover unreachable taint is Ready: terminating, even past the deadline", "n1", []*corev1.Node{newNode("n1", taint(corev1.TaintNodeUnreachable))}, deadline.Add(time.Hour), health.Terminating, health.RuleGracefulDeletion},
		{"Ready Unknown with the unreachable taint: dead", "n1", []*corev1.Node{newNode("n1", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }, taint(corev1.TaintNodeUnreachable))}, deadline.Add(-time.Second), health.Dead, health.RuleTaintEvicted},
		{"Ready with a maintenance taint: terminating", "n1", []*corev1.Node{newNode("n1", taint("example.com/maintenance"))}, deadline.Add(time.Hour), health.Terminating, health.RuleGracefulDeletion},
		{"no Ready condition at all is no evidence: before the deadline, terminating", "n1", []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, deadline.Add(-time.Second), health.Terminating, health.RuleGracefulDeletion},
		{"no Ready condition at all is no evidence: past the deadline, dead", "n1", []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, deadline, health.Dead, health.RuleTaintEvicted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(tt.now)
			pods := fake.New(fake.Options{}, realTaintEvicted(t, tt.node))
			checker := newChecker(t, pods, health.Options{Clock: clk, Nodes: fake.NewNodes(tt.nodes...)})
			report := checkAt(t, checker, clk, tt.now)
			got := report.Pods[0]
			require.Equal(t, tt.wantState, got.Verdict.State, "verdict %+v", got.Verdict)
			require.Equal(t, tt.wantRule, got.Verdict.Rule)
			if tt.wantState == health.Dead {
				require.Equal(t, health.ForceDeleted, got.Outcome)
				require.Len(t, pods.Deletes(), 1)
				return
			}
			require.Empty(t, pods.Deletes(), "a pod a live kubelet is shutting down is never force-deleted")
		})
	}
}

// Without node evidence (none configured, the lookup fails, or the cache
// misses the node and nothing confirms it gone), a taint-evicted pod is
// terminating until its deletionTimestamp, the deadline by which a live
// kubelet would have removed it, and dead from then on.
func TestTaintEvictedWithoutNodeEvidenceIsDeadOnlyFromItsDeadline(t *testing.T) {
	deadline := fixturePod(t, "pod-taint-evicted.json").DeletionTimestamp.Time
	failing := fake.NewNodes(fixtureNode(t, "node-lost.json"))
	failing.FailWith(apierrors.NewInternalError(fmt.Errorf("etcd leader changed")))
	for name, opts := range map[string]health.Options{
		"no node evidence":                           {},
		"node lookup fails":                          {Nodes: failing},
		"cache misses the node, no live read":        {Nodes: fake.NewNodes()},
		"cache misses the node, live read fails too": {Nodes: fake.NewNodes(), LiveNodes: failing},
	} {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(deadline)
			opts.Clock = clk
			pods := fake.New(fake.Options{}, realTaintEvicted(t, "node-lost"))
			checker := newChecker(t, pods, opts)

			var states []health.State
			for _, at := range []time.Duration{-30 * time.Second, -time.Second, -time.Nanosecond, 0} {
				report := checkAt(t, checker, clk, deadline.Add(at))
				states = append(states, report.Pods[0].Verdict.State)
				if at < 0 {
					require.Empty(t, pods.Deletes(), "force-deleted %v before the deadline", -at)
				}
			}
			require.Equal(t, []health.State{health.Terminating, health.Terminating, health.Terminating, health.Dead}, states)
			require.Len(t, pods.Deletes(), 1)
		})
	}
}

// A clock far behind never makes a pod dead early; a clock far ahead
// passes every deadline, as it must (the Checker cannot tell it from a pod
// stuck for years), so a verdict on the clock alone is never fenced: a
// stateful pod waits for fencing evidence and never reaches the Deleter.
// Timestamps near the limits of time do not wrap around.
func TestTaintEvictedUnderFarOffClocksAndTimestamps(t *testing.T) {
	farPast, farFuture := time.Unix(-1<<62, 0), time.Unix(1<<62, 0)
	tests := []struct {
		name       string
		now        time.Time
		deletionAt time.Time
		stateful   bool
		wantState  health.State
		wantSent   bool
	}{
		{"clock at the zero time", time.Time{}, deletedAt.Time, false, health.Terminating, false},
		{"clock far in the past", farPast, deletedAt.Time, false, health.Terminating, false},
		{"clock at the Unix epoch", time.Unix(0, 0), deletedAt.Time, false, health.Terminating, false},
		{"clock far in the future: dead by its clock", farFuture, deletedAt.Time, false, health.Dead, true},
		{"clock far in the future, stateful pod: dead but held back", farFuture, deletedAt.Time, true, health.Dead, false},
		{"deletionTimestamp far in the future", deletedAt.Add(time.Hour), farFuture, false, health.Terminating, false},
		{"deletionTimestamp in year 9999", deletedAt.Add(time.Hour), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), false, health.Terminating, false},
		{"deletionTimestamp at the zero time", deletedAt.Time, time.Time{}, false, health.Dead, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := taintEvicted("p")
			pod.DeletionTimestamp = &metav1.Time{Time: tt.deletionAt}
			if tt.stateful {
				ownedByStatefulSet(pod)
			}
			clk := clocktesting.NewFakePassiveClock(tt.now)
			pods := fake.New(fake.Options{}, pod)
			checker := newChecker(t, pods, health.Options{Clock: clk})
			report := checkAt(t, checker, clk, tt.now)
			require.Equal(t, tt.wantState, report.Pods[0].Verdict.State, "verdict %+v", report.Pods[0].Verdict)
			require.Equal(t, tt.wantSent, len(pods.Deletes()) == 1, "deletes %v", pods.Deletes())
			if tt.stateful {
				require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
			}
		})
	}
}

// A cache alone never proves a node gone: an empty or filtered cache leaves
// the node unknown, so a taint-evicted pod waits for its deadline and an
// orphan stays alive.
func TestEmptyOrFilteredNodeCacheCannotMakeANodeGoneWithoutLiveNodes(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(deletedAt.Add(-time.Second))
	filtered := fake.NewNodes(newNode("other"))
	for name, cache := range map[string]*fake.Nodes{"empty": fake.NewNodes(), "filtered": filtered} {
		t.Run(name, func(t *testing.T) {
			pods := fake.New(fake.Options{}, taintEvicted("evicted"), newPod("orphan", onNode("node-lost")))
			checker := newChecker(t, pods, health.Options{Clock: clk, Nodes: cache})
			report := checkAt(t, checker, clk, clk.Now())
			require.Equal(t, []podOutcome{
				{"evicted", health.Terminating, health.RuleGracefulDeletion, health.NoAction, false},
				{"orphan", health.Alive, "", health.NoAction, false},
			}, podOutcomes(report))
			require.Empty(t, pods.Deletes())
		})
	}
}

// A Breaker whose lister sees no node at all knows nothing about the
// cluster: it holds force deletes back.
func TestBreakerWithNoNodesHoldsForceDeletesBack(t *testing.T) {
	pods := fake.New(fake.Options{}, newPod("alive"), taintEvicted("dead"))
	checker := newChecker(t, pods, health.Options{Breaker: health.Breaker{Nodes: fake.NewNodes()}})
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.HeldBack, report.Pods[1].Outcome)
	require.Equal(t, "breaker open: cannot read node health: no nodes seen", report.Pods[1].HeldBack.String())
	require.Empty(t, pods.Deletes())
	require.True(t, report.Healthy, "D8: a held-back pod counts in neither column")
}

// An orphan, a pod whose node a live read confirms gone, is dead whether or
// not it is being deleted, and is force-deleted at once; the workload
// answers by the decision table. A cache miss that the live read does not
// confirm, or a live read that fails, leaves it alive. A pod bound to no
// node is never an orphan.
func TestOrphanOfAGoneNodeIsDeadOnlyWhenALiveReadConfirmsIt(t *testing.T) {
	errDown := apierrors.NewInternalError(fmt.Errorf("etcd leader changed"))
	tests := []struct {
		name        string
		pods        []*corev1.Pod
		cache, live []*corev1.Node
		liveErr     error
		want        []podOutcome
		wantHealthy bool
		wantDeletes int
	}{
		{name: "orphan and a live pod elsewhere: orphan force-deleted, healthy (D3)",
			pods:  []*corev1.Pod{newPod("orphan", onNode("gone")), newPod("alive", onNode("n1"))},
			cache: []*corev1.Node{newNode("n1")}, live: []*corev1.Node{newNode("n1")},
			want: []podOutcome{ // the fake lists by name
				{"alive", health.Alive, "", health.NoAction, false},
				{"orphan", health.Dead, health.RuleNodeGone, health.ForceDeleted, false},
			}, wantHealthy: true, wantDeletes: 1},
		{name: "orphan alone: force-deleted, unhealthy without error (D4)",
			pods: []*corev1.Pod{newPod("orphan", onNode("gone"))}, live: []*corev1.Node{},
			want:        []podOutcome{{"orphan", health.Dead, health.RuleNodeGone, health.ForceDeleted, false}},
			wantDeletes: 1},
		{name: "StatefulSet orphan: fenced by the gone node, force-deleted",
			pods: []*corev1.Pod{newPod("db-0", onNode("gone"), ownedByStatefulSet)}, live: []*corev1.Node{},
			want:        []podOutcome{{"db-0", health.Dead, health.RuleNodeGone, health.ForceDeleted, false}},
			wantDeletes: 1},
		{name: "finished orphan: dead too",
			pods: []*corev1.Pod{newPod("done", onNode("gone"), phase(corev1.PodSucceeded))}, live: []*corev1.Node{},
			want:        []podOutcome{{"done", health.Dead, health.RuleNodeGone, health.ForceDeleted, false}},
			wantDeletes: 1},
		{name: "only the cache misses the node, the live read finds it: alive",
			pods: []*corev1.Pod{newPod("p", onNode("n1"))}, live: []*corev1.Node{newNode("n1")},
			want: []podOutcome{{"p", health.Alive, "", health.NoAction, false}}, wantHealthy: true},
		{name: "the live read fails: unknown is not gone, alive",
			pods: []*corev1.Pod{newPod("p", onNode("gone"))}, live: []*corev1.Node{}, liveErr: errDown,
			want: []podOutcome{{"p", health.Alive, "", health.NoAction, false}}, wantHealthy: true},
		{name: "a pod bound to no node is never an orphan",
			pods: []*corev1.Pod{newPod("pending", onNode(""), phase(corev1.PodPending))}, live: []*corev1.Node{},
			want: []podOutcome{{"pending", health.Alive, "", health.NoAction, false}}, wantHealthy: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := fake.NewNodes(tt.live...)
			if tt.liveErr != nil {
				live.FailWith(tt.liveErr)
			}
			pods := fake.New(fake.Options{}, tt.pods...)
			clk := clocktesting.NewFakePassiveClock(deletedAt.Time)
			checker := newChecker(t, pods, health.Options{Clock: clk, Nodes: fake.NewNodes(tt.cache...), LiveNodes: live})
			report := checkAt(t, checker, clk, clk.Now())
			require.Equal(t, tt.want, podOutcomes(report))
			require.Equal(t, tt.wantHealthy, report.Healthy)
			require.Len(t, pods.Deletes(), tt.wantDeletes)

			healthy, err := newChecker(t, fake.New(fake.Options{}, tt.pods...), health.Options{Nodes: fake.NewNodes(tt.cache...), LiveNodes: live}).Check(context.Background())
			require.NoError(t, err)
			require.Equal(t, tt.wantHealthy, healthy, "Check answers as CheckReport does")
		})
	}
}

// With node evidence, a check looks each distinct node up once, in the
// cache and (for a missing one) live, however many pods it holds; without
// a live reader no live pod costs a lookup at all.
func TestEachNodeIsLookedUpOncePerCheck(t *testing.T) {
	var seed []*corev1.Pod
	for i := range 30 {
		seed = append(seed, newPod(fmt.Sprintf("p%02d", i), onNode(fmt.Sprintf("n%d", i%3))))
	}
	seed = append(seed, newPod("orphan-a", onNode("gone")), newPod("orphan-b", onNode("gone")))
	cache := fake.NewNodes(newNode("n0"), newNode("n1"), newNode("n2"))
	live := fake.NewNodes(newNode("n0"), newNode("n1"), newNode("n2"))
	pods := fake.New(fake.Options{ListLag: 100}, seed...)
	checker := newChecker(t, pods, health.Options{Nodes: cache, LiveNodes: live})

	for check := 1; check <= 3; check++ {
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		require.Equal(t, 30, report.Count(health.Alive))
		require.Equal(t, 2, report.Count(health.Dead))
		require.Equal(t, 4*check, cache.Gets(), "n0, n1, n2 and gone, once each per check")
		require.Equal(t, check, live.Gets(), "only the missing node is read live, once per check")
	}
	require.Len(t, pods.Deletes(), 2, "each orphan is deleted once; the Memory covers the lagging list")

	cacheOnly := fake.NewNodes()
	_, err := newChecker(t, fake.New(fake.Options{}, seed...), health.Options{Nodes: cacheOnly}).Check(context.Background())
	require.NoError(t, err)
	require.Zero(t, cacheOnly.Gets(), "without a live reader no node can be gone: live pods cost no lookup")
}

// TerminatingTooLong counts its margin from the deletion deadline, and its
// own-clock wait of grace period plus margin saturates: no grace period,
// however large or negative, and no timestamp shortens a wait.
func TestTerminatingTooLongWaitsCannotOverflowOrShrink(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const margin = time.Minute
	tests := []struct {
		name       string
		grace      *int64
		deletionAt time.Time
		elapsed    time.Duration // on the checker's own clock since its first sighting
		want       health.State
	}{
		{"margin past the deadline and grace plus margin seen: dead", ptr(int64(30)), start.Add(30 * time.Second), 90 * time.Second, health.Dead},
		{"a second short of the margin past the deadline: terminating", ptr(int64(30)), start.Add(30*time.Second + time.Second), 90 * time.Second, health.Terminating},
		{"a second short of grace plus margin seen: terminating", ptr(int64(30)), start.Add(-time.Hour), 89 * time.Second, health.Terminating},
		{"zero grace: margin alone", ptr(int64(0)), start.Add(-time.Hour), margin, health.Dead},
		{"negative grace counts as zero", ptr(int64(-5)), start.Add(-time.Hour), margin, health.Dead},
		{"negative grace never shortens the margin", ptr(int64(-5)), start.Add(-time.Hour), margin - time.Second, health.Terminating},
		{"grace beyond the range of Duration: never in a century", ptr(int64(1e10)), start.Add(-time.Hour), 100 * 365 * 24 * time.Hour, health.Terminating},
		{"grace of MaxInt64 seconds: never in a century", ptr(int64(math.MaxInt64)), start.Add(-time.Hour), 100 * 365 * 24 * time.Hour, health.Terminating},
		{"grace of the longest Duration in seconds: never in a century", ptr(int64(math.MaxInt64 / int64(time.Second))), start.Add(-time.Hour), 100 * 365 * 24 * time.Hour, health.Terminating},
		{"no deletion grace: the spec's, then 30 s", nil, start.Add(-time.Hour), 89 * time.Second, health.Terminating},
		{"deletionTimestamp at the zero time", ptr(int64(30)), time.Time{}, 90 * time.Second, health.Dead},
		{"deletionTimestamp far in the future", ptr(int64(30)), time.Unix(1<<62, 0), 100 * 365 * 24 * time.Hour, health.Terminating},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			pod := drained("p")
			pod.Spec.NodeName = "n1"
			pod.DeletionTimestamp = &metav1.Time{Time: tt.deletionAt}
			pod.DeletionGracePeriodSeconds = tt.grace
			pods := fake.New(fake.Options{}, pod)
			rules := health.Rules{health.TerminatingTooLong(margin), health.GracefulDeletion()}
			checker := newChecker(t, pods, health.Options{Clock: clk, Rules: rules, Nodes: fake.NewNodes(newNode("n1", notReady))})
			checkAt(t, checker, clk, start) // first sighting
			report := checkAt(t, checker, clk, start.Add(tt.elapsed))
			require.Equal(t, tt.want, report.Pods[0].Verdict.State, "verdict %+v", report.Pods[0].Verdict)
		})
	}
}

func TestGracePeriodAndTimeArithmeticSaturate(t *testing.T) {
	longest := time.Duration(math.MaxInt64)
	for _, tt := range []struct {
		secs int64
		want time.Duration
	}{
		{math.MinInt64, 0}, {-1, 0}, {0, 0}, {1, time.Second}, {30, 30 * time.Second},
		{int64(longest / time.Second), longest / time.Second * time.Second},
		{int64(longest/time.Second) + 1, longest}, {1e10, longest}, {math.MaxInt64, longest},
	} {
		require.Equal(t, tt.want, health.Seconds(tt.secs), "Seconds(%d)", tt.secs)
	}
	for _, tt := range []struct{ a, b, want time.Duration }{
		{0, 0, 0}, {time.Second, time.Minute, time.Minute + time.Second},
		{longest, 1, longest}, {longest, longest, longest}, {longest - 1, 1, longest},
		{-time.Hour, time.Minute, time.Minute}, {time.Minute, math.MinInt64, time.Minute},
	} {
		require.Equal(t, tt.want, health.AddSaturating(tt.a, tt.b), "AddSaturating(%d, %d)", tt.a, tt.b)
	}
	pod := newPod("p")
	require.Equal(t, 30*time.Second, health.GracePeriod(pod), "Kubernetes' default")
	pod.Spec.TerminationGracePeriodSeconds = ptr(int64(math.MaxInt64))
	require.Equal(t, longest, health.GracePeriod(pod), "the spec's, saturated")
	pod.DeletionGracePeriodSeconds = ptr(int64(-3))
	require.Equal(t, time.Duration(0), health.GracePeriod(pod), "the deletion's comes first; negative is zero")
}
