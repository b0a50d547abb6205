package health_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
)

// uidOf returns the i-th of a stream of distinct UIDs shaped like the API
// server's (36 bytes).
func uidOf(i int) types.UID {
	b := []byte("00000000-0000-4000-8000-000000000000")
	hex := strconv.AppendUint(nil, uint64(i), 16)
	copy(b[len(b)-len(hex):], hex)
	return types.UID(b)
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryStaysBoundedOverAMillionUIDs feeds a million distinct UIDs
// through a default Memory. It must never hold more than its capacity, and
// its heap must stay what it was when it first filled up. The measured
// bytes per UID are stated in the Memory's documentation.
func TestMemoryStaysBoundedOverAMillionUIDs(t *testing.T) {
	const n = 1_000_000
	m := health.NewMemory(health.MemoryOptions{})
	capacity := health.DefaultMemoryCapacity

	empty := heapInUse()
	for i := range capacity {
		m.Remember(uidOf(i), t0)
	}
	full := heapInUse()
	require.Equal(t, capacity, m.Len())
	for i := capacity; i < n; i++ {
		m.Remember(uidOf(i), t0)
		if i%(1<<16) == 0 {
			require.LessOrEqual(t, m.Len(), capacity)
		}
	}
	after := heapInUse()
	require.Equal(t, capacity, m.Len())
	require.True(t, m.Remembers(uidOf(n-1), t0), "the newest UID is remembered")
	require.False(t, m.Remembers(uidOf(n-capacity-1), t0), "the oldest are forgotten")
	runtime.KeepAlive(m)

	atCapacity := int64(full) - int64(empty)
	growth := int64(after) - int64(full)
	perUID := atCapacity / int64(capacity)
	t.Logf("heap at capacity (%d UIDs): %d bytes, %d bytes per UID; growth over %d more UIDs: %d bytes",
		capacity, atCapacity, perUID, n-capacity, growth)
	// The Memory documentation states the 184 bytes per UID measured here
	// (Go 1.26, amd64); allow for a runtime that sizes its maps a little
	// differently.
	require.LessOrEqual(t, perUID, int64(200), "bytes per remembered UID")
	require.Less(t, growth, atCapacity/4, "the heap grew by %d bytes after the Memory was full", growth)
}

// TestCheckerMemoryStaysBoundedOverAStreamOfDeadPods runs checks that each
// meet a batch of new dead pods: every one is deleted once, and the Memory
// never holds more than its capacity.
func TestCheckerMemoryStaysBoundedOverAStreamOfDeadPods(t *testing.T) {
	const (
		capacity = 256
		batches  = 200
		perBatch = 100
	)
	batch := make([]*corev1.Pod, perBatch+1)
	batch[0] = newPod("alive")
	next := 0
	source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) {
		for i := 1; i <= perBatch; i++ {
			p := taintEvicted(fmt.Sprintf("dead-%d", next))
			p.UID = uidOf(next)
			batch[i] = p
			next++
		}
		return batch, nil
	})
	var deletes atomic.Int64
	deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error {
		deletes.Add(1)
		return nil
	})
	memory := health.NewMemory(health.MemoryOptions{Capacity: capacity})
	checker, err := health.New(source, deleter, health.Options{Memory: memory})
	require.NoError(t, err)
	for range batches {
		healthy, err := checker.Check(context.Background())
		require.NoError(t, err)
		require.True(t, healthy)
		require.LessOrEqual(t, memory.Len(), capacity)
	}
	require.Equal(t, int64(batches*perBatch), deletes.Load(), "every new dead pod deleted exactly once")
	require.Equal(t, capacity, memory.Len())
}

// scalingPods returns n pods, every hundredth one dead if withDead. The
// alive pods share one object: the checker does not care, and a 100,000-pod
// test stays cheap.
func scalingPods(n int, withDead bool) (pods []*corev1.Pod, dead int) {
	alive := newPod("alive")
	pods = make([]*corev1.Pod, n)
	for i := range pods {
		if withDead && i%100 == 0 {
			pods[i] = taintEvicted(fmt.Sprintf("dead-%d", i))
			dead++
		} else {
			pods[i] = alive
		}
	}
	return pods, dead
}

// TestCheckWorkGrowsLinearly counts the work of a check over 1,000, 10,000
// and 100,000 pods instead of timing it: one list, exactly one
// classification per pod, exactly one delete per dead pod and none on the
// next check, and no allocation at all when every pod is alive.
func TestCheckWorkGrowsLinearly(t *testing.T) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		for _, withDead := range []bool{false, true} {
			t.Run(fmt.Sprintf("pods=%d/dead=%v", n, withDead), func(t *testing.T) {
				pods, dead := scalingPods(n, withDead)
				var lists, classified, deletes atomic.Int64
				counting := health.Rule{Name: "Counting", Classify: func(*corev1.Pod) (health.Verdict, bool) {
					classified.Add(1)
					return health.Verdict{}, false
				}}
				source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) {
					lists.Add(1)
					return pods, nil
				})
				deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error {
					deletes.Add(1)
					return nil
				})
				rules := append(health.Rules{counting}, health.DefaultRules()...)
				checker, err := health.New(source, deleter, health.Options{Rules: rules})
				require.NoError(t, err)

				for check := 1; check <= 2; check++ {
					healthy, err := checker.Check(context.Background())
					require.NoError(t, err)
					require.True(t, healthy)
					require.Equal(t, int64(check), lists.Load(), "one list per check")
					require.Equal(t, int64(check*n), classified.Load(), "one classification per pod and check")
					require.Equal(t, int64(dead), deletes.Load(), "one delete per dead pod, none again on the next check")
				}

				if !withDead {
					allocs := testing.AllocsPerRun(3, func() {
						if _, err := checker.Check(context.Background()); err != nil {
							t.Fatal(err)
						}
					})
					require.Zero(t, allocs, "a check of %d live pods allocates", n)
				}
			})
		}
	}
}
