package kube_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

// evidenceInformers starts node and claim informers over client.
func evidenceInformers(t *testing.T, client *fake.Clientset) (*kube.NodeSource, *kube.ClaimSource) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes, err := kube.NewNodeSource(factory.Core().V1().Nodes())
	require.NoError(t, err)
	claims, err := kube.NewClaimSource(factory.Core().V1().PersistentVolumeClaims().Lister())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		require.True(t, ok, "cache of %v did not sync", typ)
	}
	return nodes, claims
}

func TestNodeSourceReadsTheCacheOnly(t *testing.T) {
	client := fake.NewClientset(loadNode(t, "node-lost.json"), loadNode(t, "node-healthy.json"))
	nodes, _ := evidenceInformers(t, client)
	before := len(client.Actions())

	got, err := nodes.GetNode(context.Background(), "node-lost")
	require.NoError(t, err)
	require.Equal(t, "node-lost", got.Name)
	_, err = nodes.GetNode(context.Background(), "nowhere")
	require.True(t, apierrors.IsNotFound(err), "got %v", err)
	all, err := nodes.ListNodes(context.Background())
	require.NoError(t, err)
	require.Len(t, all, 2)
	// The informers' own list and watch may still be starting (a watch
	// can follow WaitForCacheSync on a busy machine); a read of the
	// NodeSource is any other request.
	for _, a := range client.Actions()[before:] {
		require.Contains(t, []string{"list", "watch"}, a.GetVerb(), "a request of the NodeSource reached the API server: %v", a)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = nodes.GetNode(ctx, "node-lost")
	require.ErrorIs(t, err, context.Canceled)
}

func TestConstructorsRefuseNil(t *testing.T) {
	_, err := kube.NewNodeSource(nil)
	require.Error(t, err)
	_, err = kube.NewLiveNodes(nil)
	require.Error(t, err)
	_, err = kube.NewClaimSource(nil)
	require.Error(t, err)
}

// checkerWithEvidence wires a checker over informers of client for the
// pods of namespace default, with node evidence (cache plus a live read) and
// claim evidence, and returns it with its node source.
func checkerWithEvidence(t *testing.T, client *fake.Clientset) (*health.Checker, *kube.NodeSource) {
	t.Helper()
	nodes, claims := evidenceInformers(t, client)
	live, err := kube.NewLiveNodes(client.CoreV1())
	require.NoError(t, err)
	source, err := kube.NewListerSource(startPodInformer(t, client, "default"), "default", registry)
	require.NoError(t, err)
	deleter, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: registry})
	require.NoError(t, err)
	checker, err := health.New(source, deleter, health.Options{
		Nodes:     nodes,
		LiveNodes: live,
		Claims:    claims,
	})
	require.NoError(t, err)
	return checker, nodes
}

// A StatefulSet pod on the real lost node is held back until the node gets
// the out-of-service taint; a missing node is confirmed with one live GET.
func TestStatefulPodWaitsForFencingEvidenceOverInformers(t *testing.T) {
	lost := loadNode(t, "node-lost.json")
	pod := loadPod(t, podTaintEvicted)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts"}}
	client := fake.NewClientset(lost, pod)
	checker, nodes := checkerWithEvidence(t, client)

	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
	require.Contains(t, report.Pods[0].HeldBack.String(), "StatefulSet db")
	require.Empty(t, deleteActions(client))

	fencedNode := lost.DeepCopy()
	fencedNode.Spec.Taints = append(fencedNode.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	_, err = client.CoreV1().Nodes().Update(context.Background(), fencedNode, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := nodes.GetNode(context.Background(), "node-lost")
		return err == nil && len(n.Spec.Taints) == 3
	}, eventually, tick)

	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome, "held back: %s", report.Pods[0].HeldBack)
	require.Len(t, deleteActions(client), 1)
}

func TestLiveNodesConfirmsAMissingNodeWithOneGet(t *testing.T) {
	pod := loadPod(t, podUserDeleted) // terminating on node-healthy, which the cache lacks
	client := fake.NewClientset(pod)
	checker, _ := checkerWithEvidence(t, client)
	before := len(client.Actions())

	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.Dead, report.Pods[0].Verdict.State)
	require.Equal(t, "NodeGone", report.Pods[0].Verdict.Rule)
	require.Equal(t, []string{"get nodes", "delete pods"}, verbs(client, before))
}

// A node informer that has not synced holds no evidence: its empty cache
// must not say NotFound, or a Checker would ask whether every node is gone.
func TestNodeSourceIsNoEvidenceUntilItsInformerHasSynced(t *testing.T) {
	client := fake.NewClientset(loadNode(t, "node-healthy.json"))
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes, err := kube.NewNodeSource(factory.Core().V1().Nodes())
	require.NoError(t, err)

	_, err = nodes.GetNode(context.Background(), "node-healthy")
	require.ErrorIs(t, err, kube.ErrNodeCacheNotSynced)
	require.ErrorIs(t, err, health.ErrNodesUnavailable, "a check asks an unsynced cache about no other node")
	require.False(t, apierrors.IsNotFound(err), "an unsynced cache is unknown, not NotFound: %v", err)
	_, err = nodes.ListNodes(context.Background())
	require.ErrorIs(t, err, kube.ErrNodeCacheNotSynced)

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		require.True(t, ok, "cache of %v did not sync", typ)
	}
	got, err := nodes.GetNode(context.Background(), "node-healthy")
	require.NoError(t, err)
	require.Equal(t, "node-healthy", got.Name)
	_, err = nodes.GetNode(context.Background(), "nowhere")
	require.True(t, apierrors.IsNotFound(err), "once synced, a missing node is NotFound: %v", err)
}

// With an unsynced node cache every node is unknown: a StatefulSet pod
// that an admin's NoExecute taint evicts from a Ready node, and an orphan
// candidate, are never force-deleted, no live read is sent on the word of
// the empty cache, and the breaker holds back.
func TestUnsyncedNodeCacheNeverLeadsToAForceDelete(t *testing.T) {
	draining := loadPod(t, podTaintEvicted)
	draining.Spec.NodeName = "node-healthy"
	draining.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts"}}
	running := loadPod(t, podAlive)
	client := fake.NewClientset(loadNode(t, "node-healthy.json"), draining, running)
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes, err := kube.NewNodeSource(factory.Core().V1().Nodes()) // never started
	require.NoError(t, err)
	live, err := kube.NewLiveNodes(client.CoreV1())
	require.NoError(t, err)
	source, err := kube.NewListerSource(startPodInformer(t, client, "default"), "default", podsource.WholeNamespace())
	require.NoError(t, err)
	deleter, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: podsource.WholeNamespace()})
	require.NoError(t, err)
	checker, err := health.New(source, deleter, health.Options{Nodes: nodes, LiveNodes: live, Breaker: health.Breaker{Nodes: nodes}})
	require.NoError(t, err)
	before := len(client.Actions())

	for range 3 {
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		for _, p := range report.Pods {
			require.NotEqual(t, health.ForceDeleted, p.Outcome, "pod %s: %+v", p.Pod.Name, p.Verdict)
		}
	}
	require.Empty(t, deleteActions(client))
	require.Empty(t, verbs(client, before), "no request at all: the empty cache is no reason for a live read")
}
