package health_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// nodeCondition adds a node condition of type typ with status.
func nodeCondition(typ corev1.NodeConditionType, status corev1.ConditionStatus) nodeOption {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: typ, Status: status})
	}
}

// evictedOn is a pod the taint-eviction controller is deleting on node.
func evictedOn(name, node string, opts ...podOption) *corev1.Pod {
	return newPod(name, append([]podOption{onNode(node), deleting, disruption("DeletionByTaintManager")}, opts...)...)
}

// KEP-5683's condition types, spelled as k8s.io/api v0.37 spells them
// (NodeGracefulNodeShutdownInProgress, NodeDrainInProgress): the library
// reads them by these strings, so that it builds at floors without them.
const (
	gracefulShutdownInProgress corev1.NodeConditionType = "GracefulNodeShutdownInProgress"
	drainInProgress            corev1.NodeConditionType = "DrainInProgress"
)

// InMaintenance is a declaration only when the condition's status is True.
func TestInMaintenanceOnlyOnATrueCondition(t *testing.T) {
	for _, tt := range []struct {
		name string
		node *corev1.Node
		want corev1.NodeConditionType
	}{
		{"nil node", nil, ""},
		{"no condition", newNode("n1"), ""},
		{"graceful shutdown in progress", newNode("n1", nodeCondition(gracefulShutdownInProgress, corev1.ConditionTrue)), gracefulShutdownInProgress},
		{"drain in progress", newNode("n1", nodeCondition(drainInProgress, corev1.ConditionTrue)), drainInProgress},
		{"drain finished (False)", newNode("n1", nodeCondition(drainInProgress, corev1.ConditionFalse)), ""},
		{"drain Unknown: no declaration", newNode("n1", nodeCondition(drainInProgress, corev1.ConditionUnknown)), ""},
		{"Drained alone: not in progress", newNode("n1", nodeCondition("Drained", corev1.ConditionTrue)), ""},
		{"MaintenanceInProgress: may not stop pods", newNode("n1", nodeCondition("MaintenanceInProgress", corev1.ConditionTrue)), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := health.InMaintenance(tt.node)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.want != "", ok)
		})
	}
}

// nodesOf returns n nodes named prefix-0 … with opts.
func nodesOf(prefix string, n int, opts ...nodeOption) []*corev1.Node {
	out := make([]*corev1.Node, n)
	for i := range out {
		out[i] = newNode(fmt.Sprintf("%s-%d", prefix, i), opts...)
	}
	return out
}

