package health

import (
	"container/list"
	"sync"
	"time"
)

// sightings remembers when something was first seen, for a bounded number
// of keys, in least-recently-seen order. A key not seen again for idle is
// forgotten; when full, the key seen least recently goes. Every operation
// costs O(1). It is safe for concurrent use.
type sightings struct {
	capacity int
	idle     time.Duration

	mu    sync.Mutex
	seen  map[string]*list.Element // of *sighting
	order list.List                // front: seen most recently
}

type sighting struct {
	key         string
	first, last time.Time
}

func newSightings(capacity int, idle time.Duration) *sightings {
	return &sightings{capacity: capacity, idle: idle, seen: make(map[string]*list.Element)}
}

// see records a sighting of key at now and returns the first one.
func (s *sightings) see(key string, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.seen[key]; ok {
		x := e.Value.(*sighting)
		if now.Sub(x.last) < s.idle {
			x.last = now
			s.order.MoveToFront(e)
			return x.first
		}
		s.removeLocked(e)
	}
	for s.order.Len() >= s.capacity {
		s.removeLocked(s.order.Back())
	}
	s.seen[key] = s.order.PushFront(&sighting{key: key, first: now, last: now})
	return now
}

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
