package health

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// ListError is returned when the PodSource fails (decision table row D6).
// It unwraps to the source's error.
type ListError struct {
	Err error
}

func (e *ListError) Error() string { return "podhealth: listing pods: " + e.Err.Error() }
func (e *ListError) Unwrap() error { return e.Err }

// InvalidPodError is returned when the PodSource hands out a pod that cannot
// be judged safely: a nil pod, or a pod without a name. Nothing is deleted
// in a check that meets one.
type InvalidPodError struct {
	Index  int // position in the list
	Reason string
}

func (e *InvalidPodError) Error() string {
	return fmt.Sprintf("podhealth: invalid pod at index %d: %s", e.Index, e.Reason)
}

// DeleteError is the error of one dead pod whose force delete failed (row
// D5). It unwraps to the Deleter's own error, so errors.Is, errors.As and
// apierrors.IsXxx reach it.
type DeleteError struct {
	Namespace string
	Name      string
	UID       types.UID
	Err       error
}

func (e *DeleteError) Error() string {
	return fmt.Sprintf("podhealth: force-deleting pod %s/%s (uid %s): %v", e.Namespace, e.Name, e.UID, e.Err)
}

func (e *DeleteError) Unwrap() error { return e.Err }

// ErrMissingUID is the DeleteError.Err of a dead pod without a UID: without
// a UID precondition the delete could hit a newer pod of the same name, so
// it is not sent.
var ErrMissingUID = errors.New("pod has no UID; refusing to delete without a UID precondition")
