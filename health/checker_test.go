package health_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

func newChecker(t testing.TB, pods *fake.Pods, opts health.Options) *health.Checker {
	t.Helper()
	c, err := health.New(pods, pods, opts)
	require.NoError(t, err)
	return c
}

// failDeletesOf makes the fake answer a delete of the named pods with err.
func failDeletesOf(err error, names ...string) fake.Interceptor {
	return fake.Interceptor{Delete: func(ctx context.Context, ns, name string, opts metav1.DeleteOptions, next fake.DeleteFunc) error {
		for _, n := range names {
			if n == name {
				return err
			}
		}
		return next(ctx, ns, name, opts)
	}}
}

func deletedNames(pods *fake.Pods) []string {
	var names []string
	for _, d := range pods.Deletes() {
		names = append(names, d.Name)
	}
	return names
}

// TestDecisionTable proves each row of the table in the package docs.
func TestDecisionTable(t *testing.T) {
	errInternal := apierrors.NewInternalError(errors.New("etcd is sad"))
	errSource := errors.New("informer not synced")
	// The rows D10 and D11 run under Options.ReplaceUnreachable, with a
	// node cache holding a node the node-lifecycle controller marked
	// unreachable (as a real one left it) and a Ready node-a.
	unreachable := health.Options{
		Nodes:              fake.NewNodes(fixtureNode(t, "node-lost.json"), newNode("node-a")),
		ReplaceUnreachable: true,
	}
	tests := []struct {
		row         string
		pods        []*corev1.Pod
		opts        fake.Options
		checker     health.Options
		ctx         func() context.Context
		wantHealthy bool
		wantDeletes []string
		wantErr     func(t *testing.T, err error)
	}{
		{row: "D1 no pods: unhealthy, no error, nothing deleted"},
		{row: "D1 only terminating pods count in neither column",
			pods: []*corev1.Pod{drained("a"), newPod("b", deleting)}},
		{row: "D2 alive only: healthy, nothing deleted",
			pods: []*corev1.Pod{newPod("a"), newPod("b")}, wantHealthy: true},
		{row: "D2 alive plus a drained pod: healthy, the drain is not cut short",
			pods: []*corev1.Pod{newPod("a"), drained("b")}, wantHealthy: true},
		{row: "D3 alive plus dead, deletes succeed: healthy",
			pods: []*corev1.Pod{newPod("a"), taintEvicted("b"), taintEvicted("c")}, wantHealthy: true, wantDeletes: []string{"b", "c"}},
		{row: "D3 alive plus dead already gone: healthy",
			pods:        []*corev1.Pod{newPod("a"), taintEvicted("b")},
			opts:        fake.Options{Interceptor: failDeletesOf(apierrors.NewNotFound(corev1.Resource("pods"), "b"), "b")},
			wantHealthy: true, wantDeletes: []string{"b"}},
		{row: "D4 dead only, deletes succeed: unhealthy, no error",
			pods: []*corev1.Pod{taintEvicted("a"), drained("b")}, wantDeletes: []string{"a"}},
		{row: "D4 dead only, name reused by a newer pod: unhealthy, no error",
			pods:        []*corev1.Pod{taintEvicted("a")},
			opts:        fake.Options{Interceptor: failDeletesOf(apierrors.NewConflict(corev1.Resource("pods"), "a", errors.New("uid mismatch")), "a")},
			wantDeletes: []string{"a"}},
		{row: "D5 one delete fails with live pods: unhealthy, every dead pod attempted, error reaches the API error",
			pods:        []*corev1.Pod{newPod("a"), taintEvicted("b"), taintEvicted("c"), taintEvicted("d")},
			opts:        fake.Options{Interceptor: failDeletesOf(errInternal, "c")},
			wantDeletes: []string{"b", "c", "d"},
			wantErr: func(t *testing.T, err error) {
				require.True(t, apierrors.IsInternalError(err), "apierrors.IsInternalError(%v)", err)
				require.ErrorIs(t, err, errInternal)
				var de *health.DeleteError
				require.ErrorAs(t, err, &de)
				require.Equal(t, "c", de.Pod.Name)
				require.Equal(t, types.UID("uid-c"), de.UID)
			}},
		{row: "D5 two deletes fail: one typed error each",
			pods:        []*corev1.Pod{taintEvicted("b"), taintEvicted("c")},
			opts:        fake.Options{Interceptor: failDeletesOf(apierrors.NewTooManyRequests("slow down", 3), "b", "c")},
			wantDeletes: []string{"b", "c"},
			wantErr: func(t *testing.T, err error) {
				joined, ok := err.(interface{ Unwrap() []error })
				require.True(t, ok, "error %T does not join", err)
				var names []string
				for _, e := range joined.Unwrap() {
					var de *health.DeleteError
					require.ErrorAs(t, e, &de)
					require.True(t, apierrors.IsTooManyRequests(e))
					names = append(names, de.Pod.Name)
				}
				require.Equal(t, []string{"b", "c"}, names)
			}},
		{row: "D6 source fails: unhealthy, wraps the source error, nothing deleted",
			pods: []*corev1.Pod{taintEvicted("a")},
			opts: fake.Options{Interceptor: fake.Interceptor{ListPods: func(context.Context, health.PodSourceFunc) ([]*corev1.Pod, error) {
				return nil, errSource
			}}},
			wantErr: func(t *testing.T, err error) {
				require.ErrorIs(t, err, errSource)
				var le *health.ListError
				require.ErrorAs(t, err, &le)
			}},
		{row: "D8 alive plus a dead pod held back for fencing evidence: healthy, only the stateless dead pod deleted",
			pods:        []*corev1.Pod{newPod("a"), taintEvicted("b"), newPod("db-0", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ownedByStatefulSet)},
			wantHealthy: true, wantDeletes: []string{"b"}},
		{row: "D9 only a dead pod held back: unhealthy, no error, nothing deleted",
			pods: []*corev1.Pod{newPod("db-0", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ownedByStatefulSet)}},
		{row: "D10 only a pod on an unreachable node: unhealthy, no error, nothing deleted",
			pods: []*corev1.Pod{newPod("a", onNode("node-lost"))}, checker: unreachable},
		{row: "D10 a pod on an unreachable node and a dead pod there: unhealthy, only the dead pod deleted",
			pods: []*corev1.Pod{newPod("a", onNode("node-lost")), taintEvicted("b")}, checker: unreachable, wantDeletes: []string{"b"}},
		{row: "D10 a pod on an unreachable node and a stateful pod held back there: unhealthy, nothing deleted",
			pods:    []*corev1.Pod{newPod("a", onNode("node-lost")), newPod("db-1", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ownedByStatefulSet)},
			checker: unreachable},
		{row: "D11 alive plus a pod on an unreachable node: healthy, nothing deleted",
			pods: []*corev1.Pod{newPod("a"), newPod("b", onNode("node-lost"))}, checker: unreachable, wantHealthy: true},
		{row: "D2 under ReplaceUnreachable a stateful pod on an unreachable node stays alive: healthy, no second writer",
			pods: []*corev1.Pod{newPod("db-0", onNode("node-lost"), ownedByStatefulSet)}, checker: unreachable, wantHealthy: true},
		{row: "D7 context already ended: unhealthy, wraps the context error, nothing deleted",
			pods: []*corev1.Pod{newPod("a"), taintEvicted("b")},
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			wantErr: func(t *testing.T, err error) { require.ErrorIs(t, err, context.Canceled) }},
	}
	for _, tt := range tests {
		t.Run(tt.row, func(t *testing.T) {
			pods := fake.New(tt.opts, tt.pods...)
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			healthy, err := newChecker(t, pods, tt.checker).Check(ctx)
			require.Equal(t, tt.wantHealthy, healthy)
			if tt.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				tt.wantErr(t, err)
			}
			require.Empty(t, cmp.Diff(tt.wantDeletes, deletedNames(pods)), "deletes sent")
		})
	}
}

