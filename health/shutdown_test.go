package health_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// cloudShutdown is the taint of k8s.io/cloud-provider's node-lifecycle
// controller, with the effect it sets.
func cloudShutdown(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: health.TaintCloudShutdown, Effect: corev1.TaintEffectNoSchedule})
}

func providerID(id string) nodeOption { return func(n *corev1.Node) { n.Spec.ProviderID = id } }

var shutdownAfter = []health.ShutdownTaint{{Key: health.TaintCloudShutdown, After: 30 * time.Second}}

// shutdownCheck runs a check of a taint-evicted StatefulSet pod on node n1
// at the clock's time and returns its report.
func shutdownCheck(t *testing.T, checker *health.Checker) health.PodReport {
	t.Helper()
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Len(t, report.Pods, 1)
	return report.Pods[0]
}

// The cloud's shutdown taint fences a stateful pod only on a node that is
// not Ready, and only once seen for After; never on a Ready node (a stale
// taint), a node without a Ready condition, a node whose provider calls an
// unreachable host shut down, or without the option. Before After, the
// hold says how long is left and RetryAfter says when to look again.
func TestCloudShutdownTaintFencesOnlyANodeNotReadyOnceSeenForAfter(t *testing.T) {
	lost := []nodeOption{notReady, taint(corev1.TaintNodeUnreachable)}
	for _, tt := range []struct {
		name   string
		node   *corev1.Node
		taints []health.ShutdownTaint
		at     time.Duration // the second check's time after the first
		want   health.Outcome
		detail string // the hold's detail at the second check, when held
	}{
		{"unreachable, tainted, seen for After: deleted", newNode("n1", append(lost, cloudShutdown)...), shutdownAfter, 30 * time.Second, health.ForceDeleted, ""},
		{"not Ready without the node-lifecycle taint yet: deleted", newNode("n1", notReady, cloudShutdown), shutdownAfter, 30 * time.Second, health.ForceDeleted, ""},
		{"seen for less than After: held, with the time left", newNode("n1", append(lost, cloudShutdown)...), shutdownAfter, 20 * time.Second, health.HeldBack,
			"owned by StatefulSet db; node n1 carries " + health.TaintCloudShutdown + ", which fences once seen for 30s (10s to go)"},
		{"the option off: held", newNode("n1", append(lost, cloudShutdown)...), nil, time.Hour, health.HeldBack, "owned by StatefulSet db"},
		{"a stale taint on a Ready node: its kubelet finishes the deletion", newNode("n1", cloudShutdown), shutdownAfter, time.Hour, health.NoAction, ""},
		{"no Ready condition: held", func() *corev1.Node {
			n := newNode("n1", cloudShutdown)
			n.Status.Conditions = nil
			return n
		}(), shutdownAfter, time.Hour, health.HeldBack, "owned by StatefulSet db"},
		{"another taint named: held", newNode("n1", append(lost, cloudShutdown)...), []health.ShutdownTaint{{Key: "fencing.example.com/powered-off", After: time.Second}}, time.Hour, health.HeldBack, "owned by StatefulSet db"},
		{"an admin's fencer's taint: deleted", newNode("n1", append(lost, taint("fencing.example.com/powered-off"))...), []health.ShutdownTaint{{Key: "fencing.example.com/powered-off", After: time.Second}}, time.Second, health.ForceDeleted, ""},
		{"kubevirt, which calls an unreachable host shut down: held", newNode("n1", append(lost, cloudShutdown, providerID("kubevirt://vm-1"))...), shutdownAfter, time.Hour, health.HeldBack,
			"owned by StatefulSet db; node n1 carries " + health.TaintCloudShutdown + ", but its provider (kubevirt://vm-1) may report a running instance shut down: no fencing evidence"},
		{"aws: deleted", newNode("n1", append(lost, cloudShutdown, providerID("aws:///eu-west-1a/i-0abc"))...), shutdownAfter, 30 * time.Second, health.ForceDeleted, ""},
		{"aws fargate, answered from its network interface: held", newNode("n1", append(lost, cloudShutdown, providerID("aws:///eu-west-1a/fargate-ip-10-0-1-2.ec2.internal"))...), shutdownAfter, time.Hour, health.HeldBack,
			"owned by StatefulSet db; node n1 carries " + health.TaintCloudShutdown + ", but its provider (aws:///eu-west-1a/fargate-ip-10-0-1-2.ec2.internal) may report a running instance shut down: no fencing evidence"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakePassiveClock(start)
			pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
			checker := newChecker(t, pods, health.Options{Nodes: fake.NewNodes(tt.node), Clock: clk, ShutdownTaints: tt.taints})

			first := shutdownCheck(t, checker)
			require.NotEqual(t, health.ForceDeleted, first.Outcome, "the first sighting never fences")

			clk.SetTime(start.Add(tt.at))
			second := shutdownCheck(t, checker)
			require.Equal(t, tt.want, second.Outcome, "held: %v", second.HeldBack)
			if tt.want == health.HeldBack {
				require.Equal(t, health.HeldForFencing, second.HeldBack.Reason)
				require.Equal(t, tt.detail, second.HeldBack.Detail)
				require.Empty(t, pods.Deletes())
				return
			}
			if tt.want == health.NoAction {
				require.Empty(t, pods.Deletes())
				return
			}
			require.Len(t, pods.Deletes(), 1)
		})
	}
}

