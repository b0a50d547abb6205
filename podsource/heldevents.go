package podsource

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/health"
)

// DefaultHeldRepeat is how often HeldEvents lets a hold that lasts be
// recorded again by default: within the hour for which an API server keeps
// events (its --event-ttl), so that a pod held for a day still has one.
const DefaultHeldRepeat = 50 * time.Minute

// heldCapacity bounds the holds a HeldEvents remembers; one it forgot is
// at worst recorded once more.
const heldCapacity = 4096

// HeldEventsOptions configure a HeldEvents. The zero value is the default.
type HeldEventsOptions struct {
	// Repeat is how long a hold is recorded once: after it, the same hold
	// is recorded again. Zero means DefaultHeldRepeat; it must not be
	// negative.
	Repeat time.Duration
	// Clock measures Repeat. Nil means the real clock.
	Clock clock.PassiveClock
}

// HeldEvents decides which HeldBack reports get an event, so that an
// operator that checks every second sends one event when a hold starts,
// not one per check: a pod's hold is recorded when it starts, when its
// reason (Hold.Reason, not its detail, whose countdowns change at every
// check) changes, and again once Repeat has passed. Any other outcome of
// the pod ends its hold, so that the next one is recorded.
//
// The EventObservers of podsource/kube and podsource/controllerruntime use
// one each. Share one between observers built per reconcile or per report
// (their options take it), or each starts afresh. It remembers at most
// 4,096 pods (by UID, else by namespace and name); one it forgot is
// recorded again at worst. A HeldEvents is safe for concurrent use.
type HeldEvents struct {
	repeat time.Duration
	clock  clock.PassiveClock

	mu    sync.Mutex
	holds map[heldKey]heldEntry
	// remembered is len(holds), read without the lock so that the
	// reports of pods that were never held (nearly all) cost no lock.
	remembered atomic.Int64
}

type heldKey struct {
	uid             types.UID
	namespace, name string
}

type heldEntry struct {
	reason health.HoldReason
	at     time.Time
}

// NewHeldEvents returns an empty HeldEvents.
func NewHeldEvents(opts HeldEventsOptions) (*HeldEvents, error) {
	if opts.Repeat < 0 {
		return nil, fmt.Errorf("podsource: NewHeldEvents: negative HeldEventsOptions.Repeat %v", opts.Repeat)
	}
	h := &HeldEvents{repeat: opts.Repeat, clock: opts.Clock, holds: map[heldKey]heldEntry{}}
	if h.repeat == 0 {
		h.repeat = DefaultHeldRepeat
	}
	if h.clock == nil {
		h.clock = clock.RealClock{}
	}
	return h, nil
}

// Record says whether r's event, if it has one (EventFor), is to be
// recorded, and remembers that it was. Reports of other outcomes than
// HeldBack are always recorded: each is news. Call it for every report,
// those without an event too, so that a hold that ends is forgotten.
func (h *HeldEvents) Record(r health.PodReport) bool {
	if r.Pod == nil || (r.Outcome != health.HeldBack && h.remembered.Load() == 0) {
		return true
	}
	key := heldKey{uid: r.Pod.UID}
	if key.uid == "" {
		key.namespace, key.name = r.Pod.Namespace, r.Pod.Name
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() { h.remembered.Store(int64(len(h.holds))) }()
	if r.Outcome != health.HeldBack {
		delete(h.holds, key)
		return true
	}
	now := h.clock.Now()
	if last, ok := h.holds[key]; ok && last.reason == r.HeldBack.Reason {
		if since := now.Sub(last.at); since >= 0 && since < h.repeat {
			return false
		}
	}
	if len(h.holds) >= heldCapacity {
		h.evict(now)
	}
	h.holds[key] = heldEntry{reason: r.HeldBack.Reason, at: now}
	return true
}

// evict forgets the holds that are due again anyway, and, if none is,
// every hold: a bound on memory matters more than one repeated event.
func (h *HeldEvents) evict(now time.Time) {
	for k, e := range h.holds {
		if now.Sub(e.at) >= h.repeat {
			delete(h.holds, k)
		}
	}
	if len(h.holds) >= heldCapacity {
		clear(h.holds)
	}
}