// The Breaker leaves a node in a graceful shutdown or a drain out of its
// count, both as not Ready and among the nodes: six of ten nodes rebooting
// one after another in a rolling upgrade do not stop the force delete of a
// pod whose own node failed. The same six nodes without the declaration
// (or with it False or Unknown) trip it, and the excluded nodes leave the
// share over the others, so that four failed of seven counted still trip.
// When every node is in maintenance, none counts as Ready, and it trips.
func TestBreakerDoesNotCountNodesInAGracefulShutdownOrADrain(t *testing.T) {
	shuttingDown := nodeCondition(gracefulShutdownInProgress, corev1.ConditionTrue)
	draining := nodeCondition(drainInProgress, corev1.ConditionTrue)
	lost := newNode("lost", notReady, taint(corev1.TaintNodeUnreachable))
	for _, tt := range []struct {
		name  string
		nodes []*corev1.Node
		want  string // the held-back reason, or "" for deleted
	}{
		{"five shutting down and not Ready, four Ready, the pod's node lost: deleted",
			join(nodesOf("reboot", 5, notReady, shuttingDown), nodesOf("ok", 4), []*corev1.Node{lost}), ""},
		{"five draining and not Ready: deleted",
			join(nodesOf("drain", 5, notReady, draining), nodesOf("ok", 4), []*corev1.Node{lost}), ""},
		{"five not Ready, no declaration: tripped",
			join(nodesOf("down", 5, notReady), nodesOf("ok", 4), []*corev1.Node{lost}), "breaker open: 6 of 10 nodes are not Ready"},
		{"five not Ready, the drain condition False: tripped",
			join(nodesOf("down", 5, notReady, nodeCondition(drainInProgress, corev1.ConditionFalse)), nodesOf("ok", 4), []*corev1.Node{lost}), "breaker open: 6 of 10 nodes are not Ready"},
		{"five not Ready, the shutdown condition Unknown: tripped",
			join(nodesOf("down", 5, notReady, nodeCondition(gracefulShutdownInProgress, corev1.ConditionUnknown)), nodesOf("ok", 4), []*corev1.Node{lost}), "breaker open: 6 of 10 nodes are not Ready"},
		{"three draining, three failed of the seven counted and the lost one: tripped over the seven",
			join(nodesOf("drain", 3, notReady, draining), nodesOf("down", 3, notReady), nodesOf("ok", 3), []*corev1.Node{lost}),
			"breaker open: 4 of 7 nodes are not Ready (3 more in a graceful shutdown or a drain, not counted)"},
		{"every node, the pod's too, draining and not Ready: none counts as Ready, tripped",
			join(nodesOf("drain", 4, notReady, draining), []*corev1.Node{newNode("lost", notReady, taint(corev1.TaintNodeUnreachable), draining)}),
			"breaker open: none of the 5 nodes counts as Ready: all are in a graceful shutdown or a drain"},
		{"every node in maintenance but the lost one: all counted not Ready, tripped",
			join(nodesOf("reboot", 4, notReady, shuttingDown), []*corev1.Node{lost}),
			"breaker open: all 1 nodes are not Ready (4 more in a graceful shutdown or a drain, not counted)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pods := fake.New(fake.Options{}, evictedOn("dead", "lost"))
			nodes := fake.NewNodes(tt.nodes...)
			checker := newChecker(t, pods, health.Options{Nodes: nodes, Breaker: health.Breaker{Nodes: nodes}})
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			if tt.want == "" {
				require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome, "held back: %v", report.Pods[0].HeldBack)
				require.Len(t, pods.Deletes(), 1)
				return
			}
			require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
			require.Equal(t, tt.want, report.Pods[0].HeldBack.String())
			require.Empty(t, pods.Deletes())
		})
	}
}

func join(lists ...[]*corev1.Node) []*corev1.Node {
	var out []*corev1.Node
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Early replacement does not replace the pods of a node that declares a
// graceful shutdown or a drain: its kubelet is stopping them, and a pod it
// has not stopped yet still serves. The same node without the declaration
// makes them Unreachable.
func TestEarlyReplacementWaitsOutAGracefulShutdownOrADrain(t *testing.T) {
	for _, tt := range []struct {
		name string
		node *corev1.Node
		want health.State
	}{
		{"unreachable: replaced", newNode("n1", markedUnreachable), health.Unreachable},
		{"unreachable in a graceful shutdown: alive", newNode("n1", markedUnreachable, nodeCondition(gracefulShutdownInProgress, corev1.ConditionTrue)), health.Alive},
		{"unreachable in a drain: alive", newNode("n1", markedUnreachable, nodeCondition(drainInProgress, corev1.ConditionTrue)), health.Alive},
		{"unreachable, the drain over (False): replaced", newNode("n1", markedUnreachable, nodeCondition(drainInProgress, corev1.ConditionFalse)), health.Unreachable},
		{"out of service in a graceful shutdown: alive", newNode("n1", notReady, outOfService, nodeCondition(gracefulShutdownInProgress, corev1.ConditionTrue)), health.Alive},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod("p", onNode("n1"))
			pods := fake.New(fake.Options{}, pod)
			checker := newChecker(t, pods, unreachableOptions(tt.node))
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, tt.want, report.Pods[0].Verdict.State)
			require.Equal(t, tt.want, checker.Classify(context.Background(), pod).State, "Classify agrees with the check")
			require.Empty(t, pods.Deletes())
		})
	}
}