// Every wait on a shutdown taint has its end: the report's RetryAfter is
// the time left, so that a caller that requeues on it judges the pod again
// just as the taint fences.
func TestShutdownTaintWaitSetsRetryAfter(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
	checker := newChecker(t, pods, health.Options{Nodes: fake.NewNodes(newNode("n1", notReady, cloudShutdown)), Clock: clk, ShutdownTaints: shutdownAfter})

	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, report.RetryAfter)

	clk.SetTime(start.Add(25 * time.Second))
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, report.RetryAfter)
}

// A pod that one taint fences is not waiting: another named taint whose
// wait has just begun adds no RetryAfter (FuzzShutdownTaints found this).
func TestShutdownTaintThatFencesLeavesNoRetryAfterOfAnother(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	nodes := fake.NewNodes(newNode("n1", notReady, taint(fencerTaint)))
	pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
	taints := []health.ShutdownTaint{{Key: health.TaintCloudShutdown, After: 30 * time.Second}, {Key: fencerTaint, After: 30 * time.Second}}
	checker := newChecker(t, pods, health.Options{Nodes: nodes, Clock: clk, ShutdownTaints: taints})
	require.Equal(t, health.HeldBack, shutdownCheck(t, checker).Outcome)

	// The cloud's taint arrives just as the fencer's has been seen for 30 s.
	clk.SetTime(start.Add(30 * time.Second))
	nodes.Set(newNode("n1", notReady, taint(fencerTaint), cloudShutdown))
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome)
	require.Zero(t, report.RetryAfter, "the deleted pod waits for nothing")
}

// The wait is measured on the Checker's own clock from its first
// sighting: a clock far behind counts no time, a fresh Memory waits the
// whole After again, and a node that is Ready again, or loses the taint,
// is forgotten, so that its next shutdown waits afresh.
func TestShutdownTaintWaitStartsAfreshAfterTheNodeComesBack(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	down := newNode("n1", notReady, cloudShutdown)
	for _, tt := range []struct {
		name  string
		steps func(clk *clocktesting.FakePassiveClock, nodes *fake.Nodes)
	}{
		{"the node Ready again in between", func(clk *clocktesting.FakePassiveClock, nodes *fake.Nodes) {
			nodes.Set(newNode("n1", cloudShutdown)) // the cloud controller has not removed it yet
		}},
		{"the taint removed in between, still not Ready", func(clk *clocktesting.FakePassiveClock, nodes *fake.Nodes) {
			nodes.Set(newNode("n1", notReady))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			nodes := fake.NewNodes(down)
			pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
			checker := newChecker(t, pods, health.Options{Nodes: nodes, Clock: clk, ShutdownTaints: shutdownAfter})
			require.Equal(t, health.HeldBack, shutdownCheck(t, checker).Outcome)

			clk.SetTime(start.Add(20 * time.Second))
			tt.steps(clk, nodes)
			require.NotEqual(t, health.ForceDeleted, shutdownCheck(t, checker).Outcome)

			clk.SetTime(start.Add(25 * time.Second))
			nodes.Set(down)
			require.Equal(t, health.HeldBack, shutdownCheck(t, checker).Outcome, "shut down again: the wait starts now")

			clk.SetTime(start.Add(50 * time.Second))
			require.Equal(t, health.HeldBack, shutdownCheck(t, checker).Outcome, "25 s into the new wait")
			clk.SetTime(start.Add(55 * time.Second))
			require.Equal(t, health.ForceDeleted, shutdownCheck(t, checker).Outcome)
		})
	}

	t.Run("a clock set back", func(t *testing.T) {
		clk := clocktesting.NewFakePassiveClock(start)
		pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
		checker := newChecker(t, pods, health.Options{Nodes: fake.NewNodes(down), Clock: clk, ShutdownTaints: shutdownAfter})
		require.Equal(t, health.HeldBack, shutdownCheck(t, checker).Outcome)
		clk.SetTime(start.Add(-time.Hour))
		require.Equal(t, health.HeldBack, shutdownCheck(t, checker).Outcome)
		require.Empty(t, pods.Deletes())
	})

	t.Run("a fresh Memory", func(t *testing.T) {
		clk := clocktesting.NewFakePassiveClock(start)
		pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
		opts := health.Options{Nodes: fake.NewNodes(down), Clock: clk, ShutdownTaints: shutdownAfter}
		require.Equal(t, health.HeldBack, shutdownCheck(t, newChecker(t, pods, opts)).Outcome)
		clk.SetTime(start.Add(time.Hour))
		require.Equal(t, health.HeldBack, shutdownCheck(t, newChecker(t, pods, opts)).Outcome, "a Checker with its own Memory has seen the taint for no time")
	})
}

