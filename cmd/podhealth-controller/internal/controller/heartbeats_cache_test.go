package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/podhealth/podhealth/health"
)

// TestTheBreakersViewListsTheCachedNodesAndMarksOnlyCopies: over
// controller-runtime's informer cache, the view lists the informer's own
// node objects, with no copy per listing; a node whose Lease is stale is
// marked not Ready in a copy, and the cached node still says Ready.
func TestTheBreakersViewListsTheCachedNodesAndMarksOnlyCopies(t *testing.T) {
	now := time.Now()
	objs := realNodes(t, 4, now)
	objs[len(objs)-1] = nodeLease("worker-00003", now.Add(-time.Minute), 40) // the last node's Lease, stale
	c, _ := informerCache(t, objs...)
	view := breakerOverInformers(t, c, clock.RealClock{}, false)
	ctx := context.Background()

	informer, err := c.GetInformer(ctx, &corev1.Node{})
	require.NoError(t, err)
	store := informer.(indexedInformer).GetIndexer()
	cached := func(name string) *corev1.Node {
		obj, ok, err := store.GetByKey(name)
		require.NoError(t, err)
		require.True(t, ok, name)
		return obj.(*corev1.Node)
	}

	first, err := view.ListNodes(ctx)
	require.NoError(t, err)
	second, err := view.ListNodes(ctx)
	require.NoError(t, err)
	require.Len(t, first, 4)
	again := make(map[string]*corev1.Node)
	for _, node := range second {
		again[node.Name] = node
	}
	for _, node := range first {
		switch node.Name {
		case "worker-00003":
			require.Equal(t, health.NodeNotReady, health.NodeStateOf(node), "the view counts the node whose Lease is stale")
			require.NotSame(t, cached(node.Name), node, "it marks a copy")
			require.Equal(t, health.NodeReady, health.NodeStateOf(cached(node.Name)), "the cached node is unchanged")
		default:
			require.Equal(t, health.NodeReady, health.NodeStateOf(node))
			require.Same(t, cached(node.Name), node, "the view holds the cache's own object")
			require.Same(t, node, again[node.Name], "a second listing copies nothing either")
		}
	}
}

// TestTheCachedNodesFailClosedUntilTheirInformerHasSynced: before the node
// informer has synced, and on a cancelled context, the listing fails with
// an error that trips the Breaker, at once; an informer that gives out no
// store leaves the listing to the fallback.
func TestTheCachedNodesFailClosedUntilTheirInformerHasSynced(t *testing.T) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	require.NoError(t, store.Add(node("n1", corev1.ConditionTrue)))
	synced := false
	nodes := informerNodes{lister: corelisters.NewNodeLister(store), synced: func() bool { return synced }}
	ctx := context.Background()

	_, err := nodes.ListNodes(ctx)
	require.ErrorIs(t, err, health.ErrNodesUnavailable)
	require.Equal(t, `breaker open: cannot read node health: listing the cached nodes: podhealth: node evidence unavailable: their cache has not synced`, health.Breaker{Nodes: nodes}.Open(ctx))

	synced = true
	listed, err := nodes.ListNodes(ctx)
	require.NoError(t, err)
	require.Len(t, listed, 1)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = nodes.ListNodes(cancelled)
	require.ErrorIs(t, err, context.Canceled)

	fallback := listedNodes{node("n2", corev1.ConditionTrue)}
	require.Equal(t, fallback, breakerNodesOf(storelessInformer{}, fallback))
}

// storelessInformer is a cache.Informer that gives out no store.
type storelessInformer struct{ cache.Informer }
