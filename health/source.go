package health

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// PodSource lists the current pods of one workload.
//
// The list may come from a cache that lags behind the API server: it may
// still hold pods that were deleted a moment ago, and miss pods created a
// moment ago. The Checker is built to tolerate that.
//
// The pods returned belong to the source (often to a shared informer cache):
// callers must treat them as read-only, and the Checker never mutates them.
// A source must not mutate a pod after returning it either; it replaces it
// instead, as informer caches do.
//
// ListPods must return an error that wraps ctx.Err() when ctx is already done.
// Implementations must be safe for concurrent use.
type PodSource interface {
	ListPods(ctx context.Context) ([]*corev1.Pod, error)
}

// PodSourceFunc adapts a function to a PodSource.
type PodSourceFunc func(ctx context.Context) ([]*corev1.Pod, error)

// ListPods calls f(ctx).
func (f PodSourceFunc) ListPods(ctx context.Context) ([]*corev1.Pod, error) { return f(ctx) }

// Deleter force-deletes one pod.
//
// ForceDelete must delete with a grace period of 0 and with a precondition
// on pod.UID, so that a newer pod that has taken the same name is never hit.
// It must not mutate pod. It reports how the delete ended:
//
//   - Deleted: the API server accepted the delete.
//   - AlreadyGone: the pod did not exist any more (NotFound).
//   - UIDMismatch: the name now belongs to a pod with another UID
//     (the UID precondition failed with Conflict); that pod was left alone.
//
// All three count as deleted. Any other failure is returned as an error,
// with the result undefined. ClassifyDeleteError maps an API error to this
// contract. Implementations must be safe for concurrent use.
type Deleter interface {
	ForceDelete(ctx context.Context, pod *corev1.Pod) (DeleteResult, error)
}

// DeleterFunc adapts a function to a Deleter.
type DeleterFunc func(ctx context.Context, pod *corev1.Pod) (DeleteResult, error)

// ForceDelete calls f(ctx, pod).
func (f DeleterFunc) ForceDelete(ctx context.Context, pod *corev1.Pod) (DeleteResult, error) {
	return f(ctx, pod)
}

// DeleteResult says how a force delete that did not fail ended.
type DeleteResult int

const (
	// Deleted means the API server accepted the delete.
	Deleted DeleteResult = iota + 1
	// AlreadyGone means the pod no longer existed (NotFound).
	AlreadyGone
	// UIDMismatch means the name belongs to a newer pod now: the UID
	// precondition failed (Conflict) and that pod was left alone.
	UIDMismatch
)

func (r DeleteResult) String() string {
	switch r {
	case Deleted:
		return "Deleted"
	case AlreadyGone:
		return "AlreadyGone"
	case UIDMismatch:
		return "UIDMismatch"
	default:
		return "DeleteResult(?)"
	}
}

// ClassifyDeleteError maps the error of a DELETE sent with a UID
// precondition to a Deleter's result: nil is Deleted, NotFound is
// AlreadyGone, Conflict is UIDMismatch (a DELETE whose only precondition is
// the UID can conflict for no other reason). Any other error is returned
// unchanged, so that apierrors.IsXxx and errors.Is still reach it.
func ClassifyDeleteError(err error) (DeleteResult, error) {
	switch {
	case err == nil:
		return Deleted, nil
	case apierrors.IsNotFound(err):
		return AlreadyGone, nil
	case apierrors.IsConflict(err) && !isContextError(err):
		return UIDMismatch, nil
	default:
		return 0, err
	}
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