func TestD7ContextEndingBetweenDeletesStopsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pods := fake.New(fake.Options{Interceptor: fake.Interceptor{Delete: func(ctx context.Context, ns, name string, opts metav1.DeleteOptions, next fake.DeleteFunc) error {
		err := next(ctx, ns, name, opts)
		cancel() // the caller gives up while the first delete is in flight
		return err
	}}}, newPod("a"), taintEvicted("b"), taintEvicted("c"), taintEvicted("d"))

	report, err := newChecker(t, pods, health.Options{}).CheckReport(ctx)

	require.ErrorIs(t, err, context.Canceled)
	require.False(t, report.Healthy)
	require.Equal(t, []string{"b"}, deletedNames(pods), "no delete after the context ended")
	require.Equal(t, []health.Outcome{health.NoAction, health.ForceDeleted, health.NotAttempted, health.NotAttempted}, outcomes(report))
}

// TestD7AContextThatEndsInANodeReadIsNoHealthyAnswer: with Nodes and
// LiveNodes, a check looks up the node of every bound pod; when the
// check's context ends in that read (a frozen API server and a check
// deadline), the read counts as unknown, and the check must not then
// answer (true, nil) from what it found by then: it answers row D7. An
// end-to-end check against a frozen API server once answered healthy this
// way, after its deadline.
func TestD7AContextThatEndsInANodeReadIsNoHealthyAnswer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hangs := nodeGetterFunc(func(ctx context.Context, name string) (*corev1.Node, error) {
		cancel() // the deadline passes while the GET hangs
		return nil, fmt.Errorf("get node %s: %w", name, ctx.Err())
	})
	pods := fake.New(fake.Options{}, newPod("alive"))
	checker := newChecker(t, pods, health.Options{Nodes: hangs, LiveNodes: hangs})
	healthy, err := checker.Check(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, healthy)
}

