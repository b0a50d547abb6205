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
// apierrors.IsNotFound is true when the node does not exist, and one that
// wraps ErrNodesUnavailable when it cannot answer about any node now. The
// node returned must not be mutated. Implementations must be safe for
// concurrent use.
type NodeGetter interface {
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
}

// ErrNodesUnavailable is wrapped by the error of a NodeGetter that cannot
// answer about any node now: a node cache that has not synced, or never
// will (no RBAC for nodes). A check that meets it asks that getter about no
// other node: every node it has not read yet is NodeUnknown for the rest of
// the check. The check says so in Report.NodeEvidence, and the Checker logs
// it once when node evidence becomes unavailable and once when it is back.
var ErrNodesUnavailable = errors.New("podhealth: node evidence unavailable")

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
	// table caches seen for screen.
	table nodeTable
	// touched keeps the bytes that screen reads ahead of its lookups,
	// so that the reads are not optimised away; nothing else reads it.
	touched byte
	// nodesDown and liveDown are the first errors wrapping
	// ErrNodesUnavailable of nodes and live: once set, that getter is not
	// asked again in this check.
	nodesDown, liveDown error
	// unreachableFor is Options.UnreachableFor (see replacement). When it
	// is set, a lookup that finds a node Ready forgets when the node was
	// first seen unreachable, so that its next failure waits afresh, with
	// or without a lastTransitionTime. New refuses it without
	// Options.ReplaceUnreachable.
	unreachableFor time.Duration
	// wake is how soon the check expects a verdict to change with time
	// alone. It lives here, in the pooled evidence, so that the rules reach
	// it.
	wake soonest
	// shutdownTaints are Options.ShutdownTaints (see evidence_shutdown.go).
	shutdownTaints []ShutdownTaint
	// asking is the name of the fencer being asked, whose keys Sightings
	// keeps apart.
	asking string
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

// nodeFact is what one check found about one node: its object, when it
// was read, and its state (see NodeStateOf).
type nodeFact struct {
	node  *corev1.Node
	state NodeState
}

// node returns the named node's state, and its object when it was read.
// With no node evidence, a pod not bound to a node, or a lookup that fails
// or is not confirmed, the state is NodeUnknown: a rule must then have no
// opinion. NodeGone comes only from a live read's NotFound.
func (e *evidence) node(name string) (NodeState, *corev1.Node) {
	if e == nil || e.nodes == nil || name == "" {
		return NodeUnknown, nil
	}
	if f, ok := e.seen[name]; ok {
		return f.state, f.node
	}
	f := e.lookUp(name)
	if e.seen == nil {
		e.seen = make(map[string]nodeFact)
	}
	e.seen[name] = f
	if e.unreachableFor > 0 && f.state == NodeReady {
		e.sightings.forget(unreachableKey(name))
	}
	if len(e.shutdownTaints) > 0 {
		e.forgetShutdowns(f)
	}
	return f.state, f.node
}

func (e *evidence) lookUp(name string) nodeFact {
	if e.nodesDown != nil {
		return nodeFact{}
	}
	node, err := e.nodes.GetNode(e.ctx, name)
	switch {
	case err == nil && node != nil:
		return nodeFact{node: node, state: NodeStateOf(node)}
	case errors.Is(err, ErrNodesUnavailable):
		e.nodesDown = err
		return nodeFact{}
	case err == nil || !apierrors.IsNotFound(err) || e.live == nil || e.liveDown != nil:
		// No node and no error, another error, or a missing node that no
		// live read can confirm gone: unknown.
		return nodeFact{}
	}
	node, err = e.live.GetNode(e.ctx, name)
	switch {
	case err == nil && node != nil:
		return nodeFact{node: node, state: NodeStateOf(node)} // the cache lags behind
	case err != nil && apierrors.IsNotFound(err):
		return nodeFact{state: NodeGone}
	case errors.Is(err, ErrNodesUnavailable):
		e.liveDown = err
	}
	return nodeFact{}
}

