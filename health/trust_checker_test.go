package health_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// Helpers of this file, named apart from those of the other test files.

func trustNode(name string, ready bool, taints ...string) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionUnknown
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
	}
	for _, key := range taints {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute})
	}
	return n
}

func mountsClaim(name string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}
}

func ownedByStatefulSetDB(p *corev1.Pod) {
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid"})
}

func sharedClaim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}}
}

type nodeGetterFunc func(ctx context.Context, name string) (*corev1.Node, error)

func (f nodeGetterFunc) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	return f(ctx, name)
}

type nodeListerFunc func(ctx context.Context) ([]*corev1.Node, error)

func (f nodeListerFunc) ListNodes(ctx context.Context) ([]*corev1.Node, error) { return f(ctx) }

type claimGetterFunc func(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)

func (f claimGetterFunc) GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return f(ctx, namespace, name)
}

type observerFunc func(ctx context.Context, r health.PodReport)

func (f observerFunc) Observe(ctx context.Context, r health.PodReport) { f(ctx, r) }

// finishes runs f and fails the test if it does not return. The timeout
// only detects a hang; it measures nothing.
func finishes(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s hangs", what)
	}
}

// doneWatcher is a context that says when a check first waits on it: a
// check that shares another check's force delete waits on its context's
// Done channel, and asks for it nowhere else.
type doneWatcher struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func newDoneWatcher() *doneWatcher {
	return &doneWatcher{Context: context.Background(), waiting: make(chan struct{})}
}

func (c *doneWatcher) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// deletesOf counts the DELETEs that the store received for the named pod.
func deletesOf(pods *fake.Pods, name string) int {
	n := 0
	for _, d := range pods.Deletes() {
		if d.Name == name {
			n++
		}
	}
	return n
}

// stuckPod is a pod terminating on a node that is not Ready, which only
// TerminatingTooLong can call dead, once its time has come.
func stuckPod(name, node string) *corev1.Pod {
	return newPod(name, onNode(node), deleting)
}

// TestTerminatingTooLongRemovesEveryStuckPodBeyondTheMemoryCapacity checks
// that the first-seen record does not starve: with more pods stuck than the
// Memory holds UIDs, every pod keeps its first sighting from one check to
// the next, and all of them go once their time has come.
func TestTerminatingTooLongRemovesEveryStuckPodBeyondTheMemoryCapacity(t *testing.T) {
	const stuck = 10_000
	require.Greater(t, stuck, health.DefaultMemoryCapacity)
	const margin = time.Minute
	start := deletedAt.Add(time.Hour)
	clk := clocktesting.NewFakePassiveClock(start)
	var nodes []*corev1.Node
	for i := range 10 {
		nodes = append(nodes, trustNode(fmt.Sprintf("lost-%d", i), false))
	}
	var seed []*corev1.Pod
	for i := range stuck {
		seed = append(seed, stuckPod(fmt.Sprintf("stuck-%05d", i), fmt.Sprintf("lost-%d", i%10)))
	}
	pods := fake.New(fake.Options{}, seed...)
	checker := newChecker(t, pods, health.Options{
		Clock: clk, Nodes: fake.NewNodes(nodes...),
		Rules: health.Rules{health.TerminatingTooLong(margin), health.GracefulDeletion()},
	})

	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, stuck, report.Count(health.Terminating), "first sighting: every pod must wait")

	clk.SetTime(start.Add(30*time.Second + margin)) // the pods' grace period plus the margin
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, stuck, report.CountOutcome(health.ForceDeleted), "pods force-deleted once their time has come")
	require.Len(t, pods.Deletes(), stuck)
}

// simulation runs checkers on a fake clock that moves only when every
// checker waits for it (in a slow DELETE or between checks), the way a
// discrete-event simulation does. So the clock never moves between a
// check's budget charge and its DELETE, and the times recorded are exact.
type simulation struct {
	mu       sync.Mutex
	clk      *clocktesting.FakeClock
	running  int
	sleepers []sleeper
	sends    []time.Time
}

type sleeper struct {
	until time.Time
	wake  chan struct{}
}

