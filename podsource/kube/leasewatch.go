package kube

import (
	"errors"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/fencing"
)

var _ fencing.LeaseSightings = (*LeaseWatch)(nil)

// LeaseWatch remembers when a Lease informer first delivered each Lease's
// current version, for fencing.LeaseOptions.Seen: the wait of a
// self-fencing pod then runs from the moment its holder's last renewal
// reached this process, not from the first check that asks (which comes
// only once the pod is dead, seconds after its node went silent). The
// LeaseFencer still reads the Lease live and uses the watch's time only
// for the very version it read.
//
// Its clock must be the Checker's (health.Options.Clock). It remembers
// one version per Lease the informer holds, and forgets a Lease that is
// deleted. A LeaseWatch is safe for concurrent use.
type LeaseWatch struct {
	clock clock.PassiveClock

	mu   sync.Mutex
	seen map[string]leaseVersion // by namespace/name
}

type leaseVersion struct {
	rv string
	at time.Time
}

// LeaseEvents is what a LeaseWatch needs of a Lease informer: client-go's
// (factory.Coordination().V1().Leases().Informer()) and
// controller-runtime's (mgr.GetCache().GetInformer(ctx, &Lease{})) both
// have it.
type LeaseEvents interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
}

// NewLeaseWatch returns a LeaseWatch fed by informer, an informer of the
// workloads' Leases. clk nil means the real clock.
func NewLeaseWatch(informer LeaseEvents, clk clock.PassiveClock) (*LeaseWatch, error) {
	if isNil(informer) {
		return nil, errors.New("kube: NewLeaseWatch: nil Lease informer (a typed nil too)")
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	w := &LeaseWatch{clock: clk, seen: map[string]leaseVersion{}}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.saw,
		UpdateFunc: func(_, obj any) { w.saw(obj) },
		DeleteFunc: w.forget,
	}); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *LeaseWatch) saw(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	key := lease.Namespace + "/" + lease.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[key].rv != lease.ResourceVersion { // a resync delivers the same version again
		w.seen[key] = leaseVersion{rv: lease.ResourceVersion, at: w.clock.Now()}
	}
}

func (w *LeaseWatch) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.seen, lease.Namespace+"/"+lease.Name)
	}
}

// LeaseSeen returns when the informer first delivered Lease
// namespace/name at resourceVersion.
func (w *LeaseWatch) LeaseSeen(namespace, name, resourceVersion string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.seen[namespace+"/"+name]
	if !ok || v.rv != resourceVersion {
		return time.Time{}, false
	}
	return v.at, true
}
