package health

import (
	"context"
	"errors"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
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
	// ownSightings is what sightings points to in a check's evidence.
	ownSightings checkSightings
	seen         map[string]nodeFact
	reasons      map[nodeReason]string // see reason
	// clock gives now when a rule first needs the time (see time), so
	// that looking nodes up for live pods reads no clock.
	clock   clock.PassiveClock
	haveNow bool
	// table caches seen for scanNodes.
	table nodeTable
	// touched keeps the bytes that scanNodes reads ahead of its lookups,
	// so that the reads are not optimised away; nothing else reads it.
	touched byte
}

// nodeReason is a verdict's reason about a node, before it is spelled out.
type nodeReason struct{ prefix, node, suffix string }

// reason returns prefix + node + suffix, spelled out once per node and
// check, so that the many dead pods of one failed node share one string.
func (e *evidence) reason(prefix, node, suffix string) string {
	key := nodeReason{prefix, node, suffix}
	if r, ok := e.reasons[key]; ok {
		return r
	}
	r := prefix + node + suffix
	if e.reasons == nil {
		e.reasons = make(map[nodeReason]string)
	}
	e.reasons[key] = r
	return r
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

// time returns the check's time, reading the clock on first use.
func (e *evidence) time() time.Time {
	if !e.haveNow {
		e.now, e.haveNow = e.clock.Now(), true
	}
	return e.now
}

// gone reports whether a live read confirmed the named node gone. It is
// what a check asks about every pod bound to a node, so after the first
// pod of a node it costs one map lookup.
func (e *evidence) gone(name string) bool {
	_, gone, err := e.node(name)
	return err == nil && gone
}

// terminatingSince returns when this Checker (or one sharing its Memory)
// first saw the pod with a deletionTimestamp, on the Checker's own clock,
// so that clock skew between nodes and the API server cannot fool a rule.
// A dry run counts its own sightings and those of real checks, and records
// only its own. A pod without a UID cannot be followed from check to check:
// for it, the wait starts now, every time.
func (e *evidence) terminatingSince(pod *corev1.Pod) time.Time {
	if pod.DeletionTimestamp == nil || pod.UID == "" {
		return e.time()
	}
	return e.sightings.see(string(pod.UID), e.time())
}

// deletionOverdue reports whether a live kubelet would have finished the
// pod's graceful deletion by now: its deletion deadline (the
// deletionTimestamp, which already includes the grace period) has passed
// on the Checker's clock. A clock far behind the API server's only delays
// the verdict; one far ahead brings it forward by as much, which is why a
// verdict on this evidence alone is never fenced.
func (e *evidence) deletionOverdue(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && !e.time().Before(pod.DeletionTimestamp.Time)
}

// gracePeriod returns the pod's grace period: its
// deletionGracePeriodSeconds, or else its terminationGracePeriodSeconds,
// or else Kubernetes' default of 30 seconds. A negative one counts as zero;
// a huge one saturates at the longest Duration.
func gracePeriod(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return seconds(*pod.DeletionGracePeriodSeconds)
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return seconds(*pod.Spec.TerminationGracePeriodSeconds)
	default:
		return seconds(corev1.DefaultTerminationGracePeriodSeconds)
	}
}

// seconds converts secs to a Duration without overflow: a negative count
// is zero, and one beyond the range of Duration is the longest Duration.
func seconds(secs int64) time.Duration {
	switch {
	case secs <= 0:
		return 0
	case secs > int64(math.MaxInt64/time.Second):
		return math.MaxInt64
	default:
		return time.Duration(secs) * time.Second
	}
}

// addSaturating adds two Durations that are not negative, saturating at
// the longest Duration instead of wrapping around.
func addSaturating(a, b time.Duration) time.Duration {
	if a < 0 {
		a = 0
	}
	if b < 0 {
		b = 0
	}
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
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

// nodeDown reports whether node evidence says the node is not Ready: its
// Ready condition is False or Unknown, or it carries the unreachable or the
// not-ready taint of the node-lifecycle controller.
func nodeDown(node *corev1.Node) bool {
	if node == nil {
		return false
	}
	if hasTaint(node, corev1.TaintNodeUnreachable) || hasTaint(node, corev1.TaintNodeNotReady) {
		return true
	}
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionFalse || c.Status == corev1.ConditionUnknown
		}
	}
	return false
}

// nodeUp reports whether node evidence says the node is Ready: its Ready
// condition is True and it carries neither the unreachable nor the
// not-ready taint. A node that is neither up nor down is no evidence.
func nodeUp(node *corev1.Node) bool {
	return node != nil && !nodeDown(node) && nodeReady(node)
}

func hasTaint(node *corev1.Node, key string) bool {
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].Key == key {
			return true
		}
	}
	return false
}
