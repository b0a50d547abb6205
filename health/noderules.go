package health

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Names of the node-aware rules.
const (
	ruleNodeGone           = "NodeGone"
	ruleOutOfService       = "OutOfService"
	ruleTerminatingTooLong = "TerminatingTooLong"
)

// defaultTerminatingMargin is how long past its deletion deadline a pod on a
// node that is not Ready may stay terminating before TerminatingTooLong calls
// it dead, in DefaultRules.
const defaultTerminatingMargin = 5 * time.Minute

// nodeGone marks dead a terminating pod whose node no longer exists. The
// node must be confirmed gone by a live read (see Options.LiveNodes): a
// cache may lag, or never have synced. Without that the rule has no
// opinion. Its verdict is fenced: with its node gone, the pod cannot run.
func nodeGone() Rule {
	return Rule{Name: ruleNodeGone, when: deleting, withEvidence: func(pod *corev1.Pod, ev *evidence) (Verdict, bool) {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			return Verdict{}, false
		}
		if _, gone, err := ev.node(pod.Spec.NodeName); err != nil || !gone {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Fenced: true, Reason: "deletionTimestamp set and node " + pod.Spec.NodeName + " is gone"}, true
	}}
}

// outOfService marks dead a terminating pod whose node is not Ready and
// carries the node.kubernetes.io/out-of-service taint, which an admin or a
// fencing tool sets on a node that is powered off. Its verdict is fenced.
func outOfService() Rule {
	return Rule{Name: ruleOutOfService, when: deleting, withEvidence: func(pod *corev1.Pod, ev *evidence) (Verdict, bool) {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			return Verdict{}, false
		}
		node, _, err := ev.node(pod.Spec.NodeName)
		if err != nil || node == nil || !nodeOutOfService(node) {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Fenced: true, Reason: "deletionTimestamp set and node " + pod.Spec.NodeName + " is not Ready and out of service"}, true
	}}
}

// TerminatingTooLong returns the rule, named TerminatingTooLong, that marks
// dead a pod that has been terminating for longer than its grace period plus
// margin on a node that is not Ready. Both clocks must agree: the pod's
// deletionTimestamp plus its grace period plus margin has passed, and so has
// its grace period plus margin since this Checker first saw it terminating
// on a node that was not Ready, on its own clock, so that clock skew cannot
// shorten the wait. A margin of zero or less means 5 minutes, the margin of
// DefaultRules. Its verdict is not fenced: the node may only be partitioned.
// It needs node evidence (Options.Nodes).
func TerminatingTooLong(margin time.Duration) Rule {
	if margin <= 0 {
		margin = defaultTerminatingMargin
	}
	return Rule{Name: ruleTerminatingTooLong, when: deleting, withEvidence: func(pod *corev1.Pod, ev *evidence) (Verdict, bool) {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			return Verdict{}, false
		}
		node, _, err := ev.node(pod.Spec.NodeName)
		if err != nil || node == nil || nodeReady(node) {
			return Verdict{}, false
		}
		wait := margin
		if pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds > 0 {
			wait += time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		now := ev.now
		since := ev.terminatingSince(pod)
		if now.Sub(since) < wait || now.Before(pod.DeletionTimestamp.Add(wait)) {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Reason: "terminating past its grace period and margin on node " + pod.Spec.NodeName + ", which is not Ready"}, true
	}}
}

// nodeFences reports whether node evidence alone shows that a pod's
// containers on the node cannot run: the node is gone, or it is not Ready
// and out of service. The node rules and the fencing policy share it.
func nodeFences(node *corev1.Node, gone bool) bool {
	return gone || (node != nil && nodeOutOfService(node))
}

// nodeOutOfService reports whether node is not Ready and carries the
// out-of-service taint.
func nodeOutOfService(node *corev1.Node) bool {
	return !nodeReady(node) && hasTaint(node, corev1.TaintNodeOutOfService)
}
