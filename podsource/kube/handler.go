package kube

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podhealth/podhealth/health"
)

// DeadPodHandler returns an informer event handler that calls enqueue with
// a pod as soon as rules call it Dead:
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
// and objects that are not pods are ignored, never a panic.
//
// Empty rules mean health.DefaultRules(), as for a Checker. A nil enqueue
// makes a handler that does nothing. The pod given to enqueue is the
// cache's own object and must not be changed.
//
// The handler is safe for concurrent use when enqueue is.
func DeadPodHandler(rules health.Rules, enqueue func(pod *corev1.Pod)) cache.ResourceEventHandler {
	if len(rules) == 0 {
		rules = health.DefaultRules()
	}
	return &deadPodHandler{rules: rules, enqueue: enqueue}
}

type deadPodHandler struct {
	rules   health.Rules
	enqueue func(pod *corev1.Pod)
}

// dead returns obj as a pod, and whether it is a dead one.
func (h *deadPodHandler) dead(obj any) (*corev1.Pod, bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod == nil {
		return nil, false
	}
	return pod, h.rules.Classify(pod).State == health.Dead
}

func (h *deadPodHandler) OnAdd(obj any, _ bool) {
	if pod, dead := h.dead(obj); dead && h.enqueue != nil {
		h.enqueue(pod)
	}
}

func (h *deadPodHandler) OnUpdate(oldObj, newObj any) {
	pod, nowDead := h.dead(newObj)
	if !nowDead || h.enqueue == nil {
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
