package kube

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

var _ health.Observer = (*EventObserver)(nil)

// EventObserverOptions configure an EventObserver. The zero value records
// each event on the pod it is about.
type EventObserverOptions struct {
	// Object, when not nil, is the object every event is recorded on, for
	// example the custom resource that owns the workload. It must be an
	// object the recorder can reference (it has a kind in the recorder's
	// scheme, or is a *corev1.ObjectReference). Nil means the pod.
	Object runtime.Object
	// HeldEvents, when not nil, is the record of holds already recorded,
	// shared with other observers (see podsource.HeldEvents): share one
	// when observers are built per reconcile. Nil means a record of the
	// observer's own, with the default repeat.
	HeldEvents *podsource.HeldEvents
}

// EventObserver is a health.Observer that records a Kubernetes event for
// each force delete a Checker sends, or would send in a dry run, and for
// each dead pod it holds back, with the reasons and messages of
// podsource.EventFor (podsource.ReasonForceDeleted and the others).
// Outcomes that podsource.EventFor gives no event record nothing. A pod
// held back is recorded when its hold starts or its reason changes, and
// again every podsource.DefaultHeldRepeat while it lasts, not at every
// check (podsource.HeldEvents).
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
	held     *podsource.HeldEvents
}

// NewEventObserver returns an EventObserver that records through recorder,
// typically from record.NewBroadcaster().NewRecorder(...).
func NewEventObserver(recorder record.EventRecorder, opts EventObserverOptions) (*EventObserver, error) {
	if isNil(recorder) {
		return nil, errors.New("kube: NewEventObserver: nil EventRecorder (a typed nil too)")
	}
	held := opts.HeldEvents
	if held == nil {
		held, _ = podsource.NewHeldEvents(podsource.HeldEventsOptions{}) // the defaults are valid
	}
	return &EventObserver{recorder: recorder, object: opts.Object, held: held}, nil
}

// Observe records the event for one pod's report, when its outcome is one
// that the Reason constants name, and nothing otherwise: a Checker calls it
// for every pod of every check, far too often for events. It does not
// change r.Pod.
func (o *EventObserver) Observe(_ context.Context, r health.PodReport) {
	if !o.held.Record(r) {
		return // this hold was recorded already
	}
	if e, ok := podsource.EventFor(r); ok {
		o.recorder.Event(o.target(r.Pod), corev1.EventTypeWarning, e.Reason, e.Message)
	}
}

func (o *EventObserver) target(pod *corev1.Pod) runtime.Object {
	if o.object != nil {
		return o.object
	}
	return podsource.PodReference(pod)
}
