package health_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// TestDefaultBreakerTripsAtExactlyFiftyFivePercentAtEverySizeUpTo2000 runs
// real checks of a taint-evicted pod behind the default Breaker (0.55, at
// least 3 nodes) at every cluster size from 6 to 2,000: with the fewest
// not-Ready nodes that make up 55 % of the cluster the pod is held back;
// with one fewer it is force-deleted. 55 of 100 did not trip it when the
// share was compared as a float64 product.
func TestDefaultBreakerTripsAtExactlyFiftyFivePercentAtEverySizeUpTo2000(t *testing.T) {
	const maxNodes = 2000
	down := make([]*corev1.Node, maxNodes)
	up := make([]*corev1.Node, maxNodes)
	for i := range down {
		down[i] = newNode(fmt.Sprintf("down-%d", i), notReady)
		up[i] = newNode(fmt.Sprintf("up-%d", i))
	}
	// The pod's node is down-0, a not-Ready node, so that only the Breaker
	// can hold the pod back.
	pod := newPod("web", onNode("down-0"), deleting, disruption("DeletionByTaintManager"))
	run := func(t *testing.T, notReadyNodes, total int) health.PodReport {
		t.Helper()
		cluster := append(append([]*corev1.Node{}, down[:notReadyNodes]...), up[:total-notReadyNodes]...)
		lister := nodeListerFunc(func(context.Context) ([]*corev1.Node, error) { return cluster, nil })
		pods := fake.New(fake.Options{}, pod)
		report, err := newChecker(t, pods, health.Options{Nodes: fake.NewNodes(down[0]), Breaker: health.Breaker{Nodes: lister}}).CheckReport(context.Background())
		require.NoError(t, err)
		return report.Pods[0]
	}
	for total := 6; total <= maxNodes; total++ {
		first := max((55*total+99)/100, 3)
		if first == total {
			continue // every node down trips it whatever the share
		}
		held := run(t, first, total)
		require.Equal(t, health.HeldByBreaker, held.HeldBack.Reason, "%d of %d nodes not Ready must trip the default Breaker", first, total)
		require.Contains(t, held.HeldBack.Detail, fmt.Sprintf("%d of %d nodes are not Ready", first, total))
		if first-1 >= 1 {
			require.Equal(t, health.ForceDeleted, run(t, first-1, total).Outcome, "%d of %d nodes not Ready must not trip the default Breaker", first-1, total)
		}
	}
}

// TestNewRefusesABreakerShareThatRoundsToZero: the Breaker reads its share
// to the millionth, so a positive share below half a millionth would be
// read as zero, which means the default: refused instead.
func TestNewRefusesABreakerShareThatRoundsToZero(t *testing.T) {
	pods := fake.New(fake.Options{})
	_, err := health.New(pods, pods, health.Options{Breaker: health.Breaker{UnhealthyShare: 4e-7}})
	require.ErrorContains(t, err, "millionth")
	_, err = health.New(pods, pods, health.Options{Breaker: health.Breaker{UnhealthyShare: 1e-6}})
	require.NoError(t, err)
}