func (s *simulation) sleep(d time.Duration) {
	s.mu.Lock()
	w := sleeper{until: s.clk.Now().Add(d), wake: make(chan struct{})}
	s.sleepers = append(s.sleepers, w)
	s.running--
	s.advanceLocked()
	s.mu.Unlock()
	<-w.wake
}

func (s *simulation) exit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	s.advanceLocked()
}

func (s *simulation) send() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends = append(s.sends, s.clk.Now())
}

// advanceLocked moves the clock to the earliest sleeper's time once nobody
// runs, and wakes every sleeper whose time has come.
func (s *simulation) advanceLocked() {
	if s.running > 0 || len(s.sleepers) == 0 {
		return
	}
	earliest := s.sleepers[0].until
	for _, w := range s.sleepers[1:] {
		if w.until.Before(earliest) {
			earliest = w.until
		}
	}
	if earliest.After(s.clk.Now()) {
		s.clk.SetTime(earliest)
	}
	rest := s.sleepers[:0]
	for _, w := range s.sleepers {
		if w.until.After(earliest) {
			rest = append(rest, w)
			continue
		}
		s.running++
		close(w.wake)
	}
	s.sleepers = rest
}

// TestPropertySharedBudgetHoldsInEveryWindow: checkers sharing one budget of
// N per window W, with DELETEs that take up to 10 s each, never send more
// than N force deletes within any window of length W, whatever the number
// of checkers.
func TestPropertySharedBudgetHoldsInEveryWindow(t *testing.T) {
	const runs = 60
	horizon := 5 * time.Minute
	for seed := range uint64(runs) {
		r := seeded(seed)
		limit := 1 + r.IntN(10)
		window := time.Duration(10+r.IntN(60)) * time.Second
		checkers := 1 + r.IntN(5)
		budget, err := health.NewDeleteBudget(limit, window)
		require.NoError(t, err)
		start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) // past the test pods' deletion deadline
		sim := &simulation{clk: clocktesting.NewFakeClock(start), running: checkers}

		var wg sync.WaitGroup
		for c := range checkers {
			cr := rand.New(rand.NewPCG(seed, uint64(c)))
			var seedPods []*corev1.Pod
			for i := range 30 {
				seedPods = append(seedPods, taintEvicted(fmt.Sprintf("c%d-dead-%02d", c, i)))
			}
			store := fake.New(fake.Options{}, seedPods...)
			deleter := health.DeleterFunc(func(ctx context.Context, pod *corev1.Pod) error {
				sim.send()
				sim.sleep(time.Duration(cr.Int64N(int64(10 * time.Second))))
				return store.ForceDelete(ctx, pod)
			})
			checker, err := health.New(store, deleter, health.Options{Clock: sim.clk, Budget: budget})
			require.NoError(t, err)
			pause := 5*time.Second + time.Duration(r.Int64N(int64(25*time.Second)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer sim.exit()
				for sim.clk.Now().Before(start.Add(horizon)) {
					if _, err := checker.Check(context.Background()); err != nil {
						t.Errorf("seed %d: %v", seed, err)
						return
					}
					sim.sleep(pause)
				}
			}()
		}
		finishes(t, "the simulation", wg.Wait)

		sends := slices.Clone(sim.sends)
		slices.SortFunc(sends, time.Time.Compare)
		require.NotEmpty(t, sends)
		for i, from := range sends {
			in := 0
			for _, s := range sends[i:] {
				if s.Before(from.Add(window)) {
					in++
				}
			}
			require.LessOrEqual(t, in, limit, "seed %d: %d checkers sharing %d per %v sent %d force deletes within %v from %v",
				seed, checkers, limit, window, in, window, from.Sub(start))
		}
	}
}

