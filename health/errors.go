package health

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ListError is returned when the PodSource fails, or hands out a nil pod
// (decision table row D6). It unwraps to the source's error.
type ListError struct {
	Err error
}

func (e *ListError) Error() string { return "podhealth: listing pods: " + e.Err.Error() }
func (e *ListError) Unwrap() error { return e.Err }

// DeleteError is the error of one dead pod whose force delete failed or was
// refused (row D5). It unwraps to the Deleter's own error, so errors.Is,
// errors.As and apierrors.IsXxx reach it.
type DeleteError struct {
	Pod types.NamespacedName
	UID types.UID
	Err error
}

func (e *DeleteError) Error() string {
	return fmt.Sprintf("podhealth: force-deleting pod %s (uid %q): %v", e.Pod, e.UID, e.Err)
}

func (e *DeleteError) Unwrap() error { return e.Err }

// ErrClaimUnavailable is wrapped, with the ClaimGetter's own error, by the
// error a check returns when a dead pod's claim could not be read (a 429, a
// timeout; not NotFound): the pod is held back for fencing (it is never
// force-deleted on a reading that failed), its report's Err carries the
// error, and the check fails, so that its caller retries soon rather than
// waiting for an event that a dead node never sends.
var ErrClaimUnavailable = errors.New("podhealth: a claim's access modes could not be read")

// ErrUnidentifiedPod is what the Deleters of this repository return for a
// pod without a name or a UID, sending nothing: such a delete could hit
// another pod (a newer one of the same name). A Checker never asks: it
// holds such a dead pod back (HeldUnidentified), and the check fails with
// an error wrapping ErrUnidentifiedPod, also in the pod's PodReport.Err,
// because no API server serves such a pod: the source is wrong.
var ErrUnidentifiedPod = errors.New("pod has no name or no UID; refusing to force-delete it without a UID precondition")

// keyOf names pod in the errors about it.
func keyOf(pod *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}

// nilPod is the error of a list with a nil pod at index (row D6): a
// broken source.
func nilPod(index int) error {
	return &ListError{Err: fmt.Errorf("the source returned a nil pod at index %d", index)}
}

// stopped wraps the error of an ended context (row D7).
func stopped(err error) error {
	return fmt.Errorf("podhealth: check stopped: %w", err)
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
