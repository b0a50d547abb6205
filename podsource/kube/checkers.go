package kube

import (
	"context"
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

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

// Checkers is what one operator's checks share, built once at setup and
// held by the operator, as an informer factory is: the health.Memory of
// what was force-deleted and of when each wait began, the record of holds
// already recorded as events, the node evidence, and the Lease path (the
// live reads and the watch, which starts with the Lease informer it was
// given, before any checker exists). Per reconcile, For hands out a
// Checker of one workload's pods over that state: two checkers from one
// Checkers share one Memory, and two Checkers share nothing.
//
// A Checkers must come from NewCheckers. It is safe for concurrent use,
// and so are the checkers it hands out.
type Checkers struct {
	client   kubernetes.Interface
	health   health.Options // Memory set, node evidence filled in
	recorder record.EventRecorder
	held     *podsource.HeldEvents // nil without a recorder
	leases   *LiveLeases           // nil without FenceLease
	watch    *LeaseWatch           // nil without a Lease informer
}

// CheckersOptions configure NewCheckers: what every checker of the
// operator has. The zero value gives checkers with the default rules and
// policy, a Memory of the Checkers' own, node evidence read live (see
// Nodes), no claim evidence (a pod with a claim counts as stateful), no
// Breaker, and no events.
type CheckersOptions struct {
	// Health are the checkers' options. NewCheckers fills in Nodes,
	// LiveNodes and Breaker.Nodes as the fields below say, only where
	// they are nil; a nil Memory means a new one that the checkers share.
	// Everything else (Budget, Logger, Rules, DryRun...) is passed on as
	// it is: a Budget shared by all checkers bounds the operator's force
	// deletes.
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
	// Recorder, when not nil, records an EventObserver's events (core/v1),
	// for example from record.NewBroadcaster().NewRecorder(scheme.Scheme,
	// source), each hold once per podsource.DefaultHeldRepeat on
	// Health.Clock, however many checkers meet it. With Health.Observer
	// set too, both hear every report (health.MultiObserver).
	Recorder record.EventRecorder
	// FenceLease, when true, adds the self-fencing Lease protocol's fencer
	// to Health.Fencers (fencing.LeaseFencer), each Lease read live through
	// the client (LiveLeases; get on leases, LeasePolicyRules). The
	// default is false.
	FenceLease bool
	// Leases, with FenceLease, is a Lease informer of the workloads'
	// namespaces (factory.Coordination().V1().Leases().Informer(),
	// registered before the factory starts): the watch (LeaseWatch, on
	// Health.Clock) starts with it, so that a wait starts when it
	// delivered the holder's last renewal or a successor's takeover, not
	// at the first check after the pod's eviction, and a takeover frees a
	// pod it saw hold the Lease. It needs list and watch on leases too.
	// Nil means no watch. Without FenceLease it would do nothing, and
	// NewCheckers refuses it.
	Leases LeaseEvents
}

// CheckOptions configure one checker that Checkers.For hands out: what
// is one workload's. The zero value checks every pod of the scope, and
// records events on no object.
type CheckOptions struct {
	// Keep, when not nil, narrows the pods to those for which it returns
	// true, as podsource.Filter does: for an operator whose selector
	// alone cannot tell the pods of the current spec from older ones. The
	// Deleter keeps to namespace and selector; Keep only narrows what the
	// Checker sees. It is called once per pod and check, maybe from
	// several goroutines at once, and must not mutate the pod.
	Keep func(*corev1.Pod) bool
	// EventObject, when not nil, is the object the events are recorded
	// on, such as the workload's own object (EventObserverOptions.Object).
	// Without CheckersOptions.Recorder it would do nothing, and For
	// refuses it.
	EventObject runtime.Object
	// LeaseProtocol states each pod's self-fencing protocol in process
	// (fencing.LeaseOptions.Protocol), computed from the operator's own
	// resource: nothing is stamped on its pods, and the pods' annotations
	// are not read. Nil means the annotations. Without
	// CheckersOptions.FenceLease it would do nothing, and For refuses it.
	LeaseProtocol func(pod *corev1.Pod) (fencing.LeaseProtocol, bool)
}

// NewCheckers builds what an operator's checkers share, from its client
// and options: call it once, at setup, and keep the value. It refuses
// what the checkers could not use, and registers the Lease watch on
// opts.Leases now.
func NewCheckers(client kubernetes.Interface, opts CheckersOptions) (*Checkers, error) {
	if isNil(client) {
		return nil, errors.New("kube: NewCheckers: nil kubernetes.Interface")
	}
	c := &Checkers{client: client, health: opts.Health}
	if c.health.Memory == nil {
		c.health.Memory = health.NewMemory(health.MemoryOptions{})
	}
	if !opts.NoNodeEvidence {
		if err := opts.nodeEvidence(client, &c.health); err != nil {
			return nil, err
		}
	}
	switch {
	case opts.FenceLease:
		live, err := NewLiveLeases(client.CoordinationV1())
		if err != nil {
			return nil, fmt.Errorf("kube: NewCheckers: CheckersOptions.FenceLease: %w", err)
		}
		c.leases = live
		if !isNil(opts.Leases) {
			if c.watch, err = NewLeaseWatch(opts.Leases, c.health.Clock); err != nil {
				return nil, fmt.Errorf("kube: NewCheckers: CheckersOptions.Leases: %w", err)
			}
		}
	case !isNil(opts.Leases):
		return nil, errors.New("kube: NewCheckers: Leases without FenceLease would do nothing: set FenceLease, or drop Leases")
	}
	if !isNil(opts.Recorder) {
		held, err := podsource.NewHeldEvents(podsource.HeldEventsOptions{Clock: c.health.Clock})
		if err != nil {
			return nil, fmt.Errorf("kube: NewCheckers: %w", err)
		}
		c.recorder, c.held = opts.Recorder, held
	}
	return c, nil
}

// For returns a Checker of the pods of namespace that match selector, over
// the Checkers' state: a ListerSource over pods (the lister of a started
// informer: a check sends no LIST) narrowed by opts.Keep, and a Deleter
// over the Checkers' client. namespace and selector are required, and
// refused as NewListerSource refuses them. It is cheap: call it in every
// reconcile.
func (c *Checkers) For(pods corelisters.PodLister, namespace string, selector labels.Selector, opts CheckOptions) (*health.Checker, error) {
	if c == nil || c.client == nil {
		return nil, errors.New("kube: Checkers.For: the Checkers was not made by NewCheckers")
	}
	if isNil(pods) {
		return nil, errors.New("kube: Checkers.For: nil PodLister")
	}
	var source health.PodSource
	source, err := NewListerSource(pods, namespace, selector)
	if err != nil {
		return nil, err
	}
	if opts.Keep != nil {
		if source, err = podsource.Filter(source, opts.Keep); err != nil {
			return nil, fmt.Errorf("kube: Checkers.For: %w", err)
		}
	}
	deleter, err := NewDeleter(c.client.CoreV1(), namespace, DeleterOptions{Selector: selector})
	if err != nil {
		return nil, err
	}
	h := c.health
	switch {
	case c.leases != nil:
		var seen fencing.LeaseSightings
		if c.watch != nil {
			seen = c.watch
		}
		f, err := fencing.NewLeaseFencer(c.leases, fencing.LeaseOptions{Seen: seen, Protocol: opts.LeaseProtocol})
		if err != nil {
			return nil, fmt.Errorf("kube: Checkers.For: %w", err)
		}
		h.Fencers = append(slices.Clip(h.Fencers), f)
	case opts.LeaseProtocol != nil:
		return nil, errors.New("kube: Checkers.For: CheckOptions.LeaseProtocol without CheckersOptions.FenceLease would do nothing: set FenceLease")
	}
	switch {
	case c.recorder != nil:
		events, err := NewEventObserver(c.recorder, EventObserverOptions{Object: opts.EventObject, HeldEvents: c.held})
		if err != nil {
			return nil, err
		}
		h.Observer = health.MultiObserver(h.Observer, events)
	case opts.EventObject != nil:
		return nil, errors.New("kube: Checkers.For: CheckOptions.EventObject without CheckersOptions.Recorder would do nothing: set Recorder")
	}
	return health.New(source, deleter, h)
}

// Check is For and the Checker's CheckReport in one call, for a reconcile
// that needs the checker for nothing else: it checks the pods of
// namespace that match selector over the Checkers' state, and returns the
// report. Its error is For's (a refused input, when the check did not
// run) or the check's, wrapped with the namespace and the selector.
func (c *Checkers) Check(ctx context.Context, pods corelisters.PodLister, namespace string, selector labels.Selector, opts CheckOptions) (health.Report, error) {
	checker, err := c.For(pods, namespace, selector, opts)
	if err != nil {
		return health.Report{}, err
	}
	report, err := checker.CheckReport(ctx)
	if err != nil {
		return report, fmt.Errorf("kube: checking the pods of namespace %q that match %q: %w", namespace, selector, err)
	}
	return report, nil
}
