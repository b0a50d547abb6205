package harness

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// WaitForRegisteredNode waits for the node-lifecycle controller's
// RegisteredNode event of the named node. The controller records it soon
// after the node is created; waiting for it keeps that write out of request
// counts taken afterwards. Give ctx a deadline.
func (cp *ControlPlane) WaitForRegisteredNode(ctx context.Context, name string) error {
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.kind", "Node"),
		fields.OneTermEqualSelector("involvedObject.name", name),
		fields.OneTermEqualSelector("reason", "RegisteredNode"),
	).String()
	var lastErr error
	err := poll(ctx, func() bool {
		events, err := cp.client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			lastErr = err
			return false
		}
		if len(events.Items) == 0 {
			lastErr = errors.New("no event yet")
			return false
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("waiting for the RegisteredNode event of node %s: %w; last: %v", name, err, lastErr)
	}
	return nil
}
