package replacements_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/replacements"
)

var start = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func pod(name, uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
}

// step is one call on a Tracker: Created when created is set (or
// createdNil), else Forget when forget is set, else Pending with listed,
// which must answer want. advance moves the fake clock first.
type step struct {
	advance    time.Duration
	workload   string
	created    *corev1.Pod
	createdNil bool
	forget     bool
	listed     []*corev1.Pod
	want       int
}

func TestTrackerRemembersCreatedPodsUntilListedOrExpired(t *testing.T) {
	const w, other = "registry", "mirror"
	a, b := pod("registry-a", "uid-a"), pod("registry-b", "uid-b")
	tests := []struct {
		name  string
		steps []step
	}{
		{"nothing created: nothing pending", []step{
			{workload: w, want: 0},
		}},
		{"created and not listed: pending", []step{
			{workload: w, created: a},
			{workload: w, listed: []*corev1.Pod{b}, want: 1},
			{workload: w, want: 1},
		}},
		{"listed once: forgotten for good", []step{
			{workload: w, created: a},
			{workload: w, listed: []*corev1.Pod{b, a}, want: 0},
			{workload: w, want: 0},
		}},
		{"matched by UID: another pod with the same name does not confirm it", []step{
			{workload: w, created: a},
			{workload: w, listed: []*corev1.Pod{pod("registry-a", "uid-old")}, want: 1},
		}},
		{"matched by UID: the listed copy may carry another name", []step{
			{workload: w, created: a},
			{workload: w, listed: []*corev1.Pod{pod("renamed", "uid-a")}, want: 0},
		}},
		{"two created, one listed: one pending", []step{
			{workload: w, created: a},
			{workload: w, created: b},
			{workload: w, listed: []*corev1.Pod{b}, want: 1},
			{workload: w, listed: []*corev1.Pod{a}, want: 0},
		}},
		{"the same UID created twice counts once", []step{
			{workload: w, created: a},
			{workload: w, created: a.DeepCopy()},
			{workload: w, want: 1},
		}},
		{"workloads are separate", []step{
			{workload: w, created: a},
			{workload: other, listed: []*corev1.Pod{a}, want: 0},
			{workload: w, want: 1},
		}},
		{"expires after the TTL, not before", []step{
			{workload: w, created: a},
			{advance: time.Minute - time.Nanosecond, workload: w, want: 1},
			{advance: time.Nanosecond, workload: w, want: 0},
		}},
		{"each pod expires on its own", []step{
			{workload: w, created: a},
			{advance: 30 * time.Second, workload: w, created: b},
			{advance: 30 * time.Second, workload: w, want: 1},
			{advance: 30 * time.Second, workload: w, want: 0},
		}},
		{"forget drops the workload's pods only", []step{
			{workload: w, created: a},
			{workload: other, created: b},
			{workload: w, forget: true},
			{workload: w, want: 0},
			{workload: other, want: 1},
		}},
		{"nil pod: pending until the TTL", []step{
			{workload: w, createdNil: true},
			{workload: w, listed: []*corev1.Pod{a, nil}, want: 1},
			{advance: time.Minute, workload: w, want: 0},
		}},
		{"no UID, no name: no list confirms it, the TTL ends it", []step{
			{workload: w, created: pod("", "")},
			{workload: w, listed: []*corev1.Pod{pod("", "")}, want: 1},
			{advance: time.Minute, workload: w, want: 0},
		}},
		{"no UID: matched by namespace and name", []step{
			{workload: w, created: pod("registry-a", "")},
			{workload: w, listed: []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "registry-a"}}}, want: 1},
			{workload: w, listed: []*corev1.Pod{pod("registry-a", "uid-late")}, want: 0},
		}},
		{"nil entries in the list are skipped", []step{
			{workload: w, created: a},
			{workload: w, listed: []*corev1.Pod{nil, nil}, want: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakePassiveClock(start)
			tr := replacements.New(replacements.Options{Clock: clk, TTL: time.Minute})
			for i, s := range tt.steps {
				clk.SetTime(clk.Now().Add(s.advance))
				switch {
				case s.created != nil:
					tr.Created(s.workload, s.created)
				case s.createdNil:
					tr.Created(s.workload, nil)
				case s.forget:
					tr.Forget(s.workload)
				default:
					require.Equal(t, s.want, tr.Pending(s.workload, s.listed), "step %d: Pending(%q)", i, s.workload)
				}
			}
		})
	}
}

