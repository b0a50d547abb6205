package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// every node that says Ready but whose Lease (kube-node-lease/<node>) has
// gone stale (see leaseStale) counted as not Ready (its Ready condition
// Unknown, reason StaleLeaseReason).
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
// concurrent use: it changes no node it lists, but a copy of each that it
// marks.
type heartbeatNodes struct {
	// nodes returns a new slice, of objects that must not be changed (the
	// cache's own, see informerNodes).
	nodes  health.NodeLister
	leases client.Reader
	clock  clock.PassiveClock
	// synced, when not nil, reports whether the Lease cache has synced: a
	// cache read before then would wait for it (for ever, without RBAC on
	// the Leases), so ListNodes fails at once instead.
	synced func() bool
	// memo, when not nil, keeps the view while no change is seen; it is
	// set once the informers' handlers that report changes to it are
	// registered (SetupWithManager).
	memo *viewMemo
}

// ListNodes returns the nodes of nodes, with the ones whose Lease is stale
// marked not Ready: the memoized view while it holds (see viewMemo).
func (h heartbeatNodes) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	if h.memo != nil {
		return h.memo.get(ctx, h.list)
	}
	nodes, _, err := h.list(ctx, h.clock.Now())
	return nodes, err
}

// list returns the view at now, and the last instant it holds with no
// change of a node or a Lease: when the first Lease still fresh goes stale
// (the zero time when none is fresh).
func (h heartbeatNodes) list(ctx context.Context, now time.Time) ([]*corev1.Node, time.Time, error) {
	nodes, err := h.nodes.ListNodes(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	if h.synced != nil && !h.synced() {
		return nil, time.Time{}, fmt.Errorf("the node Leases of %s: %w: their cache has not synced (is RBAC for them missing?)", corev1.NamespaceNodeLease, health.ErrNodesUnavailable)
	}
	var leases coordinationv1.LeaseList
	if err := h.leases.List(ctx, &leases, client.InNamespace(corev1.NamespaceNodeLease), client.UnsafeDisableDeepCopy); err != nil {
		return nil, time.Time{}, fmt.Errorf("listing the node Leases of %s: %w: %w", corev1.NamespaceNodeLease, health.ErrNodesUnavailable, err)
	}
	var through time.Time
	stale := make(map[string]time.Duration)
	for i := range leases.Items {
		lease := &leases.Items[i]
		age, ok := leaseStale(lease, now)
		if ok {
			stale[lease.Name] = age
			continue
		}
		if at := lease.Spec.RenewTime.Add(leaseDuration(lease) / 2); through.IsZero() || at.Before(through) {
			through = at
		}
	}
	for i, node := range nodes {
		age, ok := stale[node.Name]
		if !ok || health.NodeStateOf(node) != health.NodeReady {
			continue
		}
		// Only the view's copy is marked: node is the cache's.
		nodes[i] = node.DeepCopy()
		markNotReady(nodes[i], age, now)
	}
	return nodes, through, nil
}

// leaseStale returns how long ago lease was renewed, and whether that is
// longer than half its duration. A Lease never renewed is stale.
//
// Why half: a kubelet renews its Lease every quarter of its duration, so
// half is two renewals missed. The node-lifecycle controller waits its
// grace period (at least the Lease's duration by default) after the last
// renewal it saw before it marks the node, so every failed node counts
// here before the first of them is marked, and tainted, even though their
// last renewals are spread over one renewal interval. Counting after the
// whole duration, the count completed only as the first nodes were marked,
// and pods with short tolerations were force-deleted before the Breaker
// opened.
func leaseStale(lease *coordinationv1.Lease, now time.Time) (time.Duration, bool) {
	if lease.Spec.RenewTime == nil {
		return 0, true
	}
	age := now.Sub(lease.Spec.RenewTime.Time)
	return age, age > leaseDuration(lease)/2
}

// leaseDuration is the duration lease names, or the kubelet's.
func leaseDuration(lease *coordinationv1.Lease) time.Duration {
	if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		return time.Duration(*d) * time.Second
	}
	return defaultLeaseDuration
}

// markNotReady sets node's Ready condition (of the view's own copy) to
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

// leaseShowsRunning returns why node's Lease, read live, shows that its
// kubelet runs though the node's Ready condition is Unknown, or "": the
// Lease was renewed after that condition's last transition. The
// node-lifecycle controller marks a node Unknown only once its kubelet
// has stopped renewing, so a renewal since is a kubelet that came back
// (a restarted instance, before it posts its status, still carries the
// cloud's shutdown taint). A node without a Lease, or one never renewed,
// shows nothing. A Lease that cannot be read is an error: no taint is
// written on a reading that failed.
//
// The two times are the kubelet's clock and the node-lifecycle
// controller's: a kubelet clock ahead by more than the node-monitor grace
// period makes a stopped node's last renewal look newer, and holds the
// taint back (it fails closed) until the node is Ready or its clock is
// mended.
func (r *Reconciler) leaseShowsRunning(ctx context.Context, node *corev1.Node) (string, error) {
	var leases coordinationv1.LeaseList
	if err := r.live.List(ctx, &leases, client.InNamespace(corev1.NamespaceNodeLease), client.MatchingFields{"metadata.name": node.Name}); err != nil {
		return "", fmt.Errorf("reading the Lease of node %s: %w", node.Name, err)
	}
	transition := readyTransition(node)
	for i := range leases.Items {
		lease := &leases.Items[i]
		if lease.Name != node.Name || lease.Spec.RenewTime == nil {
			continue
		}
		if renewed := lease.Spec.RenewTime.Time; renewed.After(transition) {
			return fmt.Sprintf("its kubelet renewed its Lease at %s, after the node became not Ready at %s: it runs", renewed.UTC().Format(time.RFC3339), transition.UTC().Format(time.RFC3339)), nil
		}
	}
	return "", nil
}

// runningNodes is the Checker's view of the nodes: the cached node, with
// the shutdown taints removed from a copy of one whose cached Lease was
// renewed after its Ready condition's last transition (see
// leaseShowsRunning), so that no pod is force-deleted on the cloud's word
// while its kubelet is back. It only ever takes evidence away. It is safe
// for concurrent use.
type runningNodes struct {
	nodes          health.NodeGetter
	leases         client.Reader
	shutdownTaints []health.ShutdownTaint
}

var _ health.NodeGetter = runningNodes{}

func (v runningNodes) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	node, err := v.nodes.GetNode(ctx, name)
	if err != nil || node == nil {
		return node, err
	}
	if _, ok := health.ShutdownTaintOf(node, v.shutdownTaints); !ok {
		return node, nil
	}
	var lease coordinationv1.Lease
	if err := v.leases.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: name}, &lease); err != nil {
		if apierrors.IsNotFound(err) {
			return node, nil
		}
		// No reading of the Lease: no shutdown evidence either.
		return withoutShutdownTaints(node, v.shutdownTaints), nil
	}
	if lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(readyTransition(node)) {
		return withoutShutdownTaints(node, v.shutdownTaints), nil
	}
	return node, nil
}

// withoutShutdownTaints returns a copy of node without the taints named in
// taints.
func withoutShutdownTaints(node *corev1.Node, taints []health.ShutdownTaint) *corev1.Node {
	out := node.DeepCopy()
	out.Spec.Taints = slices.DeleteFunc(out.Spec.Taints, func(t corev1.Taint) bool {
		return slices.ContainsFunc(taints, func(s health.ShutdownTaint) bool { return s.Key == t.Key })
	})
	return out
}
