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
