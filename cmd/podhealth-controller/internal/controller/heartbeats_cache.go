package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/podhealth/podhealth/health"
)

var _ health.NodeLister = informerNodes{}

// informerNodes lists the nodes of the node informer's own store, as a
// client-go lister does, for the Breaker's view (heartbeatNodes): the
// cache's objects, not copies of them, in a new slice. The Breaker changes
// no node it lists (health.NodeLister), and the view copies the few it
// marks.
//
// Why: a listing through the manager's cache reader copies every node
// twice (a deep copy, then into the typed list). Each change of a node's
// state, and each stale Lease renewed, ends the shared view (viewMemo), so
// as the nodes of a mass failure came back the check after each report
// listed, and copied, every node: at 2,500 nodes those copies were a third
// of the controller's CPU in the recovery.
//
// It reads the store the informer fills before it tells any handler of a
// change, as the cache reader does: so an event's handler that ends the
// view is followed by a listing that has the change. A handler's own
// copy of the nodes could not promise that: informers tell their handlers
// each in its own time.
//
// Until the informer has synced it fails at once with an error wrapping
// health.ErrNodesUnavailable, which trips the Breaker: it never waits for
// the cache. It is safe for concurrent use.
type informerNodes struct {
	lister corelisters.NodeLister
	synced func() bool
}

// ListNodes returns every node in the informer's store.
func (n informerNodes) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing the cached nodes: %w", err)
	}
	if !n.synced() {
		return nil, fmt.Errorf("listing the cached nodes: %w: their cache has not synced", health.ErrNodesUnavailable)
	}
	nodes, err := n.lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing the cached nodes: %w: %w", health.ErrNodesUnavailable, err)
	}
	return nodes, nil
}

// indexedInformer is the part of client-go's SharedIndexInformer, which
// controller-runtime's cache returns for a cluster-scoped kind, that
// cache.Informer leaves out.
type indexedInformer interface {
	GetIndexer() toolscache.Indexer
}

// breakerNodesOf returns the nodes of informer's store (informerNodes), or
// otherwise, when informer keeps no store it gives out, fallback.
func breakerNodesOf(informer cache.Informer, fallback health.NodeLister) health.NodeLister {
	indexed, ok := informer.(indexedInformer)
	if !ok {
		return fallback
	}
	return informerNodes{lister: corelisters.NewNodeLister(indexed.GetIndexer()), synced: informer.HasSynced}
}
