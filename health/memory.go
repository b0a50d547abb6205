package health

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Default bounds of a Memory.
const (
	DefaultMemoryCapacity = 4096
	DefaultMemoryTTL      = 10 * time.Minute
)

// MemoryOptions bound a Memory. The zero value means the defaults.
type MemoryOptions struct {
	// Capacity is the most UIDs remembered; the oldest is forgotten first.
	// Zero means DefaultMemoryCapacity.
	Capacity int
	// TTL is how long a UID is remembered. Zero means DefaultMemoryTTL.
	TTL time.Duration
}

// Memory remembers the UIDs of pods that were force-deleted, so that a pod
// still listed by a lagging cache is not deleted again. It is bounded: it
// holds at most Capacity UIDs, each for at most TTL, in a fixed-size ring
// plus a map. Measured with 36-byte UIDs (Go 1.26, amd64), that is 184
// bytes per UID, about 740 KB at the default capacity of 4,096, and the
// heap does not grow past it however many UIDs go through
// (TestMemoryStaysBoundedOverAMillionUIDs).
//
// It also makes concurrent checks that meet the same dead pod send a single
// DELETE: the later ones wait for the first one's result.
//
// Several Checkers may share one Memory (see Options.Memory), for example
// checkers built per reconcile for the same workloads. A Memory is safe for
// concurrent use.
type Memory struct {
	capacity int
	ttl      time.Duration

	mu       sync.Mutex
	deleted  map[types.UID]time.Time // UID -> when it expires
	ring     []rememberedUID         // insertion order, oldest at head
	head     int
	size     int
	inflight map[types.UID]*deleteCall

	// sightings remembers when pods were first seen terminating and nodes
	// first seen missing.
	sightings *sightings
}

type rememberedUID struct {
	uid     types.UID
	expires time.Time
}

// deleteCall is one force delete in progress; done closes when it ends.
type deleteCall struct {
	done chan struct{}
	res  result
}

// NewMemory returns an empty Memory with the given bounds. Negative bounds
// mean the defaults.
func NewMemory(opts MemoryOptions) *Memory {
	if opts.Capacity <= 0 {
		opts.Capacity = DefaultMemoryCapacity
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultMemoryTTL
	}
	return &Memory{
		capacity:  opts.Capacity,
		ttl:       opts.TTL,
		deleted:   make(map[types.UID]time.Time),
		inflight:  make(map[types.UID]*deleteCall),
		sightings: newSightings(opts.Capacity, opts.TTL),
	}
}

// Len returns how many UIDs are remembered, expired ones included until they
// are swept.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.size
}

// Remembers reports whether uid was force-deleted and has not expired at now.
func (m *Memory) Remembers(uid types.UID, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.remembersLocked(uid, now)
}

func (m *Memory) remembersLocked(uid types.UID, now time.Time) bool {
	expires, ok := m.deleted[uid]
	return ok && now.Before(expires)
}

// Remember records that uid was force-deleted at now.
func (m *Memory) Remember(uid types.UID, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rememberLocked(uid, now)
}

func (m *Memory) rememberLocked(uid types.UID, now time.Time) {
	m.sweepLocked(now)
	if m.ring == nil {
		m.ring = make([]rememberedUID, m.capacity)
	}
	if m.size == m.capacity {
		m.dropOldestLocked()
	}
	expires := now.Add(m.ttl)
	m.ring[(m.head+m.size)%m.capacity] = rememberedUID{uid: uid, expires: expires}
	m.size++
	// A UID remembered twice keeps its latest expiry; the older ring slot
	// is ignored when it is dropped (see dropOldestLocked).
	m.deleted[uid] = expires
}

// sweepLocked forgets the expired UIDs. Entries are added with a
// non-decreasing clock, so the expired ones sit at the head of the ring.
func (m *Memory) sweepLocked(now time.Time) {
	for m.size > 0 && !now.Before(m.ring[m.head].expires) {
		m.dropOldestLocked()
	}
}

func (m *Memory) dropOldestLocked() {
	oldest := m.ring[m.head]
	if m.deleted[oldest.uid].Equal(oldest.expires) {
		delete(m.deleted, oldest.uid)
	}
	m.ring[m.head] = rememberedUID{}
	m.head = (m.head + 1) % m.capacity
	m.size--
}

// finish ends the call; a delete that was sent and did not fail is
// remembered at now.
func (m *Memory) finish(uid types.UID, call *deleteCall, res result, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	call.res = res
	delete(m.inflight, uid)
	if res.outcome.Removed() {
		m.rememberLocked(uid, now)
	}
	close(call.done)
}

// claimUnlessRemembered reports whether uid was force-deleted already;
// otherwise it returns the delete in flight for uid, or registers a new one
// (owner=true) that the caller must end with finish.
func (m *Memory) claimUnlessRemembered(uid types.UID, now time.Time) (remembered bool, call *deleteCall, owner bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.remembersLocked(uid, now) {
		return true, nil, false
	}
	if call, ok := m.inflight[uid]; ok {
		return false, call, false
	}
	call = &deleteCall{done: make(chan struct{})}
	m.inflight[uid] = call
	return false, call, true
}
