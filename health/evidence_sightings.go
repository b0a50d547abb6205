package health

import (
	"container/list"
	"sync"
	"time"
)

// sightings remembers when pods were first seen terminating, so that
// TerminatingTooLong can measure the wait on the Checker's own clock. It is
// bounded without starving anyone:
//
//   - Sightings are counted in generations: each check that records a
//     sighting opens a generation, and records all of its sightings in it.
//     A key seen in the current or the previous generation is never evicted
//     for room, so every pod listed by the latest check keeps its first
//     sighting, however many pods there are.
//   - Other keys are kept up to capacity, least recently seen evicted first.
//   - A key not seen for idle is forgotten, and starts again; idle counts
//     from its last sighting or from when the check that saw it said it
//     would look again (hold), whichever is later, so that a wait longer
//     than idle ends for a caller that checks only at Report.RetryAfter.
//
// So it holds at most the larger of capacity and the keys of the last two
// generations (plus the keys of checks still running), whatever the churn.
// Every operation costs O(1) amortised. It is safe for concurrent use.
type sightings struct {
	capacity int
	idle     time.Duration

	mu    sync.Mutex
	gen   uint64                   // the latest generation opened
	seen  map[string]*list.Element // of *sighting
	order list.List                // front: seen most recently
}

type sighting struct {
	key         string
	first, last time.Time
	// heldUntil is when a check that saw the key said it would look again
	// (see hold): the key is not idle before heldUntil plus idle.
	heldUntil time.Time
	gen       uint64 // the latest generation that saw it
}

// idleAt reports whether x has gone unseen for idle at now, counting from
// its last sighting or its hold, whichever is later.
func (s *sightings) idleAt(x *sighting, now time.Time) bool {
	from := x.last
	if x.heldUntil.After(from) {
		from = x.heldUntil
	}
	return now.Sub(from) >= s.idle
}

func newSightings(capacity int, idle time.Duration) *sightings {
	return &sightings{capacity: capacity, idle: idle, seen: make(map[string]*list.Element)}
}

// open starts a generation and returns it.
func (s *sightings) open() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	return s.gen
}

// current returns the latest generation, opening none.
func (s *sightings) current() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// see records a sighting of key at now in generation gen and returns the
// first one.
func (s *sightings) see(key string, gen uint64, now time.Time) time.Time {
	return s.record(key, gen, now).first
}

// record is see, returning the sighting itself, for hold.
func (s *sightings) record(key string, gen uint64, now time.Time) *sighting {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.seen[key]; ok {
		x := e.Value.(*sighting)
		if !s.idleAt(x, now) {
			if now.After(x.last) {
				x.last = now
			}
			x.gen = max(x.gen, gen)
			s.order.MoveToFront(e)
			return x
		}
		s.removeLocked(e)
	}
	for s.order.Len() >= s.capacity {
		back := s.order.Back()
		x := back.Value.(*sighting)
		if x.gen+1 >= s.gen && !s.idleAt(x, now) {
			break // seen by one of the last two generations, and not idle: kept
		}
		s.removeLocked(back)
	}
	x := &sighting{key: key, first: now, last: now, gen: gen}
	s.seen[key] = s.order.PushFront(x)
	return x
}

// hold keeps each of xs from going idle before until plus idle: the check
// that saw them will look again at until (its Report.RetryAfter). A
// sighting since forgotten or evicted is no longer in the record, and
// holding it changes nothing.
func (s *sightings) hold(xs []*sighting, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range xs {
		if until.After(x.heldUntil) {
			x.heldUntil = until
		}
	}
}

// peek returns the first sighting of key, if it is remembered and not
// idle at now, without recording anything.
func (s *sightings) peek(key string, now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.seen[key]
	if !ok {
		return time.Time{}, false
	}
	x := e.Value.(*sighting)
	if s.idleAt(x, now) {
		return time.Time{}, false
	}
	return x.first, true
}

// forget drops key, so that its next sighting is a first one.
func (s *sightings) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.seen[key]; ok {
		s.removeLocked(e)
	}
}

func (s *sightings) removeLocked(e *list.Element) {
	delete(s.seen, e.Value.(*sighting).key)
	s.order.Remove(e)
}

func (s *sightings) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}

// checkSightings is one check's use of the first-seen records: it records
// in record, all in one generation opened on its first sighting. A dry run
// records in a record of its own, and reads the real checks' record
// (shared) without writing it, so that it answers as a real check that had
// been running would.
type checkSightings struct {
	record *sightings
	shared *sightings // read only; nil unless a dry run
	// peek opens no generation: for a classification outside a check,
	// which must not age the checks' sightings.
	peek bool
	gen  uint64
	// seen are the sightings this check recorded, which hold keeps until
	// the check's RetryAfter.
	seen []*sighting
}

// see records a sighting of key at now and returns the first one.
func (c *checkSightings) see(key string, now time.Time) time.Time {
	if c.gen == 0 {
		if c.peek {
			c.gen = c.record.current()
		} else {
			c.gen = c.record.open()
		}
	}
	x := c.record.record(key, c.gen, now)
	c.seen = append(c.seen, x)
	first := x.first
	if c.shared != nil {
		if t, ok := c.shared.peek(key, now); ok && t.Before(first) {
			first = t
		}
	}
	return first
}

// hold keeps the sightings this check recorded until at least until, when
// the check's caller looks again (Report.RetryAfter), plus the idle
// period: a wait measured from a sighting then ends however much longer
// than the idle period it is.
func (c *checkSightings) hold(until time.Time) {
	if len(c.seen) > 0 {
		c.record.hold(c.seen, until)
	}
}

// forget drops key from the record this check writes.
func (c *checkSightings) forget(key string) {
	c.record.forget(key)
}
