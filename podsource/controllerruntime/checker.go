package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

// Manager is what NewCheckers uses of a controller-runtime manager:
// manager.Manager (and cluster.Cluster) of every controller-runtime release
// from v0.19 on satisfy it. GetClient reads from the manager's cache and
// writes to the API server; GetAPIReader reads the API server directly. The
// event recorder is not part of it, since its API changed between releases:
// pass it in CheckersOptions.
type Manager interface {
	GetClient() client.Client
	GetAPIReader() client.Reader
}

// Checkers is what one operator's checks share, built once at setup from
// its manager and held by the operator, as the manager itself is: the
// health.Memory of what was force-deleted and of when each wait began, the
// record of holds already recorded as events, the node and claim readers
// (whose stall guard makes a cache that never syncs cost one read timeout
// in all, not one per reconcile), and the Lease path (the live reads and
// the watch, registered on the manager's cache when the Checkers is built,
// and started with the manager, before any checker exists). Per reconcile,
// For and ForOwner hand out a Checker of one workload's pods over that
// state: two checkers from one Checkers share one Memory, and two Checkers
// share nothing.
//
// A Checkers must come from NewCheckers. It is safe for concurrent use,
// and so are the checkers it hands out.
type Checkers struct {
	mgr    Manager
	client client.Client
	health health.Options // Memory set, node and claim evidence filled in
	// The events' recorders (one at most) and the record of holds.
	eventRecorder events.EventRecorder
	coreRecorder  record.EventRecorder
	held          *podsource.HeldEvents
	// The Lease path of FenceLease: nil without it; watch nil without a
	// cache.
	leases *LiveLeases
	watch  *kube.LeaseWatch
}

// CheckersOptions configure NewCheckers: what every checker of the
// operator has. The zero value gives checkers with the default rules and
// policy, a Memory of the Checkers' own, node evidence from the manager's
// cache and live reader, no claim evidence (a pod with a claim then counts
// as stateful), and no events.
type CheckersOptions struct {
	// Health are the checkers' options. NewCheckers fills in Nodes,
	// LiveNodes and Claims as the fields below say, only where they are
	// nil; a nil Memory means a new one that the checkers share.
	// Everything else (Budget, Logger, Rules, DryRun...) is passed on as
	// it is. A zero Logger logs to the logger of each check's context, as
	// controller-runtime users expect (log.FromContext).
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
	// mgr.GetEventRecorder("podhealth"). Before v0.23, whose managers have
	// only the core/v1 recorder, set CoreEventRecorder. Each hold is
	// recorded once per podsource.DefaultHeldRepeat on Health.Clock,
	// however many checkers meet it. With Health.Observer set too, both
	// hear every report (health.MultiObserver). Nil means no events.
	EventRecorder events.EventRecorder
	// CoreEventRecorder, when not nil, records the same events through a
	// core/v1 recorder, as podsource/kube's EventObserver does: the
	// mgr.GetEventRecorderFor("podhealth") that most operators hold. Set
	// it or EventRecorder, not both.
	CoreEventRecorder record.EventRecorder
	// FenceLease, when true, adds the self-fencing Lease protocol's fencer
	// to Health.Fencers (fencing.LeaseFencer): each Lease read live through
	// mgr.GetAPIReader(), and, when the Manager has a cache (GetCache, as a
	// ctrl.Manager does), a watch of the Leases (kube.LeaseWatch, on
	// Health.Clock) registered on it by NewCheckers, so that it runs from
	// the manager's start: a wait starts when the holder's last renewal or
	// a successor's takeover arrived, not at the first check after the
	// pod's eviction, and a takeover frees a pod it saw hold the Lease. It
	// needs get, list and watch on leases (the RBAC markers of
	// LeasePolicyRules). The default is false.
	FenceLease bool
}

// CheckOptions configure one checker that Checkers.For or ForOwner hands
// out: what is one workload's. The zero value records events on no object
// and reads the self-fencing protocol from the pods' annotations.
type CheckOptions struct {
	// EventObject, when not nil, is the object the events regard, such as
	// the workload's own object (EventObserverOptions.Object). Without a
	// recorder in CheckersOptions it would do nothing, and For refuses it.
	EventObject runtime.Object
	// LeaseProtocol states each pod's protocol in process
	// (fencing.LeaseOptions.Protocol): computed from the operator's own
	// resource, so that nothing is stamped on its pods and the pods'
	// annotations are not read. Nil means the annotations. Without
	// CheckersOptions.FenceLease it would do nothing, and For refuses it.
	LeaseProtocol func(pod *corev1.Pod) (fencing.LeaseProtocol, bool)
}

