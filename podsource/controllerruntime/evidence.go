package controllerruntime

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/health"
)

var (
	_ health.NodeGetter  = (*Nodes)(nil)
	_ health.NodeLister  = (*Nodes)(nil)
	_ health.ClaimGetter = (*Claims)(nil)
)

// Nodes reads nodes through a client.Reader. Over the manager's cache
// (mgr.GetClient() or mgr.GetCache()) it is the node evidence of
// health.Options.Nodes and health.Breaker.Nodes; over the manager's live
// reader (mgr.GetAPIReader()) it is health.Options.LiveNodes, the one GET
// that confirms that a node missing from the cache is gone.
//
// controller-runtime's cache starts a node informer on the first read and
// waits for it to sync before it answers, so an empty cache is never taken
// for missing nodes; it ignores the context of the read itself, so Nodes
// checks the context first. Each read waits at most 10 seconds (a cache
// without RBAC on nodes never syncs): a read that times out is an error, and
// the node is then unknown to a Checker, never gone. That timeout is paid
// once, not once per node and reconcile: after it, every read fails at once
// with an error wrapping health.ErrNodesUnavailable (so a check asks about
// no other node, and says so in its Report and once in its log), while one
// read at a time probes the cache in the background with the full timeout;
// once the cache answers, reads go to it again. A missing node is the reader's NotFound error,
// wrapped (apierrors.IsNotFound reaches it), which a Checker reads as "missing from this reader" and
// confirms with LiveNodes. Every call returns new objects. A Nodes is safe
// for concurrent use when its reader is.
type Nodes struct {
	reader client.Reader
	guard  stallGuard
}

// NewNodes returns a Nodes over reader.
func NewNodes(reader client.Reader) (*Nodes, error) {
	if isNil(reader) {
		return nil, errors.New("controllerruntime: NewNodes: nil client.Reader")
	}
	return &Nodes{reader: reader}, nil
}

// GetNode returns the named node. A missing node is a NotFound error.
func (n *Nodes) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("controllerruntime: getting node %q: %w", name, err)
	}
	node := &corev1.Node{}
	err := n.guard.read(ctx, func(ctx context.Context) error { return n.reader.Get(ctx, client.ObjectKey{Name: name}, node) })
	switch {
	case errors.Is(err, errCacheNotSynced):
		return nil, fmt.Errorf("controllerruntime: getting node %q: %w: %w", name, health.ErrNodesUnavailable, err)
	case err != nil:
		return nil, fmt.Errorf("controllerruntime: getting node %q: %w", name, err)
	}
	return node, nil
}

// ListNodes returns every node.
func (n *Nodes) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("controllerruntime: listing nodes: %w", err)
	}
	var list corev1.NodeList
	err := n.guard.read(ctx, func(ctx context.Context) error { return n.reader.List(ctx, &list) })
	switch {
	case errors.Is(err, errCacheNotSynced):
		return nil, fmt.Errorf("controllerruntime: listing nodes: %w: %w", health.ErrNodesUnavailable, err)
	case err != nil:
		return nil, fmt.Errorf("controllerruntime: listing nodes: %w", err)
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// Claims tells the policy the access modes of a pod's claims
// (health.Options.Claims), read through a client.Reader, typically the
// manager's cache. It checks the context first, as the cache ignores it.
// A missing claim is the reader's NotFound error, wrapped. A cache that
// never syncs costs one read timeout, as for Nodes: later reads fail at
// once (the policy then counts the pod as stateful) until a background
// probe finds the cache answering. Every call returns a new
// object. A Claims is safe for concurrent use when its reader is.
type Claims struct {
	reader client.Reader
	guard  stallGuard
}

// NewClaims returns a Claims over reader.
func NewClaims(reader client.Reader) (*Claims, error) {
	if isNil(reader) {
		return nil, errors.New("controllerruntime: NewClaims: nil client.Reader")
	}
	return &Claims{reader: reader}, nil
}

// GetClaim returns the named PersistentVolumeClaim.
func (c *Claims) GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("controllerruntime: getting claim %s/%s: %w", namespace, name, err)
	}
	claim := &corev1.PersistentVolumeClaim{}
	if err := c.guard.read(ctx, func(ctx context.Context) error {
		return c.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, claim)
	}); err != nil {
		return nil, fmt.Errorf("controllerruntime: getting claim %s/%s: %w", namespace, name, err)
	}
	return claim, nil
}