// Node evidence that cannot be read is no shutdown: a node cache that has
// not synced leaves the pod held for fencing, however long.
func TestShutdownTaintUnreadableNodeIsNoEvidence(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	nodes := fake.NewNodes(newNode("n1", notReady, cloudShutdown))
	nodes.FailWith(fmt.Errorf("cache not synced: %w", health.ErrNodesUnavailable))
	pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
	checker := newChecker(t, pods, health.Options{Nodes: nodes, Clock: clk, ShutdownTaints: shutdownAfter})
	for _, at := range []time.Duration{0, time.Hour} {
		clk.SetTime(start.Add(at))
		report := shutdownCheck(t, checker)
		require.Equal(t, health.HeldForFencing, report.HeldBack.Reason)
	}
	require.Empty(t, pods.Deletes())
}

// A stateless pod needs no fencing: the option changes nothing for it, and
// a stateful one under FenceAlways is fenced by the taint like any other.
func TestShutdownTaintOnlyMattersToPodsThatNeedFencing(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	pods := fake.New(fake.Options{}, evictedOn("web-1", "n1"))
	checker := newChecker(t, pods, health.Options{Nodes: fake.NewNodes(newNode("n1", notReady, cloudShutdown)), Clock: clk, Fencing: health.FenceAlways, ShutdownTaints: shutdownAfter})
	require.Equal(t, health.HeldBack, shutdownCheck(t, checker).Outcome, "FenceAlways: the stateless pod waits for the taint too")
	clk.SetTime(start.Add(30 * time.Second))
	require.Equal(t, health.ForceDeleted, shutdownCheck(t, checker).Outcome)
}

