//go:build go1.25

package sim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The oracle finds two processes writing one resource at overlapping
// times; it counts apart the overlap of a write in flight across a
// freeze; one process, or one after the other, is no finding.
func TestTheOracleFindsAPlantedDoubleWrite(t *testing.T) {
	a, b := &process{name: "a"}, &process{name: "b"}
	s := time.Second
	for _, tc := range []struct {
		name       string
		writes     []*write
		violations int
		window     int
	}{
		{"two writers at once", []*write{{proc: a, resource: "data", start: 0, end: 2 * s}, {proc: b, resource: "data", start: s, end: 3 * s}}, 1, 0},
		{"a writer still in flight at the run's end", []*write{{proc: a, resource: "data", start: 0, end: -1}, {proc: b, resource: "data", start: 5 * s, end: 6 * s}}, 1, 0},
		{"one after the other", []*write{{proc: a, resource: "data", start: 0, end: s}, {proc: b, resource: "data", start: s, end: 2 * s}}, 0, 0},
		{"one process", []*write{{proc: a, resource: "data", start: 0, end: 2 * s}, {proc: a, resource: "data", start: s, end: 3 * s}}, 0, 0},
		{"two resources", []*write{{proc: a, resource: "data", start: 0, end: 2 * s}, {proc: b, resource: "volume-2", start: s, end: 3 * s}}, 0, 0},
		{"a write in flight across a freeze", []*write{{proc: a, resource: "data", start: 0, end: 9 * s, frozen: true}, {proc: b, resource: "data", start: s, end: 2 * s}}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res Result
			got := overlaps(tc.writes, &res)
			if len(got) != tc.violations || res.Window != tc.window {
				t.Fatalf("found %q and %d overlaps in the window; want %d and %d", got, res.Window, tc.violations, tc.window)
			}
		})
	}
}

// The oracle finds a force delete that freed a writer still running, and
// a run whose data nobody wrote again after the last heal.
func TestTheOracleFindsAFreedWriterAndNoWriterAfterTheHeal(t *testing.T) {
	w := newWorld(1)
	w.forceDeletes = []forceDelete{{pod: "db-0", uid: "u", running: []string{"db-0/db#0"}}, {pod: "db-1", uid: "v", idle: []*process{{name: "db-1/db#3"}}}}
	w.writes = []*write{{proc: &process{name: "a"}, resource: "data", start: 0, end: time.Second}}
	res := Result{Healed: time.Minute}
	w.judge(&res)
	if len(res.Violations) != 2 || !strings.Contains(res.Violations[0], "freed writers still running [db-0/db#0]") || !strings.Contains(res.Violations[1], "no write of the data") {
		t.Fatalf("violations %q", res.Violations)
	}
}

// The oracle finds a process that ran without the Lease when its pod was
// force deleted as stopped, and wrote afterwards; one that wrote only
// before the delete, or a process of the pod's replacement of the same
// name, is no finding.
func TestTheOracleFindsAFreedPodsProcessThatWritesLater(t *testing.T) {
	idle, replacement := &process{name: "db-0/db#2"}, &process{name: "db-0/db#2"}
	for _, tc := range []struct {
		name  string
		write *write
		finds bool
	}{
		{"its idle process writes after the delete", &write{proc: idle, resource: "data", start: 11 * time.Second, end: 12 * time.Second}, true},
		{"its idle process wrote only before the delete", &write{proc: idle, resource: "data", start: 8 * time.Second, end: 9 * time.Second}, false},
		{"the replacement of the same name writes", &write{proc: replacement, resource: "data", start: 11 * time.Second, end: 12 * time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(1)
			w.forceDeletes = []forceDelete{{pod: "db-0", uid: "u", at: 10 * time.Second, idle: []*process{idle}}}
			w.writes = []*write{tc.write}
			res := Result{Healed: 0}
			w.judge(&res)
			found := slices.ContainsFunc(res.Violations, func(v string) bool {
				return strings.Contains(v, "db-0/db#2 wrote, though its pod db-0 (u) was force deleted at 10s as stopped")
			})
			if found != tc.finds {
				t.Fatalf("violations %q; want the finding: %v", res.Violations, tc.finds)
			}
		})
	}
}

