package podsource

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateScope returns nil when a source or a deleter may be bound to
// namespace and selector, and otherwise says why not: the namespace must
// be a valid, non-empty DNS-1123 label, and the selector must not be nil
// nor select every pod of the namespace (labels.Everything(),
// labels.Nothing() and any other empty selector), unless it is
// WholeNamespace(). Every binding of package health (podsource/kube,
// podsource/controllerruntime) calls it, so that they all refuse the same
// scopes.
func ValidateScope(namespace string, selector labels.Selector) error {
	if namespace == "" {
		return errors.New("empty namespace; a namespace is required")
	}
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return fmt.Errorf("invalid namespace %q: %s", namespace, strings.Join(msgs, "; "))
	}
	if selector == nil {
		return errors.New("nil label selector; pass the workload's selector, or podsource.WholeNamespace() to select every pod of the namespace on purpose")
	}
	if _, ok := selector.(wholeNamespace); ok {
		return nil
	}
	// labels.Nothing() is not Empty, but its String() is "", which the API
	// server reads as "every pod".
	if selector.Empty() || selector.String() == "" {
		return fmt.Errorf("label selector %q selects every pod of the namespace "+
			"(labels.Everything(), labels.Nothing() and empty selectors are refused; "+
			"metav1.LabelSelectorAsSelector(nil) returns labels.Nothing()); "+
			"pass the workload's selector, or podsource.WholeNamespace() to select every pod of the namespace on purpose", selector.String())
	}
	return nil
}

// WholeNamespace returns the selector that puts every pod of the namespace
// in scope on purpose, as a cluster administrator's tool that cleans up a
// whole namespace may want. It is the only selector of every pod that
// ValidateScope accepts, so that a forgotten or mistyped selector cannot
// widen a workload to its namespace, answer healthy from another
// workload's pod and force-delete that workload's pods.
//
// The value matches every label set and renders as "". Adding a
// requirement to it, or deep-copying it, returns an ordinary selector,
// which is then judged on its own.
func WholeNamespace() labels.Selector { return wholeNamespace{labels.Everything()} }

// wholeNamespace marks the explicit choice of every pod of the namespace.
type wholeNamespace struct{ labels.Selector }

// InScope returns nil when pod lies in the scope of a deleter bound to
// namespace and selector, and otherwise an *OutOfScopeError: a deleter
// checks it before it sends anything, so that a pod handed to it by
// mistake is never deleted.
func InScope(pod *corev1.Pod, namespace string, selector labels.Selector) error {
	switch {
	case pod.Namespace != namespace:
		return &OutOfScopeError{Namespace: pod.Namespace, Name: pod.Name, ScopeNamespace: namespace, Reason: fmt.Sprintf("namespace %q is not %q", pod.Namespace, namespace)}
	case selector == nil:
		return &OutOfScopeError{Namespace: pod.Namespace, Name: pod.Name, ScopeNamespace: namespace, Reason: "the deleter has no label selector (not built by its constructor)"}
	case !selector.Matches(labels.Set(pod.Labels)):
		return &OutOfScopeError{Namespace: pod.Namespace, Name: pod.Name, ScopeNamespace: namespace, ScopeSelector: selector.String(), Reason: fmt.Sprintf("labels do not match selector %q", selector.String())}
	}
	return nil
}

// OutOfScopeError is a deleter's refusal to delete a pod outside its
// namespace and label selector; nothing was sent.
type OutOfScopeError struct {
	// Namespace and Name are the refused pod's.
	Namespace string
	Name      string
	// ScopeNamespace and ScopeSelector are the deleter's scope
	// (ScopeSelector "" when the selector is the whole namespace).
	ScopeNamespace string
	ScopeSelector  string
	// Reason says what does not match.
	Reason string
}

func (e *OutOfScopeError) Error() string {
	return fmt.Sprintf("podsource: refusing to delete pod %s/%s outside the deleter's scope: %s", e.Namespace, e.Name, e.Reason)
}

// ForceDeleteOptions returns the options of a force delete, as the
// health.Deleter contract requires: a grace period of 0 and a precondition
// on uid, so that a newer pod that took the same name is never hit.
func ForceDeleteOptions(uid types.UID) metav1.DeleteOptions {
	grace := int64(0)
	return metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      metav1.NewUIDPreconditions(string(uid)),
	}
}
