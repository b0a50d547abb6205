package health

import corev1 "k8s.io/api/core/v1"

// replace is early replacement's verdict (Options.ReplaceUnreachable) for
// pod, which the rules call Alive (v): Unreachable when the pod needs no
// fencing and is bound to a node that is NodeUnreachable or
// NodeOutOfService and not InMaintenance, and has been so for
// Options.UnreachableFor; else v. A pod with a deletionTimestamp or in a
// terminal phase keeps v, whatever a rule of the caller's said: it is not
// serving anyway, and its own verdict says why. Fencing is decided before
// the wait, so that a pod that can never become Unreachable sets no
// RetryAfter; when only the wait keeps the pod Alive, the report's
// RetryAfter says when it ends. It is the policy's: which alive pods the
// caller may replace elsewhere, and a pod that writes alone is never one.
func (k *check) replace(pod *corev1.Pod, v Verdict) Verdict {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || isTerminalPhase(pod) {
		return v
	}
	ev := k.getEvidence()
	if ok, _, _ := ev.replacement(pod.Spec.NodeName, false); !ok {
		return v
	}
	if why, _ := k.policy.needsFencing(k.ctx, pod); why != "" {
		return v // a second copy would be a second writer
	}
	_, wait, reason := ev.replacement(pod.Spec.NodeName, true)
	if wait > 0 {
		ev.wake.add(wait)
		return v
	}
	return Verdict{State: Unreachable, Rule: RuleNodeUnreachable, Reason: reason}
}
