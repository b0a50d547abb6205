package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/registry"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

// Manager is what NewChecker uses of a controller-runtime manager:
// manager.Manager (and cluster.Cluster) of every controller-runtime release
// from v0.19 on satisfy it. GetClient reads from the manager's cache and
// writes to the API server; GetAPIReader reads the API server directly. The
// event recorder is not part of it, since its API changed between releases:
// pass it in Options.EventRecorder.
type Manager interface {
	GetClient() client.Client
	GetAPIReader() client.Reader
}

// Options configure NewChecker. The zero value gives a Checker with the
// default rules and policy, node evidence from the manager's cache and
// live reader, no claim evidence (a pod with a claim then counts as
// stateful), and no events.
type Options struct {
	// Health are the Checker's options. NewChecker fills in Nodes,
	// LiveNodes and Claims as the fields below say, only where they are
	// nil, and adds the EventRecorder's events to Observer; everything
	// else (Budget, Logger, Rules, DryRun...) is passed on as it is. A nil
	// Memory means the one that the manager's checkers on the same
	// Health.Clock share, so that checkers built per reconcile remember
	// what the others force-deleted (see package health); a Manager that
	// cannot be compared gives each checker a Memory of its own.
	Health health.Options
	// NoNodeEvidence, when true, leaves Health.Nodes and Health.LiveNodes
	// nil. By default they read nodes from the manager's cache and, to
	// confirm that a node is gone, from mgr.GetAPIReader(): that needs the
	// ClusterRole of EvidencePolicyRules.
	NoNodeEvidence bool
	// ClaimEvidence, when true, sets Health.Claims to read claims from the
	// manager's cache, which needs list and watch on persistentvolumeclaims
	// (EvidencePolicyRules).
	ClaimEvidence bool
	// EventRecorder, when not nil, records the events of an EventObserver
	// (events.k8s.io/v1): from controller-runtime v0.23 on,
	// mgr.GetEventRecorder("podhealth"). With Health.Observer set too,
	// both hear every report (health.MultiObserver). Before v0.23, whose
	// managers have only the core/v1 recorder, add kube.NewEventObserver
	// over mgr.GetEventRecorderFor("podhealth") to Health.Observer
	// instead, or set CoreEventRecorder. Nil means no events.
	EventRecorder events.EventRecorder
	// CoreEventRecorder, when not nil, records the same events through a
	// core/v1 recorder, as podsource/kube's EventObserver does: the
	// mgr.GetEventRecorderFor("podhealth") that most operators hold. Set
	// it or EventRecorder, not both.
	CoreEventRecorder record.EventRecorder
	// EventObject, when not nil, is the object the events regard, such as
	// the workload's own object (EventObserverOptions.Object).
	EventObject runtime.Object
	// FenceLease, when true, adds the self-fencing Lease protocol's fencer
	// to Health.Fencers (fencing.LeaseFencer): each Lease read live through
	// mgr.GetAPIReader(), and, when the Manager has a cache (GetCache, as a
	// ctrl.Manager does), the wait started when the cache's Lease informer
	// delivered the holder's last renewal (kube.LeaseWatch, on
	// Health.Clock), not at the first check after the pod's eviction. The
	// checkers of one manager and clock share one watch; a Manager that
	// cannot be compared and shares no Health.Memory gets none (its
	// checkers share nothing, and each watch would outlive its checker). It
	// needs get, list and watch on leases (the RBAC markers of
	// LeasePolicyRules). The default is false.
	FenceLease bool
	// LeaseProtocol, with FenceLease, states each pod's protocol in
	// process (fencing.LeaseOptions.Protocol): computed from the
	// operator's own resource, so that nothing is stamped on its pods and
	// the pods' annotations are not read. Nil means the annotations.
	// Without FenceLease it would do nothing, and NewChecker refuses it.
	LeaseProtocol func(pod *corev1.Pod) (fencing.LeaseProtocol, bool)
}

