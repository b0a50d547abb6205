package health

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// defaultTerminatingMargin is how long past its deletion deadline a pod on a
// node that is not Ready may stay terminating before TerminatingTooLong calls
// it dead, in DefaultRules.
const defaultTerminatingMargin = 5 * time.Minute

// nodeGone marks dead a pod whose node no longer exists, with or without a
// deletionTimestamp, as Kubernetes' pod garbage collector does after its
// quarantine. The node must be confirmed gone by a live read (see
// Options.LiveNodes): a cache may lag, be filtered, or never have synced.
// Without that the rule has no opinion; a pod not bound to a node never
// matches. A check sets the onGoneNode fact only with node evidence, so the
// rule costs live pods nothing without it. Its verdict is fenced: with its
// node gone, the pod cannot run.
func nodeGone() Rule {
	return Rule{Name: RuleNodeGone, when: onGoneNode, withEvidence: func(pod *corev1.Pod, ev *evidence) (Verdict, bool) {
		if pod.Spec.NodeName == "" || !ev.gone(pod.Spec.NodeName) {
			return Verdict{}, false
		}
		prefix := "node "
		if pod.DeletionTimestamp != nil {
			prefix = "deletionTimestamp set and node "
		}
		reason := ev.reason(prefix, pod.Spec.NodeName, " is gone, confirmed by a live read")
		return Verdict{State: Dead, Fenced: true, Reason: reason}, true
	}}
}

// outOfService marks dead a terminating pod whose node is not Ready and
// carries the node.kubernetes.io/out-of-service taint, which an admin or a
// fencing tool sets on a node that is powered off. Its verdict is fenced.
func outOfService() Rule {
	return Rule{Name: RuleOutOfService, when: deleting, withEvidence: func(pod *corev1.Pod, ev *evidence) (Verdict, bool) {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			return Verdict{}, false
		}
		if state, _ := ev.node(pod.Spec.NodeName); state != NodeOutOfService {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Fenced: true, Reason: ev.reason("deletionTimestamp set and node ", pod.Spec.NodeName, " is not Ready and out of service")}, true
	}}
}

// TerminatingTooLong returns the rule, named TerminatingTooLong, that marks
// dead a pod that stays terminating for longer than margin past its
// deletion deadline on a node that is down (NodeState.Down, other than
// NodeGone, which rule NodeGone decides). Both clocks must agree:
// margin has passed since the pod's deletionTimestamp (which already
// includes its grace period), and its grace period plus margin have passed
// since this Checker first saw it terminating, on its own clock, so that
// clock skew cannot shorten the wait. Any grace period, however large or
// negative, and any timestamp only ever lengthen the wait: the arithmetic
// saturates instead of overflowing. A margin of zero or less means 5
// minutes, the margin of DefaultRules. Its verdict is not fenced: the node
// may only be partitioned. It needs node evidence (Options.Nodes).
func TerminatingTooLong(margin time.Duration) Rule {
	if margin <= 0 {
		margin = defaultTerminatingMargin
	}
	return Rule{Name: RuleTerminatingTooLong, when: deleting, withEvidence: func(pod *corev1.Pod, ev *evidence) (Verdict, bool) {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			return Verdict{}, false
		}
		if state, _ := ev.node(pod.Spec.NodeName); !state.Down() || state == NodeGone {
			return Verdict{}, false // NodeGone decides about a gone node
		}
		since := ev.terminatingSince(pod)
		now := ev.time()
		// Both waits must end; no timestamp or grace period can shorten
		// either (see remaining).
		left := max(remaining(now.Sub(pod.DeletionTimestamp.Time), margin), remaining(now.Sub(since), addSaturating(gracePeriod(pod), margin)))
		if left > 0 {
			ev.wake.add(left)
			return Verdict{}, false
		}
		return Verdict{State: Dead, Reason: ev.reason("terminating past its deletion deadline and margin on node ", pod.Spec.NodeName, ", which is not Ready")}, true
	}}
}

// remaining returns how much of need is left after elapsed, without
// overflow: zero once elapsed reaches need, and all of need while elapsed
// is not positive (a clock behind, or a timestamp ahead; the wait is
// measured again at the next check).
func remaining(elapsed, need time.Duration) time.Duration {
	switch {
	case elapsed >= need:
		return 0
	case elapsed <= 0:
		return need
	default:
		return need - elapsed
	}
}