// unavailable returns the error that made node evidence unavailable in
// this check, or nil.
func (e *evidence) unavailable() error {
	if e == nil {
		return nil
	}
	if e.nodesDown != nil {
		return e.nodesDown
	}
	return e.liveDown
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
	state, _ := e.node(name)
	return state == NodeGone
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

// untilDeletionDeadline returns how long until a live kubelet would have
// finished the pod's graceful deletion: until its deletion deadline (the
// deletionTimestamp, which already includes the grace period) on the
// Checker's clock. Zero or less means the deadline has passed. A clock far
// behind the API server's only delays the verdict; one far ahead brings it
// forward by as much, which is why a verdict on this evidence alone is
// never fenced.
func (e *evidence) untilDeletionDeadline(pod *corev1.Pod) time.Duration {
	return pod.DeletionTimestamp.Time.Sub(e.time())
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

// getEvidence returns the check's evidence, made on first use. A check
// takes it from the pool that every Checker shares, with the tables of an
// earlier check,
// emptied, so that looking up the same nodes again allocates nothing.
func (k *check) getEvidence() *evidence {
	if k.evidence == nil {
		e, _ := evidences.Get().(*evidence)
		if e == nil {
			e = new(evidence)
		}
		seen, reasons, table, sighted := e.seen, e.reasons, e.table, e.ownSightings.seen
		*e = evidence{ctx: k.ctx, nodes: k.nodes, live: k.liveNodes, clock: k.clock, now: k.now, haveNow: k.haveNow, seen: seen, reasons: reasons, table: table, ownSightings: k.firstSightings(),
			unreachableFor: k.unreachableFor, shutdownTaints: k.policy.shutdownTaints}
		e.ownSightings.seen = sighted
		e.sightings = &e.ownSightings
		k.evidence = e
	}
	return k.evidence
}

// releaseEvidence gives the check's evidence back to the shared pool,
// emptied, once no rule of the check can read it any more.
func (k *check) releaseEvidence() {
	e := k.evidence
	if e == nil {
		return
	}
	k.evidence = nil
	k.reportEvidence(e)
	if e.wake > 0 {
		// The caller looks again at RetryAfter: what this check saw must
		// still be remembered then, or a wait longer than the Memory's TTL
		// would start again at every look and never end.
		e.sightings.hold(e.time().Add(time.Duration(e.wake)))
	}
	clear(e.seen)
	clear(e.reasons)
	clear(e.ownSightings.seen)
	e.table.reset()
	seen, reasons, table, sighted := e.seen, e.reasons, e.table, e.ownSightings.seen[:0]
	*e = evidence{seen: seen, reasons: reasons, table: table, ownSightings: checkSightings{seen: sighted}}
	evidences.Put(e)
}

// firstSightings returns the first-seen records that this check writes and
// reads. A dry run writes only a record of its own, which real checks never
// read, and reads the real checks' record without writing it.
func (k *check) firstSightings() checkSightings {
	if k.dryRun {
		return checkSightings{record: k.memory.dryRunSightings, shared: k.memory.sightings, peek: k.classifyOnly}
	}
	return checkSightings{record: k.memory.sightings, peek: k.classifyOnly}
}

// reportEvidence puts into the check's report what its evidence learnt:
// how soon a verdict changes with time alone (RetryAfter), and whether
// node evidence was unavailable (NodeEvidence). It logs once when node
// evidence becomes unavailable, and once when it is back.
func (k *check) reportEvidence(e *evidence) {
	if r := k.report; r != nil && e.wake > 0 && (r.RetryAfter == 0 || time.Duration(e.wake) < r.RetryAfter) {
		r.RetryAfter = time.Duration(e.wake)
	}
	if err := e.unavailable(); err != nil {
		if k.report != nil {
			k.report.NodeEvidence = err
		}
		if k.nodesUnavailable.CompareAndSwap(false, true) {
			k.log.Error(err, "node evidence unavailable: every node counts as unknown until a node can be read again; taint-evicted pods wait for their deletion deadline, and pods that need fencing are held back")
		}
		return
	}
	if !k.nodesUnavailable.Load() {
		return // only a comeback is left to log
	}
	for _, f := range e.seen {
		if f.state != NodeUnknown {
			if k.nodesUnavailable.CompareAndSwap(true, false) {
				k.log.Info("node evidence available again")
			}
			return
		}
	}
}
