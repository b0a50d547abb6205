package fake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
)

var (
	_ health.NodeGetter  = (*Nodes)(nil)
	_ health.NodeLister  = (*Nodes)(nil)
	_ health.ClaimGetter = (*Claims)(nil)
)

// Nodes is an in-memory health.NodeGetter and health.NodeLister. Like Pods,
// it never mutates a stored node and answers with real API errors. Err, when
// set, is returned by every call instead. Nodes is safe for concurrent use.
type Nodes struct {
	mu    sync.Mutex
	nodes map[string]*corev1.Node
	err   error
	gets  int
}

// NewNodes returns Nodes seeded with deep copies of nodes.
func NewNodes(nodes ...*corev1.Node) *Nodes {
	n := &Nodes{nodes: make(map[string]*corev1.Node)}
	for _, node := range nodes {
		n.Set(node)
	}
	return n
}

// Set stores a deep copy of node, replacing any node of the same name.
func (n *Nodes) Set(node *corev1.Node) {
	if node == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[node.Name] = node.DeepCopy()
}

// Delete removes the named node.
func (n *Nodes) Delete(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.nodes, name)
}

// FailWith makes every later call return err; nil restores normal answers.
func (n *Nodes) FailWith(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.err = err
}

// GetNode returns the stored node, or a NotFound error.
func (n *Nodes) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake: get node: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.gets++
	if n.err != nil {
		return nil, n.err
	}
	node, ok := n.nodes[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}
	return node, nil
}

// ListNodes returns the stored nodes sorted by name.
func (n *Nodes) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake: list nodes: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return nil, n.err
	}
	out := make([]*corev1.Node, 0, len(n.nodes))
	for _, node := range n.nodes {
		out = append(out, node)
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Gets returns how many times GetNode was called.
func (n *Nodes) Gets() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gets
}

// Claims is an in-memory health.ClaimGetter. It is safe for concurrent use.
type Claims struct {
	mu     sync.Mutex
	claims map[types.NamespacedName]*corev1.PersistentVolumeClaim
}

// NewClaims returns Claims seeded with deep copies of claims.
func NewClaims(claims ...*corev1.PersistentVolumeClaim) *Claims {
	c := &Claims{claims: make(map[types.NamespacedName]*corev1.PersistentVolumeClaim)}
	for _, claim := range claims {
		c.claims[types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}] = claim.DeepCopy()
	}
	return c
}

// GetClaim returns the stored claim, or a NotFound error.
func (c *Claims) GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake: get claim: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	claim, ok := c.claims[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), name)
	}
	return claim, nil
}
