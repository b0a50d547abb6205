package health

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// NodeGetter gets a Node by name. It returns an error for which
// apierrors.IsNotFound is true when the node does not exist. The node
// returned must not be mutated. Implementations must be safe for concurrent
// use.
type NodeGetter interface {
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
}

// evidence is what a Checker knows, during one check, beyond the pod
// itself: its node, how long it has been terminating, and the time. Node
// lookups are made on demand, at most once per node per check. An evidence
// belongs to one check and is not safe for concurrent use.
type evidence struct {
	ctx       context.Context
	nodes     NodeGetter // nil: no node evidence
	live      NodeGetter // nil: a missing node is never confirmed gone
	now       time.Time
	sightings *checkSightings
	seen      map[string]nodeFact
}

type nodeFact struct {
	node *corev1.Node
	gone bool
	err  error
}

// node returns the named node. gone is true only when a live read confirmed
// that the node does not exist. With no node evidence, or when the lookup
// fails or is not confirmed, it returns an error: a rule must then have no
// opinion.
func (e *evidence) node(name string) (node *corev1.Node, gone bool, err error) {
	if e == nil || e.nodes == nil {
		return nil, false, errNoNodeEvidence
	}
	if name == "" {
		return nil, false, errors.New("pod is not bound to a node")
	}
	if f, ok := e.seen[name]; ok {
		return f.node, f.gone, f.err
	}
	f := e.lookUp(name)
	if e.seen == nil {
		e.seen = make(map[string]nodeFact)
	}
	e.seen[name] = f
	return f.node, f.gone, f.err
}

func (e *evidence) lookUp(name string) nodeFact {
	node, err := e.nodes.GetNode(e.ctx, name)
	switch {
	case err == nil && node != nil:
		return nodeFact{node: node}
	case err == nil:
		return nodeFact{err: errors.New("node getter returned no node and no error")}
	case !apierrors.IsNotFound(err):
		return nodeFact{err: err}
	case e.live == nil:
		return nodeFact{err: errNodeGoneUnconfirmed}
	}
	node, err = e.live.GetNode(e.ctx, name)
	switch {
	case err == nil && node != nil:
		return nodeFact{node: node} // the cache lags behind
	case err == nil:
		return nodeFact{err: errors.New("live node getter returned no node and no error")}
	case apierrors.IsNotFound(err):
		return nodeFact{gone: true}
	default:
		return nodeFact{err: err}
	}
}

// terminatingSince returns when this Checker (or one sharing its Memory)
// first saw the pod with a deletionTimestamp, on the Checker's own clock,
// so that clock skew between nodes and the API server cannot fool a rule.
// A dry run counts its own sightings and those of real checks, and records
// only its own. It is the zero time for a pod that is not terminating.
func (e *evidence) terminatingSince(pod *corev1.Pod) time.Time {
	if e == nil || pod.DeletionTimestamp == nil || pod.UID == "" {
		return time.Time{}
	}
	return e.sightings.see(string(pod.UID), e.now)
}

var (
	errNoNodeEvidence      = errors.New("no node evidence configured")
	errNodeGoneUnconfirmed = errors.New("node missing from the node source, and no live read confirms it gone")
)

// nodeReady reports whether the node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(node *corev1.Node, key string) bool {
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].Key == key {
			return true
		}
	}
	return false
}
