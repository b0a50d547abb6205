package harness

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// BindPod binds an unscheduled pod to node through the pods/binding
// subresource, as a scheduler would: the harness runs none, so pods created
// without spec.nodeName stay Pending until something binds them.
func (cp *ControlPlane) BindPod(ctx context.Context, namespace, name, node string) error {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := cp.client.CoreV1().Pods(namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("harness: binding pod %s/%s to node %s: %w", namespace, name, node, err)
	}
	return nil
}

// AddNodeTaint adds taint to the node's spec, as kubectl taint does, unless
// a taint with the same key and effect is there already. It retries on
// conflicts with the node-lifecycle controller, which updates the taints
// too.
func (cp *ControlPlane) AddNodeTaint(ctx context.Context, node string, taint corev1.Taint) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cp.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, t := range n.Spec.Taints {
			if t.Key == taint.Key && t.Effect == taint.Effect {
				return nil
			}
		}
		n.Spec.Taints = append(n.Spec.Taints, taint)
		_, err = cp.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("harness: tainting node %s with %s=%s:%s: %w", node, taint.Key, taint.Value, taint.Effect, err)
	}
	return nil
}
