package health

import corev1 "k8s.io/api/core/v1"

// The facts of a pod that every stage reads: whether it is being deleted,
// in a terminal phase, or a disruption's target. The rules declare the
// facts they need (Rule.when), the evidence screen and the fencers read
// the phase, and the quiet path counts pods alive on them alone.

// facts are cheap facts about a pod, as a bit set (see Rule.when).
type facts uint8

const (
	// deleting: the pod has a deletionTimestamp.
	deleting facts = 1 << iota
	// terminal: the pod is in phase Succeeded or Failed.
	terminal
	// disrupted: the pod has a DisruptionTarget=True condition.
	disrupted
	// onGoneNode: a live read confirmed that the pod's node is gone. Unlike
	// the others, factsOf does not read it: a check sets it, with node
	// evidence only, at the cost of one lookup per node and check.
	onGoneNode
)

// factsOf returns the facts that hold for pod.
func factsOf(pod *corev1.Pod) facts {
	var f facts
	if pod.DeletionTimestamp != nil {
		f |= deleting
	}
	if isTerminalPhase(pod) {
		f |= terminal
	}
	if disruptionTarget(pod) != nil {
		f |= disrupted
	}
	return f
}

// isTerminalPhase reports whether the pod is in phase Succeeded or Failed.
func isTerminalPhase(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// disruptionTarget returns the pod's DisruptionTarget=True condition, or nil.
// When the condition appears more than once, the first True one counts.
func disruptionTarget(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// hasDisruptionTarget reports whether any DisruptionTarget=True condition
// has the given reason, so that the order of duplicate conditions does not
// change the verdict.
func hasDisruptionTarget(pod *corev1.Pod, reason string) bool {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}
