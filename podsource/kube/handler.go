package kube

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podhealth/podhealth/health"
)

// handlerTimeout bounds the node lookups of one informer event, so that a
// slow API server (asked only to confirm that a node is gone) cannot stall
// the informer.
const handlerTimeout = 5 * time.Second

// DeadPodHandler returns an informer event handler that calls enqueue with
// a pod as soon as checker would call it Dead, with the checker's own rules
// and node evidence (health.Checker.Classify), so that the handler's idea
// of dead is never narrower than the Checker's:
//
//   - on an add of a pod that is already dead (the informer's initial list,
//     or a pod that the cache first sees dead);
//   - on an update from a pod that was not dead to one that is, such as the
//     update that adds DisruptionTarget to a pod the taint-eviction
//     controller is deleting.
//
// Updates between two dead states (resyncs included) and deletes call
// nothing: the pod's death was reported already, and a deleted pod is no
// longer to be force-deleted. Tombstones (cache.DeletedFinalStateUnknown)
// and objects that are not pods are ignored, never a panic. Each event's
// node lookups are bounded by a few seconds.
//
// A nil checker or enqueue is refused with an error. The pod given to
// enqueue is the cache's own object and must not be changed. The handler is
// safe for concurrent use when enqueue is.
func DeadPodHandler(checker *health.Checker, enqueue func(pod *corev1.Pod)) (cache.ResourceEventHandler, error) {
	if checker == nil {
		return nil, errors.New("kube: DeadPodHandler: nil Checker")
	}
	if enqueue == nil {
		return nil, errors.New("kube: DeadPodHandler: nil enqueue function")
	}
	return &deadPodHandler{checker: checker, enqueue: enqueue}, nil
}

type deadPodHandler struct {
	checker *health.Checker
	enqueue func(pod *corev1.Pod)
}

// dead returns obj as a pod, and whether it is a dead one.
func (h *deadPodHandler) dead(obj any) (*corev1.Pod, bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod == nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), handlerTimeout)
	defer cancel()
	return pod, h.checker.Classify(ctx, pod).State == health.Dead
}

func (h *deadPodHandler) OnAdd(obj any, _ bool) {
	if pod, dead := h.dead(obj); dead {
		h.enqueue(pod)
	}
}

func (h *deadPodHandler) OnUpdate(oldObj, newObj any) {
	pod, nowDead := h.dead(newObj)
	if !nowDead {
		return
	}
	if _, wasDead := h.dead(oldObj); !wasDead {
		h.enqueue(pod)
	}
}

func (h *deadPodHandler) OnDelete(any) {}

// PodFromObject returns the pod an informer handed to an event handler: obj
// itself when it is a *corev1.Pod, or the last known state held by a
// cache.DeletedFinalStateUnknown tombstone. It returns false for anything
// else, including a tombstone of another kind of object.
func PodFromObject(obj any) (*corev1.Pod, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if tomb, ok := obj.(*cache.DeletedFinalStateUnknown); ok && tomb != nil {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod == nil {
		return nil, false
	}
	return pod, true
}
