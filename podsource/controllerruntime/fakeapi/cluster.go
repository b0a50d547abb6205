package fakeapi

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/podsource/fake"
)

// FailNode makes the named node of c what the node-lifecycle controller
// leaves when a node's kubelet stops posting status (fake.LostNode): every
// condition Unknown since at, and the unreachable NoSchedule and NoExecute
// taints. It writes the taints with an Update and the conditions through
// the status subresource, as the controller does: controller-runtime's
// fake client keeps a Node's or Pod's status apart, so a plain Update that
// changes it saves the rest and drops the status change without an error.
func FailNode(ctx context.Context, c client.Client, name string, at time.Time) error {
	var node corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
		return fmt.Errorf("fakeapi: FailNode: %w", err)
	}
	lost := fake.LostNode(&node, at)
	// Each write reads the stored object back into its argument, so each
	// gets a copy of lost of its own.
	if err := c.Status().Update(ctx, lost.DeepCopy()); err != nil {
		return fmt.Errorf("fakeapi: FailNode: status of node %s: %w", name, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
		return fmt.Errorf("fakeapi: FailNode: %w", err)
	}
	node.Spec.Taints = lost.Spec.Taints
	if err := c.Update(ctx, &node); err != nil {
		return fmt.Errorf("fakeapi: FailNode: taints of node %s: %w", name, err)
	}
	return nil
}

// EvictPod does to the pod at key what the taint-eviction controller does
// when the pod's toleration of its node's NoExecute taint runs out at at
// (fake.TaintEvicted): it sets DisruptionTarget=True with reason
// DeletionByTaintManager through the status subresource, then deletes the
// pod gracefully, with its own grace period. The pod must be bound to a
// node; NewClient's client then keeps it Terminating, as an API server
// does with no kubelet left to confirm the delete. Its deletionTimestamp is
// the time of the delete (see the package documentation), not at plus the
// grace period.
func EvictPod(ctx context.Context, c client.Client, key client.ObjectKey, at time.Time) error {
	var pod corev1.Pod
	if err := c.Get(ctx, key, &pod); err != nil {
		return fmt.Errorf("fakeapi: EvictPod: %w", err)
	}
	if pod.Spec.NodeName == "" {
		return fmt.Errorf("fakeapi: EvictPod: pod %s is not bound to a node: the taint-eviction controller evicts only pods on a tainted node", key)
	}
	evicted := fake.TaintEvicted(&pod, at)
	if err := c.Status().Update(ctx, evicted.DeepCopy()); err != nil { // it reads the stored pod back into its argument
		return fmt.Errorf("fakeapi: EvictPod: status of pod %s: %w", key, err)
	}
	if err := c.Delete(ctx, &pod, client.GracePeriodSeconds(*evicted.DeletionGracePeriodSeconds), client.Preconditions{UID: &pod.UID}); err != nil {
		return fmt.Errorf("fakeapi: EvictPod: deleting pod %s: %w", key, err)
	}
	return nil
}
