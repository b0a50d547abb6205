package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/health"
)

// viewMaxAge is the longest a memoized view of the nodes serves checks
// without a new listing, even with no change seen: a bound on what a
// change the handlers let through by mistake could cost.
const viewMaxAge = time.Second

// viewMemo keeps the Breaker's last view of the nodes (heartbeatNodes) for
// the checks that follow, as long as it is still the view a new listing
// would give: no change of a node or a Lease that the view shows has been
// seen since (the informers' handlers call changed), no Lease counted
// fresh in it has gone stale with time, the clock has not gone back, and
// it is at most viewMaxAge old.
//
// Why: every check that reaches a dead pod asks the Breaker, which lists
// every node and Lease. When the Breaker closes after a mass failure, or
// the first recovered node brings back every group it held, tens of
// thousands of checks run in a burst: listing for each made the burst cost
// the groups times the nodes.
//
// The view can lag the cache by the delivery of one informer
// notification, as one informer's cache lags another's; the events that
// enqueue the groups the Breaker held end the view themselves before they
// enqueue them (breakerHeldGroups), so that those checks read the change
// that brought them.
//
// A view is shared by the checks it serves: the Breaker does not change
// the nodes it lists (health.NodeLister). It is safe for concurrent use;
// listings are made one at a time, so that a burst lists once.
type viewMemo struct {
	clock   clock.PassiveClock
	maxAge  time.Duration // zero means viewMaxAge
	changes atomic.Uint64 // bumped by changed
	// openEverywhere, when not nil, reads each new listing as the Breaker
	// would: whether it stops force deletes on every node. The last
	// reading is kept in lastListed (see closedSomewhereWhenLastListed).
	openEverywhere func(ctx context.Context, nodes []*corev1.Node) bool
	lastListed     atomic.Int32 // listedUnknown, listedOpenEverywhere or listedClosedSomewhere

	mu      sync.Mutex
	valid   bool
	nodes   []*corev1.Node
	of      uint64    // changes when nodes was listed
	at      time.Time // when it was listed
	through time.Time // the last instant it holds without a change
}

// What the last listing said of the Breaker (viewMemo.lastListed).
const (
	listedUnknown int32 = iota
	listedOpenEverywhere
	listedClosedSomewhere
)

// closedSomewhereWhenLastListed reports whether the last listing, however
// old, was read as a Breaker that lets force deletes go on some node:
// false when none was, or its reading failed.
func (m *viewMemo) closedSomewhereWhenLastListed() bool {
	return m.lastListed.Load() == listedClosedSomewhere
}

// changed records a change that a view may show.
func (m *viewMemo) changed() { m.changes.Add(1) }

// get returns the memoized view, or a new one from list, which returns the
// view at now and the last instant it holds without a change (the zero
// time for no such instant). An error is not kept: the next call lists
// again.
//
// A view listed after the call began serves it, though changes came
// since: the caller needs every change made before it asked, and a view
// whose listing began after them has them. So the checks that wait while
// one lists share the next listing, however often the informers report a
// change meanwhile (as the nodes of a mass failure come back, hundreds a
// minute); the change counter read before each wait and each listing
// says which.
func (m *viewMemo) get(ctx context.Context, list func(ctx context.Context, now time.Time) ([]*corev1.Node, time.Time, error)) ([]*corev1.Node, error) {
	return m.getAsOf(ctx, m.changes.Load(), list)
}

// getAsOf is get for a caller that asked when the change counter read
// asked.
func (m *viewMemo) getAsOf(ctx context.Context, asked uint64, list func(ctx context.Context, now time.Time) ([]*corev1.Node, time.Time, error)) ([]*corev1.Node, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	if m.valid && m.of >= asked && !now.Before(m.at) && !now.After(m.through) {
		return m.nodes, nil
	}
	// Read before the listing: a change the listing misses bumps it after.
	changes := m.changes.Load()
	m.valid = false
	nodes, through, err := list(ctx, now)
	if err != nil {
		m.lastListed.Store(listedUnknown)
		return nil, err
	}
	if m.openEverywhere != nil {
		read := listedClosedSomewhere
		if m.openEverywhere(ctx, nodes) {
			read = listedOpenEverywhere
		}
		m.lastListed.Store(read)
	}
	maxAge := m.maxAge
	if maxAge == 0 {
		maxAge = viewMaxAge
	}
	if limit := now.Add(maxAge); through.IsZero() || through.After(limit) {
		through = limit
	}
	m.valid, m.nodes, m.of, m.at, m.through = true, nodes, changes, now, through
	return nodes, nil
}

// nodeHandler returns the node informer's handler of m: a node added or
// deleted, or one whose state, maintenance or zone (what the Breaker
// counts by) changed. The heartbeats that change none of them, most node
// updates, do not count.
func (m *viewMemo) nodeHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { m.changed() },
		UpdateFunc: func(oldObj, newObj any) {
			old, okOld := oldObj.(*corev1.Node)
			node, okNew := newObj.(*corev1.Node)
			if !okOld || !okNew || breakerFactsOf(old) != breakerFactsOf(node) {
				m.changed()
			}
		},
		DeleteFunc: func(any) { m.changed() },
	}
}

// breakerFacts are what the Breaker, and the view's marking, read of a
// node.
type breakerFacts struct {
	state       health.NodeState
	maintenance corev1.NodeConditionType
	stopping    bool
	zone        string
}

func breakerFactsOf(node *corev1.Node) breakerFacts {
	maintenance, stopping := health.InMaintenance(node)
	return breakerFacts{state: health.NodeStateOf(node), maintenance: maintenance, stopping: stopping, zone: node.Labels[corev1.LabelTopologyZone]}
}

// leaseHandler returns the Lease informer's handler of m: a Lease added or
// deleted, one stale at the update's time, and one whose renewal went
// back or whose duration shrank (either can make it stale sooner than the
// view holds). A renewal of a fresh Lease only moves its staleness later,
// which the view's own end already bounds, so it does not count: most
// Lease updates are such renewals.
func (m *viewMemo) leaseHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { m.changed() },
		UpdateFunc: func(oldObj, newObj any) {
			old, okOld := oldObj.(*coordinationv1.Lease)
			lease, okNew := newObj.(*coordinationv1.Lease)
			if !okOld || !okNew || !renewedFresh(old, lease, m.clock.Now()) {
				m.changed()
			}
		},
		DeleteFunc: func(any) { m.changed() },
	}
}

// renewedFresh reports whether lease, after old, is a renewal of a Lease
// that was fresh at now: renewed no earlier, for no shorter a duration.
func renewedFresh(old, lease *coordinationv1.Lease, now time.Time) bool {
	if _, stale := leaseStale(old, now); stale || lease.Spec.RenewTime == nil {
		return false
	}
	return !lease.Spec.RenewTime.Time.Before(old.Spec.RenewTime.Time) && leaseDuration(lease) >= leaseDuration(old)
}