func outcomes(r health.Report) []health.Outcome {
	var out []health.Outcome
	for _, p := range r.Pods {
		out = append(out, p.Outcome)
	}
	return out
}

func TestForceDeleteSendsGraceZeroAndUIDPrecondition(t *testing.T) {
	pods := fake.New(fake.Options{}, taintEvicted("a"))
	_, err := newChecker(t, pods, health.Options{}).Check(context.Background())
	require.NoError(t, err)

	zero := int64(0)
	want := []fake.DeleteCall{{Namespace: "ns", Name: "a", UID: "uid-a", GracePeriodSeconds: &zero}}
	require.Empty(t, cmp.Diff(want, pods.Deletes()))
	_, err = pods.Get("ns", "a")
	require.True(t, apierrors.IsNotFound(err), "the dead pod is gone: %v", err)
}

func TestReportListsEveryPodWithVerdictAndOutcome(t *testing.T) {
	pods := fake.New(fake.Options{}, newPod("alive"), taintEvicted("dead"), drained("drained"), newPod("done", phase(corev1.PodSucceeded)))
	report, err := newChecker(t, pods, health.Options{}).CheckReport(context.Background())
	require.NoError(t, err)

	type row struct {
		Name    string
		State   health.State
		Rule    string
		Outcome health.Outcome
		Node    string
	}
	var got []row
	for _, p := range report.Pods {
		got = append(got, row{p.Pod.Name, p.Verdict.State, p.Verdict.Rule, p.Outcome, p.Pod.Spec.NodeName})
	}
	want := []row{
		{"alive", health.Alive, "", health.NoAction, "node-a"},
		{"dead", health.Dead, health.RuleTaintEvicted, health.ForceDeleted, "node-lost"},
		{"done", health.Finished, health.RuleFinishedPod, health.NoAction, "node-a"},
		{"drained", health.Terminating, health.RuleGracefulDeletion, health.NoAction, "node-a"},
	}
	require.Empty(t, cmp.Diff(want, got))
	require.True(t, report.Healthy)
	require.Equal(t, 1, report.Count(health.Alive))
	require.Equal(t, 1, report.Count(health.Dead))
	require.Equal(t, 1, report.CountOutcome(health.ForceDeleted))
}