// A panic in any dependency goes on up the stack, and leaves nothing held:
// a later check with well-behaved dependencies and no deadline finishes,
// and the pod is force-deleted exactly once over both checks.
func TestPanicInADependencyLeavesNothingHeld(t *testing.T) {
	type deps struct {
		source  health.PodSource
		deleter health.Deleter
		opts    health.Options
	}
	gone := fake.NewNodes(trustNode("a", true)) // neither cache nor live read knows node-lost: gone
	lostNode := fake.NewNodes(trustNode("node-lost", false))
	fencedNode := fake.NewNodes(trustNode("node-lost", false, corev1.TaintNodeOutOfService))
	cluster := fake.NewNodes(trustNode("node-lost", false), trustNode("a", true), trustNode("b", true), trustNode("c", true))
	tests := []struct {
		name string
		pod  *corev1.Pod
		// with returns the dependencies of a check; with panicking set, the
		// one under test panics with the value "boom".
		with func(store *fake.Pods, panicking bool) deps
	}{
		{"Deleter", taintEvicted("dead"), func(store *fake.Pods, panicking bool) deps {
			d := deps{source: store, deleter: store}
			if panicking {
				d.deleter = health.DeleterFunc(func(context.Context, *corev1.Pod) error { panic("boom") })
			}
			return d
		}},
		{"Observer", taintEvicted("dead"), func(store *fake.Pods, panicking bool) deps {
			d := deps{source: store, deleter: store}
			if panicking {
				// Panics on the dead pod's report, after its DELETE.
				d.opts.Observer = observerFunc(func(_ context.Context, r health.PodReport) {
					if r.Outcome == health.ForceDeleted {
						panic("boom")
					}
				})
			}
			return d
		}},
		{"PodSource", taintEvicted("dead"), func(store *fake.Pods, panicking bool) deps {
			d := deps{source: store, deleter: store}
			if panicking {
				d.source = health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { panic("boom") })
			}
			return d
		}},
		{"Options.Nodes", stuckPod("dead", "node-lost"), func(store *fake.Pods, panicking bool) deps {
			d := deps{source: store, deleter: store, opts: health.Options{Nodes: fencedNode}}
			if panicking {
				d.opts.Nodes = nodeGetterFunc(func(context.Context, string) (*corev1.Node, error) { panic("boom") })
			}
			return d
		}},
		{"Options.LiveNodes", stuckPod("dead", "node-lost"), func(store *fake.Pods, panicking bool) deps {
			d := deps{source: store, deleter: store, opts: health.Options{Nodes: gone, LiveNodes: gone}}
			if panicking {
				d.opts.LiveNodes = nodeGetterFunc(func(context.Context, string) (*corev1.Node, error) { panic("boom") })
			}
			return d
		}},
		{"Options.Claims", newPod("dead", onNode("node-lost"), deleting, disruption(health.ReasonDeletionByTaintManager), mountsClaim("data"), ownedByReplicaSet), func(store *fake.Pods, panicking bool) deps {
			d := deps{source: store, deleter: store, opts: health.Options{Nodes: lostNode, Claims: fake.NewClaims(sharedClaim("data"))}}
			if panicking {
				d.opts.Claims = claimGetterFunc(func(context.Context, string, string) (*corev1.PersistentVolumeClaim, error) { panic("boom") })
			}
			return d
		}},
		{"Options.Breaker.Nodes", taintEvicted("dead"), func(store *fake.Pods, panicking bool) deps {
			d := deps{source: store, deleter: store, opts: health.Options{Breaker: health.Breaker{Nodes: cluster}}}
			if panicking {
				d.opts.Breaker.Nodes = nodeListerFunc(func(context.Context) ([]*corev1.Node, error) { panic("boom") })
			}
			return d
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The store lists a deleted pod once more, as a lagging cache does.
			store := fake.New(fake.Options{ListLag: 1}, newPod("alive", onNode("a")), tt.pod)
			memory := health.NewMemory(health.MemoryOptions{})
			budget, err := health.NewDeleteBudget(2, time.Hour)
			require.NoError(t, err)
			check := func(panicking bool) (health.Report, error) {
				d := tt.with(store, panicking)
				d.opts.Memory, d.opts.Budget = memory, budget
				checker, err := health.New(d.source, d.deleter, d.opts)
				require.NoError(t, err)
				return checker.CheckReport(context.Background())
			}

			require.PanicsWithValue(t, "boom", func() { _, _ = check(true) }, "the panic goes on up the stack")
			finishes(t, "the check after the panic", func() {
				report, err := check(false)
				require.NoError(t, err)
				require.True(t, report.Healthy)
				require.Contains(t, []health.Outcome{health.ForceDeleted, health.DeletedEarlier}, report.Pods[1].Outcome, "held back: %s", report.Pods[1].HeldBack)
			})
			require.Equal(t, 1, deletesOf(store, "dead"), "DELETEs of the dead pod over both checks")
		})
	}
}

