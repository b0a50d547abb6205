package health

import (
	"context"

	corev1 "k8s.io/api/core/v1"
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
// Implementations must be safe for concurrent use. Package podsource states
// the full contract and checks an implementation against it.
type PodSource interface {
	ListPods(ctx context.Context) ([]*corev1.Pod, error)
}

// PodSourceFunc adapts a function to a PodSource.
type PodSourceFunc func(ctx context.Context) ([]*corev1.Pod, error)

// ListPods calls f(ctx).
func (f PodSourceFunc) ListPods(ctx context.Context) ([]*corev1.Pod, error) { return f(ctx) }

// Deleter force-deletes one pod.
//
// ForceDelete must send one delete with a grace period of 0 and a
// precondition on pod.UID, so that a newer pod that has taken the same name
// is never hit, and return the API server's answer as the error, wrapped
// with %w if at all, so that apierrors.IsXxx still reaches it. The Checker
// reads that answer the way controller-runtime users do:
//
//   - nil: the pod was deleted (outcome ForceDeleted);
//   - NotFound: the pod no longer existed (WasAlreadyGone);
//   - Conflict: the UID precondition failed because a newer pod holds the
//     name; that pod was left alone (NameReused);
//   - anything else: the delete failed (DeleteFailed), and the next check
//     tries again.
//
// ForceDelete must not mutate pod, must return an error wrapping ctx.Err()
// without sending anything when ctx is already done, and must be safe for
// concurrent use. podsource.TestDeleter checks an implementation against
// this contract.
type Deleter interface {
	ForceDelete(ctx context.Context, pod *corev1.Pod) error
}
