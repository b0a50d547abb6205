package kube

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/podhealth/podhealth/health"
)

var _ health.Observer = (*EventObserver)(nil)

// Reasons of the events an EventObserver records.
const (
	// ReasonForceDeleted is recorded (type Warning) when a dead pod was
	// force-deleted, or found already gone (outcomes ForceDeleted,
	// WasAlreadyGone and NameReused; the message says which).
	ReasonForceDeleted = "ForceDeletedDeadPod"
	// ReasonForceDeleteFailed is recorded (type Warning) when the force
	// delete of a dead pod failed (outcome DeleteFailed).
	ReasonForceDeleteFailed = "ForceDeleteDeadPodFailed"
	// ReasonWouldForceDelete is recorded (type Warning) in a dry run, for a
	// dead pod that a real check would force-delete (outcome
	// WouldForceDelete).
	ReasonWouldForceDelete = "WouldForceDeleteDeadPod"
	// ReasonHeldBack is recorded (type Warning) when a dead pod was not
	// force-deleted because the Checker held it back (outcome HeldBack;
	// the message says why). It is recorded at each check that holds the
	// pod back; client-go's recorders fold the repeats into one event with
	// a count.
	ReasonHeldBack = "DeadPodHeldBack"
)

// EventObserverOptions configure an EventObserver. The zero value records
// each event on the pod it is about.
type EventObserverOptions struct {
	// Object, when not nil, is the object every event is recorded on, for
	// example the custom resource that owns the workload. It must be an
	// object the recorder can reference (it has a kind in the recorder's
	// scheme, or is a *corev1.ObjectReference). Nil means the pod.
	Object runtime.Object
}

// EventObserver is a health.Observer that records a Kubernetes event for
// each force delete a Checker sends, or would send in a dry run, and for
// each dead pod it holds back. Outcomes other than those named by the
// Reason constants record nothing.
//
// When the event is recorded on the pod, the recorder is given a
// *corev1.ObjectReference built from the pod, never the pod itself, so a
// pod from an informer's cache is not touched.
//
// An EventObserver is safe for concurrent use when its recorder is, as
// the recorders of client-go's record package are.
type EventObserver struct {
	recorder record.EventRecorder
	object   runtime.Object
}

// NewEventObserver returns an EventObserver that records through recorder,
// typically from record.NewBroadcaster().NewRecorder(...).
func NewEventObserver(recorder record.EventRecorder, opts EventObserverOptions) (*EventObserver, error) {
	if recorder == nil {
		return nil, errors.New("kube: NewEventObserver: nil EventRecorder")
	}
	return &EventObserver{recorder: recorder, object: opts.Object}, nil
}

// Observe records the event for one pod's report, when its outcome is one
// that the Reason constants name, and nothing otherwise: a Checker calls it
// for every pod of every check, far too often for events. It does not
// change r.Pod.
func (o *EventObserver) Observe(_ context.Context, r health.PodReport) {
	var reason, what string
	switch r.Outcome {
	case health.ForceDeleted, health.WasAlreadyGone, health.NameReused:
		reason, what = ReasonForceDeleted, "Force-deleted dead pod"
	case health.DeleteFailed:
		reason, what = ReasonForceDeleteFailed, "Failed to force-delete dead pod"
	case health.WouldForceDelete:
		reason, what = ReasonWouldForceDelete, "Would force-delete dead pod (dry run)"
	case health.HeldBack:
		o.recorder.Event(o.target(r.Pod), corev1.EventTypeWarning, ReasonHeldBack,
			fmt.Sprintf("Dead pod %s/%s (uid %s) on node %q not force-deleted: %s; rule %s: %s",
				r.Pod.Namespace, r.Pod.Name, r.Pod.UID, r.Pod.Spec.NodeName, r.HeldBack, r.Verdict.Rule, r.Verdict.Reason))
		return
	default:
		return
	}
	msg := fmt.Sprintf("%s %s/%s (uid %s) on node %q: rule %s: %s; outcome %s",
		what, r.Pod.Namespace, r.Pod.Name, r.Pod.UID, r.Pod.Spec.NodeName, r.Verdict.Rule, r.Verdict.Reason, r.Outcome)
	if r.Err != nil {
		msg += ": " + r.Err.Error()
	}
	o.recorder.Event(o.target(r.Pod), corev1.EventTypeWarning, reason, msg)
}

func (o *EventObserver) target(pod *corev1.Pod) runtime.Object {
	if o.object != nil {
		return o.object
	}
	return PodReference(pod)
}

// PodReference returns a reference to pod, for recording events on it
// without handing the pod itself to a recorder.
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
