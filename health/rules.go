package health

import (
	corev1 "k8s.io/api/core/v1"
)

// Rule is one named classification rule. It has one of two functions:
//
//   - Classify judges from the pod alone;
//   - WithEvidence may also look at the pod's node and at how long the pod
//     has been terminating (see Evidence). A Checker consults it only for
//     pods that are being deleted or are in a terminal phase; Rules.Classify,
//     which has no evidence, skips it.
//
// Either returns ok=false when the rule has no opinion about the pod. It must
// not mutate the pod and must be safe for concurrent use.
//
// When, if not zero, lists facts a pod must all have for the rule to have an
// opinion; a pod that lacks one skips the rule without calling it. It lets
// a check over many live pods skip most rules: the facts are read once per
// pod. A rule that declares When must have no opinion about pods lacking
// those facts.
type Rule struct {
	Name         string
	When         Facts
	Classify     func(pod *corev1.Pod) (v Verdict, ok bool)
	WithEvidence func(pod *corev1.Pod, ev *Evidence) (v Verdict, ok bool)
}

// Facts are cheap facts about a pod, as a bit set (see Rule.When).
type Facts uint8

const (
	// Deleting: the pod has a deletionTimestamp.
	Deleting Facts = 1 << iota
	// Terminal: the pod is in phase Succeeded or Failed.
	Terminal
	// Disrupted: the pod has a DisruptionTarget=True condition.
	Disrupted
)

// FactsOf returns the facts that hold for pod.
func FactsOf(pod *corev1.Pod) Facts {
	var f Facts
	if pod.DeletionTimestamp != nil {
		f |= Deleting
	}
	if isTerminalPhase(pod) {
		f |= Terminal
	}
	if disruptionTarget(pod) != nil {
		f |= Disrupted
	}
	return f
}

// Rules is an ordered rule set: the first rule with an opinion decides. A pod
// that no rule matches is Alive. Rules compose by concatenation, so a caller
// can put its own rules before or after DefaultRules().
type Rules []Rule

// Names of the built-in rules, as they appear in Verdict.Rule.
const (
	RuleTaintEvicted         = "TaintEvicted"
	RuleTerminatedByKubelet  = "TerminatedByKubelet"
	RuleGracefulDeletion     = "GracefulDeletion"
	RuleFinishedPod          = "FinishedPod"
	RuleFinishedPodIsDead    = "FinishedPodIsDead"
	RuleStaleDisruptionAlive = "StaleDisruptionTarget"
)

// Condition reasons set by Kubernetes on the DisruptionTarget condition.
const (
	ReasonDeletionByTaintManager = "DeletionByTaintManager"
	ReasonTerminationByKubelet   = "TerminationByKubelet"
)

// DefaultRules returns the default rule set. The rules are safe: they only
// speed up a deletion that Kubernetes already decided, or remove a pod whose
// containers already stopped. In order:
//
//  1. TaintEvicted: deletionTimestamp set and DisruptionTarget=True with
//     reason DeletionByTaintManager: Dead.
//  2. TerminatedByKubelet: phase Failed and DisruptionTarget=True with reason
//     TerminationByKubelet: Dead, with or without a deletionTimestamp.
//  3. NodeGone, OutOfService and TerminatingTooLong(DefaultTerminatingMargin):
//     a terminating pod whose node is confirmed gone, is out of service, or
//     has not been Ready for the pod's grace period plus the margin: Dead.
//     They need node evidence (Options.NodeEvidence); without it they have no
//     opinion.
//  4. GracefulDeletion: any other pod with a deletionTimestamp (a drain, a
//     preemption, a user's delete): Terminating, never force-deleted.
//  5. FinishedPod: any other pod in phase Succeeded or Failed: Finished.
//  6. StaleDisruptionTarget: DisruptionTarget=True without a deletionTimestamp
//     on a running pod: Alive, since the condition can be stale.
//
// Any other pod is Alive. Each call returns a new slice that the caller may
// change.
func DefaultRules() Rules {
	return Rules{
		TaintEvicted(), TerminatedByKubelet(),
		NodeGone(), OutOfService(), TerminatingTooLong(DefaultTerminatingMargin),
		GracefulDeletion(), FinishedPod(), StaleDisruptionTarget(),
	}
}

// Classify returns the verdict of the first rule with an opinion, or Alive.
// It judges from the pod alone: rules that need evidence are skipped. A nil
// pod is judged by no rule: it gets an Alive verdict, which never leads to a
// delete, with the reason "nil pod".
func (rs Rules) Classify(pod *corev1.Pod) Verdict {
	if pod == nil {
		return Verdict{State: Alive, Reason: "nil pod"}
	}
	return rs.classify(pod, FactsOf(pod), nil)
}