// The budget charge of a DELETE whose Deleter panicked stays spent: the
// DELETE may have been sent before the panic.
func TestPanickingDeleterKeepsItsBudgetCharge(t *testing.T) {
	store := fake.New(fake.Options{}, taintEvicted("dead"))
	budget, err := health.NewDeleteBudget(1, time.Hour)
	require.NoError(t, err)
	memory := health.NewMemory(health.MemoryOptions{})
	panicking, err := health.New(store, health.DeleterFunc(func(context.Context, *corev1.Pod) error { panic("boom") }),
		health.Options{Budget: budget, Memory: memory})
	require.NoError(t, err)
	require.Panics(t, func() { _, _ = panicking.Check(context.Background()) })

	report, err := newChecker(t, store, health.Options{Budget: budget, Memory: memory}).CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
	require.Contains(t, report.Pods[0].HeldBack.String(), "budget")
	require.Empty(t, store.Deletes())
}

// Checks waiting for another check's force delete get a result when that
// check's Deleter panics, and do not hang; the next check sends the DELETE.
func TestWaitersOnAPanickingDeleteGetAResult(t *testing.T) {
	const waiters = 3
	store := fake.New(fake.Options{}, newPod("alive"), taintEvicted("dead"))
	entered, release := make(chan struct{}), make(chan struct{})
	var calls sync.Mutex
	first := true
	deleter := health.DeleterFunc(func(ctx context.Context, pod *corev1.Pod) error {
		calls.Lock()
		wasFirst := first
		first = false
		calls.Unlock()
		if wasFirst {
			close(entered)
			<-release
			panic("boom")
		}
		return store.ForceDelete(ctx, pod)
	})
	checker, err := health.New(store, deleter, health.Options{})
	require.NoError(t, err)

	owner := make(chan any, 1)
	go func() {
		defer func() { owner <- recover() }()
		_, _ = checker.Check(context.Background())
	}()
	<-entered
	reports := make([]health.Report, waiters)
	errs := make([]error, waiters)
	var wg sync.WaitGroup
	for w := range waiters {
		ctx := newDoneWatcher()
		wg.Add(1)
		go func() { defer wg.Done(); reports[w], errs[w] = checker.CheckReport(ctx) }()
		finishes(t, "waiting for the waiter", func() { <-ctx.waiting })
	}
	close(release)
	finishes(t, "the owner", func() { require.Equal(t, "boom", <-owner) })
	finishes(t, "the waiters", wg.Wait)
	for w := range waiters {
		require.Error(t, errs[w])
		require.ErrorContains(t, errs[w], "panicked")
		require.Equal(t, health.DeleteFailed, reports[w].Pods[1].Outcome)
	}
	require.Empty(t, store.Deletes(), "the panicking Deleter sent nothing")

	finishes(t, "the next check", func() {
		healthy, err := checker.Check(context.Background())
		require.NoError(t, err)
		require.True(t, healthy)
	})
	require.Equal(t, 1, deletesOf(store, "dead"))
}

