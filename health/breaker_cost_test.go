package health_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// A Breaker costs a check one listing of the nodes when the check reaches
// a dead pod to force-delete, however many dead pods and failed nodes it
// meets, and nothing when every pod is alive or every dead pod is already
// remembered.
func TestBreakerListsNodesOncePerCheckAndNeverForLivePods(t *testing.T) {
	nodes := []*corev1.Node{newNode("node-a")}
	for i := range 3 {
		nodes = append(nodes, newNode(fmt.Sprintf("failed-%d", i), notReady))
	}
	for i := range 7 {
		nodes = append(nodes, newNode(fmt.Sprintf("ready-%d", i)))
	}
	lister := fake.NewNodes(nodes...)
	var lists atomic.Int64
	breaker := health.Breaker{Nodes: nodeListerFunc(func(ctx context.Context) ([]*corev1.Node, error) {
		lists.Add(1)
		return lister.ListNodes(ctx)
	})}

	var live []*corev1.Pod
	for i := range 20 {
		live = append(live, newPod(fmt.Sprintf("alive-%d", i)))
	}
	_, err := newChecker(t, fake.New(fake.Options{}, live...), health.Options{Breaker: breaker}).Check(context.Background())
	require.NoError(t, err)
	require.Zero(t, lists.Load(), "node listings in a check of live pods")

	withDead := append([]*corev1.Pod(nil), live...)
	for i := range 9 {
		withDead = append(withDead, newPod(fmt.Sprintf("dead-%d", i), onNode(fmt.Sprintf("failed-%d", i%3)),
			phase(corev1.PodFailed), disruption(string(corev1.PodReasonTerminationByKubelet))))
	}
	source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return withDead, nil })
	var deletes atomic.Int64
	deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { deletes.Add(1); return nil })
	checker, err := health.New(source, deleter, health.Options{Breaker: breaker})
	require.NoError(t, err)
	healthy, err := checker.Check(context.Background())
	require.NoError(t, err)
	require.True(t, healthy)
	require.Equal(t, int64(9), deletes.Load(), "3 of 11 nodes not Ready do not trip the breaker")
	require.Equal(t, int64(1), lists.Load(), "node listings in a check of 9 dead pods on 3 failed nodes")

	_, err = checker.Check(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(1), lists.Load(), "node listings in a check whose dead pods are remembered")
}
