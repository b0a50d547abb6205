package plugin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/health"
)

var (
	_ health.NodeGetter  = (*nodeSnapshot)(nil)
	_ health.NodeLister  = (*nodeSnapshot)(nil)
	_ health.NodeGetter  = (*onceNodes)(nil)
	_ health.ClaimGetter = (*onceClaims)(nil)
)

// nodeSnapshot is the cluster's nodes as one paginated LIST returned them:
// the node evidence (health.Options.Nodes) and the breaker's view
// (health.Breaker.Nodes) of one run. A node missing from it is NotFound, and
// the Checker then asks its LiveNodes before it calls the node gone. It never
// changes after it is built, so it is safe for concurrent use.
type nodeSnapshot struct {
	byName map[string]*corev1.Node
	list   []*corev1.Node
	// warnings says how the list was read, when it is not one
	// consistent snapshot.
	warnings []string
}

// listNodes reads every node, pageSize at a time. A list that outlives its
// continue token goes on at the API server's current state, as a pod scan
// does (see resumeExpired); a node read twice across the two states keeps
// its later object.
func listNodes(ctx context.Context, cluster Cluster, pageSize int64) (*nodeSnapshot, error) {
	s := &nodeSnapshot{byName: map[string]*corev1.Node{}}
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		page, err := cluster.ListNodes(ctx, opts)
		if next, ok := resumeExpired(err, opts); ok {
			opts.Continue = next
			s.warnings = appendOnce(s.warnings, "the node list took longer than the API server keeps a consistent snapshot; the rest of it was read at a later state")
			continue
		}
		if err != nil {
			return nil, err
		}
		for i := range page.Items {
			n := &page.Items[i]
			if _, seen := s.byName[n.Name]; seen {
				for j := range s.list {
					if s.list[j].Name == n.Name {
						s.list[j] = n
					}
				}
			} else {
				s.list = append(s.list, n)
			}
			s.byName[n.Name] = n
		}
		if page.Continue == "" {
			return s, nil
		}
		opts.Continue = page.Continue
	}
}

func (s *nodeSnapshot) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	if n, ok := s.byName[name]; ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
}

func (s *nodeSnapshot) ListNodes(context.Context) ([]*corev1.Node, error) {
	return s.list, nil
}

// onceNodes asks its getter about each node at most once per run and
// remembers the answer, error included: a scan checks its pods a page at a
// time, and a node missing from the snapshot would otherwise be read live
// once per page. It is safe for concurrent use.
type onceNodes struct {
	getter health.NodeGetter
	mu     sync.Mutex
	seen   map[string]nodeAnswer
}

type nodeAnswer struct {
	node *corev1.Node
	err  error
}

func newOnceNodes(getter health.NodeGetter) *onceNodes {
	return &onceNodes{getter: getter, seen: map[string]nodeAnswer{}}
}

func (o *onceNodes) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	o.mu.Lock()
	a, ok := o.seen[name]
	o.mu.Unlock()
	if ok {
		return a.node, a.err
	}
	node, err := o.getter.GetNode(ctx, name)
	if ctx.Err() != nil {
		return node, err // a cancelled read says nothing about the node
	}
	o.mu.Lock()
	o.seen[name] = nodeAnswer{node: node, err: err}
	o.mu.Unlock()
	return node, err
}

// onceClaims reads a claim live, at most once per run, so that the policy
// knows its access modes (health.Options.Claims). A claim that cannot be
// read (no RBAC, say) is an error, and the policy then counts the pod as
// stateful. It is safe for concurrent use.
type onceClaims struct {
	cluster Cluster
	mu      sync.Mutex
	seen    map[string]claimAnswer
}

type claimAnswer struct {
	claim *corev1.PersistentVolumeClaim
	err   error
}

func newOnceClaims(cluster Cluster) *onceClaims {
	return &onceClaims{cluster: cluster, seen: map[string]claimAnswer{}}
}

func (o *onceClaims) GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	key := namespace + "/" + name
	o.mu.Lock()
	a, ok := o.seen[key]
	o.mu.Unlock()
	if ok {
		return a.claim, a.err
	}
	claim, err := o.cluster.GetClaim(ctx, namespace, name)
	if err != nil {
		err = fmt.Errorf("reading claim %s: %w", key, err)
	}
	if ctx.Err() != nil {
		return claim, err
	}
	o.mu.Lock()
	o.seen[key] = claimAnswer{claim: claim, err: err}
	o.mu.Unlock()
	return claim, err
}

// evidence is the node and claim evidence of one run. When the nodes could
// not be listed, nodes is nil and the Checker runs without node evidence.
type evidence struct {
	nodes  *nodeSnapshot
	live   *onceNodes
	claims *onceClaims
}

// options returns the Checker options of a run with this evidence: the
// library's default rules and fencing policy, its breaker over the same
// nodes, and the claims read live.
func (e *evidence) options() health.Options {
	opts := health.Options{Claims: e.claims}
	if e.nodes != nil {
		opts.Nodes = e.nodes
		opts.LiveNodes = e.live
		opts.Breaker = health.Breaker{Nodes: e.nodes}
	}
	return opts
}

// newEvidence lists the nodes and prepares the live reads. A Forbidden or
// Unauthorized answer to the node LIST is not an error: the run goes on
// without node evidence, and the returned warning says what that costs.
func newEvidence(ctx context.Context, cluster Cluster, pageSize int64) (*evidence, []string, error) {
	e := &evidence{claims: newOnceClaims(cluster)}
	nodes, err := listNodes(ctx, cluster, pageSize)
	switch {
	case err == nil:
		e.nodes, e.live = nodes, newOnceNodes(liveNodes{cluster: cluster})
		return e, nodes.warnings, nil
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return e, []string{noNodeEvidenceWarning(err)}, nil
	default:
		return nil, nil, fmt.Errorf("cannot list nodes: %w", err)
	}
}

// resumeExpired returns the continue token with which a paginated LIST
// that failed with err goes on, when err is a 410 Expired on a later page
// whose status offers a token at the current state.
func resumeExpired(err error, opts metav1.ListOptions) (string, bool) {
	var status apierrors.APIStatus
	if err == nil || !apierrors.IsResourceExpired(err) || opts.Continue == "" || !errors.As(err, &status) || status.Status().Continue == "" {
		return "", false
	}
	return status.Status().Continue, true
}

// noNodeEvidenceWarning says which rules cannot apply without node
// evidence and what the run falls back to.
func noNodeEvidenceWarning(err error) string {
	return fmt.Sprintf("cannot list nodes (%v): without node evidence the rules NodeGone, OutOfService and TerminatingTooLong cannot apply, "+
		"TaintEvicted calls a pod dead only once its deletion deadline has passed, pods that need fencing evidence (StatefulSet, ReadWriteOnce claims) stay held back, "+
		"and the breaker cannot see the cluster's nodes; grant list and get on nodes for the full rules", err)
}
