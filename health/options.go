package health

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/internal/nilcheck"
)

// Options configure a Checker. The zero value is the default: force deletes
// are sent, logs go to the logger of each check's context (none: discarded),
// the real clock is used, the rules are DefaultRules(), there is no node
// evidence, the fencing policy is FenceStateful with claims' access modes
// unknown, there is no budget and no breaker, the Checker has a Memory of
// its own with default bounds, nobody is notified, and a pod on an
// unreachable node is alive until the rules call it dead.
type Options struct {
	// DryRun classifies and reports what would be force-deleted, and writes
	// nothing that a real check reads: it calls neither the Deleter nor the
	// Budget, and records neither deleted UIDs nor first sightings in the
	// Memory. It keeps its own record of when it first saw pods
	// terminating, apart in the Memory, and also counts the sightings of
	// real checks sharing the Memory, so that over time it tells what a real
	// check would do; a real check never counts a dry run's sightings, and
	// waits its own full period. Its health answer is the one the real check
	// would give if every force delete succeeded.
	DryRun bool
	// Logger gets one structured line per force delete (or would-be force
	// delete in dry run), with the keys pod, node, uid, rule, reason and
	// outcome, in Kubernetes' structured-logging style. The zero Logger
	// means the logger in each check's context (logr.FromContextOrDiscard).
	Logger logr.Logger
	// Clock measures the Memory's expiry, the budget's window and how long
	// pods have been seen in a state. Nil means the real clock.
	Clock clock.PassiveClock
	// Rules classify pods. Empty means DefaultRules().
	Rules Rules
	// Nodes gets a pod's node, typically from a node informer's cache, for
	// the node-aware rules and the fencing evidence. Nil means no node
	// evidence: TaintEvicted then waits for the pod's deletionTimestamp to
	// pass, the other node-aware rules have no opinion, and pods that need
	// fencing are held back.
	Nodes NodeGetter
	// LiveNodes is asked when Nodes says a node is missing, typically a
	// direct API client next to a node cache in Nodes: a node is gone only
	// when LiveNodes answers NotFound too. Nil means a node is never
	// confirmed gone. It is never asked without Nodes, so New refuses it
	// then: live reads alone go in Nodes.
	LiveNodes NodeGetter
	// Fencing says which dead pods need fencing evidence before a force
	// delete. The zero value is FenceStateful.
	Fencing Fencing
	// Claims tells the access modes of the claims a pod mounts. Nil means
	// they are unknown, and a pod that mounts any claim counts as stateful.
	Claims ClaimGetter
	// ShutdownTaints are taints that, on a node that is not Ready, are
	// fencing evidence once seen for their After (see ShutdownTaint):
	// typically {Key: TaintCloudShutdown, After: ...}, the cloud's word
	// that the node's instance is shut down. Empty, the default, means
	// only the out-of-service taint and a node's deletion fence. It needs
	// Options.Nodes, and is refused with FenceNever, where it would do
	// nothing.
	ShutdownTaints []ShutdownTaint
	// Fencers are more authorities whose proof that a pod's containers
	// cannot run lets a pod that needs fencing go (see Fencer): a
	// LeaseFencer for workloads that fence themselves, a storage's fence,
	// a fencing tool's. They are asked after the built-in evidence, in
	// order. Empty, the default, means the built-in evidence only. Nil
	// entries, names that are empty, repeated or a built-in one's, and
	// Fencers with FenceNever, where none would be asked, are refused.
	Fencers []Fencer
	// Budget, when not nil, limits force deletes per time window; share one
	// between Checkers to limit them together. It must come from
	// NewDeleteBudget: New refuses a zero DeleteBudget.
	Budget *DeleteBudget
	// Breaker stops force deletes when many nodes fail at once. The zero
	// value never trips.
	Breaker Breaker
	// Memory remembers deleted UIDs. Nil means a new Memory with default
	// bounds, private to this Checker; a zero Memory (&Memory{}) has the
	// default bounds too. Share one Memory between Checkers
	// that see the same pods, and always when checkers are built per
	// reconcile.
	Memory *Memory
	// Observer, when not nil, is told the final report of each pod of each
	// check. MultiObserver feeds several (metrics, events, logs) at once.
	Observer Observer
	// ReplaceUnreachable, when true, calls Unreachable a pod that the rules
	// call Alive when its node is NodeUnreachable (the node-lifecycle
	// controller marked it: Ready is Unknown or False and it carries the
	// node.kubernetes.io/unreachable or node.kubernetes.io/not-ready taint
	// with effect NoExecute) or NodeOutOfService (see NodeStateOf). Such a pod
	// counts as not alive (rows D10 and D11), so that the caller creates a
	// replacement before the pod's toleration of the taint runs out; it is
	// never force-deleted on this evidence. Pods that need fencing under
	// Options.Fencing stay Alive: a second copy of them would be a second
	// writer. It needs node evidence: New refuses it without
	// Options.Nodes. The default is false.
	ReplaceUnreachable bool
	// UnreachableFor is how long a node must have been unreachable before
	// its pods are Unreachable, beyond the node-lifecycle controller's own
	// node-monitor-grace-period: both since the Ready condition's
	// lastTransitionTime (when it has one) and since this Checker (or one
	// sharing its Memory) first saw the node unreachable, on the Checker's
	// clock, so that neither a clock far ahead nor a fresh Checker shortens
	// the wait (a clock behind only lengthens it). The first sighting is
	// kept in the Memory, and forgotten when no check sees the node
	// unreachable for the Memory's TTL, or as soon as a check sees the node
	// Ready. A node that comes back and fails again waits afresh, so a node
	// that flaps for less than UnreachableFor at a time never makes its pods
	// Unreachable. Zero, the default, means no extra wait, and reads no
	// clock. It needs ReplaceUnreachable; New refuses a negative value.
	UnreachableFor time.Duration
}

