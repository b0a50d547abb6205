package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// HeartbeatInterval is how often a healthy [Node] renews its heartbeat,
// unless Options.HeartbeatInterval says otherwise.
const HeartbeatInterval = time.Second

// Node is a Node object whose heartbeat the harness renews in place of a
// kubelet: every HeartbeatInterval it sets the Ready condition to True with
// a fresh lastHeartbeatTime and renews the node's Lease in kube-node-lease.
type Node struct {
	cp   *ControlPlane
	name string

	mu         sync.Mutex
	cancel     context.CancelFunc // stops the heartbeat loop; nil when stopped
	done       chan struct{}      // closed when the loop has returned
	readySince time.Time          // lastTransitionTime of the Ready condition we post
	// bootingUntil, when not zero, is when a booting node (Boot) posts
	// Ready=True; before it, Ready=False since readySince.
	bootingUntil time.Time
	lastBeat     time.Time // time of the last fully successful heartbeat
	// reportedAt is when the API server answered the first fully
	// successful heartbeat since the node was added, recovered or booted;
	// zero until then.
	reportedAt time.Time
	lastErr    error // error of the last heartbeat, nil if it succeeded
}

// AddNode creates a Ready node named name with a Lease, and starts renewing
// its heartbeat. It stops the test with t.Fatal if the objects cannot be
// created, so it must be called from the test's goroutine. The heartbeat
// stops when the test ends.
func (cp *ControlPlane) AddNode(ctx context.Context, name string) *Node {
	cp.t.Helper()
	now := time.Now()
	n := &Node{cp: cp, name: name, readySince: now}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{corev1.LabelHostname: name},
			// As a kubelet sets it: the attach-detach controller attaches
			// and detaches this node's volumes.
			Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{n.readyCondition(now)}},
	}
	created, err := cp.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		cp.t.Fatalf("harness: creating node %s: %v", name, err)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: corev1.NamespaceNodeLease,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Node",
				Name:       name,
				UID:        created.UID,
			}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(name),
			LeaseDurationSeconds: ptr.To(int32(math.Ceil(cp.opts.NodeLeaseDuration.Seconds()))),
			RenewTime:            ptr.To(metav1.NewMicroTime(now)),
		},
	}
	if _, err := cp.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		cp.t.Fatalf("harness: creating lease for node %s: %v", name, err)
	}
	n.mu.Lock()
	n.lastBeat = now
	n.startLoopLocked(0)
	n.mu.Unlock()
	cp.t.Cleanup(n.Fail)
	return n
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// Fail stops the heartbeat, as if the node had lost power. No heartbeat is
// sent after Fail returns. About NodeMonitorGracePeriod later the
// node-lifecycle controller marks the node Ready=Unknown and taints it
// unreachable. Failing a failed node does nothing.
func (n *Node) Fail() {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel, n.done = nil, nil
	n.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Recover restarts the heartbeat of a failed node, with a new
// lastTransitionTime for its Ready condition. Its first heartbeat comes at
// a random moment within the heartbeat interval or 10 s, whichever is
// shorter: as a kubelet whose network is back posts its status at its
// next update (every 10 s), the nodes recovered together report spread
// over that time, not all in one instant. Recovering a healthy node does
// nothing.
func (n *Node) Recover() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cancel != nil {
		return
	}
	n.readySince, n.reportedAt = time.Now(), time.Time{}
	n.startLoopLocked(rand.N(min(n.cp.opts.HeartbeatInterval, statusFrequency)))
}

// Boot restarts the heartbeat of a failed node as a machine that boots
// again does: its kubelet renews the node's Lease at once, and for
// notReadyFor posts Ready=False (reason KubeletNotReady, "container runtime
// network not ready", the first seconds of every boot), with a new
// lastTransitionTime; then Ready=True, with another. Booting a healthy
// node does nothing.
func (n *Node) Boot(notReadyFor time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cancel != nil {
		return
	}
	now := time.Now()
	n.readySince, n.bootingUntil, n.reportedAt = now, now.Add(notReadyFor), time.Time{}
	n.startLoopLocked(0)
}

// LastHeartbeat returns when the last heartbeat that reached the API server
// was sent.
func (n *Node) LastHeartbeat() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastBeat
}

// ReportedAt returns when the API server answered the node's first
// heartbeat since it was added, recovered or booted, or the zero time if
// none has been answered yet: until then, the node's Ready condition is
// the one the node-lifecycle controller last wrote.
func (n *Node) ReportedAt() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.reportedAt
}

// Err returns the error of the most recent heartbeat, or nil if it
// succeeded. Heartbeats fail while the API server is stopped.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastErr
}

