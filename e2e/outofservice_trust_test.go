package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/health"
)

// trustAfter is the --shutdown-taint wait of TestOutOfServiceTrust: long
// enough that a taint measured on a lagging cache's old Ready transition
// would come well inside it after the live node's new one.
const trustAfter = 6 * time.Second

// trustWatchDelay is how far the lagging controller's cache trails the API
// server in TestOutOfServiceTrust.
const trustWatchDelay = 10 * time.Second

// TestOutOfServiceTrust puts podhealth-controller's out-of-service taint
// on the real control plane (node-lifecycle controller, the cloud
// node-lifecycle controller of k8s.io/cloud-provider over a cloud with a
// power state per instance) in the two cases where it used to run ahead
// of its evidence:
//   - a booting node: the instance was stopped (the cloud tainted it shut
//     down) and starts again before any controller tainted it out of
//     service (a failover: the controller starts now); its kubelet renews
//     the Lease and posts Ready=False for 15 s while the cloud's taint
//     stays. The node must never be tainted;
//   - a lagging cache: the controller's watches trail by 10 s; the node was
//     tainted shut down, and then came back and failed again (a new Ready
//     transition, the cloud's taint still on) before the cache shows even
//     the first failure. The taint must come no sooner than AFTER after
//     the live node's new transition.
func TestOutOfServiceTrust(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// A kubelet's 40 s Lease: the lagging controller's cached Leases trail
	// by trustWatchDelay, and with the harness's 6 s its Breaker would
	// count every node stale and hold every taint (failing closed, as it
	// should), where this case needs it closed.
	cp := harness.Start(t, bins, harness.Options{NodeLeaseDuration: 40 * time.Second})
	c := cp.Client()
	cloud := newShutdownCloud()
	startCloudNodeLifecycle(ctx, t, c, cloud)
	nodes := map[string]*harness.Node{}
	for _, name := range []string{"boot", "blip", "ok-1", "ok-2", "ok-3", "ok-4"} {
		nodes[name] = cp.AddNode(ctx, name)
	}
	flags := []string{"--shutdown-taint=" + health.TaintCloudShutdown + "=" + trustAfter.String(), "--apply-out-of-service", "--leader-elect=false"}

	t.Run("a booting node is never tainted", func(t *testing.T) {
		cloud.setOff("boot", true)
		nodes["boot"].Fail()
		waitNode(ctx, t, c, "boot", "Ready Unknown and the cloud's shutdown taint", func(n *corev1.Node) bool {
			return readyStatus(n) == corev1.ConditionUnknown && hasNodeTaint(n, health.TaintCloudShutdown)
		})
		// The instance starts again; the controller that should have
		// tainted it during the stop starts only now.
		cloud.setOff("boot", false)
		booted := time.Now()
		nodes["boot"].Boot(15 * time.Second)
		op := startControllerReplica(t, cp, "trust-boot", cp.KubeconfigPath(), flags...)
		waitForController(ctx, t, op)
		var sawFalseWithTaint bool
		if err := pollUntil(ctx, func() bool {
			n, err := c.CoreV1().Nodes().Get(ctx, "boot", metav1.GetOptions{})
			if err != nil {
				return false
			}
			if hasNodeTaint(n, corev1.TaintNodeOutOfService) {
				t.Fatalf("the booting node was tainted out of service %v after its boot began: %v", time.Since(booted).Round(time.Millisecond), n.Spec.Taints)
			}
			sawFalseWithTaint = sawFalseWithTaint || (readyStatus(n) == corev1.ConditionFalse && hasNodeTaint(n, health.TaintCloudShutdown))
			// Done once it is Ready and the cloud took its taint off.
			return readyStatus(n) == corev1.ConditionTrue && !hasNodeTaint(n, health.TaintCloudShutdown)
		}); err != nil {
			t.Fatalf("the booted node never became Ready without the cloud's taint: %v", err)
		}
		if !sawFalseWithTaint {
			t.Fatal("the node was never seen booting (Ready=False) under the cloud's shutdown taint: the case was not tested")
		}
		t.Logf("booting node: Ready=False under the cloud's shutdown taint for its boot, no out-of-service taint in %v", time.Since(booted).Round(time.Millisecond))
		if err := op.op.Stop(); err != nil {
			t.Log(err)
		}
	})

	t.Run("a lagging cache does not shorten the wait", func(t *testing.T) {
		proxy, err := cp.StartWatchDelayProxy(trustWatchDelay)
		if err != nil {
			t.Fatal(err)
		}
		op := startControllerReplica(t, cp, "trust-lag", proxy.KubeconfigPath(), flags...)
		waitForController(ctx, t, op)
		cloud.setOff("blip", true)
		nodes["blip"].Fail()
		var shutdownSeen time.Time
		waitNode(ctx, t, c, "blip", "Ready Unknown and the cloud's shutdown taint", func(n *corev1.Node) bool {
			ok := readyStatus(n) == corev1.ConditionUnknown && hasNodeTaint(n, health.TaintCloudShutdown)
			if ok {
				shutdownSeen = time.Now()
			}
			return ok
		})
		// The lagging cache shows the taint about trustWatchDelay from now,
		// and its wait, measured on the old transition, would end trustAfter
		// after that. Halfway into that wait the node has come back and
		// failed again: the node-lifecycle controller's new Unknown, the
		// cloud's taint outliving a blip shorter than its poll.
		sleepCtx(ctx, time.Until(shutdownSeen.Add(trustWatchDelay+trustAfter/2)))
		failedAgain := time.Now().Truncate(time.Second)
		setReadyTransition(ctx, t, c, "blip", failedAgain)
		var taintedAt time.Time
		tctx, tcancel := context.WithTimeout(ctx, 2*time.Minute)
		defer tcancel()
		if err := pollUntil(tctx, func() bool {
			n, err := c.CoreV1().Nodes().Get(ctx, "blip", metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, taint := range n.Spec.Taints {
				if taint.Key == corev1.TaintNodeOutOfService {
					taintedAt = time.Now()
					if taint.TimeAdded != nil {
						taintedAt = taint.TimeAdded.Time
					}
					return true
				}
			}
			return false
		}); err != nil {
			t.Fatalf("the node was never tainted out of service: %v\n%s", err, op.op.Log())
		}
		if early := taintedAt.Sub(failedAgain); early < trustAfter {
			t.Fatalf("the node was tainted out of service %v after its new Ready transition, with AFTER %v: the wait ran on the lagging cache's old transition", early.Round(time.Millisecond), trustAfter)
		}
		t.Logf("lagging cache (%v): tainted %v after the live node's new transition (AFTER %v), %v after the first shutdown was seen",
			trustWatchDelay, taintedAt.Sub(failedAgain).Round(time.Millisecond), trustAfter, taintedAt.Sub(shutdownSeen).Round(time.Millisecond))
		if err := op.op.Stop(); err != nil {
			t.Log(err)
		}
	})
}

// waitNode polls node name until cond holds, or fails the test.
func waitNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name, what string, cond func(*corev1.Node) bool) {
	t.Helper()
	if err := pollUntil(ctx, func() bool {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && cond(n)
	}); err != nil {
		t.Fatalf("node %s: never %s: %v", name, what, err)
	}
}

// waitForController waits until the replica answers /readyz: its caches
// have synced.
func waitForController(ctx context.Context, t *testing.T, r controllerReplica) {
	t.Helper()
	if err := pollUntil(ctx, func() bool {
		_, ok := httpGet(ctx, r.probeURL+"/readyz")
		return ok
	}); err != nil {
		t.Fatalf("podhealth-controller never became ready: %v\n%s", err, r.op.Log())
	}
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return ""
}

// setReadyTransition gives node name's Ready=Unknown condition a new
// lastTransitionTime, as the node-lifecycle controller writes it when a
// node that came back fails again; its lastHeartbeatTime stays, so that
// the node-lifecycle controller sees no heartbeat in it.
func setReadyTransition(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, at time.Time) {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ready corev1.NodeCondition
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond
		}
	}
	if ready.Status != corev1.ConditionUnknown {
		t.Fatalf("node %s: Ready is %q, not Unknown", name, ready.Status)
	}
	ready.LastTransitionTime = metav1.NewTime(at)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{ready}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(fmt.Errorf("setting the Ready transition of node %s: %w", name, err))
	}
}