// A process's clock runs at its rate from its offset, and its timers fire
// when its own clock reaches them, never before.
func TestAClockRunsAtItsRateAndItsTimersFireOnIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(1)
		fast := w.newProcess(1, "fast", 1_100_000, time.Hour)
		clk := procClock{fast}
		if got := clk.Now(); !got.Equal(origin.Add(time.Hour)) {
			t.Fatalf("the clock reads %s at the start, want its offset", got)
		}
		fired := make(chan time.Duration, 1)
		go func() {
			<-clk.After(11 * time.Second)
			fired <- w.now
		}()
		w.run(time.Minute)
		if got := <-fired; got != (10 * time.Second) {
			t.Fatalf("a timer of 11 s on a clock 10%% fast fired at %s of true time, want 10s", got)
		}
		if got := clk.Since(origin.Add(time.Hour)); got != 66*time.Second {
			t.Fatalf("after a minute of true time the clock moved %s, want 66s", got)
		}
		w.teardown(nil)
	})
}

// A frozen process gets nothing while frozen; its clock runs on, and what
// came meanwhile happens when it thaws. A dead one gets nothing, and
// teardown ends its waits.
func TestAFrozenProcessWakesWhenItThawsAndADeadOneNever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(1)
		p := w.newProcess(1, "p", 1e6, 0)
		dead := w.newProcess(2, "dead", 1e6, 0)
		woke := make(chan time.Duration, 2)
		go func() { <-procClock{p}.After(time.Second); woke <- w.now }()
		go func() { <-procClock{dead}.After(time.Second); woke <- -1 }()
		w.settle()
		p.freeze()
		dead.die()
		w.at(5*time.Second, p.thaw)
		w.run(time.Minute)
		if got := <-woke; got != (5 * time.Second) {
			t.Fatalf("the frozen process woke at %s, want at its thaw, 5s", got)
		}
		if got := (procClock{p}).Now(); !got.Equal(origin.Add(time.Minute)) {
			t.Fatalf("the clock of a process frozen for 4 s reads %s, want a minute on", got)
		}
		select {
		case <-woke:
			t.Fatal("a dead process woke")
		default:
		}
		w.teardown([]*process{p, dead})
	})
}

// A request from a node cut off from the API server is lost, and ends at
// its context's deadline on the caller's clock; the store answers
// resourceVersion and UID preconditions as an API server does.
func TestARequestFromAPartitionedNodeTimesOutAndTheStoreHonoursPreconditions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(1)
		w.store = newStore(w)
		w.nodeOf = map[*process]*node{}
		w.api = apiFaults{maxDelay: time.Millisecond}
		n := &node{name: "n", powered: true, partitioned: true}
		slow := w.newProcess(1, "slow", 500_000, 0) // half speed: 2 s of its clock are 4 s
		w.nodeOf[slow] = n
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := client{w: w, p: slow}.CoordinationV1().Leases("db").Get(ctx, "l", metav1.GetOptions{})
			done <- err
		}()
		w.run(3 * time.Second)
		select {
		case err := <-done:
			t.Fatalf("answered %v before the deadline", err)
		default:
		}
		w.run(5 * time.Second)
		if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the deadline", err)
		}

		l, err := w.store.createLease(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "l"}})
		if err != nil {
			t.Fatal(err)
		}
		l.Spec.HolderIdentity = ptr.To("a")
		if _, err := w.store.updateLease(l); err != nil {
			t.Fatal(err)
		}
		if _, err := w.store.updateLease(l); !apierrors.IsConflict(err) {
			t.Fatalf("an update at an old resourceVersion: %v, want a conflict", err)
		}
		w.store.putPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "p", UID: "one"}})
		if _, err := w.store.deletePod("db", "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0)), Preconditions: &metav1.Preconditions{UID: ptr.To(k8stypes.UID("two"))}}); !apierrors.IsConflict(err) {
			t.Fatalf("a delete with another UID: %v, want a conflict", err)
		}
		if _, err := w.store.deletePod("db", "p", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if pod := w.store.pods["db/p"]; pod == nil || pod.DeletionTimestamp == nil {
			t.Fatal("a graceful delete did not mark the pod for its kubelet")
		}
		w.teardown([]*process{slow})
	})
}