// How a heartbeat is retried and a recovered node reports, as a kubelet
// does: it retries a failed status update or Lease renewal at once, then
// backs off from 100 ms, doubling to at most 7 s (the Lease controller's
// backoffEnsureLease in k8s.io/component-helpers); and it posts its status
// every 10 s by default (nodeStatusUpdateFrequency), each kubelet at its
// own moment.
const (
	retryFirst      = 100 * time.Millisecond
	retryMax        = 7 * time.Second
	statusFrequency = 10 * time.Second
)

// startLoopLocked starts the heartbeat loop, its first heartbeat after
// first; n.mu must be held. A failed heartbeat is retried before the next
// tick (retryAfter): waiting for it let a herd of nodes recovered at once
// fail together, tick after tick, against a busy API server (at 5,000
// nodes, 650 of 1,500 were still not Ready 8 minutes later).
func (n *Node) startLoopLocked(first time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.cancel, n.done = cancel, done
	interval := n.cp.opts.HeartbeatInterval
	go func() {
		defer close(done)
		if !sleepCtx(ctx, first) {
			return
		}
		for {
			due := time.Now().Add(interval)
			for failures := 1; n.beat(ctx) != nil; failures++ {
				wait := retryAfter(failures, interval)
				if !time.Now().Add(wait).Before(due) {
					break // the next heartbeat is as soon
				}
				if !sleepCtx(ctx, wait) {
					return
				}
			}
			if !sleepCtx(ctx, time.Until(due)) {
				return
			}
		}
	}()
}

// retryAfter is how long a node waits after its failures-th heartbeat
// failure in a row: the first is retried at once, then 100 ms doubling,
// at most 7 s and at most interval, with a random part (up to half) so
// that nodes that failed together do not retry together.
func retryAfter(failures int, interval time.Duration) time.Duration {
	if failures <= 1 {
		return 0
	}
	d := retryFirst << min(failures-2, 10)
	d = min(d, retryMax, interval)
	return wait.Jitter(d/2, 1)
}

// sleepCtx sleeps for d, or until ctx ends: false then.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// beat posts one heartbeat: the node's Ready condition, then its Lease.
func (n *Node) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now := time.Now()
	err := n.patchStatus(ctx, now)
	if err == nil {
		err = n.renewLease(ctx, now)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lastErr = err
	if err == nil {
		n.lastBeat = now
		if n.reportedAt.IsZero() {
			n.reportedAt = time.Now()
		}
	}
	return err
}

func (n *Node) readyCondition(now time.Time) corev1.NodeCondition {
	if !n.bootingUntil.IsZero() {
		if now.Before(n.bootingUntil) {
			return corev1.NodeCondition{
				Type:               corev1.NodeReady,
				Status:             corev1.ConditionFalse,
				Reason:             "KubeletNotReady",
				Message:            "container runtime network not ready: NetworkReady=false (booting, in the e2e harness)",
				LastHeartbeatTime:  metav1.NewTime(now),
				LastTransitionTime: metav1.NewTime(n.readySince),
			}
		}
		n.readySince, n.bootingUntil = n.bootingUntil, time.Time{} // booted: Ready since then
	}
	return corev1.NodeCondition{
		Type:               corev1.NodeReady,
		Status:             corev1.ConditionTrue,
		Reason:             "KubeletReady",
		Message:            "heartbeat renewed by the e2e harness",
		LastHeartbeatTime:  metav1.NewTime(now),
		LastTransitionTime: metav1.NewTime(n.readySince),
	}
}

// patchStatus sets the Ready condition with a strategic merge patch of the
// status subresource, which merges conditions by type and so leaves the
// other conditions as they are.
func (n *Node) patchStatus(ctx context.Context, now time.Time) error {
	n.mu.Lock()
	cond := n.readyCondition(now)
	n.mu.Unlock()
	patch, err := json.Marshal(map[string]any{
		"status": map[string]any{"conditions": []corev1.NodeCondition{cond}},
	})
	if err != nil {
		return err
	}
	_, err = n.cp.heartbeats.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("heartbeat of node %s: %w", n.name, err)
	}
	return nil
}

func (n *Node) renewLease(ctx context.Context, now time.Time) error {
	patch, err := json.Marshal(map[string]any{
		"spec": map[string]any{"renewTime": metav1.NewMicroTime(now)},
	})
	if err != nil {
		return err
	}
	_, err = n.cp.heartbeats.CoordinationV1().Leases(corev1.NamespaceNodeLease).Patch(ctx, n.name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("renewing lease of node %s: %w", n.name, err)
	}
	return nil
}

// Delete stops the node's heartbeat and deletes its Node object, as an
// admin or a cloud provider's node controller does for a machine that is
// gone for good. Its pods are left as they are: nothing marks them for
// deletion. Its Lease is left for garbage collection, which the harness
// does not run. Delete returns once the API server has answered the DELETE.
func (n *Node) Delete(ctx context.Context) error {
	n.Fail()
	if err := n.cp.client.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("harness: deleting node %s: %w", n.name, err)
	}
	return nil
}
