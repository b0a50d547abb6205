package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

var _ health.Deleter = (*Deleter)(nil)

// Deleter force-deletes pods through a client.Writer, typically
// mgr.GetClient(): one DELETE per pod with a grace period of 0 and a
// precondition on the pod's UID, so that a newer pod that took the same
// name is never hit.
//
// Like podsource/kube's Deleter, it is bound to one namespace and a label
// selector (or, when asked, to the whole namespace with
// podsource.WholeNamespace()), and refuses without sending anything a pod
// outside that scope (*podsource.OutOfScopeError) and a pod without a name or a
// UID (health.ErrUnidentifiedPod).
//
// A Deleter is safe for concurrent use when its writer is, as the manager's
// client is.
type Deleter struct {
	writer    client.Writer
	namespace string
	selector  labels.Selector
	// owner, when not empty, is the UID of the controller whose pods
	// alone the Deleter deletes (NewOwnedDeleter).
	owner types.UID
}

// NewDeleter returns a Deleter that sends its DELETE requests through
// writer and only deletes pods of namespace that match selector. Both are
// required and refused as NewPodSource refuses them (podsource.ValidateScope).
func NewDeleter(writer client.Writer, namespace string, selector labels.Selector) (*Deleter, error) {
	if isNil(writer) {
		return nil, errors.New("controllerruntime: NewDeleter: nil client.Writer")
	}
	if err := podsource.ValidateScope(namespace, selector); err != nil {
		return nil, fmt.Errorf("controllerruntime: NewDeleter: %w", err)
	}
	return &Deleter{writer: writer, namespace: namespace, selector: selector}, nil
}

// ForceDelete deletes pod with a grace period of 0 and a UID precondition,
// and returns the API server's answer wrapped, so that errors.Is,
// errors.As and apierrors.IsXxx still reach it: nil when the pod was
// deleted, NotFound when it was gone already, Conflict when a newer pod
// holds its name.
//
// A Deleter of NewOwnedDeleter also sends the pod's resourceVersion as a
// precondition: a pod that changed since it was listed (another controller
// adopted it, its owner released it) is not deleted, and the answer is an
// error wrapping ErrPodChanged, not a Conflict (which a Checker takes for
// a newer pod holding the name). A newer pod that holds the name fails the
// UID precondition first, and that Conflict comes back as it is.
//
// A nil pod, a pod outside the Deleter's scope and a pod without a name or
// a UID are refused with an error and no request; so is any pod when ctx
// is done. ForceDelete never changes pod: it deletes a new object that
// carries only the pod's namespace and name.
func (d *Deleter) ForceDelete(ctx context.Context, pod *corev1.Pod) error {
	if pod == nil {
		return errors.New("controllerruntime: force delete: nil pod")
	}
	if d.writer == nil || d.selector == nil {
		return errors.New("controllerruntime: force delete: Deleter not built by NewDeleter")
	}
	if err := d.InScope(pod); err != nil {
		return err
	}
	if pod.Name == "" || pod.UID == "" {
		return fmt.Errorf("controllerruntime: force delete of pod %s/%s: %w", pod.Namespace, pod.Name, health.ErrUnidentifiedPod)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("controllerruntime: force delete of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	// A fresh object: the client writes the server's answer into the
	// object it is given, and pod may be a cache's own.
	target := &corev1.Pod{}
	target.Namespace, target.Name = pod.Namespace, pod.Name
	opts := deleteOptions(pod)
	if d.owner != "" && pod.ResourceVersion != "" {
		// The owner was judged on the pod as listed; the resourceVersion
		// precondition makes the API server refuse the delete if the live
		// pod changed since (another controller adopted it, say), so that
		// the owner, and the fencing policy that reads it, are judged on
		// the object deleted.
		opts.Preconditions.ResourceVersion = &pod.ResourceVersion
	}
	if err := d.writer.Delete(ctx, target, opts); err != nil {
		if opts.Preconditions.ResourceVersion != nil && apierrors.IsConflict(err) && !uidPreconditionFailed(err) {
			// Not NameReused: the same pod may still be there, changed.
			// The error does not unwrap to the Conflict, which a Checker
			// reads as NameReused; the next check judges the pod again
			// from a fresher list.
			return fmt.Errorf("controllerruntime: DELETE pod %s/%s (uid %s) was refused: %w: it changed since it was listed at resourceVersion %s, and may no longer be controlled by the deleter's owner (uid %s); the API server answered: %s",
				pod.Namespace, pod.Name, pod.UID, ErrPodChanged, pod.ResourceVersion, d.owner, err.Error())
		}
		return fmt.Errorf("controllerruntime: DELETE pod %s/%s with grace period 0 and UID precondition: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// ErrPodChanged is wrapped by the error of an owned Deleter's DELETE that
// the API server refused because the pod changed since it was listed (its
// resourceVersion precondition failed, its UID's held): the pod may still
// be there, and the check fails so that the next one judges it again.
var ErrPodChanged = errors.New("the live pod is not the one listed")

// uidPreconditionFailed reports whether a Conflict is the API server's
// answer to a UID precondition that failed: a newer pod holds the name
// (the server checks the UID before the resourceVersion). Its words, in
// k8s.io/apiserver's storage preconditions, old and new.
func uidPreconditionFailed(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "UID in the precondition") || strings.Contains(msg, "UID in precondition")
}

// InScope returns nil when pod is in the Deleter's scope (its namespace
// and its label selector, or its owner), else a *podsource.OutOfScopeError.
func (d *Deleter) InScope(pod *corev1.Pod) error {
	if err := podsource.InScope(pod, d.namespace, d.selector); err != nil || d.owner == "" {
		return err
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != d.owner {
		return &podsource.OutOfScopeError{Namespace: pod.Namespace, Name: pod.Name, ScopeNamespace: d.namespace,
			Reason: fmt.Sprintf("not controlled by the deleter's owner (uid %s)", d.owner)}
	}
	return nil
}

// deleteOptions returns the options of the force delete of pod: those of
// podsource.ForceDeleteOptions (grace period 0, UID precondition), in the fields that
// controller-runtime sends (it overwrites the same fields of Raw).
func deleteOptions(pod *corev1.Pod) *client.DeleteOptions {
	raw := podsource.ForceDeleteOptions(pod.UID)
	return &client.DeleteOptions{GracePeriodSeconds: raw.GracePeriodSeconds, Preconditions: raw.Preconditions}
}