func TestLaggingSourceDeletesEachUIDOnce(t *testing.T) {
	pods := fake.New(fake.Options{ListLag: 3}, newPod("alive"), taintEvicted("dead"))
	checker := newChecker(t, pods, health.Options{})

	var got []health.Outcome
	for range 5 {
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		require.True(t, report.Healthy)
		for _, p := range report.Pods {
			if p.Pod.Name == "dead" {
				got = append(got, p.Outcome)
			}
		}
	}
	// The fake lists the deleted pod three more times, like a lagging
	// informer; then it is gone.
	require.Equal(t, []health.Outcome{health.ForceDeleted, health.DeletedEarlier, health.DeletedEarlier, health.DeletedEarlier}, got)
	require.Len(t, pods.Deletes(), 1)
}

func TestMemoryExpiresSoAVeryStaleSourceIsAskedAgain(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) // past the pod's deletion deadline
	pods := fake.New(fake.Options{ListLag: 100}, taintEvicted("dead"))
	checker := newChecker(t, pods, health.Options{Clock: clk, Memory: health.NewMemory(health.MemoryOptions{TTL: time.Minute})})

	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome)

	clk.SetTime(clk.Now().Add(59 * time.Second))
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.DeletedEarlier, report.Pods[0].Outcome)

	clk.SetTime(clk.Now().Add(time.Second))
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.WasAlreadyGone, report.Pods[0].Outcome, "after the TTL the delete is sent again; the server says NotFound")
	require.Len(t, pods.Deletes(), 2)
}

func TestSameNameReplacementIsLeftAlone(t *testing.T) {
	old := taintEvicted("registry")
	pods := fake.New(fake.Options{ListLag: 1}, old)
	replacement, err := pods.Replace(newPod("registry", onNode("node-b")))
	require.NoError(t, err)
	require.NotEqual(t, old.UID, replacement.UID)

	// The lagging list still shows the old dead pod; its delete carries the
	// old UID, the server answers Conflict, and the new pod survives.
	report, err := newChecker(t, pods, health.Options{}).CheckReport(context.Background())
	require.NoError(t, err)
	require.Len(t, report.Pods, 1)
	require.Equal(t, old.UID, report.Pods[0].Pod.UID)
	require.Equal(t, health.NameReused, report.Pods[0].Outcome)
	require.False(t, report.Healthy, "D4: the only listed pod was dead")

	require.Len(t, pods.Deletes(), 1)
	require.True(t, apierrors.IsConflict(pods.Deletes()[0].Err), "the server refused with Conflict: %v", pods.Deletes()[0].Err)
	got, err := pods.Get("ns", "registry")
	require.NoError(t, err)
	require.Equal(t, replacement.UID, got.UID, "the newer pod survived")
}

func TestFailedDeleteIsRetriedOnTheNextCheck(t *testing.T) {
	failures := 1
	var mu sync.Mutex
	pods := fake.New(fake.Options{Interceptor: fake.Interceptor{Delete: func(ctx context.Context, ns, name string, opts metav1.DeleteOptions, next fake.DeleteFunc) error {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return apierrors.NewServerTimeout(corev1.Resource("pods"), "delete", 1)
		}
		return next(ctx, ns, name, opts)
	}}}, newPod("alive"), taintEvicted("dead"))
	checker := newChecker(t, pods, health.Options{})

	healthy, err := checker.Check(context.Background())
	require.False(t, healthy)
	require.True(t, apierrors.IsServerTimeout(err), "got %v", err)

	healthy, err = checker.Check(context.Background())
	require.NoError(t, err)
	require.True(t, healthy)
	require.Equal(t, []string{"dead", "dead"}, deletedNames(pods))
}

