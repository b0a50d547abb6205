package controllerruntime

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/health"
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
	// nil, and adds the EventRecorder's events to Observer; everything else (Memory, Budget, Logger, Rules,
	// DryRun...) is passed on as it is. Checkers built per reconcile should
	// share one health.Memory (see package health).
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
	// instead. Nil means no events.
	EventRecorder events.EventRecorder
	// EventObject, when not nil, is the object the events regard, such as
	// the workload's own object (EventObserverOptions.Object).
	EventObject runtime.Object
}

// NewChecker builds, from a manager, a Checker of the pods of namespace
// that match selector: a PodSource over mgr.GetClient() (the cache), a
// Deleter over mgr.GetClient() (the API server), node evidence and an
// EventObserver over opts.EventRecorder, as opts say. namespace and
// selector are required, and refused as NewPodSource refuses them.
//
// It is cheap enough to call in every reconcile; the checkers of one
// manager should then share a health.Memory in opts.Health.Memory, so that
// what one checker deleted is not deleted again by the next.
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
	h := opts.Health
	if !opts.NoNodeEvidence {
		if h.Nodes == nil {
			if h.Nodes, err = NewNodes(c); err != nil {
				return nil, err
			}
		}
		if h.LiveNodes == nil {
			if h.LiveNodes, err = NewNodes(mgr.GetAPIReader()); err != nil {
				return nil, fmt.Errorf("controllerruntime: NewChecker: live reader: %w", err)
			}
		}
	}
	if opts.ClaimEvidence && h.Claims == nil {
		if h.Claims, err = NewClaims(c); err != nil {
			return nil, err
		}
	}
	if !isNil(opts.EventRecorder) {
		events, err := NewEventObserver(opts.EventRecorder, EventObserverOptions{Object: opts.EventObject})
		if err != nil {
			return nil, err
		}
		h.Observer = health.MultiObserver(h.Observer, events)
	}
	return health.New(source, deleter, h)
}
