package health

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// validateUnreachable checks Options.ReplaceUnreachable and
// Options.UnreachableFor.
func validateUnreachable(opts Options) error {
	switch {
	case opts.UnreachableFor < 0:
		return errors.New("negative Options.UnreachableFor " + opts.UnreachableFor.String())
	case opts.UnreachableFor > 0 && !opts.ReplaceUnreachable:
		return errors.New("Options.UnreachableFor is set but Options.ReplaceUnreachable is not: it would have no effect")
	case opts.ReplaceUnreachable && opts.Nodes == nil:
		return errors.New("Options.ReplaceUnreachable needs node evidence (Options.Nodes): without it no pod could ever be Unreachable")
	}
	return nil
}

// unreachable returns the verdict of pod, which the rules call Alive (v),
// under Options.ReplaceUnreachable: Unreachable when the pod needs no
// fencing and is bound to a node that is NodeUnreachable or
// NodeOutOfService and not InMaintenance, and has been so for
// Options.UnreachableFor; else v. A
// pod with a deletionTimestamp or in a terminal phase keeps v, whatever a
// rule of the caller's said: it is not serving anyway, and its own verdict
// says why. Fencing is decided before the wait, so that a pod that can
// never become Unreachable sets no RetryAfter; when only the wait keeps
// the pod Alive, the report's RetryAfter says when it ends.
func (k *check) unreachable(pod *corev1.Pod, v Verdict) Verdict {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || isTerminalPhase(pod) {
		return v
	}
	ev := k.getEvidence()
	state, node := ev.node(pod.Spec.NodeName)
	if state != NodeUnreachable && state != NodeOutOfService {
		return v // no evidence, a node that serves, or NodeGone's business
	}
	if _, stopping := InMaintenance(node); stopping {
		return v // its kubelet is stopping the pod: a planned stop, not a failure
	}
	if why, _ := k.policy.needsFencing(k.ctx, pod); why != "" {
		return v // a second copy would be a second writer
	}
	ready := readyCondition(node)
	if k.unreachableFor > 0 {
		if wait := ev.unreachableWait(node.Name, ready.LastTransitionTime.Time, k.unreachableFor); wait > 0 {
			ev.retryIn(wait)
			return v
		}
	}
	return Verdict{State: Unreachable, Rule: RuleNodeUnreachable, Reason: ev.reason("node ", node.Name, unreachableSuffix(ready.Status, state, lifecycleTaint(node)))}
}

// unreachableSuffix is the end of an Unreachable verdict's reason: a
// constant, so that the pods of one node share one reason without a
// string built per pod.
func unreachableSuffix(ready corev1.ConditionStatus, state NodeState, taint string) string {
	const end = "; replace the pod elsewhere, it is not force-deleted"
	const byLifecycle = ":NoExecute by the node-lifecycle controller" + end
	switch {
	case state == NodeOutOfService && ready == corev1.ConditionFalse:
		return " is not Ready (Ready=False) and tainted " + corev1.TaintNodeOutOfService + end
	case state == NodeOutOfService:
		return " is not Ready (Ready=Unknown) and tainted " + corev1.TaintNodeOutOfService + end
	case ready == corev1.ConditionFalse && taint == corev1.TaintNodeNotReady:
		return " is not Ready (Ready=False) and tainted " + corev1.TaintNodeNotReady + byLifecycle
	case ready == corev1.ConditionFalse:
		return " is not Ready (Ready=False) and tainted " + corev1.TaintNodeUnreachable + byLifecycle
	case taint == corev1.TaintNodeNotReady:
		return " is not Ready (Ready=Unknown) and tainted " + corev1.TaintNodeNotReady + byLifecycle
	default:
		return " is not Ready (Ready=Unknown) and tainted " + corev1.TaintNodeUnreachable + byLifecycle
	}
}

// unreachable reports whether the named node is NodeUnreachable or
// NodeOutOfService, whatever for how long. A check asks it about every
// bound pod under Options.ReplaceUnreachable, so after the first pod of a
// node it costs one map lookup.
func (e *evidence) unreachable(name string) bool {
	state, _ := e.node(name)
	return state == NodeUnreachable || state == NodeOutOfService
}

// unreachableKey is the key of a node's first unreachable sighting in the
// Memory's first-seen record, apart from the pods' UIDs.
func unreachableKey(node string) string { return "node\x00" + node }

// unreachableWait returns how much longer the named node, unreachable
// since its Ready condition's lastTransitionTime since, must stay so
// before its pods are Unreachable: wait is measured both from since and
// from the first time a check sharing this Memory saw the node unreachable,
// on the Checker's clock. A clock far behind the API server's only
// lengthens the wait; one far ahead, or a lastTransitionTime that is
// missing, cannot shorten it below wait on the Checker's own clock. Each
// failure waits afresh: a node that comes back has a new
// lastTransitionTime, and a check that sees it Ready forgets its first
// sighting (see evidence.node), so a flapping node without transition
// times waits afresh too. Zero or less means the wait is over.
func (e *evidence) unreachableWait(name string, since time.Time, wait time.Duration) time.Duration {
	first := e.sightings.see(unreachableKey(name), e.time())
	// Elapsed times below zero (a clock behind) count as zero, so that
	// the subtraction cannot overflow.
	return wait - max(min(e.time().Sub(since), e.time().Sub(first)), 0)
}