func TestFinalizerHeldPodIsDeletedOnceThenReportedBlocked(t *testing.T) {
	pods := fake.New(fake.Options{}, newPod("alive"), newPod("held", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), finalizer("example.com/backup")))
	checker := newChecker(t, pods, health.Options{})

	var got []health.Outcome
	for range 3 {
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		require.True(t, report.Healthy)
		got = append(got, report.Pods[1].Outcome)
	}
	require.Equal(t, []health.Outcome{health.ForceDeleted, health.BlockedByFinalizers, health.BlockedByFinalizers}, got)
	require.Len(t, pods.Deletes(), 1)
	held, err := pods.Get("ns", "held")
	require.NoError(t, err, "finalizers keep the pod")
	require.Equal(t, int64(0), *held.DeletionGracePeriodSeconds)
}

func TestDryRunCallsNothingAndReportsWhatItWouldDo(t *testing.T) {
	var logs []string
	logger := funcr.New(func(prefix, args string) { logs = append(logs, args) }, funcr.Options{})
	source := fake.New(fake.Options{}, taintEvicted("dead"), drained("drained"))
	observer := &recordingObserver{}
	checker, err := health.New(source, nil, health.Options{DryRun: true, Logger: logger, Observer: observer})
	require.NoError(t, err, "a dry run needs no deleter")

	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.False(t, report.Healthy, "D4 as if the delete succeeded")
	require.Equal(t, []health.Outcome{health.WouldForceDelete, health.NoAction}, outcomes(report))
	require.Empty(t, source.Deletes())
	require.Len(t, logs, 1)
	require.Contains(t, logs[0], `"msg"="would force-delete pod"`)
	require.Equal(t, []string{"dead:WouldForceDelete"}, observer.seen())
}

func TestLoggerWritesOneStructuredLinePerForceDelete(t *testing.T) {
	var logs []string
	logger := funcr.New(func(prefix, args string) { logs = append(logs, args) }, funcr.Options{})
	pods := fake.New(fake.Options{Interceptor: failDeletesOf(apierrors.NewInternalError(errors.New("boom")), "c")},
		newPod("a"), taintEvicted("b"), taintEvicted("c"))
	_, err := newChecker(t, pods, health.Options{Logger: logger}).Check(context.Background())
	require.Error(t, err)

	require.Len(t, logs, 2, "one line per force delete, none for alive pods: %q", logs)
	for _, want := range []string{`"msg"="force-deleted pod"`, `"pod"="ns/b"`, `"uid"="uid-b"`, `"rule"="TaintEvicted"`, `"reason"=`, `"outcome"="ForceDeleted"`} {
		require.Contains(t, logs[0], want)
	}
	for _, want := range []string{`"msg"="force delete failed"`, `"pod"="ns/c"`, `"uid"="uid-c"`, `"error"=`} {
		require.Contains(t, logs[1], want)
	}
}

type recordingObserver struct {
	mu    sync.Mutex
	calls []string
}

// Observe records the pods that reached a force delete (or would have).
func (o *recordingObserver) Observe(_ context.Context, r health.PodReport) {
	switch r.Outcome {
	case health.NoAction, health.DeletedEarlier, health.BlockedByFinalizers, health.HeldBack, health.NotAttempted:
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, r.Pod.Name+":"+r.Outcome.String())
}

func (o *recordingObserver) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.calls...)
}

func TestObserverHearsEachForceDeleteWithItsOutcome(t *testing.T) {
	pods := fake.New(fake.Options{ListLag: 2, Interceptor: failDeletesOf(apierrors.NewNotFound(corev1.Resource("pods"), "gone"), "gone")},
		newPod("alive"), taintEvicted("dead"), taintEvicted("gone"), drained("drained"))
	observer := &recordingObserver{}
	checker := newChecker(t, pods, health.Options{Observer: observer})
	for range 2 {
		_, err := checker.Check(context.Background())
		require.NoError(t, err)
	}
	require.Equal(t, []string{"dead:ForceDeleted", "gone:WasAlreadyGone"}, observer.seen(), "nothing for alive, terminating or remembered pods")
}

