package health

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
)

// Rule is one named classification rule. Classify judges a pod and returns
// ok=false when the rule has no opinion about it; it must not mutate the pod
// and must be safe for concurrent use. A rule's Verdict.Fenced says that its
// evidence alone shows the pod's containers cannot run any more; leave it
// false unless that is certain.
//
// The built-in rules also read cheap pod facts once per pod, to skip pods
// they have no opinion about, and some read node evidence; a rule of the
// caller's is asked about every pod that no earlier rule decided.
type Rule struct {
	Name     string
	Classify func(pod *corev1.Pod) (v Verdict, ok bool)

	// when lists facts a pod must all have for the rule to have an
	// opinion; a pod that lacks one skips the rule without calling it.
	when facts
	// withEvidence, set instead of Classify, may also read node evidence.
	withEvidence func(pod *corev1.Pod, ev *evidence) (v Verdict, ok bool)
}

// Rules is an ordered rule set: the first rule with an opinion decides. A pod
// that no rule matches is Alive. Rules compose by concatenation, so a caller
// can put its own rules before or after DefaultRules(), or drop a built-in
// rule by its Name.
type Rules []Rule

// Names of the built-in rules, as they appear in Rule.Name and
// Verdict.Rule. Drop a built-in rule by its name:
//
//	rules := slices.DeleteFunc(health.DefaultRules(), func(r health.Rule) bool { return r.Name == health.RuleTerminatingTooLong })
const (
	RuleTaintEvicted          = "TaintEvicted"
	RuleTerminatedByKubelet   = "TerminatedByKubelet"
	RuleNodeGone              = "NodeGone"
	RuleOutOfService          = "OutOfService"
	RuleTerminatingTooLong    = "TerminatingTooLong"
	RuleGracefulDeletion      = "GracefulDeletion"
	RuleFinishedPod           = "FinishedPod"
	RuleFinishedPodIsDead     = "FinishedPodIsDead"
	RuleStaleDisruptionTarget = "StaleDisruptionTarget"
	// RuleNodeUnreachable is the Verdict.Rule of an Unreachable pod (see
	// Options.ReplaceUnreachable); it is not a Rule of its own.
	RuleNodeUnreachable = "NodeUnreachable"
)

// reasonDeletionByTaintManager is the DisruptionTarget reason that the
// taint-eviction controller sets; k8s.io/api has no constant for it.
const reasonDeletionByTaintManager = "DeletionByTaintManager"

// DefaultRules returns the default rule set. The rules are safe: they only
// speed up a deletion that Kubernetes already decided and no kubelet will
// finish, or remove a pod whose containers already stopped or whose node is
// gone. In order, by Name:
//
//  1. TaintEvicted: deletionTimestamp set and DisruptionTarget=True with
//     reason DeletionByTaintManager, which the taint-eviction controller
//     sets for any NoExecute taint the pod does not tolerate, on a Ready
//     node too. With node evidence (Options.Nodes), Dead when the node is
//     down (NodeState.Down: NotReady, Unreachable, OutOfService, or Gone as
//     confirmed by Options.LiveNodes); on a Ready node (NodeReady, stale
//     taints or not) the rule has no opinion, and the kubelet finishes the
//     graceful deletion. When the node's state is NodeUnknown (no node
//     evidence configured, the lookup failed, no Ready condition), Dead
//     once the deletion deadline (the deletionTimestamp, which includes the
//     grace period) has passed on the Checker's clock: a live kubelet would
//     have removed the pod by then; until then, Report.RetryAfter says when
//     the deadline passes. Only a verdict on a Gone or OutOfService node is
//     fenced, so a stateful pod still waits for fencing evidence.
//  2. TerminatedByKubelet: phase Failed and DisruptionTarget=True with reason
//     TerminationByKubelet: Dead, with or without a deletionTimestamp.
//  3. NodeGone: a pod bound to a node that a live read confirms gone
//     (Options.Nodes says NotFound, then Options.LiveNodes says NotFound
//     too), with or without a deletionTimestamp, running or not: Dead and
//     fenced, as Kubernetes' pod garbage collector would decide after its
//     quarantine.
//  4. OutOfService and TerminatingTooLong (with a margin of 5 minutes): a
//     terminating pod whose node is NodeOutOfService, or down (NotReady,
//     Unreachable or OutOfService) while the pod stays terminating for the margin past its
//     deletion deadline (and its grace period plus the margin since the
//     Checker first saw it terminating, on its own clock): Dead.
//     NodeGone, OutOfService and TerminatingTooLong need node evidence;
//     without it they have no opinion.
//  5. GracefulDeletion: any other pod with a deletionTimestamp (a drain, a
//     preemption, a user's delete, a taint eviction from a Ready node):
//     Terminating, never force-deleted.
//  6. FinishedPod: any other pod in phase Succeeded or Failed: Finished.
//  7. StaleDisruptionTarget: DisruptionTarget=True without a deletionTimestamp
//     on a running pod: Alive, since the condition can be stale.
//
// Any other pod is Alive. Each call returns a new slice that the caller may
// change.
func DefaultRules() Rules {
	return Rules{
		taintEvicted(), terminatedByKubelet(),
		nodeGone(), outOfService(), TerminatingTooLong(defaultTerminatingMargin),
		gracefulDeletion(), finishedPod(), staleDisruptionTarget(),
	}
}

