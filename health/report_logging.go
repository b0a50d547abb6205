package health

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// logResult logs what became of one dead pod: the fencers that failed
// before another proved it fenced, then its hold, its dry run or the
// answer to its DELETE. A pod force-deleted earlier gets no line, and a
// result shared from another check's delete is that check's to log.
func (k *check) logResult(pod *corev1.Pod, v Verdict, d decision, res result) {
	if d.fencersFailed != nil {
		k.log.V(1).Info("fencers failed before another proved the pod fenced", append(podKeys(pod, v), "errors", d.fencersFailed.Error())...)
	}
	if res.shared {
		return
	}
	switch res.outcome {
	case HeldBack:
		k.log.V(1).Info("holding back force delete", append(podKeys(pod, v), "heldBack", res.heldBack.Reason.String(), "detail", res.heldBack.Detail)...)
	case WouldForceDelete:
		k.log.Info("would force-delete pod", proofKeys(podKeys(pod, v), res.fencedBy)...)
	case DeleteFailed:
		k.log.Error(res.err, "force delete failed", proofKeys(podKeys(pod, v), res.fencedBy)...)
	case ForceDeleted, WasAlreadyGone, NameReused:
		k.log.Info("force-deleted pod", proofKeys(append(podKeys(pod, v), "outcome", res.outcome.String()), res.fencedBy)...)
	}
}

// objectRef names an object in logs as "namespace/name" (or "name" for a
// cluster-scoped one) in every sink: a text sink that prints a plain
// struct with %v (logrusr, say) would print "{dead-pod testns}", so
// MarshalLog, which sinks honour before anything else, gives the string.
type objectRef struct {
	Name, Namespace string
}

func (r objectRef) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// MarshalLog is the String form, for sinks that read MarshalLog and not
// String.
func (r objectRef) MarshalLog() any { return r.String() }

func podKeys(pod *corev1.Pod, v Verdict) []any {
	return []any{
		"pod", objectRef{Name: pod.Name, Namespace: pod.Namespace},
		"uid", string(pod.UID),
		"node", objectRef{Name: pod.Spec.NodeName},
		"rule", v.Rule, "reason", v.Reason,
	}
}

// proofKeys adds to a log line's keys the fencer's proof that let the pod
// go, when one did.
func proofKeys(keys []any, proof *Fence) []any {
	if proof == nil {
		return keys
	}
	keys = append(keys, "fencer", proof.Fencer, "fencedBy", proof.By, "proves", proof.Proves.String())
	if !proof.Since.IsZero() {
		keys = append(keys, "fencedSince", proof.Since.UTC().Format(time.RFC3339))
	}
	return append(keys, "fenceDetail", proof.Detail)
}
