package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodePredicate is a condition on a node. The node is nil if it does not
// exist.
type NodePredicate func(node *corev1.Node) bool

// NodeReadyIs is true of a node whose Ready condition has the given status.
func NodeReadyIs(status corev1.ConditionStatus) NodePredicate {
	return func(node *corev1.Node) bool {
		if node == nil {
			return false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == status
			}
		}
		return false
	}
}

// NodeHasTaint is true of a node with a taint of the given key and effect.
func NodeHasTaint(key string, effect corev1.TaintEffect) NodePredicate {
	return func(node *corev1.Node) bool {
		if node == nil {
			return false
		}
		for _, t := range node.Spec.Taints {
			if t.Key == key && t.Effect == effect {
				return true
			}
		}
		return false
	}
}

// NodeAll is true of a node when every one of preds is.
func NodeAll(preds ...NodePredicate) NodePredicate {
	return func(node *corev1.Node) bool {
		for _, p := range preds {
			if !p(node) {
				return false
			}
		}
		return true
	}
}

// WaitForNode reads the node every PollInterval until pred is true of it,
// and returns the node as last read (nil if it did not exist). It gives up
// when ctx is done, with an error that describes the node as last seen; give
// ctx a deadline.
func WaitForNode(ctx context.Context, c kubernetes.Interface, name string, pred NodePredicate) (*corev1.Node, error) {
	var last *corev1.Node
	var lastErr error
	err := poll(ctx, func() bool {
		last, lastErr = c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(lastErr) {
			last, lastErr = nil, nil
		}
		return lastErr == nil && pred(last)
	})
	if err != nil {
		return last, fmt.Errorf("waiting for node %s: %w; last read: %s", name, err, describeNode(last, lastErr))
	}
	return last, nil
}

func describeNode(node *corev1.Node, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if node == nil {
		return "not found"
	}
	var b strings.Builder
	for _, c := range node.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s(heartbeat %s) ", c.Type, c.Status, c.LastHeartbeatTime.UTC().Format(time.RFC3339))
	}
	for _, t := range node.Spec.Taints {
		fmt.Fprintf(&b, "taint %s:%s ", t.Key, t.Effect)
	}
	return strings.TrimSpace(b.String())
}
