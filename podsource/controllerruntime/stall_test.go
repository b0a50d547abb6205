package controllerruntime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/health"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/fake"
)

// unsyncedCache is a client.Reader of nodes as controller-runtime's cache
// is without RBAC for nodes: every read waits for its context to end, until
// synced is set; then it answers NotReady nodes. It counts the reads.
type unsyncedCache struct {
	client.Reader
	mu     sync.Mutex
	synced bool
	reads  int
}

func (c *unsyncedCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.mu.Lock()
	c.reads++
	synced := c.synced
	c.mu.Unlock()
	if !synced {
		<-ctx.Done()
		return apierrors.NewTimeoutError("failed waiting for *v1.Node Informer to sync", 0)
	}
	node := obj.(*corev1.Node)
	node.Name = key.Name
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	return nil
}

func (c *unsyncedCache) List(ctx context.Context, _ client.ObjectList, _ ...client.ListOption) error {
	<-ctx.Done()
	return ctx.Err()
}

func (c *unsyncedCache) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// TestUnsyncedNodeCacheCostsOneTimeoutNotOnePerNodeAndReconcile: with a
// node cache that never syncs, the first check pays the read timeout once
// for its three pods on three nodes, and later checks pay none: each read
// fails at once with health.ErrNodesUnavailable, which the Report names,
// while one background probe at a time waits on the cache. Every node is
// then unknown, so taint-evicted pods wait for their deadline and nothing
// is deleted early. Once the cache syncs, a probe notices and the nodes
// are read again.
func TestUnsyncedNodeCacheCostsOneTimeoutNotOnePerNodeAndReconcile(t *testing.T) {
	old := crh.SetReadTimeout(300 * time.Millisecond)
	t.Cleanup(func() { crh.SetReadTimeout(old) })

	future := metav1.NewTime(time.Now().Add(time.Hour)) // the pods' deletion deadline has not passed
	var pods []*corev1.Pod
	for _, n := range []string{"n1", "n2", "n3"} {
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "registry-" + n, DeletionTimestamp: &future},
			Spec:       corev1.PodSpec{NodeName: n},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager"}}},
		})
	}
	source := fake.New(fake.Options{}, pods...)
	cache := &unsyncedCache{}
	nodes, err := crh.NewNodes(cache)
	require.NoError(t, err)
	checker, err := health.New(source, source, health.Options{Nodes: nodes})
	require.NoError(t, err)

	for i := range 5 {
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		require.ErrorIs(t, report.NodeEvidence, health.ErrNodesUnavailable, "check %d", i)
		for _, p := range report.Pods {
			require.Equal(t, health.Terminating, p.Verdict.State, "every node is unknown")
		}
	}
	// One read timed out in the first check; at most one probe waits in
	// the background since. Without the guard: 3 reads per check, each
	// waiting the full timeout, 15 in all.
	require.LessOrEqual(t, cache.count(), 2, "reads of the unsynced cache over five checks")
	require.Empty(t, source.Deletes())

	cache.mu.Lock()
	cache.synced = true
	cache.mu.Unlock()
	require.Eventually(t, func() bool {
		report, err := checker.CheckReport(context.Background())
		return err == nil && report.NodeEvidence == nil && report.Pods[0].Verdict.State == health.Dead
	}, 10*time.Second, 50*time.Millisecond, "once the cache syncs, the nodes are read again, and they are not Ready")
}
