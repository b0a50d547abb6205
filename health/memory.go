package health

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Default bounds of a Memory.
const (
	defaultMemoryCapacity = 4096
	defaultMemoryTTL      = 10 * time.Minute
)

// MemoryOptions bound a Memory. The zero value means the defaults.
type MemoryOptions struct {
	// Capacity is the most UIDs remembered; the oldest is forgotten first.
	// Zero or less means 4,096.
	Capacity int
	// TTL is how long a UID is remembered. Zero or less means 10 minutes.
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
// A UID past its TTL is no longer taken as deleted: a check that judges the
// pod again may send its force delete again. A Check without node evidence
// that counts a pod alive does not judge again a pod whose UID the Memory
// still holds, expired or not (expired UIDs are dropped when it next
// records a delete): that pod is gone from the API server or held there by
// a finalizer, and cannot change the answer.
//
// It also makes concurrent checks that meet the same dead pod send a single
// DELETE: the later ones wait for the first one's result.
//
// It also records when pods were first seen terminating, for
// TerminatingTooLong, and when nodes were first seen unreachable, for
// Options.UnreachableFor, with bounds of its own: a pod listed by one of the
// last two checks that saw terminating pods is never forgotten for room,
// however many pods are stuck, so that every one of them gets its turn;
// other pods are kept up to Capacity, least recently seen first out; a pod
// not seen for TTL starts again. The TTL counts from the last check that
// saw it, or from the time that check's Report.RetryAfter named, whichever
// is later: a wait longer than the TTL (a shutdown taint's After, a
// fencer's deadline) ends for a caller that checks again only at
// RetryAfter. Over any churn it holds about the
// terminating pods of the last two such checks, or Capacity if more
// (TestFirstSightingsStayBoundedOverPodChurn). Checkers of different
// workloads that share one Memory count as one stream of checks: when they
// see more than Capacity terminating pods together, a workload whose pods
// go unseen while two other checks see terminating pods may have their
// waits restarted. Give such checkers a Capacity above the terminating
// pods they see together, or a Memory per workload.
//
// Share one Memory between Checkers that see the same pods (see
// Options.Memory), in particular between checkers built per reconcile:
// a Checker with a Memory of its own forgets, when it is dropped, what it
// deleted. The zero Memory is ready to use, with the default bounds, as is
// one made by NewMemory(MemoryOptions{}). A Memory is safe for concurrent
// use.
type Memory struct {
	// once sets the bounds and the records up on first use, so that the
	// zero Memory works.
	once     sync.Once
	capacity int
	ttl      time.Duration

	mu      sync.Mutex
	deleted map[types.UID]time.Time // UID -> when it expires
	ring    []rememberedUID         // insertion order, oldest at head
	head    int
	size    int
	shed    uint64 // UIDs forgotten for room before their TTL (see Shed)

	// inflight holds the force deletes in progress, so that concurrent
	// checks send one DELETE per pod.
	inflight inflight

	// sightings remembers when pods were first seen terminating, with
	// bounds of its own (see sightings): the Memory's capacity for the pods
	// that no recent check listed, and no limit on those that one did.
	sightings *sightings
	// dryRunSightings is the same record for dry runs, which real checks
	// never read, so that a dry run cannot shorten a real check's wait.
	dryRunSightings *sightings
}

type rememberedUID struct {
	uid     types.UID
	expires time.Time
}

// NewMemory returns an empty Memory with the given bounds.
func NewMemory(opts MemoryOptions) *Memory {
	m := &Memory{}
	m.once.Do(func() { m.setUp(opts) })
	return m
}

// ready sets up a Memory that NewMemory did not make (the zero Memory)
// with the default bounds. New calls it, so the methods below, which only
// a Checker calls, need not.
func (m *Memory) ready() *Memory {
	m.once.Do(func() { m.setUp(MemoryOptions{}) })
	return m
}

func (m *Memory) setUp(opts MemoryOptions) {
	if opts.Capacity <= 0 {
		opts.Capacity = defaultMemoryCapacity
	}
	if opts.TTL <= 0 {
		opts.TTL = defaultMemoryTTL
	}
	m.capacity, m.ttl = opts.Capacity, opts.TTL
	m.deleted = make(map[types.UID]time.Time)
	m.sightings = newSightings(opts.Capacity, opts.TTL)
	m.dryRunSightings = newSightings(opts.Capacity, opts.TTL)
}

// len returns how many UIDs are remembered, expired ones included until they
// are swept.
func (m *Memory) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.size
}

// Shed returns how many force-deleted UIDs the Memory has forgotten for
// room before their TTL ran out. While it grows, a cache that lags longer
// than the Memory remembers may get a second DELETE for a pod (which the
// UID precondition keeps harmless): raise MemoryOptions.Capacity.
func (m *Memory) Shed() uint64 {
	m.ready()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shed
}

// remembers reports whether uid was force-deleted and has not expired at now.
func (m *Memory) remembers(uid types.UID, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	expires, ok := m.deleted[uid]
	return ok && now.Before(expires)
}

// holds reports whether uid was force-deleted and is still held, expired or
// not: expired UIDs are dropped when the Memory next records a delete. It
// reads no clock, for the checks that only need to know that a pod was
// force-deleted already (see Checker.run).
func (m *Memory) holds(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.deleted[uid]
	return ok
}

// remember records that uid was force-deleted at now.
func (m *Memory) remember(uid types.UID, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked(now)
	if m.ring == nil {
		m.ring = make([]rememberedUID, m.capacity)
	}
	if m.size == m.capacity {
		m.dropOldestLocked()
		m.shed++
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
