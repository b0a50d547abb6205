package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/nilcheck"
)

// CheckerOptions configure NewChecker: the fields of CheckersOptions and
// of CheckOptions in one, for one Checker. The zero value gives a Checker
// with the default rules and policy, node evidence read live (see Nodes),
// no claim evidence (a pod with a claim counts as stateful), no Breaker,
// and no events.
type CheckerOptions struct {
	// Health are the Checker's options. NewChecker fills in Nodes,
	// LiveNodes and Breaker.Nodes as the fields below say, only where they
	// are nil, and adds the Recorder's events to Observer; everything else (Memory, Budget, Logger,
	// Rules, DryRun...) is passed on as it is. A nil Memory means one of
	// the Checker's own.
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

// NewChecker builds one Checker of the pods of namespace that match
// selector, with state of its own: a ListerSource over pods (the lister of
// a started informer: a check sends no LIST) narrowed by opts.Keep, a
// Deleter over client, node evidence, the Lease path and events as opts
// say. namespace and selector are required, and refused as
// NewListerSource refuses them.
//
// Build it once, at startup, and keep it: its Memory (unless
// opts.Health.Memory names one), its record of holds already recorded as
// events and its Lease watch are its own, and a checker built anew per
// reconcile would forget what the last one force-deleted. An operator that
// checks per reconcile builds one Checkers with NewCheckers at setup and
// asks it for a checker each time (Checkers.For). The requests it sends
// are those of PolicyRules, and of EvidencePolicyRules for the nodes.
func NewChecker(client kubernetes.Interface, pods corelisters.PodLister, namespace string, selector labels.Selector, opts CheckerOptions) (*health.Checker, error) {
	checkers, err := NewCheckers(client, CheckersOptions{
		Health: opts.Health, Nodes: opts.Nodes, NoNodeEvidence: opts.NoNodeEvidence,
		Recorder: opts.Recorder, FenceLease: opts.FenceLease, Leases: opts.Leases,
	})
	if err != nil {
		return nil, err
	}
	return checkers.For(pods, namespace, selector, CheckOptions{Keep: opts.Keep, EventObject: opts.EventObject, LeaseProtocol: opts.LeaseProtocol})
}

// nodeEvidence fills in h's node evidence where it is nil.
func (opts CheckersOptions) nodeEvidence(client kubernetes.Interface, h *health.Options) error {
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