func TestBadInputGetsAClearErrorAndDeletesNothing(t *testing.T) {
	tests := []struct {
		name    string
		list    []*corev1.Pod
		wantErr func(t *testing.T, err error)
	}{
		{"nil pod is a broken source", []*corev1.Pod{taintEvicted("dead"), nil}, func(t *testing.T, err error) {
			var le *health.ListError
			require.ErrorAs(t, err, &le)
			require.ErrorContains(t, err, "nil pod at index 1")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deletes := 0
			deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error {
				deletes++
				return nil
			})
			source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return tt.list, nil })
			checker, err := health.New(source, deleter, health.Options{})
			require.NoError(t, err)
			healthy, err := checker.Check(context.Background())
			require.False(t, healthy)
			require.Error(t, err)
			tt.wantErr(t, err)
			require.Zero(t, deletes)
		})
	}
}

func TestNewRejectsMissingDependencies(t *testing.T) {
	pods := fake.New(fake.Options{})
	_, err := health.New(nil, pods, health.Options{})
	require.ErrorContains(t, err, "nil PodSource")
	_, err = health.New(pods, nil, health.Options{})
	require.ErrorContains(t, err, "nil Deleter")
}

func TestCheckNeverMutatesListedPods(t *testing.T) {
	listed := []*corev1.Pod{newPod("alive"), taintEvicted("dead"), drained("drained"), newPod("held", deleting, disruption("DeletionByTaintManager"), finalizer("x"))}
	before := make([]*corev1.Pod, len(listed))
	for i, p := range listed {
		before[i] = p.DeepCopy()
	}
	source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return listed, nil })
	deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { return nil })
	checker, err := health.New(source, deleter, health.Options{DryRun: false})
	require.NoError(t, err)
	for range 2 {
		_, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
	}
	require.Empty(t, cmp.Diff(before, listed))
}

func TestConcurrentChecksSendOneDeletePerDeadPod(t *testing.T) {
	const workers, deadPods = 32, 20
	seed := []*corev1.Pod{newPod("alive")}
	for i := range deadPods {
		seed = append(seed, taintEvicted(fmt.Sprintf("dead-%02d", i)))
	}
	pods := fake.New(fake.Options{ListLag: workers}, seed...)
	checker := newChecker(t, pods, health.Options{})

	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, workers)
	healthy := make([]bool, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			healthy[w], errs[w] = checker.Check(context.Background())
		}()
	}
	close(start)
	wg.Wait()

	for w := range workers {
		require.NoError(t, errs[w])
		require.True(t, healthy[w])
	}
	perName := map[string]int{}
	for _, d := range pods.Deletes() {
		perName[d.Name]++
	}
	require.Len(t, perName, deadPods)
	for name, n := range perName {
		require.Equal(t, 1, n, "pod %s deleted %d times", name, n)
	}
}

func TestCheckersSharingAMemoryDeleteOnce(t *testing.T) {
	pods := fake.New(fake.Options{ListLag: 5}, newPod("alive"), taintEvicted("dead"))
	memory := health.NewMemory(health.MemoryOptions{})
	for range 3 {
		// A checker per reconcile, as an operator may build them.
		_, err := newChecker(t, pods, health.Options{Memory: memory}).Check(context.Background())
		require.NoError(t, err)
	}
	require.Len(t, pods.Deletes(), 1)
	require.Equal(t, 1, memory.Len())
}

