package controllerruntime

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/podhealth/podhealth/health"
)

// classifyTimeout bounds the node lookups of one event, so that a slow API
// server (asked only to confirm that a node is gone) cannot stall the
// controller's event handling.
const classifyTimeout = 5 * time.Second

// DeadPodPredicate returns a predicate that lets a pod event through when
// the pod is dead by checker's own rules and node evidence
// (health.Checker.Classify), so that its idea of dead is never narrower
// than the Checker's:
//
//   - a create event of a pod that is already dead (the cache's initial
//     list, or a pod the cache first sees dead);
//   - an update from a pod that was not dead to one that is, such as the
//     update that adds DisruptionTarget to a pod the taint-eviction
//     controller is deleting.
//
// Updates between two dead states, deletes and generic events are
// filtered out, as are objects that are not pods. Use it on the watch of
// the workload's pods, so that the owner is reconciled as soon as one of
// its pods dies, whatever other predicates the watch has:
//
//	Owns(&corev1.Pod{}, builder.WithPredicates(dead))
//
// Each event's node lookups are bounded by a few seconds. A nil checker is
// refused with an error. The predicate is safe for concurrent use.
func DeadPodPredicate(checker *health.Checker) (predicate.Predicate, error) {
	if checker == nil {
		return nil, errors.New("controllerruntime: DeadPodPredicate: nil Checker")
	}
	dead := func(obj client.Object) bool {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod == nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), classifyTimeout)
		defer cancel()
		return checker.Classify(ctx, pod).State == health.Dead
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return dead(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return dead(e.ObjectNew) && !dead(e.ObjectOld)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}, nil
}