// A getter that answers nothing and no error is unknown evidence: no panic,
// the pod is held back or left terminating, nothing is deleted.
func TestGettersAnsweringNothingAreUnknown(t *testing.T) {
	nothing := nodeGetterFunc(func(context.Context, string) (*corev1.Node, error) { return nil, nil })
	statefulDead := newPod("db-0", onNode("n"), deleting, disruption(health.ReasonDeletionByTaintManager), ownedByStatefulSetDB)
	stuck := stuckPod("stuck", "n")
	claimed := newPod("claimed", onNode("n"), deleting, disruption(health.ReasonDeletionByTaintManager), mountsClaim("data"), ownedByReplicaSet)
	stateless := newPod("stateless", onNode("n"), deleting, disruption(health.ReasonDeletionByTaintManager))
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		opts     health.Options
		want     []health.Outcome
		heldBack string
	}{
		{"Options.Nodes returns nil, nil", []*corev1.Pod{statefulDead, stuck}, health.Options{Nodes: nothing},
			[]health.Outcome{health.HeldBack, health.NoAction}, "needs fencing"},
		{"Options.LiveNodes returns nil, nil", []*corev1.Pod{statefulDead, stuck}, health.Options{Nodes: fake.NewNodes(), LiveNodes: nothing},
			[]health.Outcome{health.HeldBack, health.NoAction}, "needs fencing"},
		{"Options.Claims returns nil, nil", []*corev1.Pod{claimed}, health.Options{Claims: claimGetterFunc(func(context.Context, string, string) (*corev1.PersistentVolumeClaim, error) { return nil, nil })},
			[]health.Outcome{health.HeldBack}, "unknown"},
		{"Options.Breaker.Nodes returns nil, nil", []*corev1.Pod{stateless}, health.Options{Breaker: health.Breaker{Nodes: nodeListerFunc(func(context.Context) ([]*corev1.Node, error) { return nil, nil })}},
			[]health.Outcome{health.HeldBack}, "breaker"},
		{"Options.Breaker.Nodes returns nil entries", []*corev1.Pod{stateless}, health.Options{Breaker: health.Breaker{Nodes: nodeListerFunc(func(context.Context) ([]*corev1.Node, error) {
			return []*corev1.Node{nil, trustNode("n", false), nil, trustNode("a", true), trustNode("b", true), trustNode("c", true)}, nil
		})}}, []health.Outcome{health.HeldBack}, "breaker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := fake.New(fake.Options{}, append([]*corev1.Pod{newPod("alive")}, tt.pods...)...)
			var report health.Report
			require.NotPanics(t, func() {
				var err error
				report, err = newChecker(t, pods, tt.opts).CheckReport(context.Background())
				require.NoError(t, err)
			})
			require.Equal(t, append([]health.Outcome{health.NoAction}, tt.want...), outcomes(report))
			for _, p := range report.Pods {
				if p.Outcome == health.HeldBack {
					require.Contains(t, p.HeldBack.String(), tt.heldBack)
				}
			}
			require.Empty(t, pods.Deletes())
		})
	}
}

// New refuses an interface parameter or option that holds a typed nil
// pointer, what a constructor returns on error when its caller ignored the
// error, instead of panicking later inside a check. podsource/kube's tests
// do the same with its types, so that this package's tests (and the fuzz
// targets' instrumented build) never compile client-go.
func TestNewRefusesTypedNils(t *testing.T) {
	pods := fake.New(fake.Options{})
	tests := []struct {
		name    string
		source  health.PodSource
		deleter health.Deleter
		opts    health.Options
		want    string
	}{
		{"PodSource (*fake.Pods)(nil)", (*fake.Pods)(nil), pods, health.Options{}, "nil PodSource"},
		{"PodSource nil func", health.PodSourceFunc(nil), pods, health.Options{}, "nil PodSource"},
		{"Deleter (*fake.Pods)(nil)", pods, (*fake.Pods)(nil), health.Options{}, "nil Deleter"},
		{"Options.Nodes (*fake.Nodes)(nil)", pods, pods, health.Options{Nodes: (*fake.Nodes)(nil)}, "Options.Nodes"},
		{"Options.Claims (*fake.Claims)(nil)", pods, pods, health.Options{Claims: (*fake.Claims)(nil)}, "Options.Claims"},
		{"Options.Breaker.Nodes (*fake.Nodes)(nil)", pods, pods, health.Options{Breaker: health.Breaker{Nodes: (*fake.Nodes)(nil)}}, "Options.Breaker.Nodes"},
		{"Options.Clock (*clocktesting.FakeClock)(nil)", pods, pods, health.Options{Clock: (*clocktesting.FakeClock)(nil)}, "Options.Clock"},
		{"Options.Clock (*clocktesting.FakePassiveClock)(nil)", pods, pods, health.Options{Clock: clock.PassiveClock((*clocktesting.FakePassiveClock)(nil))}, "Options.Clock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var checker *health.Checker
			var err error
			require.NotPanics(t, func() { checker, err = health.New(tt.source, tt.deleter, tt.opts) })
			require.ErrorContains(t, err, tt.want)
			require.Nil(t, checker)
		})
	}
}