// NewCheckers builds what an operator's checkers share, from its manager
// (mgr.GetClient() for the cache and the deletes, mgr.GetAPIReader() for
// live reads) and options: call it once, at setup, before the manager
// starts, and keep the value. It refuses what the checkers could not use.
func NewCheckers(mgr Manager, opts CheckersOptions) (*Checkers, error) {
	if isNil(mgr) {
		return nil, errors.New("controllerruntime: NewCheckers: nil Manager")
	}
	if !isNil(opts.EventRecorder) && !isNil(opts.CoreEventRecorder) {
		return nil, errors.New("controllerruntime: NewCheckers: both EventRecorder and CoreEventRecorder are set, and every event would be recorded twice: set one")
	}
	c := &Checkers{mgr: mgr, client: mgr.GetClient(), health: opts.Health}
	if isNil(c.client) {
		return nil, errors.New("controllerruntime: NewCheckers: nil client.Client from GetClient")
	}
	if c.health.Memory == nil {
		c.health.Memory = health.NewMemory(health.MemoryOptions{})
	}
	if !opts.NoNodeEvidence {
		live := mgr.GetAPIReader()
		if isNil(live) {
			return nil, errors.New("controllerruntime: NewCheckers: live reader: nil client.Reader from GetAPIReader")
		}
		if c.health.Nodes == nil {
			nodes, err := NewNodes(c.client)
			if err != nil {
				return nil, err
			}
			c.health.Nodes = nodes
		}
		if c.health.LiveNodes == nil {
			liveNodes, err := NewNodes(live)
			if err != nil {
				return nil, err
			}
			c.health.LiveNodes = liveNodes
		}
	}
	if opts.ClaimEvidence && c.health.Claims == nil {
		claims, err := NewClaims(c.client)
		if err != nil {
			return nil, err
		}
		c.health.Claims = claims
	}
	if opts.FenceLease {
		if err := c.leasePath(mgr); err != nil {
			return nil, fmt.Errorf("controllerruntime: NewCheckers: CheckersOptions.FenceLease: %w", err)
		}
	}
	if !isNil(opts.EventRecorder) || !isNil(opts.CoreEventRecorder) {
		held, err := podsource.NewHeldEvents(podsource.HeldEventsOptions{Clock: c.health.Clock})
		if err != nil {
			return nil, fmt.Errorf("controllerruntime: NewCheckers: %w", err)
		}
		c.held = held
		if !isNil(opts.EventRecorder) {
			c.eventRecorder = opts.EventRecorder
		} else {
			c.coreRecorder = opts.CoreEventRecorder
		}
	}
	return c, nil
}