func TestConcurrentWaiterGivesUpWithItsContext(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	deleter := health.DeleterFunc(func(ctx context.Context, p *corev1.Pod) error {
		close(entered)
		<-release
		return nil
	})
	source := fake.New(fake.Options{}, newPod("alive"), taintEvicted("dead"))
	checker, err := health.New(source, deleter, health.Options{})
	require.NoError(t, err)

	firstDone := make(chan error, 1)
	go func() { _, err := checker.Check(context.Background()); firstDone <- err }()
	<-entered

	// The waiter's deadline passes while it waits on the first check's
	// delete, whatever the machine's speed.
	deadline, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	watcher := &doneWatcher{Context: deadline, waiting: make(chan struct{})}
	go func() { <-watcher.waiting; cancel(context.DeadlineExceeded) }()
	report, err := checker.CheckReport(watcher)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, health.NotAttempted, report.Pods[1].Outcome)

	close(release)
	require.NoError(t, <-firstDone)
}

// A check that waits on another check's DELETE of the same pod shares its
// answer, and the line that logs it is the sender's alone.
func TestAWaiterOnAnotherChecksDeleteLogsNothingOfIt(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	logger := funcr.New(func(prefix, args string) { mu.Lock(); logs = append(logs, args); mu.Unlock() }, funcr.Options{})
	release := make(chan struct{})
	entered := make(chan struct{})
	deleter := health.DeleterFunc(func(ctx context.Context, p *corev1.Pod) error {
		close(entered)
		<-release
		return apierrors.NewInternalError(errors.New("boom"))
	})
	source := fake.New(fake.Options{}, newPod("alive"), taintEvicted("dead"))
	checker, err := health.New(source, deleter, health.Options{Logger: logger})
	require.NoError(t, err)

	senderDone := make(chan error, 1)
	go func() { _, err := checker.Check(context.Background()); senderDone <- err }()
	<-entered
	watcher := newDoneWatcher()
	waiterDone := make(chan health.Report, 1)
	go func() { r, _ := checker.CheckReport(watcher); waiterDone <- r }()
	<-watcher.waiting // the waiter waits on the sender's DELETE
	close(release)

	require.Error(t, <-senderDone)
	report := <-waiterDone
	require.Equal(t, health.DeleteFailed, report.Pods[1].Outcome, "the sender's answer, shared")
	require.Len(t, logs, 1, "one line, the sender's: %q", logs)
	require.Contains(t, logs[0], `"msg"="force delete failed"`)
}

func TestZeroLoggerDiscards(t *testing.T) {
	require.NotPanics(t, func() {
		pods := fake.New(fake.Options{}, taintEvicted("dead"))
		_, err := newChecker(t, pods, health.Options{Logger: logr.Logger{}}).Check(context.Background())
		require.NoError(t, err)
	})
}

func TestErrorMessagesNameThePod(t *testing.T) {
	err := &health.DeleteError{Pod: types.NamespacedName{Namespace: "ns", Name: "p"}, UID: "u", Err: errors.New("boom")}
	require.True(t, strings.Contains(err.Error(), "ns/p") && strings.Contains(err.Error(), `uid "u"`) && strings.Contains(err.Error(), "boom"), err.Error())
}

// A rule that declares no facts is asked about every pod, also running
// ones with none of the facts the default rules need.
func TestCheckerAsksRulesWithoutFactsAboutEveryPod(t *testing.T) {
	markedDead := health.Rule{Name: "MarkedDead", Classify: func(p *corev1.Pod) (health.Verdict, bool) {
		if p.Labels["dead"] != "yes" {
			return health.Verdict{}, false
		}
		return health.Verdict{State: health.Dead, Reason: "labelled dead"}, true
	}}
	marked := newPod("marked")
	marked.Labels = map[string]string{"dead": "yes"}
	pods := fake.New(fake.Options{}, newPod("alive"), marked)
	rules := append(health.Rules{markedDead}, health.DefaultRules()...)

	report, err := newChecker(t, pods, health.Options{Rules: rules}).CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, []health.Outcome{health.NoAction, health.ForceDeleted}, outcomes(report))
	require.Equal(t, "MarkedDead", report.Pods[1].Verdict.Rule)
}