// A dry run writes nothing that a real check reads: not the first-seen
// record of the shared Memory, not the deleted UIDs, not the budget. It
// still tells over time what a real check would do.
func TestDryRunWritesNothingARealCheckerReads(t *testing.T) {
	const margin = time.Minute
	wait := 30*time.Second + margin // the pods' grace period plus the margin
	start := deletedAt.Add(time.Hour)
	clk := clocktesting.NewFakePassiveClock(start)
	pods := fake.New(fake.Options{}, newPod("alive", onNode("ready")), stuckPod("stuck-1", "lost"), stuckPod("stuck-2", "lost"))
	memory := health.NewMemory(health.MemoryOptions{})
	budget, err := health.NewDeleteBudget(2, time.Hour)
	require.NoError(t, err)
	opts := health.Options{
		Clock: clk, Nodes: fake.NewNodes(trustNode("lost", false), trustNode("ready", true)),
		Rules:  health.Rules{health.TerminatingTooLong(margin), health.GracefulDeletion()},
		Memory: memory, Budget: budget,
	}
	dryOpts := opts
	dryOpts.DryRun = true
	dry := newChecker(t, pods, dryOpts)

	var would []int
	for step := time.Duration(0); step <= time.Hour; step += 10 * time.Second {
		clk.SetTime(start.Add(step))
		report, err := dry.CheckReport(context.Background())
		require.NoError(t, err)
		would = append(would, report.CountOutcome(health.WouldForceDelete))
	}
	require.Zero(t, would[0], "the dry run's first look")
	require.Equal(t, 2, would[len(would)-1], "the dry run tells what a real check would do over time")
	require.Empty(t, pods.Deletes())

	real := newChecker(t, pods, opts)
	report, err := real.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, []health.Outcome{health.NoAction, health.NoAction, health.NoAction}, outcomes(report), "the real checker's first look: it waits its own period")

	clk.SetTime(clk.Now().Add(wait - time.Second))
	report, err = real.CheckReport(context.Background())
	require.NoError(t, err)
	require.Zero(t, report.Count(health.Dead), "one second short of its own period")

	clk.SetTime(clk.Now().Add(time.Second))
	for range 2 {
		report, err = real.CheckReport(context.Background())
		require.NoError(t, err)
	}
	require.Equal(t, []string{"stuck-1", "stuck-2"}, deletedNames(pods), "each pod deleted once, the budget's full 2")
}

// A check that meets a pod while another check's force delete of it is in
// flight shares that delete: one DELETE is sent, one check reports
// ForceDeleted and the other DeletedEarlier.
func TestCheckSharingAnotherChecksDeleteReportsDeletedEarlier(t *testing.T) {
	store := fake.New(fake.Options{ListLag: 1}, newPod("alive"), taintEvicted("dead"))
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	deleter := health.DeleterFunc(func(ctx context.Context, pod *corev1.Pod) error {
		once.Do(func() { close(entered); <-release })
		return store.ForceDelete(ctx, pod)
	})
	checker, err := health.New(store, deleter, health.Options{})
	require.NoError(t, err)

	var first, second health.Report
	var firstErr, secondErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); first, firstErr = checker.CheckReport(context.Background()) }()
	<-entered
	ctx := newDoneWatcher()
	wg.Add(1)
	go func() { defer wg.Done(); second, secondErr = checker.CheckReport(ctx) }()
	finishes(t, "waiting for the second check to wait", func() { <-ctx.waiting })
	close(release)
	finishes(t, "the checks", wg.Wait)

	require.NoError(t, firstErr)
	require.NoError(t, secondErr)
	require.Equal(t, health.ForceDeleted, first.Pods[1].Outcome)
	require.Equal(t, health.DeletedEarlier, second.Pods[1].Outcome)
	require.True(t, second.Healthy)
	require.Len(t, store.Deletes(), 1)
}

