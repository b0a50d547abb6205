package kube

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/podhealth/podhealth/health"
)

var _ health.Deleter = (*Deleter)(nil)

// DeleterOptions configure a Deleter. Selector is required: NewDeleter
// refuses the zero value.
type DeleterOptions struct {
	// Selector bounds the Deleter to the pods of its namespace whose labels
	// match it: any other pod is refused with an *OutOfScopeError. It is
	// required, and refused as the sources refuse it: nil,
	// labels.Everything(), labels.Nothing() and any other empty selector.
	// WholeNamespace() puts every pod of the namespace in scope on
	// purpose.
	Selector labels.Selector
}

// Deleter force-deletes pods through the typed client: one DELETE per pod
// with a grace period of 0 and a precondition on the pod's UID, so that a
// newer pod that took the same name is never hit.
//
// A Deleter is bound to one namespace and to a label selector (or, when
// asked explicitly, to the whole namespace). It refuses, without sending anything, a pod outside that scope
// (*OutOfScopeError) and a pod without a name or UID
// (health.ErrUnidentifiedPod).
//
// A Deleter is safe for concurrent use.
type Deleter struct {
	pods      corev1client.PodsGetter
	namespace string
	selector  labels.Selector // never nil; WholeNamespace() admits every pod
}

// NewDeleter returns a Deleter that sends its DELETE requests through
// pods, typically clientset.CoreV1(), and that only deletes pods of
// namespace (required) that match opts.Selector (required; see
// DeleterOptions).
func NewDeleter(pods corev1client.PodsGetter, namespace string, opts DeleterOptions) (*Deleter, error) {
	if pods == nil {
		return nil, errors.New("kube: NewDeleter: nil PodsGetter")
	}
	if err := checkScope("NewDeleter", namespace, opts.Selector); err != nil {
		return nil, err
	}
	return &Deleter{pods: pods, namespace: namespace, selector: opts.Selector}, nil
}

// DeleteOptions returns the options of the DELETE that force-deletes the
// pod with the given UID: grace period 0 and a UID precondition, nothing
// else.
func DeleteOptions(uid string) metav1.DeleteOptions {
	grace := int64(0)
	return metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      metav1.NewUIDPreconditions(uid),
	}
}

// ForceDelete deletes pod with a grace period of 0 and a UID precondition,
// and returns the API server's answer wrapped, so that errors.Is, errors.As
// and apierrors.IsXxx still reach it: nil when the pod was deleted,
// NotFound when it was gone already, Conflict when a newer pod holds its
// name (health.Deleter says how a Checker reads them).
//
// A nil pod, a pod without a name or a UID and a pod outside the Deleter's
// scope are refused with an error and no request; so is any pod when ctx
// is done. ForceDelete never changes pod.
func (d *Deleter) ForceDelete(ctx context.Context, pod *corev1.Pod) error {
	if pod == nil {
		return errors.New("kube: force delete: nil pod")
	}
	if d.pods == nil || d.selector == nil {
		return errors.New("kube: force delete: Deleter not built by NewDeleter")
	}
	if err := d.InScope(pod); err != nil {
		return err
	}
	if pod.Name == "" || pod.UID == "" {
		return fmt.Errorf("kube: force delete of pod %s/%s: %w", pod.Namespace, pod.Name, health.ErrUnidentifiedPod)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kube: force delete of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := d.pods.Pods(pod.Namespace).Delete(ctx, pod.Name, DeleteOptions(string(pod.UID))); err != nil {
		return fmt.Errorf("kube: DELETE pod %s/%s with grace period 0 and UID precondition: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// InScope returns nil when pod is in the Deleter's scope (its namespace
// and its label selector), else an *OutOfScopeError.
func (d *Deleter) InScope(pod *corev1.Pod) error {
	if pod.Namespace != d.namespace {
		return &OutOfScopeError{Namespace: pod.Namespace, Name: pod.Name, ScopeNamespace: d.namespace, Reason: fmt.Sprintf("namespace %q is not %q", pod.Namespace, d.namespace)}
	}
	if d.selector == nil {
		return &OutOfScopeError{Namespace: pod.Namespace, Name: pod.Name, ScopeNamespace: d.namespace, Reason: "the Deleter has no label selector (not built by NewDeleter)"}
	}
	if !d.selector.Matches(labels.Set(pod.Labels)) {
		return &OutOfScopeError{Namespace: pod.Namespace, Name: pod.Name, ScopeNamespace: d.namespace, ScopeSelector: d.selector.String(), Reason: fmt.Sprintf("labels do not match selector %q", d.selector.String())}
	}
	return nil
}

// OutOfScopeError is the error of a force delete that a Deleter refused
// because the pod lies outside its namespace or label selector. No request
// was sent.
type OutOfScopeError struct {
	// Namespace and Name are the pod's.
	Namespace string
	Name      string
	// ScopeNamespace is the Deleter's namespace; ScopeSelector its label
	// selector, empty when the whole namespace is in scope.
	ScopeNamespace string
	ScopeSelector  string
	// Reason says which bound the pod is outside of.
	Reason string
}

func (e *OutOfScopeError) Error() string {
	return fmt.Sprintf("kube: refusing to delete pod %s/%s outside the deleter's scope: %s", e.Namespace, e.Name, e.Reason)
}
