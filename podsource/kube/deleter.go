package kube

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

var _ health.Deleter = (*Deleter)(nil)

// DeleterOptions configure a Deleter. Selector is required: NewDeleter
// refuses the zero value.
type DeleterOptions struct {
	// Selector bounds the Deleter to the pods of its namespace whose labels
	// match it: any other pod is refused with an *podsource.OutOfScopeError. It is
	// required, and refused as the sources refuse it: nil,
	// labels.Everything(), labels.Nothing() and any other empty selector.
	// podsource.WholeNamespace() puts every pod of the namespace in scope on
	// purpose.
	Selector labels.Selector
}

// Deleter force-deletes pods through the typed client: one DELETE per pod
// with a grace period of 0 and a precondition on the pod's UID, so that a
// newer pod that took the same name is never hit.
//
// A Deleter is bound to one namespace and to a label selector (or, when
// asked explicitly, to the whole namespace). It refuses, without sending anything, a pod outside that scope
// (*podsource.OutOfScopeError) and a pod without a name or UID
// (health.ErrUnidentifiedPod).
//
// A Deleter is safe for concurrent use.
type Deleter struct {
	pods      corev1client.PodsGetter
	namespace string
	selector  labels.Selector // never nil; podsource.WholeNamespace() admits every pod
}

// NewDeleter returns a Deleter that sends its DELETE requests through
// pods, typically clientset.CoreV1(), and that only deletes pods of
// namespace (required) that match opts.Selector (required; see
// DeleterOptions).
func NewDeleter(pods corev1client.PodsGetter, namespace string, opts DeleterOptions) (*Deleter, error) {
	if isNil(pods) {
		return nil, errors.New("kube: NewDeleter: nil PodsGetter (a typed nil too)")
	}
	if err := checkScope("NewDeleter", namespace, opts.Selector); err != nil {
		return nil, err
	}
	return &Deleter{pods: pods, namespace: namespace, selector: opts.Selector}, nil
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
	if err := d.pods.Pods(pod.Namespace).Delete(ctx, pod.Name, podsource.ForceDeleteOptions(pod.UID)); err != nil {
		return fmt.Errorf("kube: DELETE pod %s/%s with grace period 0 and UID precondition: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// InScope returns nil when pod is in the Deleter's scope (its namespace
// and its label selector), else an *podsource.OutOfScopeError.
func (d *Deleter) InScope(pod *corev1.Pod) error {
	return podsource.InScope(pod, d.namespace, d.selector)
}