// Observer is told what a Checker decided and did about each pod. Observe
// is called once per listed pod and check, with the pod's final report (a
// dead pod's after its force delete), synchronously from the check: it must
// not mutate r.Pod, should return quickly, and must be safe for concurrent
// use. Implementations in this repository: podsource/kube.EventObserver
// (Kubernetes events) and the Observer of the metrics module
// (Prometheus); MultiObserver hands each report to several.
type Observer interface {
	Observe(ctx context.Context, r PodReport)
}

// New returns a Checker over source and deleter. The deleter may be nil only
// in dry run. Nil interfaces, typed nil pointers in them, unknown Fencing
// values and rules without a Classify function are refused with an error.
func New(source PodSource, deleter Deleter, opts Options) (*Checker, error) {
	if isNil(source) {
		return nil, errors.New("podhealth: New: nil PodSource")
	}
	if isNil(deleter) && !opts.DryRun {
		return nil, errors.New("podhealth: New: nil Deleter (only a dry run may have none)")
	}
	for name, v := range map[string]any{
		"Options.Nodes": opts.Nodes, "Options.LiveNodes": opts.LiveNodes, "Options.Claims": opts.Claims,
		"Options.Observer": opts.Observer, "Options.Breaker.Nodes": opts.Breaker.Nodes, "Options.Clock": opts.Clock,
	} {
		if v != nil && isNil(v) {
			return nil, fmt.Errorf("podhealth: New: %s holds a nil %T", name, v)
		}
	}
	if opts.LiveNodes != nil && opts.Nodes == nil {
		return nil, errors.New("podhealth: New: Options.LiveNodes without Options.Nodes would never be asked: LiveNodes only confirms that a node missing from Nodes is gone. " +
			"Put the getter in Options.Nodes (live reads serve there too: a check then reads each node it needs once), and add LiveNodes only next to a node cache")
	}
	switch opts.Fencing {
	case FenceStateful, FenceAlways, FenceNever:
	default:
		return nil, fmt.Errorf("podhealth: New: unknown Options.Fencing %d", int(opts.Fencing))
	}
	if b := opts.Budget; b != nil && (b.max <= 0 || b.window <= 0) {
		return nil, errors.New("podhealth: New: Options.Budget was not made by NewDeleteBudget: a DeleteBudget of zero deletes would hold back every force delete for ever")
	}
	if share := opts.Breaker.UnhealthyShare; !(share >= 0 && share <= 1) {
		return nil, fmt.Errorf("podhealth: New: Options.Breaker.UnhealthyShare %v is not a share between 0 and 1", share)
	} else if share > 0 && shareInMillionths(share) == 0 {
		return nil, fmt.Errorf("podhealth: New: Options.Breaker.UnhealthyShare %v is below the millionth to which the Breaker reads it", share)
	}
	if opts.Breaker.MinUnhealthy < 0 {
		return nil, fmt.Errorf("podhealth: New: negative Options.Breaker.MinUnhealthy %d", opts.Breaker.MinUnhealthy)
	}
	if err := opts.Rules.validate(); err != nil {
		return nil, fmt.Errorf("podhealth: New: %w", err)
	}
	if err := validateUnreachable(opts); err != nil {
		return nil, fmt.Errorf("podhealth: New: %w", err)
	}
	if err := validateShutdownTaints(opts); err != nil {
		return nil, fmt.Errorf("podhealth: New: %w", err)
	}
	if err := validateFencers(opts); err != nil {
		return nil, fmt.Errorf("podhealth: New: %w", err)
	}
	c := &Checker{
		source:    source,
		dryRun:    opts.DryRun,
		log:       opts.Logger,
		clock:     opts.Clock,
		rules:     opts.Rules,
		nodes:     opts.Nodes,
		liveNodes: opts.LiveNodes,
		policy:    policy{fencing: opts.Fencing, claims: opts.Claims, shutdownTaints: slices.Clone(opts.ShutdownTaints)},
		fencers:   append(builtinFencers(slices.Clone(opts.ShutdownTaints)), opts.Fencers...),
		budget:    opts.Budget,
		breaker:   opts.Breaker,
		memory:    opts.Memory,
		observer:  opts.Observer,

		replaceUnreachable: opts.ReplaceUnreachable,
		unreachableFor:     opts.UnreachableFor,
	}
	if !isNil(deleter) {
		c.deleter = deleter
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if len(c.rules) == 0 {
		c.rules = DefaultRules()
	}
	c.evidenceRules = c.rules.needEvidence()
	c.factsRules = c.rules.needFacts()
	c.quickAlive = c.rules.aliveUnlessDeletingOrTerminal()
	c.orphans = c.nodes != nil && c.liveNodes != nil
	if c.memory == nil {
		c.memory = NewMemory(MemoryOptions{})
	}
	c.memory.ready() // the zero Memory has the default bounds
	return c, nil
}

var isNil = nilcheck.IsNil