// classify is Classify with the pod's facts already read and with evidence;
// a nil ev skips the rules that need it.
func (rs Rules) classify(pod *corev1.Pod, facts Facts, ev *Evidence) Verdict {
	for i := range rs {
		r := &rs[i]
		if r.When&^facts != 0 {
			continue
		}
		var v Verdict
		var ok bool
		switch {
		case r.Classify != nil:
			v, ok = r.Classify(pod)
		case r.WithEvidence != nil && ev != nil:
			v, ok = r.WithEvidence(pod, ev)
		}
		if ok {
			if v.Rule == "" {
				v.Rule = r.Name
			}
			return v
		}
	}
	return aliveByDefault
}

// aliveByDefault is the verdict of a pod that no rule matched.
var aliveByDefault = Verdict{State: Alive, Reason: "no rule matched"}

// needFacts reports whether every rule declares facts it needs, so that a
// pod with none of the facts matches no rule.
func (rs Rules) needFacts() bool {
	for _, r := range rs {
		if r.When == 0 {
			return false
		}
	}
	return true
}

// needEvidence reports whether any rule needs evidence.
func (rs Rules) needEvidence() bool {
	for _, r := range rs {
		if r.Classify == nil && r.WithEvidence != nil {
			return true
		}
	}
	return false
}

// TaintEvicted marks dead a pod that the taint-eviction controller is
// deleting: its node went away and the toleration ran out, so no kubelet will
// ever confirm the graceful deletion.
func TaintEvicted() Rule {
	return Rule{Name: RuleTaintEvicted, When: Deleting | Disrupted, Classify: func(pod *corev1.Pod) (Verdict, bool) {
		if pod.DeletionTimestamp == nil || !hasDisruptionTarget(pod, ReasonDeletionByTaintManager) {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Reason: "deletionTimestamp set and DisruptionTarget=True reason DeletionByTaintManager"}, true
	}}
}

// TerminatedByKubelet marks dead a Failed pod that the kubelet terminated
// for a disruption (node shutdown, resource pressure): its containers are
// gone already.
func TerminatedByKubelet() Rule {
	return Rule{Name: RuleTerminatedByKubelet, When: Terminal | Disrupted, Classify: func(pod *corev1.Pod) (Verdict, bool) {
		if pod.Status.Phase != corev1.PodFailed || !hasDisruptionTarget(pod, ReasonTerminationByKubelet) {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Fenced: true, Reason: "phase Failed and DisruptionTarget=True reason TerminationByKubelet"}, true
	}}
}

// GracefulDeletion marks terminating any pod that is being deleted. Put it
// after the rules that recognise dead pods: on its own it protects every
// graceful shutdown, such as a drain's.
func GracefulDeletion() Rule {
	return Rule{Name: RuleGracefulDeletion, When: Deleting, Classify: func(pod *corev1.Pod) (Verdict, bool) {
		if pod.DeletionTimestamp == nil {
			return Verdict{}, false
		}
		reason := "deletionTimestamp set, graceful deletion in progress"
		if c := disruptionTarget(pod); c != nil {
			reason = "deletionTimestamp set, graceful deletion in progress (DisruptionTarget reason " + c.Reason + ")"
		}
		return Verdict{State: Terminating, Reason: reason}, true
	}}
}

// FinishedPod marks a pod in phase Succeeded or Failed as Finished: not
// alive, and left alone.
func FinishedPod() Rule {
	return Rule{Name: RuleFinishedPod, When: Terminal, Classify: func(pod *corev1.Pod) (Verdict, bool) {
		if !isTerminalPhase(pod) {
			return Verdict{}, false
		}
		return Verdict{State: Finished, Reason: "phase " + string(pod.Status.Phase)}, true
	}}
}

// FinishedPodIsDead is the opt-in rule that force-deletes pods in phase
// Succeeded or Failed. Put it before GracefulDeletion or FinishedPod to take
// effect; pods with a deletionTimestamp are left to GracefulDeletion:
//
//	rules := append(health.Rules{health.FinishedPodIsDead()}, health.DefaultRules()...)
func FinishedPodIsDead() Rule {
	return Rule{Name: RuleFinishedPodIsDead, When: Terminal, Classify: func(pod *corev1.Pod) (Verdict, bool) {
		if !isTerminalPhase(pod) || pod.DeletionTimestamp != nil {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Fenced: true, Reason: "phase " + string(pod.Status.Phase) + ", containers stopped"}, true
	}}
}

// StaleDisruptionTarget keeps alive a running pod that carries
// DisruptionTarget=True but no deletionTimestamp: the disruption was called
// off or has not happened, and the condition may be stale.
func StaleDisruptionTarget() Rule {
	return Rule{Name: RuleStaleDisruptionAlive, When: Disrupted, Classify: func(pod *corev1.Pod) (Verdict, bool) {
		if pod.DeletionTimestamp != nil || isTerminalPhase(pod) || disruptionTarget(pod) == nil {
			return Verdict{}, false
		}
		return Verdict{State: Alive, Reason: "DisruptionTarget=True without deletionTimestamp; the condition can be stale"}, true
	}}
}

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