// leasePath makes the Lease path: live reads through the API reader, and
// a watch through the manager's cache when it has one.
func (c *Checkers) leasePath(mgr Manager) error {
	leases, err := NewLiveLeases(mgr.GetAPIReader())
	if err != nil {
		return err
	}
	c.leases = leases
	cached, ok := mgr.(interface{ GetCache() cache.Cache })
	if !ok || isNil(cached.GetCache()) {
		return nil
	}
	// Not blocking on the informer's sync: a cache without RBAC for
	// Leases would never sync, and the fencer reads live anyway; until it
	// syncs the waits run from the first check.
	informer, err := cached.GetCache().GetInformer(context.Background(), &coordinationv1.Lease{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("the manager's Lease informer: %w", err)
	}
	c.watch, err = kube.NewLeaseWatch(informer, c.health.Clock)
	return err
}

// For returns a Checker of the pods of namespace that match selector, over
// the Checkers' state: a PodSource over mgr.GetClient() (the cache) and a
// Deleter over mgr.GetClient() (the API server). namespace and selector are
// required, and refused as NewPodSource refuses them. It is cheap: call it
// in every reconcile.
func (c *Checkers) For(namespace string, selector labels.Selector, opts CheckOptions) (*health.Checker, error) {
	if c == nil || c.client == nil {
		return nil, errors.New("controllerruntime: Checkers.For: the Checkers was not made by NewCheckers")
	}
	source, err := NewPodSource(c.client, namespace, selector)
	if err != nil {
		return nil, err
	}
	deleter, err := NewDeleter(c.client, namespace, selector)
	if err != nil {
		return nil, err
	}
	return c.checker(source, deleter, opts)
}

// ForOwner is For for the pods that owner controls (their controller
// reference names its UID; its Deleter is NewOwnedDeleter's), for an
// operator that finds its pods by owner rather than by label: ownerIndex,
// when not empty, is the name of the operator's field index of pods by
// their controller's name (ControllerIndex), which the list uses.
func (c *Checkers) ForOwner(owner client.Object, ownerIndex string, opts CheckOptions) (*health.Checker, error) {
	if c == nil || c.client == nil {
		return nil, errors.New("controllerruntime: Checkers.ForOwner: the Checkers was not made by NewCheckers")
	}
	source, err := newOwnedPodSource(c.client, owner, ownerIndex)
	if err != nil {
		return nil, err
	}
	deleter, err := NewOwnedDeleter(c.client, owner)
	if err != nil {
		return nil, err
	}
	return c.checker(source, deleter, opts)
}

// Check is For and the Checker's CheckReport in one call, for a reconcile
// that needs the checker for nothing else. Its error is For's (a refused
// input, when the check did not run) or the check's, wrapped with the
// namespace and the selector.
func (c *Checkers) Check(ctx context.Context, namespace string, selector labels.Selector, opts CheckOptions) (health.Report, error) {
	checker, err := c.For(namespace, selector, opts)
	if err != nil {
		return health.Report{}, err
	}
	report, err := checker.CheckReport(ctx)
	if err != nil {
		return report, fmt.Errorf("controllerruntime: checking the pods of namespace %q that match %q: %w", namespace, selector, err)
	}
	return report, nil
}

// CheckOwner is ForOwner and the Checker's CheckReport in one call, for a
// reconcile that needs the checker for nothing else. Its error is
// ForOwner's (a refused input, when the check did not run) or the
// check's, wrapped with the owner's namespace and name.
func (c *Checkers) CheckOwner(ctx context.Context, owner client.Object, ownerIndex string, opts CheckOptions) (health.Report, error) {
	checker, err := c.ForOwner(owner, ownerIndex, opts)
	if err != nil {
		return health.Report{}, err
	}
	report, err := checker.CheckReport(ctx)
	if err != nil {
		return report, fmt.Errorf("controllerruntime: checking the pods that %s/%s controls: %w", owner.GetNamespace(), owner.GetName(), err)
	}
	return report, nil
}

// checker wires source and deleter with the Checkers' state and opts.
func (c *Checkers) checker(source health.PodSource, deleter health.Deleter, opts CheckOptions) (*health.Checker, error) {
	h := c.health
	switch {
	case c.leases != nil:
		var seen fencing.LeaseSightings
		if c.watch != nil {
			seen = c.watch
		}
		f, err := fencing.NewLeaseFencer(c.leases, fencing.LeaseOptions{Seen: seen, Protocol: opts.LeaseProtocol})
		if err != nil {
			return nil, err
		}
		h.Fencers = append(slices.Clip(h.Fencers), f)
	case opts.LeaseProtocol != nil:
		return nil, errors.New("controllerruntime: CheckOptions.LeaseProtocol without CheckersOptions.FenceLease would do nothing: set FenceLease")
	}
	var events health.Observer
	var err error
	switch {
	case c.eventRecorder != nil:
		events, err = NewEventObserver(c.eventRecorder, EventObserverOptions{Object: opts.EventObject, HeldEvents: c.held})
	case c.coreRecorder != nil:
		events, err = kube.NewEventObserver(c.coreRecorder, kube.EventObserverOptions{Object: opts.EventObject, HeldEvents: c.held})
	case !isNil(opts.EventObject):
		return nil, errors.New("controllerruntime: CheckOptions.EventObject without an event recorder in CheckersOptions would do nothing: set EventRecorder or CoreEventRecorder")
	}
	if err != nil {
		return nil, err
	}
	h.Observer = health.MultiObserver(h.Observer, events)
	return health.New(source, deleter, h)
}
