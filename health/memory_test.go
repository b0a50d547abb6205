package health_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
)

var t0 = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

func TestMemoryForgetsTheOldestBeyondCapacity(t *testing.T) {
	m := health.NewMemory(health.MemoryOptions{Capacity: 3, TTL: time.Hour})
	for i := range 5 {
		m.Remember(types.UID(fmt.Sprint(i)), t0.Add(time.Duration(i)*time.Second))
	}
	require.Equal(t, 3, m.Len())
	now := t0.Add(10 * time.Second)
	var remembered []bool
	for i := range 5 {
		remembered = append(remembered, m.Remembers(types.UID(fmt.Sprint(i)), now))
	}
	require.Equal(t, []bool{false, false, true, true, true}, remembered)
}

func TestMemoryForgetsAfterTTL(t *testing.T) {
	m := health.NewMemory(health.MemoryOptions{TTL: time.Minute})
	m.Remember("a", t0)
	m.Remember("b", t0.Add(30*time.Second))
	require.True(t, m.Remembers("a", t0.Add(59*time.Second)))
	require.False(t, m.Remembers("a", t0.Add(time.Minute)), "expired at exactly TTL")
	require.True(t, m.Remembers("b", t0.Add(time.Minute)))

	m.Remember("c", t0.Add(time.Minute)) // sweeps what expired
	require.Equal(t, 2, m.Len())
}

func TestMemoryRememberingAUIDAgainKeepsTheLatestExpiry(t *testing.T) {
	m := health.NewMemory(health.MemoryOptions{Capacity: 2, TTL: time.Minute})
	m.Remember("a", t0)
	m.Remember("a", t0.Add(50*time.Second))
	m.Remember("b", t0.Add(61*time.Second)) // sweeps the first "a" slot only
	require.True(t, m.Remembers("a", t0.Add(100*time.Second)))
}

func TestMemoryZeroOptionsMeanDefaults(t *testing.T) {
	m := health.NewMemory(health.MemoryOptions{})
	for i := range health.DefaultMemoryCapacity + 10 {
		m.Remember(types.UID(fmt.Sprint(i)), t0)
	}
	require.Equal(t, health.DefaultMemoryCapacity, m.Len())
	require.True(t, m.Remembers("20", t0.Add(health.DefaultMemoryTTL-time.Nanosecond)))
	require.False(t, m.Remembers("20", t0.Add(health.DefaultMemoryTTL)))
}

// TestMemoryShedCountsOnlyWhatItForgotForRoom: a UID pushed out by a full
// Memory before its TTL counts as shed; one that expired and was swept
// does not, and neither does the zero Memory's nothing.
func TestMemoryShedCountsOnlyWhatItForgotForRoom(t *testing.T) {
	m := health.NewMemory(health.MemoryOptions{Capacity: 2, TTL: time.Minute})
	m.Remember("a", t0)
	m.Remember("b", t0)
	require.Zero(t, m.Shed())
	m.Remember("c", t0.Add(time.Second)) // "a" goes for room
	require.Equal(t, uint64(1), m.Shed())
	m.Remember("d", t0.Add(2*time.Minute)) // "b" and "c" expired: swept, not shed
	require.Equal(t, uint64(1), m.Shed())
	require.Zero(t, new(health.Memory).Shed())
}
