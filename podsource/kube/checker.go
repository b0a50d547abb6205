package kube

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/nilcheck"
	"github.com/podhealth/podhealth/internal/registry"
	"github.com/podhealth/podhealth/podsource"
)

// CheckerOptions configure NewChecker. The zero value gives a Checker with
// the default rules and policy, node evidence read live (see Nodes), no
// claim evidence (a pod with a claim counts as stateful), no Breaker, and
// no events.
type CheckerOptions struct {
	// Health are the Checker's options. NewChecker fills in Nodes,
	// LiveNodes and Breaker.Nodes as the fields below say, only where they
	// are nil, and adds the Recorder's events to Observer; everything else (Memory, Budget, Logger,
	// Rules, DryRun...) is passed on as it is. A nil Memory means the one
	// that NewChecker's checkers over the same client and Health.Clock
	// share, so that checkers built per reconcile remember what the others
	// force-deleted (see package health).
	Health health.Options
	// Nodes, when not nil, is a node informer (from a factory without a
	// namespace and without list options, so that it holds every node):
	// its cache is Health.Nodes and Health.Breaker.Nodes, and a live GET
	// confirms that a node it misses is gone (Health.LiveNodes). Register
	// it before the factory starts. Nil means node evidence without an
	// informer: Health.Nodes reads each node live, once per check and only
	// for the nodes of pods that are terminating or finished (with
	// Health.ReplaceUnreachable, of every bound pod), so that a
	// taint-evicted pod on a node that is not Ready is dead at once,
	// without waiting for its deletion deadline. A node is then never
	// confirmed gone and there is no Breaker.
	Nodes coreinformers.NodeInformer
	// NoNodeEvidence, when true, leaves Health.Nodes and Health.LiveNodes
	// nil, whatever Nodes says: no node is read at all.
	NoNodeEvidence bool
	// Keep, when not nil, narrows the pods to those for which it returns
	// true, as podsource.Filter does: for an operator whose selector
	// alone cannot tell the pods of the current spec from older ones. The
	// Deleter keeps to namespace and selector; Keep only narrows what the
	// Checker sees. It is called once per pod and check, maybe from
	// several goroutines at once, and must not mutate the pod.
	Keep func(*corev1.Pod) bool
	// Recorder, when not nil, records an EventObserver's events (core/v1),
	// for example from record.NewBroadcaster().NewRecorder(scheme.Scheme,
	// source). With Health.Observer set too, both hear every report
	// (health.MultiObserver).
	Recorder record.EventRecorder
	// EventObject, when not nil, is the object the events are recorded
	// on, such as the workload's own object (EventObserverOptions.Object).
	EventObject runtime.Object
	// FenceLease, when true, adds the self-fencing Lease protocol's fencer
	// to Health.Fencers (fencing.LeaseFencer), each Lease read live through
	// client (LiveLeases; get on leases, LeasePolicyRules). The default is
	// false.
	FenceLease bool
	// Leases, with FenceLease, is a Lease informer of the workloads'
	// namespaces (factory.Coordination().V1().Leases().Informer(),
	// registered before the factory starts): the wait then starts when it
	// delivered the holder's last renewal (LeaseWatch, on Health.Clock),
	// not at the first check after the pod's eviction; it needs list and
	// watch on leases too. Nil means no watch. Without FenceLease it would
	// do nothing, and NewChecker refuses it.
	Leases LeaseEvents
	// LeaseProtocol, with FenceLease, states each pod's protocol in
	// process (fencing.LeaseOptions.Protocol), computed from the
	// operator's own resource: nothing is stamped on its pods, and the
	// pods' annotations are not read. Nil means the annotations. Without
	// FenceLease it would do nothing, and NewChecker refuses it.
	LeaseProtocol func(pod *corev1.Pod) (fencing.LeaseProtocol, bool)
}

// NewChecker builds a Checker of the pods of namespace that match selector
// in one call: a ListerSource over pods (the lister of a started informer:
// a check sends no LIST) narrowed by opts.Keep, a Deleter over client,
// node evidence and events as opts say. namespace and selector are required, and refused as
// NewListerSource refuses them.
//
// It is cheap enough to call in every reconcile. The checkers it builds
// over one client and one Health.Clock share a health.Memory, unless
// opts.Health.Memory names one, and their record of holds already
// recorded as events (podsource.HeldEvents, its
// repeat on that clock), so that a hold gets one event rather than one per
// reconcile. The
// requests it sends are those of PolicyRules, and of EvidencePolicyRules
// for the nodes.
func NewChecker(client kubernetes.Interface, pods corelisters.PodLister, namespace string, selector labels.Selector, opts CheckerOptions) (*health.Checker, error) {
	if isNil(client) {
		return nil, errors.New("kube: NewChecker: nil kubernetes.Interface")
	}
	if isNil(pods) {
		return nil, errors.New("kube: NewChecker: nil PodLister")
	}
	var source health.PodSource
	source, err := NewListerSource(pods, namespace, selector)
	if err != nil {
		return nil, err
	}
	if opts.Keep != nil {
		if source, err = podsource.Filter(source, opts.Keep); err != nil {
			return nil, fmt.Errorf("kube: NewChecker: %w", err)
		}
	}
	deleter, err := NewDeleter(client.CoreV1(), namespace, DeleterOptions{Selector: selector})
	if err != nil {
		return nil, err
	}
	h := opts.Health
	if h.Memory == nil {
		h.Memory = memoryOf(client, h.Clock)
	}
	if !opts.NoNodeEvidence {
		if err := opts.nodeEvidence(client, &h); err != nil {
			return nil, err
		}
	}
	switch {
	case opts.FenceLease:
		f, err := leaseFencerOf(client, h.Clock, opts.Leases, opts.LeaseProtocol)
		if err != nil {
			return nil, fmt.Errorf("kube: NewChecker: CheckerOptions.FenceLease: %w", err)
		}
		h.Fencers = append(slices.Clip(h.Fencers), f)
	case !isNil(opts.Leases):
		return nil, errors.New("kube: NewChecker: CheckerOptions.Leases without FenceLease would do nothing: set FenceLease, or drop Leases")
	case opts.LeaseProtocol != nil:
		return nil, errors.New("kube: NewChecker: CheckerOptions.LeaseProtocol without FenceLease would do nothing: set FenceLease")
	}
	if !isNil(opts.Recorder) {
		held, err := heldEventsOf(client, h.Clock)
		if err != nil {
			return nil, fmt.Errorf("kube: NewChecker: %w", err)
		}
		events, err := NewEventObserver(opts.Recorder, EventObserverOptions{Object: opts.EventObject, HeldEvents: held})
		if err != nil {
			return nil, err
		}
		h.Observer = health.MultiObserver(h.Observer, events)
	}
	return health.New(source, deleter, h)
}