// classify returns the verdict of the first rule with an opinion, or Alive.
// The pod's facts are read already; a nil ev skips the rules that need
// evidence.
func (rs Rules) classify(pod *corev1.Pod, f facts, ev *evidence) Verdict {
	for i := range rs {
		r := &rs[i]
		if r.when&^f != 0 {
			continue
		}
		var v Verdict
		var ok bool
		switch {
		case r.Classify != nil:
			v, ok = r.Classify(pod)
		case r.withEvidence != nil && ev != nil:
			v, ok = r.withEvidence(pod, ev)
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
		if r.when == 0 {
			return false
		}
	}
	return true
}

// aliveUnlessDeletingOrTerminal reports whether the rules call alive every
// pod that has no deletionTimestamp, is not in a terminal phase and is not
// on a node confirmed gone, whatever its conditions: each rule needs the
// deleting, terminal or onGoneNode fact, or is staleDisruptionTarget
// (recognised by its function, not its name), whose only verdict is Alive.
// A check that reports no verdict may then count such a pod alive without
// reading its conditions; one that reports verdicts must still ask
// staleDisruptionTarget, whose Rule and Reason differ from those of a pod
// that no rule matched. A rule of the caller's declares no fact, so any
// one turns this off.
func (rs Rules) aliveUnlessDeletingOrTerminal() bool {
	for _, r := range rs {
		switch {
		case r.when&(deleting|terminal|onGoneNode) != 0:
		case r.when == disrupted && r.withEvidence == nil && sameFunc(r.Classify, classifyStaleDisruptionTarget):
		default:
			return false
		}
	}
	return true
}

// sameFunc reports whether f is the top-level function g itself, not a
// closure or another function that a caller put in its place.
func sameFunc(f, g func(*corev1.Pod) (Verdict, bool)) bool {
	return f != nil && reflect.ValueOf(f).Pointer() == reflect.ValueOf(g).Pointer()
}

// needEvidence reports whether any rule needs evidence.
func (rs Rules) needEvidence() bool {
	for _, r := range rs {
		if r.Classify == nil && r.withEvidence != nil {
			return true
		}
	}
	return false
}

// validate rejects rules that could never be asked.
func (rs Rules) validate() error {
	for i, r := range rs {
		if r.Classify == nil && r.withEvidence == nil {
			return fmt.Errorf("rule %d (%q) has no Classify function", i, r.Name)
		}
	}
	return nil
}

// taintEvicted marks dead a pod that the taint-eviction controller is
// deleting when no kubelet will finish the graceful deletion: its node is
// gone or not Ready, or, without node evidence, its deletion deadline has
// passed (until then, the report's RetryAfter says when it will). On a
// Ready node (an admin's NoExecute maintenance taint) it has no opinion,
// and GracefulDeletion keeps the pod terminating. Its verdict is fenced
// only when the node's state fences (see NodeState.Fences).
func taintEvicted() Rule {
	return Rule{Name: RuleTaintEvicted, when: deleting | disrupted, withEvidence: func(pod *corev1.Pod, ev *evidence) (Verdict, bool) {
		if pod.DeletionTimestamp == nil || !hasDisruptionTarget(pod, reasonDeletionByTaintManager) {
			return Verdict{}, false
		}
		const why = "deletionTimestamp set and DisruptionTarget=True reason DeletionByTaintManager"
		switch state, _ := ev.node(pod.Spec.NodeName); {
		case state == NodeGone:
			return Verdict{State: Dead, Fenced: true, Reason: ev.reason(why+", node ", pod.Spec.NodeName, " is gone")}, true
		case state.Down():
			return Verdict{State: Dead, Fenced: state.Fences(), Reason: ev.reason(why+", node ", pod.Spec.NodeName, " is not Ready")}, true
		case state == NodeReady:
			return Verdict{}, false // a live kubelet finishes the graceful deletion
		}
		if left := ev.untilDeletionDeadline(pod); left > 0 {
			ev.wake.add(left) // dead when the deadline passes
			return Verdict{}, false
		}
		return Verdict{State: Dead, Reason: why + ", no node evidence, and the deletion deadline has passed"}, true
	}}
}

// terminatedByKubelet marks dead a Failed pod that the kubelet terminated
// for a disruption (node shutdown, resource pressure): its containers are
// gone already.
func terminatedByKubelet() Rule {
	return Rule{Name: RuleTerminatedByKubelet, when: terminal | disrupted, Classify: func(pod *corev1.Pod) (Verdict, bool) {
		if pod.Status.Phase != corev1.PodFailed || !hasDisruptionTarget(pod, corev1.PodReasonTerminationByKubelet) {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Fenced: true, Reason: "phase Failed and DisruptionTarget=True reason TerminationByKubelet"}, true
	}}
}

// gracefulDeletion marks terminating any pod that is being deleted. It
// comes after the rules that recognise dead pods: on its own it protects
// every graceful shutdown, such as a drain's.
func gracefulDeletion() Rule {
	return Rule{Name: RuleGracefulDeletion, when: deleting, Classify: func(pod *corev1.Pod) (Verdict, bool) {
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

// finishedPod marks a pod in phase Succeeded or Failed as Finished: not
// alive, and left alone.
func finishedPod() Rule {
	return Rule{Name: RuleFinishedPod, when: terminal, Classify: func(pod *corev1.Pod) (Verdict, bool) {
		if !isTerminalPhase(pod) {
			return Verdict{}, false
		}
		return Verdict{State: Finished, Reason: "phase " + string(pod.Status.Phase)}, true
	}}
}

// FinishedPodIsDead is the opt-in rule, named FinishedPodIsDead, that
// force-deletes pods in phase Succeeded or Failed. Put it before the default
// rules to take effect; pods with a deletionTimestamp are left to
// GracefulDeletion:
//
//	rules := append(health.Rules{health.FinishedPodIsDead()}, health.DefaultRules()...)
func FinishedPodIsDead() Rule {
	return Rule{Name: RuleFinishedPodIsDead, when: terminal, Classify: func(pod *corev1.Pod) (Verdict, bool) {
		if !isTerminalPhase(pod) || pod.DeletionTimestamp != nil {
			return Verdict{}, false
		}
		return Verdict{State: Dead, Fenced: true, Reason: "phase " + string(pod.Status.Phase) + ", containers stopped"}, true
	}}
}

// staleDisruptionTarget keeps alive a running pod that carries
// DisruptionTarget=True but no deletionTimestamp: the disruption was called
// off or has not happened, and the condition may be stale.
func staleDisruptionTarget() Rule {
	return Rule{Name: RuleStaleDisruptionTarget, when: disrupted, Classify: classifyStaleDisruptionTarget}
}

// classifyStaleDisruptionTarget is staleDisruptionTarget's Classify. It is
// a function of its own, not a closure, so that a Checker can tell that a
// rule is this one (see Rules.aliveUnlessDeletingOrTerminal): its only
// verdict is Alive.
func classifyStaleDisruptionTarget(pod *corev1.Pod) (Verdict, bool) {
	if pod.DeletionTimestamp != nil || isTerminalPhase(pod) || disruptionTarget(pod) == nil {
		return Verdict{}, false
	}
	return Verdict{State: Alive, Reason: "DisruptionTarget=True without deletionTimestamp; the condition can be stale"}, true
}
