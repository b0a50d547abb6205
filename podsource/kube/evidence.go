package kube

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

var (
	_ health.NodeGetter  = (*NodeSource)(nil)
	_ health.NodeLister  = (*NodeSource)(nil)
	_ health.NodeGetter  = (*LiveNodes)(nil)
	_ health.ClaimGetter = (*ClaimSource)(nil)
)

// ErrNodeCacheNotSynced is the error, wrapped, of a NodeSource whose
// informer has not synced yet. It is not a NotFound error: a Checker takes
// it for "unknown", never for "gone". It wraps health.ErrNodesUnavailable,
// so a check asks an unsynced NodeSource about one node only, and says so
// in Report.NodeEvidence.
var ErrNodeCacheNotSynced = fmt.Errorf("the node informer's cache has not synced: %w", health.ErrNodesUnavailable)

// NodeSource gives the Checker node evidence from a node informer's cache:
// health.Options.Nodes and health.Breaker.Nodes. It sends no request to the
// API server, and returns the cache's own objects, which must be treated as
// read-only. Until the informer has synced, GetNode and ListNodes return an
// error wrapping ErrNodeCacheNotSynced, so that an empty cache is never
// taken for missing nodes. A NodeSource is safe for concurrent use.
type NodeSource struct {
	lister corelisters.NodeLister
	synced cache.InformerSynced
}

// NewNodeSource returns a NodeSource over a node informer, typically
// factory.Core().V1().Nodes(). It registers the informer with its factory,
// so call it before factory.Start. Taking the informer rather than its
// lister lets the NodeSource know when the cache has synced.
func NewNodeSource(nodes coreinformers.NodeInformer) (*NodeSource, error) {
	if isNil(nodes) {
		return nil, errors.New("kube: NewNodeSource: nil NodeInformer (a typed nil too)")
	}
	informer := nodes.Informer()
	if isNil(informer) {
		return nil, errors.New("kube: NewNodeSource: the NodeInformer has no informer")
	}
	return &NodeSource{lister: nodes.Lister(), synced: informer.HasSynced}, nil
}

// GetNode returns the cached node; a missing node is a NotFound error, and
// a cache that has not synced an ErrNodeCacheNotSynced one.
func (s *NodeSource) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kube: getting node from cache: %w", err)
	}
	if !s.synced() {
		return nil, fmt.Errorf("kube: getting node %q: %w", name, ErrNodeCacheNotSynced)
	}
	return s.lister.Get(name)
}

// ListNodes returns every cached node, or an ErrNodeCacheNotSynced error
// before the cache has synced.
func (s *NodeSource) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kube: listing nodes from cache: %w", err)
	}
	if !s.synced() {
		return nil, fmt.Errorf("kube: listing nodes: %w", ErrNodeCacheNotSynced)
	}
	return s.lister.List(labels.Everything())
}

// LiveNodes reads nodes straight from the API server. Use it as
// health.Options.LiveNodes, the second look that confirms a node missing
// from the cache is really gone; it is asked only then. A LiveNodes is safe
// for concurrent use.
type LiveNodes struct {
	nodes corev1client.NodesGetter
}

// NewLiveNodes returns a LiveNodes over client, typically
// clientset.CoreV1().
func NewLiveNodes(client corev1client.NodesGetter) (*LiveNodes, error) {
	if isNil(client) {
		return nil, errors.New("kube: NewLiveNodes: nil NodesGetter (a typed nil too)")
	}
	return &LiveNodes{nodes: client}, nil
}

// GetNode sends one GET for the node. A NotFound comes back as it is: the
// node is gone. An answer that says no node can be read now, whichever it
// is (401 Unauthorized, 403 Forbidden: no RBAC for nodes; 429 Too Many
// Requests, 503 Service Unavailable; or no answer at all, such as a refused
// connection), wraps health.ErrNodesUnavailable as well as the API error,
// so that a check asks about no other node, says so in
// Report.NodeEvidence, and logs it once, while apierrors.IsForbidden and
// the like still reach the error. Any other error comes back unchanged.
func (l *LiveNodes) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	node, err := l.nodes.Nodes().Get(ctx, name, metav1.GetOptions{})
	if podsource.NoNodeReadable(err) {
		return nil, fmt.Errorf("kube: getting node %q: %w: %w", name, health.ErrNodesUnavailable, err)
	}
	return node, err
}

// ClaimSource tells the policy the access modes of a pod's claims from an
// informer's PersistentVolumeClaim lister (health.Options.Claims). It sends
// no request and returns the cache's own objects, which must be treated as
// read-only. A ClaimSource is safe for concurrent use.
type ClaimSource struct {
	lister corelisters.PersistentVolumeClaimLister
}

// NewClaimSource returns a ClaimSource over lister, typically
// factory.Core().V1().PersistentVolumeClaims().Lister().
func NewClaimSource(lister corelisters.PersistentVolumeClaimLister) (*ClaimSource, error) {
	if isNil(lister) {
		return nil, errors.New("kube: NewClaimSource: nil PersistentVolumeClaimLister (a typed nil too)")
	}
	return &ClaimSource{lister: lister}, nil
}

// GetClaim returns the cached claim; a missing claim is a NotFound error.
func (s *ClaimSource) GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kube: getting claim from cache: %w", err)
	}
	return s.lister.PersistentVolumeClaims(namespace).Get(name)
}

// EvidencePolicyRules returns the rules that node and claim evidence need on
// top of PolicyRules, exactly the requests they send. Nodes are
// cluster-scoped and so need a ClusterRole: list and watch (the node
// informer behind a NodeSource) and get (LiveNodes, the one live read that
// confirms a node is gone). Claims need, in the workload's namespace, list
// and watch (the claim informer behind a ClaimSource, started for that
// namespace only). Each call returns new slices.
func EvidencePolicyRules() (cluster, namespaced []rbacv1.PolicyRule) {
	return []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		}, []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"list", "watch"}},
		}
}
