package controller

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/health"
)

// StaleLeaseReason is the reason of the Ready condition that the Breaker's
// view of a node carries when the node's Lease has not been renewed in
// time (see heartbeatNodes).
const StaleLeaseReason = "PodhealthNodeLeaseStale"

// defaultLeaseDuration is the kubelet's own Lease duration, for a Lease
// that names none.
const defaultLeaseDuration = 40 * time.Second

var _ health.NodeLister = heartbeatNodes{}

// heartbeatNodes is the Breaker's view of the nodes: the cached nodes, with
// every node that says Ready but whose Lease (kube-node-lease/<node>) was
// last renewed longer ago than the Lease's duration counted as not Ready
// (its Ready condition Unknown, reason StaleLeaseReason).
//
// Why: the node-lifecycle controller marks a failed node not Ready, then
// each of its pods not Ready, one request at a time at its client's rate.
// When many nodes fail at once it takes minutes to mark them all, while it
// already taints and evicts the first ones; a Breaker that read only the
// Ready conditions would see a few failed nodes, and let those pods go. The
// Leases of every failed node stop at the same moment.
//
// It only ever counts more nodes as not Ready than their conditions do, so
// it can only hold back more: a node without a Lease keeps its condition,
// and Leases that cannot be read are an error wrapping
// health.ErrNodesUnavailable, which trips the Breaker. The staleness is
// measured on the controller's clock against the kubelets': a controller
// clock far ahead makes every Lease stale and trips the Breaker; one far
// behind makes none stale, and the conditions alone count. It is safe for
// concurrent use: it changes nothing but the nodes it has just listed.
type heartbeatNodes struct {
	nodes  health.NodeLister // returns new objects, which it may change
	leases client.Reader
	clock  clock.PassiveClock
	// synced, when not nil, reports whether the Lease cache has synced: a
	// cache read before then would wait for it (for ever, without RBAC on
	// the Leases), so ListNodes fails at once instead.
	synced func() bool
}

// ListNodes returns the nodes of nodes, with the ones whose Lease is stale
// marked not Ready.
func (h heartbeatNodes) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	nodes, err := h.nodes.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	if h.synced != nil && !h.synced() {
		return nil, fmt.Errorf("the node Leases of %s: %w: their cache has not synced (is RBAC for them missing?)", corev1.NamespaceNodeLease, health.ErrNodesUnavailable)
	}
	var leases coordinationv1.LeaseList
	if err := h.leases.List(ctx, &leases, client.InNamespace(corev1.NamespaceNodeLease), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the node Leases of %s: %w: %w", corev1.NamespaceNodeLease, health.ErrNodesUnavailable, err)
	}
	now := h.clock.Now()
	stale := make(map[string]time.Duration)
	for i := range leases.Items {
		if age, ok := leaseStale(&leases.Items[i], now); ok {
			stale[leases.Items[i].Name] = age
		}
	}
	if len(stale) == 0 {
		return nodes, nil
	}
	for _, node := range nodes {
		age, ok := stale[node.Name]
		if !ok || health.NodeStateOf(node) != health.NodeReady {
			continue
		}
		markNotReady(node, age, now)
	}
	return nodes, nil
}

// leaseStale returns how long ago lease was renewed, and whether that is
// longer than its duration. A Lease never renewed is stale.
func leaseStale(lease *coordinationv1.Lease, now time.Time) (time.Duration, bool) {
	duration := defaultLeaseDuration
	if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		duration = time.Duration(*d) * time.Second
	}
	if lease.Spec.RenewTime == nil {
		return 0, true
	}
	age := now.Sub(lease.Spec.RenewTime.Time)
	return age, age > duration
}

// markNotReady sets node's Ready condition (of the Breaker's own copy) to
// Unknown.
func markNotReady(node *corev1.Node, age time.Duration, now time.Time) {
	cond := corev1.NodeCondition{
		Type:               corev1.NodeReady,
		Status:             corev1.ConditionUnknown,
		Reason:             StaleLeaseReason,
		Message:            fmt.Sprintf("the node's Lease was last renewed %v ago", age.Round(time.Second)),
		LastTransitionTime: metav1.NewTime(now),
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			node.Status.Conditions[i] = cond
			return
		}
	}
	node.Status.Conditions = append(node.Status.Conditions, cond)
}
