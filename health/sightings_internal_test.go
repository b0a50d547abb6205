package health

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestSightingsStayBoundedAndKeepTheFirstSighting(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	s := newSightings(100, time.Minute)
	first := s.see("kept", s.open(), t0)
	for i := range 10_000 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		gen := s.open() // one check per key
		s.see(fmt.Sprint(i), gen, now)
		if i%50 == 0 {
			require.Equal(t, first, s.see("kept", gen, now), "a key seen often keeps its first sighting")
		}
	}
	require.LessOrEqual(t, s.len(), 100)

	later := t0.Add(time.Hour)
	require.Equal(t, later, s.see("kept", s.open(), later), "a key not seen for the idle period starts again")
}

func TestSightingsEvictTheLeastRecentlySeenOfOlderGenerations(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	s := newSightings(2, time.Hour)
	s.see("a", s.open(), t0)
	s.see("b", s.open(), t0.Add(time.Second))
	s.see("a", s.open(), t0.Add(2*time.Second)) // a is now the most recent
	s.see("c", s.open(), t0.Add(3*time.Second)) // evicts b, two generations old
	require.Equal(t, t0, s.see("a", s.open(), t0.Add(4*time.Second)), "a kept its first sighting")
	require.Equal(t, t0.Add(5*time.Second), s.see("b", s.open(), t0.Add(5*time.Second)), "b was evicted and starts again")
	require.Equal(t, 2, s.len())
}

// Keys seen by the latest or the one before are never evicted for room,
// however many: the record grows past its capacity instead.
func TestSightingsNeverEvictWhatTheLastTwoGenerationsSaw(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	s := newSightings(10, time.Hour)
	for check := range 3 {
		gen := s.open()
		now := t0.Add(time.Duration(check) * time.Minute)
		for i := range 100 {
			require.Equal(t, t0, s.see(fmt.Sprint(i), gen, now), "check %d, key %d", check, i)
		}
	}
	require.Equal(t, 100, s.len())
}

// podsOf lists the pods of one check, a batch of terminating pods.
type podsOf func(context.Context) ([]*corev1.Pod, error)

func (f podsOf) ListPods(ctx context.Context) ([]*corev1.Pod, error) { return f(ctx) }

type nodeFunc func(context.Context, string) (*corev1.Node, error)

func (f nodeFunc) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	return f(ctx, name)
}

// 100,000 distinct keys pass through the record, a thousand per
// generation: it holds the keys of the last two generations, not more.
func TestSightingsStayBoundedOverKeyChurn(t *testing.T) {
	const batch, gens, capacity = 1_000, 100, 100
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	s := newSightings(capacity, time.Hour)
	most := 0
	for g := range gens {
		gen := s.open()
		for i := range batch {
			s.see(strconv.Itoa(g*batch+i), gen, t0)
		}
		most = max(most, s.len())
	}
	require.Equal(t, 2*batch, most)
}

// Two hundred thousand distinct terminating pods pass through a Checker, a
// thousand per check: the first-seen record holds the pods of the last two
// checks, not all of them, and never fewer than those of the latest.
func TestFirstSightingsStayBoundedOverPodChurn(t *testing.T) {
	const batch, checks, capacity = 1_000, 200, 100
	deletedAt := metav1.NewTime(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	clk := clocktesting.NewFakePassiveClock(deletedAt.Add(time.Minute))
	listed := make([]*corev1.Pod, batch)
	for i := range listed {
		listed[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p-", i), DeletionTimestamp: &deletedAt},
			Spec:       corev1.PodSpec{NodeName: "lost"},
		}
	}
	check := 0
	source := podsOf(func(context.Context) ([]*corev1.Pod, error) {
		for i, p := range listed {
			p.UID = types.UID(strconv.Itoa(check*batch + i)) // a new pod each time
		}
		check++
		return listed, nil
	})
	lost := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}}
	memory := NewMemory(MemoryOptions{Capacity: capacity})
	c, err := New(source, nopDeleter{}, Options{Clock: clk, Memory: memory, Rules: Rules{TerminatingTooLong(time.Hour)},
		Nodes: nodeFunc(func(context.Context, string) (*corev1.Node, error) { return lost, nil })})
	require.NoError(t, err)

	most := 0
	for range checks {
		clk.SetTime(clk.Now().Add(time.Second))
		_, err := c.Check(context.Background())
		require.NoError(t, err)
		most = max(most, memory.sightings.len())
	}
	t.Logf("at most %d first sightings held, for %d pods", most, batch*checks)
	require.LessOrEqual(t, most, 2*batch, "about the pods of the last two checks")
	require.GreaterOrEqual(t, most, batch, "the pods of the latest check are all held")
}

type nopDeleter struct{}

func (nopDeleter) ForceDelete(context.Context, *corev1.Pod) error { return nil }

// Filling the sightings far past capacity costs the same per key: a
// benchmark, not a timed test, shows it.
func BenchmarkSightingsWhenFull(b *testing.B) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	s := newSightings(defaultMemoryCapacity, time.Hour)
	keys := make([]string, 4*defaultMemoryCapacity)
	for i := range keys {
		keys[i] = fmt.Sprint("uid-", i)
	}
	i := 0
	b.ResetTimer()
	for range b.N {
		if i%defaultMemoryCapacity == 0 {
			s.open()
		}
		s.see(keys[i%len(keys)], s.current(), t0)
		i++
	}
}
