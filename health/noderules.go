package health

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Names of the node-aware rules.
const (
	RuleNodeGone           = "NodeGone"
	RuleOutOfService       = "OutOfService"
	RuleTerminatingTooLong = "TerminatingTooLong"
)

// DefaultTerminatingMargin is how long past its deletion deadline a pod on a
// node that is not Ready may stay terminating before TerminatingTooLong calls
// it dead.
const DefaultTerminatingMargin = 5 * time.Minute

// NodeGone marks dead a terminating pod whose node no longer exists. The
// node must be confirmed gone (see NodeEvidence): a cache may lag. Without
// node evidence the rule has no opinion. Its verdict is fenced: with its
// node gone, the pod cannot run.
func NodeGone() Rule {
	return Rule{Name: RuleNodeGone, When: Deleting, WithEvidence: func(pod *corev1.Pod, ev *Evidence) (Verdict, bool) {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			return Verdict{}, false
		}
		if _, gone, err := ev.Node(pod.Spec.NodeName); err != nil || !gone {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Fenced: true, Reason: "deletionTimestamp set and node " + pod.Spec.NodeName + " is gone"}, true
	}}
}

// OutOfService marks dead a terminating pod whose node is not Ready and
// carries the node.kubernetes.io/out-of-service taint, which an admin or a
// fencing tool sets on a node that is powered off. Its verdict is fenced.
func OutOfService() Rule {
	return Rule{Name: RuleOutOfService, When: Deleting, WithEvidence: func(pod *corev1.Pod, ev *Evidence) (Verdict, bool) {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			return Verdict{}, false
		}
		node, _, err := ev.Node(pod.Spec.NodeName)
		if err != nil || node == nil || nodeReady(node) || !hasTaint(node, TaintOutOfService) {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Fenced: true, Reason: "deletionTimestamp set and node " + pod.Spec.NodeName + " is not Ready and out of service"}, true
	}}
}

// TerminatingTooLong marks dead a pod that has been terminating for longer
// than its grace period plus margin on a node that is not Ready. Both clocks
// must agree: the pod's deletionTimestamp plus its grace period plus margin
// has passed, and so has its grace period plus margin since this Checker
// first saw it terminating on a node that was not Ready, on its own clock,
// so that clock skew cannot shorten the wait. A margin of zero or less means DefaultTerminatingMargin.
// Its verdict is not fenced: the node may only be partitioned.
func TerminatingTooLong(margin time.Duration) Rule {
	if margin <= 0 {
		margin = DefaultTerminatingMargin
	}
	return Rule{Name: RuleTerminatingTooLong, When: Deleting, WithEvidence: func(pod *corev1.Pod, ev *Evidence) (Verdict, bool) {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			return Verdict{}, false
		}
		node, _, err := ev.Node(pod.Spec.NodeName)
		if err != nil || node == nil || nodeReady(node) {
			return Verdict{}, false
		}
		wait := margin
		if pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds > 0 {
			wait += time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		now := ev.Now()
		since := ev.TerminatingSince(pod)
		if now.Sub(since) < wait || now.Before(pod.DeletionTimestamp.Add(wait)) {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Reason: "terminating past its grace period and margin on node " + pod.Spec.NodeName + ", which is not Ready"}, true
	}}
}
