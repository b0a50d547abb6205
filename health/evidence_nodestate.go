package health

import corev1 "k8s.io/api/core/v1"

// NodeState is what node evidence says about one node. It is decided in
// one place, NodeStateOf, and every rule, the Breaker, early replacement
// and the kubectl plugin read a node through it, so that they never
// disagree about the same node.
type NodeState int

const (
	// NodeUnknown: there is no evidence about the node: it was not read, the
	// read failed, it is missing from a cache and no live read confirmed it
	// gone, or it has no Ready condition. Rules that need node evidence have
	// no opinion, and the Breaker counts the node as not Ready.
	NodeUnknown NodeState = iota
	// NodeReady: the node's Ready condition is True. Its kubelet reports, so
	// it finishes graceful deletions. A node.kubernetes.io/unreachable or
	// node.kubernetes.io/not-ready taint left on a Ready node is stale: the
	// kubelet reports again, and the node-lifecycle controller removes the
	// taint on its next pass. The node is Ready all the same.
	NodeReady
	// NodeNotReady: Ready is False or Unknown, and the node carries neither
	// the node-lifecycle controller's NoExecute taint nor the out-of-service
	// taint.
	NodeNotReady
	// NodeUnreachable: Ready is False or Unknown, and the node carries the
	// node.kubernetes.io/unreachable or node.kubernetes.io/not-ready taint
	// with effect NoExecute: the node-lifecycle controller marked it, and
	// the taint-eviction controller evicts its pods as their tolerations
	// run out. A partitioned node is Unreachable too, so this alone never
	// fences.
	NodeUnreachable
	// NodeOutOfService: Ready is False or Unknown, and the node carries the
	// node.kubernetes.io/out-of-service taint (any effect), which an admin
	// or a fencing tool sets on a node that is powered off. It fences.
	NodeOutOfService
	// NodeGone: a live read confirmed that the node does not exist (see
	// Options.LiveNodes). It fences. NodeStateOf never returns it: only a
	// lookup can tell that a node is gone.
	NodeGone
)

var nodeStateNames = [...]string{
	NodeUnknown:      "Unknown",
	NodeReady:        "Ready",
	NodeNotReady:     "NotReady",
	NodeUnreachable:  "Unreachable",
	NodeOutOfService: "OutOfService",
	NodeGone:         "Gone",
}

func (s NodeState) String() string {
	if s < 0 || int(s) >= len(nodeStateNames) {
		return "NodeState(?)"
	}
	return nodeStateNames[s]
}

// Down reports whether the node's kubelet is known not to report: the node
// is NotReady, Unreachable, OutOfService or Gone. A pod that a controller
// deletes on such a node stays Terminating, since no kubelet confirms it.
func (s NodeState) Down() bool {
	switch s {
	case NodeNotReady, NodeUnreachable, NodeOutOfService, NodeGone:
		return true
	}
	return false
}

// Fences reports whether the state alone shows that no container of the
// node can run: the node is Gone, or OutOfService.
func (s NodeState) Fences() bool {
	return s == NodeGone || s == NodeOutOfService
}

// NodeStateOf reads a node object: NodeReady, NodeNotReady,
// NodeUnreachable, NodeOutOfService, or NodeUnknown for a nil node or one
// without a Ready condition. The Ready condition decides first, so a Ready
// node is Ready whatever its taints; among the taints of a node that is not
// Ready, out-of-service comes before the node-lifecycle controller's.
func NodeStateOf(node *corev1.Node) NodeState {
	ready := readyCondition(node)
	switch {
	case ready == nil:
		return NodeUnknown
	case ready.Status == corev1.ConditionTrue:
		return NodeReady
	case ready.Status != corev1.ConditionFalse && ready.Status != corev1.ConditionUnknown:
		return NodeUnknown // a status the API does not define
	}
	unreachable := false
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		switch {
		case t.Key == corev1.TaintNodeOutOfService:
			return NodeOutOfService
		case t.Effect == corev1.TaintEffectNoExecute && (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady):
			unreachable = true
		}
	}
	if unreachable {
		return NodeUnreachable
	}
	return NodeNotReady
}

// Node lifecycle conditions of KEP-5683 (k8s.io/api v0.37 names them
// NodeGracefulNodeShutdownInProgress and NodeDrainInProgress), read by
// their type strings so that the library builds at its floors, whose API
// types lack them.
const (
	conditionGracefulShutdownInProgress corev1.NodeConditionType = "GracefulNodeShutdownInProgress"
	conditionDrainInProgress            corev1.NodeConditionType = "DrainInProgress"
)

// InMaintenance reports whether node declares that it is being stopped or
// emptied on purpose: its GracefulNodeShutdownInProgress or
// DrainInProgress condition is True (any other status, or none, is not a
// declaration). It returns the condition's type. Such a node is not a
// failed node: the Breaker counts it neither as not Ready nor at all, and
// early replacement (Options.ReplaceUnreachable) does not replace its
// pods, whose kubelet is still stopping them. It is no fencing evidence:
// the API states that an admin or a tool sets and clears these conditions,
// so they say nothing of whether the node's containers still run; a pod
// that the kubelet stopped says so itself, in its phase.
func InMaintenance(node *corev1.Node) (corev1.NodeConditionType, bool) {
	if node == nil {
		return "", false
	}
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if (c.Type == conditionGracefulShutdownInProgress || c.Type == conditionDrainInProgress) && c.Status == corev1.ConditionTrue {
			return c.Type, true
		}
	}
	return "", false
}

// readyCondition returns the node's Ready condition, or nil (for a nil node
// too).
func readyCondition(node *corev1.Node) *corev1.NodeCondition {
	if node == nil {
		return nil
	}
	for i := range node.Status.Conditions {
		if c := &node.Status.Conditions[i]; c.Type == corev1.NodeReady {
			return c
		}
	}
	return nil
}

// lifecycleTaint returns the key of the node-lifecycle controller's
// NoExecute taint on node (unreachable first), or "".
func lifecycleTaint(node *corev1.Node) string {
	key := ""
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		switch t.Key {
		case corev1.TaintNodeUnreachable:
			return t.Key
		case corev1.TaintNodeNotReady:
			key = t.Key
		}
	}
	return key
}