// A graceful shutdown or a drain, in progress or done, is no fencing
// evidence: an admin or a tool sets these conditions, and they say nothing
// of whether the node's containers still run. A stateful dead pod there
// stays held for fencing; the out-of-service taint still lets it go, and
// so does the kubelet's own report on a pod it stopped in the shutdown
// (phase Failed, DisruptionTarget reason TerminationByKubelet).
func TestMaintenanceConditionsAreNoFencingEvidence(t *testing.T) {
	lost := []nodeOption{notReady, taint(corev1.TaintNodeUnreachable)}
	shutDown := newNode("n1", append(lost, nodeCondition(gracefulShutdownInProgress, corev1.ConditionTrue))...)
	for _, tt := range []struct {
		name string
		node *corev1.Node
		pod  *corev1.Pod // default: a taint-evicted StatefulSet pod
		want podOutcome
	}{
		{"the kubelet stopped the pod in the shutdown: its own report fences it",
			shutDown, newPod("db-0", onNode("n1"), phase(corev1.PodFailed), disruption(corev1.PodReasonTerminationByKubelet), ownedByStatefulSet),
			podOutcome{"db-0", health.Dead, health.RuleTerminatedByKubelet, health.ForceDeleted, false}},
		{"graceful shutdown in progress: held",
			shutDown, nil,
			podOutcome{"db-0", health.Dead, health.RuleTaintEvicted, health.HeldBack, true}},
		{"drain in progress and Drained: held",
			newNode("n1", append(lost, nodeCondition(drainInProgress, corev1.ConditionTrue), nodeCondition("Drained", corev1.ConditionTrue))...), nil,
			podOutcome{"db-0", health.Dead, health.RuleTaintEvicted, health.HeldBack, true}},
		{"the out-of-service taint as well: force-deleted",
			newNode("n1", append(lost, outOfService, nodeCondition(gracefulShutdownInProgress, corev1.ConditionTrue))...), nil,
			podOutcome{"db-0", health.Dead, health.RuleTaintEvicted, health.ForceDeleted, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := tt.pod
			if pod == nil {
				pod = evictedOn("db-0", "n1", ownedByStatefulSet)
			}
			pods := fake.New(fake.Options{}, pod)
			checker := newChecker(t, pods, health.Options{Nodes: fake.NewNodes(tt.node)})
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Empty(t, cmp.Diff([]podOutcome{tt.want}, podOutcomes(report)))
			if tt.want.HeldBack {
				require.Equal(t, health.HeldForFencing, report.Pods[0].HeldBack.Reason)
				require.Empty(t, pods.Deletes())
			}
		})
	}
}

// Breaker.Open reads the Breaker's own state from its nodes, whatever the
// pods: open while the outage lasts, closed as soon as the nodes recover,
// with no dead pod asking it in between (podhealth_breaker_open reads it).
func TestBreakerOpenFollowsTheNodesNotThePods(t *testing.T) {
	zoned := func(zone string) nodeOption {
		return func(n *corev1.Node) {
			n.Labels = map[string]string{corev1.LabelTopologyZone: zone}
		}
	}
	nodes := fake.NewNodes(join(nodesOf("down", 3, notReady), nodesOf("ok", 2))...)
	b := health.Breaker{Nodes: nodes}
	require.Equal(t, "breaker open: 3 of 5 nodes are not Ready", b.Open(context.Background()))

	for _, n := range nodesOf("down", 3) {
		nodes.Set(n)
	}
	require.Empty(t, b.Open(context.Background()), "every node recovered: closed")

	zones := fake.NewNodes(join(nodesOf("a", 3, notReady, zoned("a")), nodesOf("b", 9, zoned("b")))...)
	require.Equal(t, `breaker open: 3 of 3 nodes in zone "a" are not Ready`, health.Breaker{Nodes: zones}.Open(context.Background()), "one zone disrupted: open for its nodes")

	require.Equal(t, "breaker open: cannot read node health: no nodes seen", health.Breaker{Nodes: fake.NewNodes()}.Open(context.Background()), "no reading: open")
	require.Empty(t, health.Breaker{}.Open(context.Background()), "no Nodes: never open")
}