// clientKey is what the checkers that share one record of holds, or one
// Memory, have in common: their client and their clock.
type clientKey struct {
	client kubernetes.Interface
	clock  clock.PassiveClock
}

// helds are the records of holds of NewChecker's checkers, one per client
// and clock, so that checkers built per reconcile record a hold once.
var helds registry.Registry[clientKey, *podsource.HeldEvents]

// heldEventsOf returns the record of holds that every checker over client
// on clock (nil: the real clock) shares; its repeat runs on that clock.
func heldEventsOf(client kubernetes.Interface, clk clock.PassiveClock) (*podsource.HeldEvents, error) {
	return helds.Get(clientKey{client: client, clock: clk}, func() (*podsource.HeldEvents, error) {
		return podsource.NewHeldEvents(podsource.HeldEventsOptions{Clock: clk})
	})
}

// memories are the Memories of NewChecker's checkers that are given none,
// one per client and clock, so that checkers built per reconcile remember
// what the others deleted.
var memories registry.Registry[clientKey, *health.Memory]

// memoryOf returns the Memory that every checker over client on clk that
// is given none shares; nil, for a Memory of the checker's own, when
// client cannot be compared (its checkers cannot be told to share).
func memoryOf(client kubernetes.Interface, clk clock.PassiveClock) *health.Memory {
	m, err := memories.Get(clientKey{client: client, clock: clk}, func() (*health.Memory, error) {
		return health.NewMemory(health.MemoryOptions{}), nil
	})
	if err != nil {
		return nil
	}
	return m
}

// leaseKey is what the checkers that share one Lease fencer have in
// common: their client, clock and Lease informer.
type leaseKey struct {
	client   kubernetes.Interface
	clock    clock.PassiveClock
	informer LeaseEvents
}

// leasePath is the Lease path that NewChecker's checkers over one client,
// clock and informer share: the live reads, and the watch (nil without an
// informer).
type leasePath struct {
	live  *LiveLeases
	watch fencing.LeaseSightings
}

// leasePaths are NewChecker's Lease paths, so that checkers built per
// reconcile share one watch.
var leasePaths registry.Registry[leaseKey, leasePath]

// leaseFencerOf returns a Lease fencer with protocol over the Lease path
// that every checker over client on clk with informer (nil: no watch)
// shares.
func leaseFencerOf(client kubernetes.Interface, clk clock.PassiveClock, informer LeaseEvents, protocol func(*corev1.Pod) (fencing.LeaseProtocol, bool)) (*fencing.LeaseFencer, error) {
	if isNil(informer) {
		informer = nil
	}
	path, err := leasePaths.Get(leaseKey{client: client, clock: clk, informer: informer}, func() (leasePath, error) {
		live, err := NewLiveLeases(client.CoordinationV1())
		if err != nil || informer == nil {
			return leasePath{live: live}, err
		}
		watch, err := NewLeaseWatch(informer, clk)
		return leasePath{live: live, watch: watch}, err
	})
	if err != nil {
		return nil, err
	}
	return fencing.NewLeaseFencer(path.live, fencing.LeaseOptions{Seen: path.watch, Protocol: protocol})
}

// nodeEvidence fills in h's node evidence where it is nil.
func (opts CheckerOptions) nodeEvidence(client kubernetes.Interface, h *health.Options) error {
	live, err := NewLiveNodes(client.CoreV1())
	if err != nil {
		return err
	}
	if isNil(opts.Nodes) {
		if h.Nodes == nil {
			h.Nodes = live
		}
		return nil
	}
	cached, err := NewNodeSource(opts.Nodes)
	if err != nil {
		return fmt.Errorf("kube: NewChecker: %w", err)
	}
	if h.Nodes == nil {
		h.Nodes = cached
	}
	if h.LiveNodes == nil {
		h.LiveNodes = live
	}
	if h.Breaker.Nodes == nil {
		h.Breaker.Nodes = cached
	}
	return nil
}

var isNil = nilcheck.IsNil
