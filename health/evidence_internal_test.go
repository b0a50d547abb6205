package health

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSightingsStayBoundedAndKeepTheFirstSighting(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	s := newSightings(100, time.Minute)
	first := s.see("kept", t0)
	for i := range 10_000 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		s.see(fmt.Sprint(i), now)
		if i%50 == 0 {
			require.Equal(t, first, s.see("kept", now), "a key seen often keeps its first sighting")
		}
	}
	require.LessOrEqual(t, s.len(), 100)

	later := t0.Add(time.Hour)
	require.Equal(t, later, s.see("kept", later), "a key not seen for the idle period starts again")
}

func TestSightingsEvictTheLeastRecentlySeen(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	s := newSightings(2, time.Hour)
	s.see("a", t0)
	s.see("b", t0.Add(time.Second))
	s.see("a", t0.Add(2*time.Second)) // a is now the most recent
	s.see("c", t0.Add(3*time.Second)) // evicts b
	require.Equal(t, t0, s.see("a", t0.Add(4*time.Second)), "a kept its first sighting")
	require.Equal(t, t0.Add(5*time.Second), s.see("b", t0.Add(5*time.Second)), "b was evicted and starts again")
	require.Equal(t, 2, s.len())
}

// Filling the sightings far past capacity costs the same per key: a
// benchmark, not a timed test, shows it.
func BenchmarkSightingsWhenFull(b *testing.B) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	s := newSightings(DefaultMemoryCapacity, time.Hour)
	keys := make([]string, 4*DefaultMemoryCapacity)
	for i := range keys {
		keys[i] = fmt.Sprint("uid-", i)
	}
	i := 0
	b.ResetTimer()
	for range b.N {
		s.see(keys[i%len(keys)], t0)
		i++
	}
}