func TestTrackerZeroOptionsMeanTheRealClockAndFiveMinutes(t *testing.T) {
	tr := replacements.New(replacements.Options{})
	tr.Created("w", pod("p", "uid-p"))
	require.Equal(t, 1, tr.Pending("w", nil))
	wait := tr.Wait("w")
	require.LessOrEqual(t, wait, replacements.DefaultTTL)
	require.Greater(t, wait, replacements.DefaultTTL-time.Minute, "the zero TTL is not the five-minute default")
	require.Equal(t, 5*time.Minute, replacements.DefaultTTL)

	negative := replacements.New(replacements.Options{TTL: -time.Second})
	negative.Created("w", pod("p", "uid-p"))
	require.Equal(t, 1, negative.Pending("w", nil), "a negative TTL must mean the default, not expire at once")
}

func TestTrackerZeroValueIsNewWithZeroOptions(t *testing.T) {
	var tr replacements.Tracker
	require.Zero(t, tr.Pending("w", nil))
	require.Zero(t, tr.Wait("w"))
	tr.Forget("w")
	tr.Created("w", pod("p", "uid-p"))
	require.Equal(t, 1, tr.Pending("w", nil))
	require.Greater(t, tr.Wait("w"), replacements.DefaultTTL-time.Minute)
	require.Zero(t, tr.Pending("w", []*corev1.Pod{pod("p", "uid-p")}))
}

func TestTrackerWaitIsTheTimeUntilTheFirstExpiry(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(start)
	tr := replacements.New(replacements.Options{Clock: clk, TTL: time.Minute})
	require.Zero(t, tr.Wait("w"), "nothing remembered")

	tr.Created("w", pod("a", "uid-a"))
	clk.SetTime(start.Add(20 * time.Second))
	tr.Created("w", pod("b", "uid-b"))
	require.Equal(t, 40*time.Second, tr.Wait("w"))
	require.Equal(t, 2, tr.Pending("w", nil), "Wait forgot something")

	require.Equal(t, 1, tr.Pending("w", []*corev1.Pod{pod("a", "uid-a")}))
	require.Equal(t, time.Minute, tr.Wait("w"), "the wait of a pod already listed")

	clk.SetTime(start.Add(80 * time.Second))
	require.Zero(t, tr.Wait("w"), "an expired pod: check now")
}

func TestTrackerPendingReportReadsTheReportsPods(t *testing.T) {
	tr := replacements.New(replacements.Options{})
	tr.Created("w", pod("a", "uid-a"))
	tr.Created("w", pod("b", "uid-b"))

	require.Equal(t, 2, tr.PendingReport("w", health.Report{}), "an empty report lists no pod")
	require.Equal(t, 2, tr.PendingReport("w", health.Report{Pods: []health.PodReport{{}}}), "a PodReport without a pod")
	report := health.Report{Pods: []health.PodReport{{Pod: pod("a", "uid-a")}}}
	require.Equal(t, 1, tr.PendingReport("w", report))
	require.Equal(t, 1, tr.Pending("w", nil), "PendingReport did not forget the listed pod")
}

// TestTrackerIsSafeForConcurrentUse runs every method from many goroutines
// (go test -race finds unsynchronised access) and checks that no pod is
// lost or counted twice.
func TestTrackerIsSafeForConcurrentUse(t *testing.T) {
	tr := replacements.New(replacements.Options{})
	const workers, perWorker = 8, 50
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := fmt.Sprintf("w%d", g%2)
			for i := 0; i < perWorker; i++ {
				p := pod(fmt.Sprintf("p-%d-%d", g, i), fmt.Sprintf("uid-%d-%d", g, i))
				tr.Created(w, p)
				_ = tr.Pending(w, []*corev1.Pod{pod("x", fmt.Sprintf("uid-%d-%d", g, i-1))})
				_ = tr.PendingReport("forgotten", health.Report{})
				_ = tr.Wait(w)
				tr.Forget("forgotten")
			}
		}()
	}
	wg.Wait()
	// Each worker's listed pod confirmed its previous pod: one pod per
	// worker (its last) is still pending.
	require.Equal(t, workers/2, tr.Pending("w0", nil))
	require.Equal(t, workers/2, tr.Pending("w1", nil))
}
