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

// replacement tells early replacement (Options.ReplaceUnreachable) about
// the named node. ok: the node is NodeUnreachable or NodeOutOfService and
// not InMaintenance (its kubelet stopping its pods is a planned stop, not
// a failure), so its running pods may be Unreachable. With start, it also
// returns how much longer they must wait (Options.UnreachableFor, see
// unreachableWait), which records the node's first unreachable sighting,
// and the reason their verdict gives once the wait is over. The screen
// asks without start, so that only a pod that early replacement may
// replace starts the wait (see check.replace). After the node's first
// lookup in a check it costs a map lookup and a pass over its conditions.
func (e *evidence) replacement(name string, start bool) (ok bool, wait time.Duration, reason string) {
	state, node := e.node(name)
	if state != NodeUnreachable && state != NodeOutOfService {
		return false, 0, "" // no evidence, a node that serves, or NodeGone's business
	}
	if _, stopping := InMaintenance(node); stopping {
		return false, 0, ""
	}
	if !start {
		return true, 0, ""
	}
	ready := readyCondition(node)
	if e.unreachableFor > 0 {
		if wait = e.unreachableWait(node.Name, ready.LastTransitionTime.Time, e.unreachableFor); wait > 0 {
			return true, wait, ""
		}
	}
	return true, 0, e.reason("node ", node.Name, unreachableSuffix(ready.Status, state, lifecycleTaint(node)))
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
