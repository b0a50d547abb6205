package kube

import "k8s.io/apimachinery/pkg/labels"

// ValidateScope returns the error that NewListerSource, NewClientSource and
// NewDeleter return for namespace and selector, or nil when they accept
// them: the namespace must be a valid, non-empty DNS-1123 label, and the
// selector must not be nil nor select every pod of the namespace
// (labels.Everything(), labels.Nothing() and any other empty selector),
// unless it is WholeNamespace().
//
// Other bindings of package health, such as podsource/controllerruntime,
// call it so that they refuse exactly what this package refuses.
func ValidateScope(namespace string, selector labels.Selector) error {
	return checkScope("ValidateScope", namespace, selector)
}