// Each fault of the API server answers as its name says: a failure is a
// 429 or a 5xx, a conflict a 409 on a Lease's write, and neither applies;
// a request lost before it applies changes nothing and one lost after it
// applies changes the Lease, and both end only at the caller's deadline;
// a delay holds the answer up to twice the longest delay (to apply, then
// to answer).
func TestEachAPIFaultAnswersAsItSays(t *testing.T) {
	statusIn := func(codes ...int32) func(error) bool {
		return func(err error) bool {
			var status apierrors.APIStatus
			return errors.As(err, &status) && slices.Contains(codes, status.Status().Code)
		}
	}
	deadline := func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }
	for _, tc := range []struct {
		name    string
		api     apiFaults
		wantErr func(error) bool
		applied bool
		// answered bounds when the answer came, after the request.
		answered [2]time.Duration
	}{
		{"a failure answers 429 or 5xx and applies nothing", apiFaults{fail: 1, maxDelay: time.Millisecond}, statusIn(429, 500, 503, 504), false, [2]time.Duration{time.Millisecond, 2 * time.Millisecond}},
		{"a conflict answers 409 to a Lease's write and applies nothing", apiFaults{conflict: 1, maxDelay: time.Millisecond}, apierrors.IsConflict, false, [2]time.Duration{time.Millisecond, 2 * time.Millisecond}},
		{"a request lost before it applies changes nothing and ends at the caller's deadline", apiFaults{lostBefore: 1, maxDelay: time.Millisecond}, deadline, false, [2]time.Duration{5 * time.Second, 5 * time.Second}},
		{"a request lost after it applies changes the Lease and ends at the caller's deadline", apiFaults{lostAfter: 1, maxDelay: time.Millisecond}, deadline, true, [2]time.Duration{5 * time.Second, 5 * time.Second}},
		{"a delayed request is answered within twice the longest delay", apiFaults{maxDelay: 2 * time.Second}, nil, true, [2]time.Duration{2 * time.Millisecond, 4*time.Second + 2*time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(7)
				w.store = newStore(w)
				w.nodeOf = map[*process]*node{}
				p := w.newProcess(1, "p", 1e6, 0)
				l, err := w.store.createLease(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "l"}})
				if err != nil {
					t.Fatal(err)
				}
				w.api = tc.api
				type answer struct {
					err error
					at  time.Duration
				}
				done := make(chan answer, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					next := l.DeepCopy()
					next.Spec.HolderIdentity = ptr.To("p")
					_, err := client{w: w, p: p}.CoordinationV1().Leases("db").Update(ctx, next, metav1.UpdateOptions{})
					done <- answer{err, w.now}
				}()
				w.run(time.Minute)
				got := <-done
				switch {
				case tc.wantErr == nil && got.err != nil:
					t.Fatalf("answered %v, want the update", got.err)
				case tc.wantErr != nil && !tc.wantErr(got.err):
					t.Fatalf("answered %v", got.err)
				case got.at < tc.answered[0] || got.at > tc.answered[1]:
					t.Fatalf("answered at %s, want within [%s, %s]", got.at, tc.answered[0], tc.answered[1])
				}
				stored, err := w.store.getLease("db", "l")
				if err != nil {
					t.Fatal(err)
				}
				if applied := stored.Spec.HolderIdentity != nil; applied != tc.applied {
					t.Fatalf("the update applied: %t, want %t", applied, tc.applied)
				}
				w.teardown([]*process{p})
			})
		})
	}
}
