package health

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// NodeGetter gets a Node by name. It returns an error for which
// apierrors.IsNotFound is true when the node does not exist. It may read a
// cache that lags; the Checker confirms a missing node before it acts on it
// (see Evidence.NodeGone). The node returned must not be mutated.
// Implementations must be safe for concurrent use.
type NodeGetter interface {
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
}

// NodeGetterFunc adapts a function to a NodeGetter.
type NodeGetterFunc func(ctx context.Context, name string) (*corev1.Node, error)

// GetNode calls f(ctx, name).
func (f NodeGetterFunc) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	return f(ctx, name)
}

// Node taint and condition facts the rules read.
const (
	// TaintOutOfService is set by an admin or a fencing tool on a node that
	// is powered off: its pods can be removed without risk of a second
	// writer.
	TaintOutOfService = "node.kubernetes.io/out-of-service"
	// DefaultNodeGoneConfirmation is how long a node must stay missing from
	// the cache before it counts as gone, when no live NodeGetter confirms it.
	DefaultNodeGoneConfirmation = 40 * time.Second
)

// NodeEvidence configures where a Checker learns about nodes. The zero value
// means no node evidence: node-aware rules then have no opinion, and pods
// that need fencing evidence are held back.
type NodeEvidence struct {
	// Nodes gets nodes, typically from a node lister. Nil means no node
	// evidence.
	Nodes NodeGetter
	// Live, when not nil, is asked again when Nodes says a node is missing,
	// typically a direct API client: a node is gone only if Live says
	// NotFound too. Nil means the node must stay missing from Nodes for
	// Confirmation instead.
	Live NodeGetter
	// Confirmation is how long a node must stay missing from Nodes before it
	// counts as gone, when Live is nil. Zero means
	// DefaultNodeGoneConfirmation.
	Confirmation time.Duration
}

// Evidence is what a Checker knows, during one check, beyond the pod
// itself: its node, how long it has been terminating, and the time. Rules
// that need it set Rule.WithEvidence. Node lookups are made on demand, at
// most once per node per check. An Evidence belongs to one check and is not
// safe for concurrent use.
type Evidence struct {
	ctx       context.Context
	cfg       NodeEvidence
	now       time.Time
	sightings *sightings
	nodes     map[string]nodeFact
}

type nodeFact struct {
	node *corev1.Node
	gone bool
	err  error
}

func newEvidence(ctx context.Context, cfg NodeEvidence, now time.Time, s *sightings) *Evidence {
	return &Evidence{ctx: ctx, cfg: cfg, now: now, sightings: s}
}

// Now is the Checker's clock at the start of the check.
func (e *Evidence) Now() time.Time { return e.now }

// Node returns the named node. gone is true only when the node is confirmed
// missing. With no NodeGetter configured, or when the lookup fails, it
// returns an error: a rule must then have no opinion.
func (e *Evidence) Node(name string) (node *corev1.Node, gone bool, err error) {
	if e == nil || e.cfg.Nodes == nil {
		return nil, false, ErrNoNodeEvidence
	}
	if name == "" {
		return nil, false, errors.New("pod is not bound to a node")
	}
	if f, ok := e.nodes[name]; ok {
		return f.node, f.gone, f.err
	}
	f := e.lookUp(name)
	if e.nodes == nil {
		e.nodes = make(map[string]nodeFact)
	}
	e.nodes[name] = f
	return f.node, f.gone, f.err
}

func (e *Evidence) lookUp(name string) nodeFact {
	node, err := e.cfg.Nodes.GetNode(e.ctx, name)
	if err == nil {
		e.sightings.forget(nodeKey(name))
		return nodeFact{node: node}
	}
	if !apierrors.IsNotFound(err) {
		return nodeFact{err: err}
	}
	if e.cfg.Live != nil {
		node, err := e.cfg.Live.GetNode(e.ctx, name)
		switch {
		case err == nil:
			return nodeFact{node: node} // the cache lags behind
		case apierrors.IsNotFound(err):
			return nodeFact{gone: true}
		default:
			return nodeFact{err: err}
		}
	}
	confirmation := e.cfg.Confirmation
	if confirmation <= 0 {
		confirmation = DefaultNodeGoneConfirmation
	}
	first := e.sightings.see(nodeKey(name), e.now)
	if e.now.Sub(first) >= confirmation {
		return nodeFact{gone: true}
	}
	return nodeFact{err: errNodeGoneUnconfirmed}
}

// TerminatingSince returns when this Checker (or one sharing its Memory)
// first saw the pod with a deletionTimestamp, on the Checker's own clock,
// so that clock skew between nodes and the API server cannot fool a rule.
// It is the zero time for a pod that is not terminating.
func (e *Evidence) TerminatingSince(pod *corev1.Pod) time.Time {
	if e == nil || pod.DeletionTimestamp == nil || pod.UID == "" {
		return time.Time{}
	}
	return e.sightings.see(string(pod.UID), e.now)
}

// ErrNoNodeEvidence is returned by Evidence.Node when the Checker has no
// NodeGetter.
var ErrNoNodeEvidence = errors.New("no node evidence configured")

var errNodeGoneUnconfirmed = errors.New("node missing from the cache, not yet confirmed gone")

func nodeKey(name string) string { return "node/" + name }

// sightings remembers when something was first seen, for a bounded number
// of keys, in least-recently-seen order. A key not seen again for idle is
// forgotten; when full, the key seen least recently goes. Every operation
// costs O(1). It is safe for concurrent use.
type sightings struct {
	capacity int
	idle     time.Duration

	mu    sync.Mutex
	seen  map[string]*list.Element // of *sighting
	order list.List                // front: seen most recently
}

type sighting struct {
	key         string
	first, last time.Time
}

func newSightings(capacity int, idle time.Duration) *sightings {
	return &sightings{capacity: capacity, idle: idle, seen: make(map[string]*list.Element)}
}

// see records a sighting of key at now and returns the first one.
func (s *sightings) see(key string, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.seen[key]; ok {
		x := e.Value.(*sighting)
		if now.Sub(x.last) < s.idle {
			x.last = now
			s.order.MoveToFront(e)
			return x.first
		}
		s.removeLocked(e)
	}
	for s.order.Len() >= s.capacity {
		s.removeLocked(s.order.Back())
	}
	s.seen[key] = s.order.PushFront(&sighting{key: key, first: now, last: now})
	return now
}

func (s *sightings) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.seen[key]; ok {
		s.removeLocked(e)
	}
}

func (s *sightings) removeLocked(e *list.Element) {
	delete(s.seen, e.Value.(*sighting).key)
	s.order.Remove(e)
}

func (s *sightings) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}

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
