package health

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ruleNodeUnreachable names the verdict that Options.ReplaceUnreachable
// gives a pod on an unreachable node, in Verdict.Rule.
const ruleNodeUnreachable = "NodeUnreachable"

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
// under Options.ReplaceUnreachable: Unreachable when the pod is bound to a
// node that the node-lifecycle controller marked unreachable (see
// nodeUnreachable), the node has been so for Options.UnreachableFor, and
// the pod needs no fencing; else v. A pod with a deletionTimestamp or in a
// terminal phase keeps v, whatever a rule of the caller's said: it is not
// serving anyway, and its own verdict says why. When only the wait keeps
// the pod Alive, the report's RetryAfter says when it ends.
func (k *check) unreachable(pod *corev1.Pod, v Verdict) Verdict {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || isTerminalPhase(pod) {
		return v
	}
	ev := k.getEvidence()
	node, gone, err := ev.node(pod.Spec.NodeName)
	if err != nil || gone || node == nil {
		return v // no evidence, or NodeGone's business
	}
	ready, taint := nodeUnreachable(node)
	if ready == nil {
		return v
	}
	if k.unreachableFor > 0 {
		if wait := ev.unreachableWait(node.Name, ready.LastTransitionTime.Time, k.unreachableFor); wait > 0 {
			if k.report != nil && (k.report.RetryAfter == 0 || wait < k.report.RetryAfter) {
				k.report.RetryAfter = wait
			}
			return v
		}
	}
	if k.policy.needsFencing(k.ctx, pod) != "" {
		return v // a second copy would be a second writer
	}
	return Verdict{State: Unreachable, Rule: ruleNodeUnreachable, Reason: ev.reason("node ", node.Name, unreachableSuffix(ready.Status, taint))}
}

// unreachableSuffix is the end of an Unreachable verdict's reason: a
// constant, so that the pods of one node share one reason without a
// string built per pod.
func unreachableSuffix(ready corev1.ConditionStatus, taint string) string {
	const end = ":NoExecute by the node-lifecycle controller; replace the pod elsewhere, it is not force-deleted"
	switch {
	case ready == corev1.ConditionFalse && taint == corev1.TaintNodeNotReady:
		return " is not Ready (Ready=False) and tainted " + corev1.TaintNodeNotReady + end
	case ready == corev1.ConditionFalse:
		return " is not Ready (Ready=False) and tainted " + corev1.TaintNodeUnreachable + end
	case taint == corev1.TaintNodeNotReady:
		return " is not Ready (Ready=Unknown) and tainted " + corev1.TaintNodeNotReady + end
	default:
		return " is not Ready (Ready=Unknown) and tainted " + corev1.TaintNodeUnreachable + end
	}
}

// nodeUnreachable returns the node's Ready condition and the key of its
// taint when the node-lifecycle controller has marked it unreachable: Ready
// is Unknown or False, and the node carries the
// node.kubernetes.io/unreachable or node.kubernetes.io/not-ready taint with
// effect NoExecute, the one the taint-eviction controller acts on. A node
// whose Ready condition is True, or missing, is never unreachable, whatever
// its taints: a taint left over from an earlier failure is stale. It
// returns nil otherwise.
func nodeUnreachable(node *corev1.Node) (ready *corev1.NodeCondition, taint string) {
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type == corev1.NodeReady {
			ready = c
			break
		}
	}
	if ready == nil || (ready.Status != corev1.ConditionUnknown && ready.Status != corev1.ConditionFalse) {
		return nil, ""
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectNoExecute && (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady) {
			return ready, t.Key
		}
	}
	return nil, ""
}

// unreachable reports whether the named node is marked unreachable (see
// nodeUnreachable), whatever for how long. A check asks it about every
// bound pod under Options.ReplaceUnreachable, so after the first pod of a
// node it costs one map lookup and a look at the node's conditions and
// taints.
func (e *evidence) unreachable(name string) bool {
	node, gone, err := e.node(name)
	if err != nil || gone || node == nil {
		return false
	}
	ready, _ := nodeUnreachable(node)
	return ready != nil
}

// unreachableWait returns how much longer the named node, unreachable
// since its Ready condition's lastTransitionTime since, must stay so
// before its pods are Unreachable: for is measured both from since and
// from the first time a check sharing this Memory saw the node unreachable
// with that same lastTransitionTime, on the Checker's clock. A clock far
// behind the API server's only lengthens the wait; one far ahead, or a
// lastTransitionTime that is missing, cannot shorten it below for on the
// Checker's own clock. A node that comes back and fails again has a new
// lastTransitionTime, so each failure waits afresh. Zero or less means the
// wait is over.
func (e *evidence) unreachableWait(name string, since time.Time, wait time.Duration) time.Duration {
	key := "node\x00" + name + "\x00" + since.UTC().Format(time.RFC3339Nano)
	first := e.sightings.see(key, e.time())
	// Elapsed times below zero (a clock behind) count as zero, so that
	// the subtraction cannot overflow.
	return wait - max(min(e.time().Sub(since), e.time().Sub(first)), 0)
}
