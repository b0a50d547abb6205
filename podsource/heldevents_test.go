package podsource_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

func heldReport(uid string, reason health.HoldReason, detail string) health.PodReport {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-" + uid, UID: types.UID(uid)}}
	return health.PodReport{Pod: pod, Outcome: health.HeldBack, HeldBack: health.Hold{Reason: reason, Detail: detail}}
}

// A hold is recorded when it starts, when its reason changes and once its
// repeat has passed, not at each check; another outcome ends it.
func TestHeldEventsRecordAHoldWhenItStartsOrChanges(t *testing.T) {
	start := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	held, err := podsource.NewHeldEvents(podsource.HeldEventsOptions{Clock: clk, Repeat: 10 * time.Minute})
	require.NoError(t, err)
	step := func(d time.Duration) { clk.SetTime(clk.Now().Add(d)) }

	require.True(t, held.Record(heldReport("a", health.HeldForFencing, "27s to go")), "a hold that starts")
	for i := range 5 {
		step(time.Second)
		require.False(t, held.Record(heldReport("a", health.HeldForFencing, fmt.Sprintf("%ds to go", 26-i))), "the same hold, its detail counting down")
	}
	require.True(t, held.Record(heldReport("b", health.HeldForFencing, "")), "another pod's hold")
	require.True(t, held.Record(heldReport("a", health.HeldByBudget, "")), "a new reason")
	require.False(t, held.Record(heldReport("a", health.HeldByBudget, "")))
	step(10 * time.Minute)
	require.True(t, held.Record(heldReport("a", health.HeldByBudget, "")), "the repeat has passed")

	ended := heldReport("a", health.HeldByBudget, "")
	ended.Outcome, ended.HeldBack = health.NoAction, health.Hold{}
	require.True(t, held.Record(ended), "other outcomes are always recorded")
	require.True(t, held.Record(heldReport("a", health.HeldByBudget, "")), "a hold after one that ended starts afresh")

	clk.SetTime(start)
	require.True(t, held.Record(heldReport("a", health.HeldByBudget, "")), "a clock that went back cannot tell: record")

	noUID := heldReport("", health.HeldUnidentified, "")
	require.True(t, held.Record(noUID))
	require.False(t, held.Record(noUID), "a pod without a UID is known by its name")
	require.True(t, held.Record(health.PodReport{Outcome: health.HeldBack}), "a report without a pod is passed on")
}

// However many pods are held, the record stays bounded, and a pod it had
// to forget is recorded again rather than never.
func TestHeldEventsStayBoundedOverPodChurn(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC))
	held, err := podsource.NewHeldEvents(podsource.HeldEventsOptions{Clock: clk})
	require.NoError(t, err)
	for i := range 20_000 {
		require.True(t, held.Record(heldReport(fmt.Sprint(i), health.HeldForFencing, "")))
	}
	require.LessOrEqual(t, podsource.HeldEventsRemembered(held), 4096)
	require.False(t, held.Record(heldReport("19999", health.HeldForFencing, "")), "the latest holds are remembered")
}

func TestHeldEventsAreSafeForConcurrentUse(t *testing.T) {
	held, err := podsource.NewHeldEvents(podsource.HeldEventsOptions{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	recorded := make([]int, 8)
	for g := range recorded {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if held.Record(heldReport("a", health.HeldForFencing, "")) {
					recorded[g]++
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range recorded {
		total += n
	}
	require.Equal(t, 1, total, "one hold, one event, however many goroutines report it")
}

func TestNewHeldEventsRefusesANegativeRepeat(t *testing.T) {
	_, err := podsource.NewHeldEvents(podsource.HeldEventsOptions{Repeat: -time.Second})
	require.ErrorContains(t, err, "negative")
}
