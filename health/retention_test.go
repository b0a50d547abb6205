package health_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// TestADroppedCheckerAndItsPodsAreCollectedAtTheNextCollection holds the
// Checker to what a program that makes one per reconcile needs: once it is
// dropped, it and the pods its source returned are garbage at the next
// collection. The check uses both reused buffers (node evidence, and more
// dead pods than fit on the stack); a pool that the Checker owned would
// keep it until the second collection, and a controller's startup pass
// would keep a heap of pod lists.
func TestADroppedCheckerAndItsPodsAreCollectedAtTheNextCollection(t *testing.T) {
	// Only the test's own collection runs, so that an earlier one cannot
	// make a pool's hold look like none.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	collected := make(chan struct{})
	func() {
		var pods []*corev1.Pod
		for i := range 10 {
			pods = append(pods, taintEvicted(fmt.Sprintf("web-%d", i)))
		}
		// node-lost is in neither the cache nor the API server: gone.
		c, err := health.New(health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return pods, nil }), nil,
			health.Options{DryRun: true, Nodes: fake.NewNodes(), LiveNodes: fake.NewNodes()})
		require.NoError(t, err)
		report, err := c.CheckReport(context.Background())
		require.NoError(t, err)
		dead := 0
		for _, p := range report.Pods {
			if p.Verdict.State == health.Dead {
				dead++
			}
		}
		require.Equal(t, 10, dead, "every pod of the gone node is dead, so that the check used its buffers")
		runtime.SetFinalizer(c, func(*health.Checker) { close(collected) })
	}()
	runtime.GC()
	select {
	case <-collected:
	case <-time.After(5 * time.Second):
		t.Fatal("the Checker was still reachable after a collection: something shared keeps it")
	}
}