// managerState is what the checkers of one manager share however often
// NewChecker builds one: the node and claim readers, whose stall guard
// must outlive a reconcile to make an unsynced cache cost one timeout,
// and the record of holds already recorded as events.
type managerState struct {
	nodes, liveNodes *Nodes
	claims           *Claims
	held             *podsource.HeldEvents
	// memory is the Memory of the checkers given none.
	memory *health.Memory
	// private is true of the state of one checker alone (a Manager that
	// cannot be compared, without a Memory): it registers no watch, which
	// would outlive the checker on the manager's informer.
	private bool

	// The Lease path of Options.FenceLease, made on first use: the live
	// reads and the watch.
	leasesOnce sync.Once
	leases     *LiveLeases
	leaseWatch fencing.LeaseSightings
	leasesErr  error
}

// leaseFencer returns a Lease fencer over the manager's Lease path, made
// on its first use (live reads through the API reader, and a watch through
// the manager's cache when it has one), with protocol.
func (s *managerState) leaseFencer(ctx context.Context, mgr Manager, clk clock.PassiveClock, protocol func(*corev1.Pod) (fencing.LeaseProtocol, bool)) (*fencing.LeaseFencer, error) {
	s.leasesOnce.Do(func() {
		s.leases, s.leasesErr = NewLiveLeases(mgr.GetAPIReader())
		if s.leasesErr != nil {
			return
		}
		if c, ok := mgr.(interface{ GetCache() cache.Cache }); ok && !isNil(c.GetCache()) && !s.private {
			// Not blocking on the informer's sync: a cache without RBAC
			// for Leases would never sync, and the fencer reads live
			// anyway; until it syncs the waits run from the first check.
			informer, err := c.GetCache().GetInformer(ctx, &coordinationv1.Lease{}, cache.BlockUntilSynced(false))
			if err != nil {
				s.leasesErr = fmt.Errorf("the manager's Lease informer: %w", err)
				return
			}
			watch, err := kube.NewLeaseWatch(informer, clk)
			if err != nil {
				s.leasesErr = err
				return
			}
			s.leaseWatch = watch
		}
	})
	if s.leasesErr != nil {
		return nil, s.leasesErr
	}
	return fencing.NewLeaseFencer(s.leases, fencing.LeaseOptions{Seen: s.leaseWatch, Protocol: protocol})
}

// managerKey is what tells one manager's checkers from another's: the
// Manager itself, a pointer as controller-runtime's are, or a struct
// compared by value, so that a Manager held by value finds its state
// again; or, for a Manager that cannot be compared (it holds a client by
// value with funcs in it, as an interceptor client is), the health.Memory
// its checkers share (without one, a checker keeps its state to itself).
// And the checkers' clock, on which the record of holds measures its
// repeat.
type managerKey struct {
	owner any
	clock clock.PassiveClock
}

// managerStates remembers the state of up to 64 managers (a process has
// one or a few; a test may build many); past it, the oldest is forgotten.
var managerStates registry.Registry[managerKey, *managerState]

// stateOf returns the state that mgr's checkers with options h share,
// making it on first use.
func stateOf(mgr Manager, c client.Client, h health.Options) (*managerState, error) {
	live := mgr.GetAPIReader()
	build := func() (*managerState, error) {
		s := &managerState{}
		var err error
		if s.nodes, err = NewNodes(c); err != nil {
			return nil, err
		}
		if !isNil(live) {
			if s.liveNodes, err = NewNodes(live); err != nil {
				return nil, err
			}
		}
		if s.claims, err = NewClaims(c); err != nil {
			return nil, err
		}
		if s.held, err = podsource.NewHeldEvents(podsource.HeldEventsOptions{Clock: h.Clock}); err != nil {
			return nil, err
		}
		s.memory = health.NewMemory(health.MemoryOptions{})
		return s, nil
	}
	key := managerKey{owner: mgr, clock: h.Clock}
	if registry.Comparable(key) != nil {
		if h.Memory == nil {
			// Nothing this checker is built with outlives it: like a
			// Checker with a Memory of its own, it keeps its state to
			// itself.
			s, err := build()
			if s != nil {
				s.private, s.memory = true, nil
			}
			return s, err
		}
		key.owner = h.Memory
	}
	return managerStates.Get(key, build)
}

