package podsource

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
)

// Reasons of the Warning events that the bindings' EventObservers record
// (podsource/kube on core/v1 events, podsource/controllerruntime on
// events.k8s.io), one per outcome that changed or could have changed a pod.
const (
	// ReasonForceDeleted: ForceDeleted, WasAlreadyGone or NameReused.
	ReasonForceDeleted = "ForceDeletedDeadPod"
	// ReasonForceDeleteFailed: DeleteFailed.
	ReasonForceDeleteFailed = "ForceDeleteDeadPodFailed"
	// ReasonWouldForceDelete: WouldForceDelete (dry run).
	ReasonWouldForceDelete = "WouldForceDeleteDeadPod"
	// ReasonHeldBack: HeldBack.
	ReasonHeldBack = "DeadPodHeldBack"
)

// Actions of those events, for the events.k8s.io API's action field.
const (
	ActionForceDelete = "ForceDelete"
	ActionHoldBack    = "HoldBack"
)

// Event is the event that a binding records about one pod's report. Its
// type is always Warning: a dead pod is news.
type Event struct {
	Reason, Action, Message string
}

// EventFor returns the event for r, and false for an outcome that gets
// none (NoAction, DeletedEarlier, BlockedByFinalizers, NotAttempted): each
// force delete, or its refusal, is recorded once, not on every check that
// meets the pod again. A force delete that a fencer's proof let go names
// the proof (health.PodReport.FencedBy): the fencer, what it proves, by
// whom, since when and on what evidence.
func EventFor(r health.PodReport) (Event, bool) {
	if r.Pod == nil {
		return Event{}, false
	}
	var e Event
	switch r.Outcome {
	case health.ForceDeleted, health.WasAlreadyGone, health.NameReused:
		e = Event{Reason: ReasonForceDeleted, Action: ActionForceDelete, Message: "Force-deleted dead pod"}
	case health.DeleteFailed:
		e = Event{Reason: ReasonForceDeleteFailed, Action: ActionForceDelete, Message: "Failed to force-delete dead pod"}
	case health.WouldForceDelete:
		e = Event{Reason: ReasonWouldForceDelete, Action: ActionForceDelete, Message: "Would force-delete dead pod (dry run)"}
	case health.HeldBack:
		e = Event{Reason: ReasonHeldBack, Action: ActionHoldBack}
		e.Message = fmt.Sprintf("Dead pod %s/%s (uid %s) on node %q not force-deleted: %s; rule %s: %s",
			r.Pod.Namespace, r.Pod.Name, r.Pod.UID, r.Pod.Spec.NodeName, r.HeldBack, r.Verdict.Rule, r.Verdict.Reason)
		return e, true
	default:
		return Event{}, false
	}
	e.Message = fmt.Sprintf("%s %s/%s (uid %s) on node %q: rule %s: %s", e.Message, r.Pod.Namespace, r.Pod.Name, r.Pod.UID, r.Pod.Spec.NodeName, r.Verdict.Rule, r.Verdict.Reason)
	if r.FencedBy != nil {
		// The proof is why the pod could go: the verdict alone (a node
		// that is not Ready) would have held it.
		e.Message += "; fenced: " + r.FencedBy.String()
	}
	e.Message += "; outcome " + r.Outcome.String()
	if r.Err != nil {
		e.Message += ": " + r.Err.Error()
	}
	return e, true
}

// PodReference returns a reference to pod that an event recorder accepts
// without a scheme lookup, as the regarding object of an event.
func PodReference(pod *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		Kind:            "Pod",
		APIVersion:      "v1",
		Namespace:       pod.Namespace,
		Name:            pod.Name,
		UID:             pod.UID,
		ResourceVersion: pod.ResourceVersion,
	}
}