// Options.ShutdownTaints refuses what would do nothing or fence on the
// wrong evidence, and names each fault at once.
func TestNewRefusesShutdownTaintsThatCannotBeEvidence(t *testing.T) {
	nodes := fake.NewNodes()
	for _, tt := range []struct {
		name string
		opts health.Options
		want []string
	}{
		{"no node evidence", health.Options{ShutdownTaints: shutdownAfter}, []string{"needs node evidence"}},
		{"FenceNever", health.Options{Nodes: nodes, Fencing: health.FenceNever, ShutdownTaints: shutdownAfter}, []string{"FenceNever"}},
		{"no key, and no wait", health.Options{Nodes: nodes, ShutdownTaints: []health.ShutdownTaint{{}}}, []string{"ShutdownTaints[0] has no Key", "After 0s is not positive"}},
		{"a key that is no taint key", health.Options{Nodes: nodes, ShutdownTaints: []health.ShutdownTaint{{Key: "not a key", After: time.Second}}}, []string{`"not a key" is not a taint key`}},
		{"Kubernetes' silence taint", health.Options{Nodes: nodes, ShutdownTaints: []health.ShutdownTaint{{Key: corev1.TaintNodeUnreachable, After: time.Minute}}}, []string{"is Kubernetes' own taint"}},
		{"out-of-service", health.Options{Nodes: nodes, ShutdownTaints: []health.ShutdownTaint{{Key: corev1.TaintNodeOutOfService, After: time.Minute}}}, []string{"already fences"}},
		{"named twice, once with a negative wait", health.Options{Nodes: nodes, ShutdownTaints: []health.ShutdownTaint{shutdownAfter[0], {Key: health.TaintCloudShutdown, After: -time.Second}}}, []string{"named twice", "After -1s is not positive"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pods := fake.New(fake.Options{})
			_, err := health.New(pods, pods, tt.opts)
			require.Error(t, err)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

// The Checker keeps its own copy of the list: a caller that changes its
// slice after New changes nothing.
func TestShutdownTaintsAreCopiedByNew(t *testing.T) {
	taints := []health.ShutdownTaint{{Key: "fencing.example.com/powered-off", After: time.Second}}
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
	checker := newChecker(t, pods, health.Options{Nodes: fake.NewNodes(newNode("n1", notReady, cloudShutdown)), Clock: clk, ShutdownTaints: taints})
	taints[0] = health.ShutdownTaint{Key: health.TaintCloudShutdown, After: time.Second}
	shutdownCheck(t, checker)
	clk.SetTime(start.Add(time.Hour))
	require.Equal(t, health.HeldBack, shutdownCheck(t, checker).Outcome)
}

// ShutdownTaintOf agrees with the Checker about which node a shutdown
// taint may fence, before any wait: only one that is not Ready, tainted,
// and not a kubevirt node for the cloud's taint.
func TestShutdownTaintOfAgreesWithTheChecker(t *testing.T) {
	fencer := health.ShutdownTaint{Key: "fencing.example.com/powered-off", After: time.Second}
	taints := []health.ShutdownTaint{shutdownAfter[0], fencer}
	for _, tt := range []struct {
		name string
		node *corev1.Node
		want health.ShutdownTaint
		ok   bool
	}{
		{"nil node", nil, health.ShutdownTaint{}, false},
		{"Ready with a stale taint", newNode("n1", cloudShutdown), health.ShutdownTaint{}, false},
		{"not Ready, untainted", newNode("n1", notReady), health.ShutdownTaint{}, false},
		{"not Ready, the cloud's taint", newNode("n1", notReady, cloudShutdown), shutdownAfter[0], true},
		{"not Ready, the fencer's taint", newNode("n1", notReady, taint(fencer.Key)), fencer, true},
		{"kubevirt: the cloud's taint is no evidence, the fencer's is", newNode("n1", notReady, cloudShutdown, taint(fencer.Key), providerID("kubevirt://vm")), fencer, true},
		{"kubevirt, the cloud's taint alone", newNode("n1", notReady, cloudShutdown, providerID("kubevirt://vm")), health.ShutdownTaint{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := health.ShutdownTaintOf(tt.node, taints)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

// Breaker.Tripped gives the answer a check gives, and DeleteBudget.Take
// spends the same budget as force deletes, so that a caller guarding
// other actions with them shares the limits.
func TestBreakerTrippedAndBudgetTakeShareTheChecksLimits(t *testing.T) {
	nodes := fake.NewNodes(join(nodesOf("down", 3, notReady), nodesOf("ok", 2))...)
	require.Equal(t, "breaker open: 3 of 5 nodes are not Ready", health.Breaker{Nodes: nodes}.Tripped(context.Background(), "down-0"))
	require.Empty(t, health.Breaker{}.Tripped(context.Background(), "down-0"), "a Breaker without nodes never trips")
	require.Empty(t, health.Breaker{Nodes: fake.NewNodes(join(nodesOf("down", 1, notReady), nodesOf("ok", 9))...)}.Tripped(context.Background(), "down-0"))

	budget, err := health.NewDeleteBudget(1, time.Minute)
	require.NoError(t, err)
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	ok, _ := budget.Take(now)
	require.True(t, ok)
	pods := fake.New(fake.Options{}, evictedOn("web-1", "gone"))
	checker := newChecker(t, pods, health.Options{Budget: budget, Clock: clocktesting.NewFakePassiveClock(now)})
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.HeldByBudget, report.Pods[0].HeldBack.Reason, "the budget Take spent holds the force delete back")
	ok, retry := budget.Take(now.Add(30 * time.Second))
	require.False(t, ok)
	require.Equal(t, 30*time.Second, retry)
	var none *health.DeleteBudget
	ok, _ = none.Take(now)
	require.True(t, ok, "no budget: no limit")
}

// A node that came back and failed again while no check looked at it
// keeps its old first sighting in the Memory, but has a new Ready
// transition: that sighting no longer counts, and the wait starts afresh
// at the first sighting under the new transition, the whole After, not
// After less the time since the transition (the cloud taints a grace
// period after it, so that would fence short).
func TestShutdownTaintSightingFromBeforeAnUnseenReturnDoesNotShortenTheWait(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	nodes := fake.NewNodes(newNode("n1", notReady, cloudShutdown))
	pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
	memory := health.NewMemory(health.MemoryOptions{})
	opts := health.Options{Nodes: nodes, Clock: clk, ShutdownTaints: shutdownAfter, Memory: memory}
	require.Equal(t, health.HeldBack, shutdownCheck(t, newChecker(t, pods, opts)).Outcome)

	// Five minutes on, the node failed again 50 s ago and the cloud has
	// tainted it again: the old sighting is still in the Memory, the
	// transition is new.
	clk.SetTime(start.Add(5 * time.Minute))
	again := newNode("n1", notReady, cloudShutdown)
	again.Status.Conditions[0].LastTransitionTime = metav1.NewTime(start.Add(5*time.Minute - 50*time.Second))
	nodes.Set(again)
	report := shutdownCheck(t, newChecker(t, pods, opts))
	require.Equal(t, health.HeldBack, report.Outcome)
	require.Contains(t, report.HeldBack.Detail, "(30s to go)")
	clk.SetTime(start.Add(5*time.Minute + 29*time.Second))
	full, err := newChecker(t, pods, opts).CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.HeldBack, full.Pods[0].Outcome, "29 s of a 30 s wait")
	require.Equal(t, time.Second, full.RetryAfter)
	clk.SetTime(start.Add(5*time.Minute + 30*time.Second))
	require.Equal(t, health.ForceDeleted, shutdownCheck(t, newChecker(t, pods, opts)).Outcome)
}

// A restarted instance still carries the cloud's shutdown taint until the
// cloud controller sees it Ready, while its kubelet already posts
// Ready=False (the first seconds of every boot): a kubelet that posts runs,
// so the taint is no evidence there, however long it has been seen. When
// the kubelet stops posting again the node-lifecycle controller marks it
// Unknown, a new transition, and the wait starts from that sighting.
func TestShutdownTaintOnABootingNodeIsNoEvidence(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	booting := newNode("n1", cloudShutdown)
	booting.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
		Message: "container runtime network not ready", LastTransitionTime: metav1.NewTime(start.Add(-time.Second))}
	nodes := fake.NewNodes(booting)
	pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
	checker := newChecker(t, pods, health.Options{Nodes: nodes, Clock: clk, ShutdownTaints: shutdownAfter})
	_, ok := health.ShutdownTaintOf(booting, shutdownAfter)
	require.False(t, ok, "ShutdownTaintOf a node whose kubelet posts Ready=False")

	for _, at := range []time.Duration{0, time.Minute, time.Hour} {
		clk.SetTime(start.Add(at))
		report := shutdownCheck(t, checker)
		require.Equal(t, health.HeldBack, report.Outcome, "at %v", at)
		require.Equal(t, "owned by StatefulSet db", report.HeldBack.Detail)
	}
	require.Empty(t, pods.Deletes())

	// The kubelet stops posting: Unknown, a new transition; After from now.
	clk.SetTime(start.Add(2 * time.Hour))
	stopped := newNode("n1", notReady, cloudShutdown)
	stopped.Status.Conditions[0].LastTransitionTime = metav1.NewTime(start.Add(2 * time.Hour))
	nodes.Set(stopped)
	require.Equal(t, health.HeldBack, shutdownCheck(t, checker).Outcome)
	clk.SetTime(start.Add(2*time.Hour + 30*time.Second))
	require.Equal(t, health.ForceDeleted, shutdownCheck(t, checker).Outcome)
}