// NewChecker builds, from a manager, a Checker of the pods of namespace
// that match selector: a PodSource over mgr.GetClient() (the cache), a
// Deleter over mgr.GetClient() (the API server), node evidence and an
// EventObserver over opts.EventRecorder, as opts say. namespace and
// selector are required, and refused as NewPodSource refuses them.
//
// It is cheap enough to call in every reconcile. The checkers it builds
// for one manager (a pointer, or a struct compared by value; a Manager
// that cannot be compared is told apart by its checkers' Health.Memory)
// and one Health.Clock share their node and claim readers, so that a cache that never syncs costs one read timeout
// in all rather than one per reconcile, and the record of holds already
// recorded, so that a hold gets one event rather than one per reconcile
// (and again after podsource.DefaultHeldRepeat on Health.Clock), and,
// unless opts.Health.Memory names one, a health.Memory, so that what one
// checker deleted is not deleted again by the next.
func NewChecker(mgr Manager, namespace string, selector labels.Selector, opts Options) (*health.Checker, error) {
	if isNil(mgr) {
		return nil, errors.New("controllerruntime: NewChecker: nil Manager")
	}
	c := mgr.GetClient()
	source, err := NewPodSource(c, namespace, selector)
	if err != nil {
		return nil, err
	}
	deleter, err := NewDeleter(c, namespace, selector)
	if err != nil {
		return nil, err
	}
	return newChecker(mgr, c, source, deleter, opts)
}

// NewCheckerForOwner is NewChecker for the pods that owner controls
// (their controller reference names its UID; its Deleter is
// NewOwnedDeleter's), for an operator that finds its
// pods by owner rather than by label: ownerIndex, when not empty, is the
// name of the operator's field index of pods by their controller's name,
// which the list uses.
func NewCheckerForOwner(mgr Manager, owner client.Object, ownerIndex string, opts Options) (*health.Checker, error) {
	if isNil(mgr) {
		return nil, errors.New("controllerruntime: NewCheckerForOwner: nil Manager")
	}
	c := mgr.GetClient()
	source, err := newOwnedPodSource(c, owner, ownerIndex)
	if err != nil {
		return nil, err
	}
	deleter, err := NewOwnedDeleter(c, owner)
	if err != nil {
		return nil, err
	}
	return newChecker(mgr, c, source, deleter, opts)
}

// newChecker wires source and deleter with the evidence and events of
// opts.
func newChecker(mgr Manager, c client.Client, source health.PodSource, deleter health.Deleter, opts Options) (*health.Checker, error) {
	h := opts.Health
	if !isNil(opts.EventRecorder) && !isNil(opts.CoreEventRecorder) {
		return nil, errors.New("controllerruntime: NewChecker: both EventRecorder and CoreEventRecorder are set, and every event would be recorded twice: set one")
	}
	shared, err := stateOf(mgr, c, h)
	if err != nil {
		return nil, err
	}
	if h.Memory == nil {
		h.Memory = shared.memory // nil for a private state: the Checker's own
	}
	if !opts.NoNodeEvidence {
		if h.Nodes == nil {
			h.Nodes = shared.nodes
		}
		if h.LiveNodes == nil {
			if shared.liveNodes == nil {
				return nil, errors.New("controllerruntime: NewChecker: live reader: nil client.Reader from GetAPIReader")
			}
			h.LiveNodes = shared.liveNodes
		}
	}
	if opts.ClaimEvidence && h.Claims == nil {
		h.Claims = shared.claims
	}
	switch {
	case opts.FenceLease:
		f, err := shared.leaseFencer(context.Background(), mgr, h.Clock, opts.LeaseProtocol)
		if err != nil {
			return nil, fmt.Errorf("controllerruntime: NewChecker: Options.FenceLease: %w", err)
		}
		h.Fencers = append(slices.Clip(h.Fencers), f)
	case opts.LeaseProtocol != nil:
		return nil, errors.New("controllerruntime: NewChecker: Options.LeaseProtocol without FenceLease would do nothing: set FenceLease")
	}
	var events health.Observer
	switch {
	case !isNil(opts.EventRecorder):
		events, err = NewEventObserver(opts.EventRecorder, EventObserverOptions{Object: opts.EventObject, HeldEvents: shared.held})
	case !isNil(opts.CoreEventRecorder):
		events, err = kube.NewEventObserver(opts.CoreEventRecorder, kube.EventObserverOptions{Object: opts.EventObject, HeldEvents: shared.held})
	}
	if err != nil {
		return nil, err
	}
	h.Observer = health.MultiObserver(h.Observer, events)
	return health.New(source, deleter, h)
}
