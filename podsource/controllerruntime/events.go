package controllerruntime

import (
	"context"
	"errors"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

var _ health.Observer = (*EventObserver)(nil)

// maxNoteLength is the longest note the API server accepts in an
// events.k8s.io/v1 Event; longer messages are cut and end in truncated.
const (
	maxNoteLength = 1024
	truncated     = "..."
)

// EventObserverOptions configure an EventObserver. The zero value records
// each event regarding the pod it is about.
type EventObserverOptions struct {
	// Object, when not nil, is the object every event regards, for
	// example the custom resource that owns the workload; the pod is then
	// the event's related object. It must be an object the recorder can
	// reference (its kind is in the recorder's scheme, or it is a
	// *corev1.ObjectReference). Nil means the pod.
	Object runtime.Object
	// HeldEvents, when not nil, is the record of holds already recorded,
	// shared with other observers (see podsource.HeldEvents): share one
	// when observers are built per reconcile or per report. Nil means a
	// record of the observer's own, with the default repeat.
	HeldEvents *podsource.HeldEvents
}

// EventObserver is a health.Observer that records a Kubernetes event
// through an events.k8s.io/v1 recorder, the one that mgr.GetEventRecorder
// returns from controller-runtime v0.23 on (before v0.23, managers have only
// the core/v1 recorder of mgr.GetEventRecorderFor: use podsource/kube's
// EventObserver over it). It records what podsource/kube's EventObserver
// records, with the same reasons: each force delete that a Checker sends
// (or would send, in a dry run), each one that failed, and each hold of a
// dead pod when it starts or its reason changes, and again every
// podsource.DefaultHeldRepeat while it lasts (podsource.HeldEvents), not at
// every check. Other outcomes record nothing.
//
// The recorder is given a *corev1.ObjectReference built from the pod,
// never the pod itself, so a pod from a cache is not touched.
//
// An EventObserver is safe for concurrent use when its recorder is, as
// controller-runtime's recorders are.
type EventObserver struct {
	recorder events.EventRecorder
	object   runtime.Object
	held     *podsource.HeldEvents
}

// NewEventObserver returns an EventObserver that records through recorder,
// typically mgr.GetEventRecorder("my-operator").
func NewEventObserver(recorder events.EventRecorder, opts EventObserverOptions) (*EventObserver, error) {
	if isNil(recorder) {
		return nil, errors.New("controllerruntime: NewEventObserver: nil events.EventRecorder")
	}
	held := opts.HeldEvents
	if held == nil {
		held, _ = podsource.NewHeldEvents(podsource.HeldEventsOptions{}) // the defaults are valid
	}
	return &EventObserver{recorder: recorder, object: opts.Object, held: held}, nil
}

// Observe records the event for one pod's report, when its outcome is one
// that calls for it, and nothing otherwise: a Checker calls it for every
// pod of every check. It does not change r.Pod.
func (o *EventObserver) Observe(_ context.Context, r health.PodReport) {
	if !o.held.Record(r) {
		return // this hold was recorded already
	}
	e, ok := podsource.EventFor(r)
	if !ok {
		return
	}
	msg := cutNote(e.Message)
	regarding, related := runtime.Object(podsource.PodReference(r.Pod)), runtime.Object(nil)
	if o.object != nil {
		regarding, related = o.object, regarding
	}
	// The note is a format: the message goes in as an argument, never as
	// the format itself.
	o.recorder.Eventf(regarding, related, corev1.EventTypeWarning, e.Reason, e.Action, "%s", msg)
}

// cutNote returns msg whole when it fits in an event's note, and otherwise
// its longest prefix that ends on a UTF-8 boundary and leaves room for
// truncated: a note cut inside a character is not valid UTF-8, and the API
// server refuses or mangles it. The result is at most maxNoteLength bytes.
func cutNote(msg string) string {
	if len(msg) <= maxNoteLength {
		return msg
	}
	cut := maxNoteLength - len(truncated)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + truncated
}