// The Observer hears each listed pod once per check, with its final report.
func TestObserverIsToldEachPodOncePerCheck(t *testing.T) {
	store := fake.New(fake.Options{ListLag: 1},
		newPod("alive"),
		taintEvicted("dead"),
		newPod("held", onNode("node-lost"), deleting, disruption(health.ReasonDeletionByTaintManager), ownedByStatefulSetDB),
		drained("terminating"),
		newPod("finished", phase(corev1.PodSucceeded)),
	)
	var mu sync.Mutex
	heard := map[string][]string{}
	observer := observerFunc(func(_ context.Context, r health.PodReport) {
		mu.Lock()
		defer mu.Unlock()
		heard[r.Pod.Name] = append(heard[r.Pod.Name], r.Outcome.String())
	})
	checker := newChecker(t, store, health.Options{Observer: observer})
	var reports []health.Report
	for range 2 {
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		reports = append(reports, report)
	}
	for name, got := range heard {
		var want []string
		for _, r := range reports {
			for _, p := range r.Pods {
				if p.Pod.Name == name {
					want = append(want, p.Outcome.String())
				}
			}
		}
		require.Equal(t, want, got, "pod %s: one call per check, with the report's final outcome", name)
	}
	require.Equal(t, map[string][]string{
		"alive": {"NoAction", "NoAction"}, "dead": {"ForceDeleted", "DeletedEarlier"}, "held": {"HeldBack", "HeldBack"},
		"terminating": {"NoAction", "NoAction"}, "finished": {"NoAction", "NoAction"},
	}, heard)
	require.Len(t, store.Deletes(), 1)
}

// A claim that could not be read once (a 429) holds the pod back, since a
// reading that failed is no evidence that it is stateless, and fails the
// check with an error wrapping ErrClaimUnavailable and the API server's,
// so that the caller retries: a dead node sends no event that would bring
// the pod back. The next check that reads the claim deletes the pod. A
// claim that is gone (NotFound) is a fact, not a fault: held, no error.
func TestAClaimReadThatFailsIsAnErrorToRetryNotEvidence(t *testing.T) {
	lost := fake.NewNodes(newNode("node-lost", notReady, taint(corev1.TaintNodeUnreachable)))
	pod := newPod("dead", onNode("node-lost"), deleting, disruption(health.ReasonDeletionByTaintManager), mountsClaim("data"), ownedByReplicaSet)
	shared := fake.NewClaims(sharedClaim("data"))
	tooMany := apierrors.NewTooManyRequests("slow down", 1)
	failing := true
	claims := claimGetterFunc(func(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
		if failing {
			return nil, tooMany
		}
		return shared.GetClaim(ctx, namespace, name)
	})
	store := fake.New(fake.Options{}, pod)
	checker := newChecker(t, store, health.Options{Nodes: lost, Claims: claims})

	report, err := checker.CheckReport(context.Background())
	require.ErrorIs(t, err, health.ErrClaimUnavailable)
	require.True(t, apierrors.IsTooManyRequests(err), "the API server's answer is reached: %v", err)
	require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
	require.Equal(t, health.HeldForFencing, report.Pods[0].HeldBack.Reason)
	require.ErrorIs(t, report.Pods[0].Err, health.ErrClaimUnavailable)
	require.False(t, report.Healthy)
	require.Empty(t, store.Deletes())

	failing = false
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome, "the retry reads the claim: ReadWriteMany, stateless")

	gone := fake.New(fake.Options{}, pod)
	checker = newChecker(t, gone, health.Options{Nodes: lost, Claims: fake.NewClaims()})
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err, "a claim that is gone is no passing fault")
	require.Equal(t, health.HeldForFencing, report.Pods[0].HeldBack.Reason)
	require.Empty(t, gone.Deletes())
}
