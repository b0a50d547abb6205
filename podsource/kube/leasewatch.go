package kube

import (
	"errors"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/fencing"
)

var _ fencing.LeaseSightings = (*LeaseWatch)(nil)

// LeaseWatch remembers what a Lease informer delivered, for
// fencing.LeaseOptions.Seen: when it first delivered each Lease's current
// version and current acquisition, so that a self-fencing pod's wait runs
// from the moment its holder's last renewal (or a successor's takeover)
// reached this process, not from the first check that asks (which comes
// only once the pod is dead, seconds or minutes after its node went
// silent); and which holders it saw hold each Lease, the evidence that a
// pod took part in the protocol, without which a takeover frees nobody.
// The LeaseFencer still reads the Lease live and uses the watch's times
// only for the very version or acquisition it read.
//
// Its clock must be the Checker's (health.Options.Clock). It remembers
// one version and one acquisition per Lease the informer holds, and
// forgets them when the Lease is deleted; it remembers the last
// maxHoldersPerLease holders of each Lease, a deleted one's too (a Lease
// deleted and recreated still had those holders), up to
// maxForgottenLeases deleted Leases. A LeaseWatch is safe for concurrent
// use.
type LeaseWatch struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	seen    map[string]leaseVersion // by namespace/name
	holders map[string][]string     // by namespace/name, oldest first
	deleted []string                // Leases deleted whose holders are kept, oldest first
}

// The bounds of what a LeaseWatch remembers of holders.
const (
	maxHoldersPerLease = 16
	maxForgottenLeases = 4096
)

type leaseVersion struct {
	rv string
	at time.Time
	// acquisition is the current record's holder, acquireTime and
	// leaseTransitions, first seen at acquiredAt.
	acquisition string
	acquiredAt  time.Time
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
	w := &LeaseWatch{clock: clk, seen: map[string]leaseVersion{}, holders: map[string][]string{}}
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
	holder, acquisition := acquisitionOf(lease)
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.seen[key]
	if v.rv != lease.ResourceVersion { // a resync delivers the same version again
		v.rv, v.at = lease.ResourceVersion, now
	}
	if v.acquisition != acquisition {
		v.acquisition, v.acquiredAt = acquisition, now
	}
	w.seen[key] = v
	if holder != "" {
		w.sawHolder(key, holder)
	}
}

// sawHolder remembers that holder held Lease key, the last
// maxHoldersPerLease holders of it.
func (w *LeaseWatch) sawHolder(key, holder string) {
	hs := w.holders[key]
	for i, h := range hs {
		if h == holder {
			if i == len(hs)-1 {
				return
			}
			hs = append(hs[:i], hs[i+1:]...) // moved to the newest
			break
		}
	}
	if len(hs) == maxHoldersPerLease {
		hs = hs[1:]
	}
	w.holders[key] = append(hs, holder)
}

// acquisitionOf returns a Lease's holder and the key of its current
// acquisition ("" without a holder or an acquireTime).
func acquisitionOf(lease *coordinationv1.Lease) (holder, acquisition string) {
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return "", ""
	}
	holder = *lease.Spec.HolderIdentity
	if lease.Spec.AcquireTime == nil || lease.Spec.AcquireTime.IsZero() {
		return holder, ""
	}
	var transitions int32
	if lease.Spec.LeaseTransitions != nil {
		transitions = *lease.Spec.LeaseTransitions
	}
	return holder, acquisitionKey(holder, lease.Spec.AcquireTime.Time, transitions)
}

func acquisitionKey(holder string, acquired time.Time, transitions int32) string {
	return holder + "\x00" + strconv.FormatInt(acquired.UnixNano(), 36) + "\x00" + strconv.FormatInt(int64(transitions), 10)
}

func (w *LeaseWatch) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		key := lease.Namespace + "/" + lease.Name
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.seen, key)
		if _, ok := w.holders[key]; ok {
			w.deleted = append(w.deleted, key)
			if len(w.deleted) > maxForgottenLeases {
				oldest := w.deleted[0]
				w.deleted = w.deleted[1:]
				if _, live := w.seen[oldest]; !live {
					delete(w.holders, oldest)
				}
			}
		}
	}
}

// AcquisitionSeen returns when the informer first delivered holder's
// acquisition of Lease namespace/name with that acquireTime and
// leaseTransitions, if it is the Lease's current one.
func (w *LeaseWatch) AcquisitionSeen(namespace, name, holder string, acquired time.Time, transitions int32) (time.Time, bool) {
	want := acquisitionKey(holder, acquired, transitions)
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.seen[namespace+"/"+name]
	if !ok || v.acquisition != want {
		return time.Time{}, false
	}
	return v.acquiredAt, true
}

// HolderSeen reports whether the informer delivered a record of Lease
// namespace/name held by holder (among the last ones it remembers).
func (w *LeaseWatch) HolderSeen(namespace, name, holder string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.holders[namespace+"/"+name] {
		if h == holder {
			return true
		}
	}
	return false
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
