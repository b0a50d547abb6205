package health_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/health/fencertest"
	"github.com/podhealth/podhealth/podsource/fake"
)

var fenceStart = time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)

// Every built-in fencer passes the conformance suite, with the cases that
// it must prove and those it must not.
func TestBuiltinFencersPassTheConformanceSuite(t *testing.T) {
	lost := newNode("n1", notReady, taint(corev1.TaintNodeUnreachable), cloudShutdown)
	evicted := evictedOn("db-0", "n1", ownedByStatefulSet)
	cases := map[string][]fencertest.Case{
		"node": {
			{Name: "gone", Query: health.FenceQuery{Pod: evicted, NodeState: health.NodeGone, Now: fenceStart}, Want: health.NodeStopped},
			{Name: "out of service", Query: health.FenceQuery{Pod: evicted, NodeState: health.NodeOutOfService, Node: newNode("n1", notReady, outOfService), Now: fenceStart}, Want: health.NodeStopped},
			{Name: "unreachable: a partition looks the same", Query: health.FenceQuery{Pod: evicted, NodeState: health.NodeUnreachable, Node: lost, Now: fenceStart}, Want: health.NoProof},
			{Name: "unknown", Query: health.FenceQuery{Pod: evicted, Now: fenceStart}, Want: health.NoProof},
			{Name: "ready", Query: health.FenceQuery{Pod: evicted, NodeState: health.NodeReady, Node: newNode("n1"), Now: fenceStart}, Want: health.NoProof},
		},
		"shutdown-taint": {
			{Name: "seen for After", Query: health.FenceQuery{Pod: evicted, NodeState: health.NodeUnreachable, Node: lost, Now: fenceStart.Add(30 * time.Second)},
				Earlier: []time.Time{fenceStart}, Want: health.NodeStopped},
			{Name: "seen for less than After", Query: health.FenceQuery{Pod: evicted, NodeState: health.NodeUnreachable, Node: lost, Now: fenceStart.Add(29 * time.Second)},
				Earlier: []time.Time{fenceStart}, Want: health.NoProof},
			{Name: "first sighting", Query: health.FenceQuery{Pod: evicted, NodeState: health.NodeUnreachable, Node: lost, Now: fenceStart}, Want: health.NoProof},
			{Name: "a stale taint on a Ready node", Query: health.FenceQuery{Pod: evicted, NodeState: health.NodeReady, Node: newNode("n1", cloudShutdown), Now: fenceStart.Add(time.Hour)},
				Earlier: []time.Time{fenceStart}, Want: health.NoProof},
			{Name: "kubevirt", Query: health.FenceQuery{Pod: evicted, NodeState: health.NodeUnreachable, Node: newNode("n1", notReady, cloudShutdown, providerID("kubevirt://vm")), Now: fenceStart.Add(time.Hour)},
				Earlier: []time.Time{fenceStart}, Want: health.NoProof},
		},
		"kubelet": {
			{Name: "failed", Query: health.FenceQuery{Pod: newPod("p", phase(corev1.PodFailed)), Now: fenceStart}, Want: health.PodStopped},
			{Name: "succeeded", Query: health.FenceQuery{Pod: newPod("p", phase(corev1.PodSucceeded)), Now: fenceStart}, Want: health.PodStopped},
			{Name: "running", Query: health.FenceQuery{Pod: newPod("p"), Now: fenceStart}, Want: health.NoProof},
			{Name: "no phase", Query: health.FenceQuery{Pod: newPod("p", phase("")), Now: fenceStart}, Want: health.NoProof},
		},
	}
	fencers := health.BuiltinFencers(shutdownAfter)
	require.Len(t, fencers, len(cases))
	for _, f := range fencers {
		t.Run(f.Name(), func(t *testing.T) {
			require.Contains(t, cases, f.Name())
			require.NoError(t, fencertest.TestFencer(f, cases[f.Name()]...))
		})
	}
}

// fencerFunc is a Fencer of a test's own.
type fencerFunc struct {
	name  string
	fence func(ctx context.Context, q health.FenceQuery) (health.Fence, error)
}

func (f fencerFunc) Name() string { return f.name }
func (f fencerFunc) Fence(ctx context.Context, q health.FenceQuery) (health.Fence, error) {
	return f.fence(ctx, q)
}

func proving(name string, p health.Proof, asked *atomic.Int32) fencerFunc {
	return fencerFunc{name, func(context.Context, health.FenceQuery) (health.Fence, error) {
		if asked != nil {
			asked.Add(1)
		}
		return health.Fence{Proves: p, By: name}, nil
	}}
}

// The suite catches fencers that break the contract, each for its own
// reason.
func TestTestFencerCatchesBrokenFencers(t *testing.T) {
	pod := evictedOn("db-0", "n1", ownedByStatefulSet)
	unproven := fencertest.Case{Name: "unproven", Query: health.FenceQuery{Pod: pod, Now: fenceStart}, Want: health.NoProof}
	for _, tt := range []struct {
		name  string
		f     health.Fencer
		cases []fencertest.Case
		want  string
	}{
		{"no name", proving("", health.NoProof, nil), nil, "Name is empty"},
		{"proves what the case does not", proving("yes", health.PodStopped, nil), []fencertest.Case{unproven}, "proves PodStopped, want NoProof"},
		{"a proof of an unknown kind", fencerFunc{"odd", func(_ context.Context, q health.FenceQuery) (health.Fence, error) {
			return health.Fence{Proves: 7, By: "odd"}, nil
		}}, []fencertest.Case{{Name: "odd", Query: unproven.Query, Want: 7}}, "does not define"},
		{"a proof by nobody", fencerFunc{"anon", func(_ context.Context, q health.FenceQuery) (health.Fence, error) {
			return health.Fence{Proves: health.PodStopped}, nil
		}}, []fencertest.Case{{Name: "anon", Query: unproven.Query, Want: health.PodStopped}}, "By"},
		{"time alone proves", fencerFunc{"clock", func(_ context.Context, q health.FenceQuery) (health.Fence, error) {
			if q.Now.After(fenceStart.Add(24 * time.Hour)) {
				return health.Fence{Proves: health.PodStopped, By: "clock"}, nil
			}
			return health.Fence{}, nil
		}}, []fencertest.Case{unproven}, "time alone proves"},
		{"a nil pod proves", fencerFunc{"nilpod", func(_ context.Context, q health.FenceQuery) (health.Fence, error) {
			if q.Pod == nil {
				return health.Fence{Proves: health.NodeStopped, By: "nilpod"}, nil
			}
			return health.Fence{}, nil
		}}, []fencertest.Case{unproven}, "a nil pod proves"},
		{"a panic on a nil pod", fencerFunc{"panics", func(_ context.Context, q health.FenceQuery) (health.Fence, error) {
			_ = q.Pod.Name
			return health.Fence{}, nil
		}}, []fencertest.Case{unproven}, "panicked"},
		{"mutates the pod", fencerFunc{"mutates", func(_ context.Context, q health.FenceQuery) (health.Fence, error) {
			if q.Pod != nil {
				q.Pod.Labels = map[string]string{"seen": "yes"}
			}
			return health.Fence{}, nil
		}}, []fencertest.Case{{Name: "mutated", Query: health.FenceQuery{Pod: pod.DeepCopy(), Now: fenceStart}}}, "mutated"},
		{"flips when asked again", func() health.Fencer {
			var n atomic.Int32
			return fencerFunc{"flips", func(_ context.Context, q health.FenceQuery) (health.Fence, error) {
				if n.Add(1)%2 == 0 {
					return health.Fence{Proves: health.PodStopped, By: "flips"}, nil
				}
				return health.Fence{}, nil
			}}
		}(), []fencertest.Case{unproven}, "asked again"},
		{"ignores a canceled context with another answer", fencerFunc{"ctx", func(ctx context.Context, q health.FenceQuery) (health.Fence, error) {
			if ctx.Err() != nil {
				return health.Fence{}, errors.New("something else")
			}
			return health.Fence{}, nil
		}}, []fencertest.Case{unproven}, "canceled context"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := fencertest.TestFencer(tt.f, tt.cases...)
			require.Error(t, err)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// statefulOnLostNode is a Checker, over one taint-evicted StatefulSet pod
// on an unreachable node, with more fencers.
func statefulOnLostNode(t *testing.T, fencers ...health.Fencer) (*health.Checker, *fake.Pods) {
	t.Helper()
	pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
	nodes := fake.NewNodes(newNode("n1", notReady, taint(corev1.TaintNodeUnreachable)))
	return newChecker(t, pods, health.Options{Nodes: nodes, Clock: clocktesting.NewFakePassiveClock(fenceStart), Fencers: fencers}), pods
}

// A fencer's proof of either kind lets a pod that needs fencing go; no
// proof holds it, with the fencer's detail, and its RetryAfter reaches the
// report.
func TestAFencersProofFreesAPodThatNeedsFencing(t *testing.T) {
	for _, tt := range []struct {
		name    string
		fence   health.Fence
		want    health.Outcome
		detail  string
		retryIn time.Duration
	}{
		{"pod stopped", health.Fence{Proves: health.PodStopped, By: "t"}, health.ForceDeleted, "", 0},
		{"node stopped", health.Fence{Proves: health.NodeStopped, By: "t"}, health.ForceDeleted, "", 0},
		{"no proof, with a wait", health.Fence{Detail: "lease fences in 7s", RetryAfter: 7 * time.Second}, health.HeldBack, "owned by StatefulSet db; lease fences in 7s", 7 * time.Second},
		{"no proof, nothing said", health.Fence{}, health.HeldBack, "owned by StatefulSet db", 0},
		{"a kind it does not define: no proof", health.Fence{Proves: 9, By: "t"}, health.HeldBack, "owned by StatefulSet db", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got health.FenceQuery
			checker, pods := statefulOnLostNode(t, fencerFunc{"t", func(_ context.Context, q health.FenceQuery) (health.Fence, error) {
				got = q
				return tt.fence, nil
			}})
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, tt.want, report.Pods[0].Outcome)
			require.Equal(t, tt.detail, report.Pods[0].HeldBack.Detail)
			require.Equal(t, tt.retryIn, report.RetryAfter)
			require.Equal(t, tt.want == health.HeldBack, present(pods, "db-0"))
			require.Equal(t, "db-0", got.Pod.Name)
			require.Equal(t, health.NodeUnreachable, got.NodeState)
			require.Equal(t, "n1", got.Node.Name)
			require.Equal(t, fenceStart, got.Now)
			require.Equal(t, health.RuleTaintEvicted, got.Verdict.Rule)
		})
	}
}

// A fencer that fails holds the pod (fail closed) and fails the check with
// a *FenceError that names it, unless another fencer proves the pod
// fenced. Fencers are not asked about pods that need no fencing, nor about
// a verdict fenced already, nor after the first proof.
func TestAFailingFencerHoldsThePodAndFailsTheCheck(t *testing.T) {
	denied := errors.New(`leases.coordination.k8s.io "pg" is forbidden`)
	failing := fencerFunc{"storage", func(context.Context, health.FenceQuery) (health.Fence, error) { return health.Fence{}, denied }}

	checker, pods := statefulOnLostNode(t, failing)
	report, err := checker.CheckReport(context.Background())
	var fe *health.FenceError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "storage", fe.Fencer)
	require.Equal(t, "db-0", fe.Pod.Name)
	require.ErrorIs(t, err, health.ErrFenceUnavailable)
	require.ErrorIs(t, err, denied)
	require.False(t, report.Healthy)
	require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
	require.Contains(t, report.Pods[0].HeldBack.Detail, "fencer storage failed: "+denied.Error())
	require.ErrorIs(t, report.Pods[0].Err, denied)
	require.True(t, present(pods, "db-0"))

	var after atomic.Int32
	checker, pods = statefulOnLostNode(t, failing, proving("tool", health.NodeStopped, nil), proving("after", health.PodStopped, &after))
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err, "a proof from another authority stands")
	require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome)
	require.False(t, present(pods, "db-0"))
	require.Zero(t, after.Load(), "no fencer is asked after the first proof")

	var asked atomic.Int32
	stateless := fake.New(fake.Options{}, evictedOn("web-0", "n1"), evictedOn("gone-0", "gone", ownedByStatefulSet))
	nodes := fake.NewNodes(newNode("n1", notReady, taint(corev1.TaintNodeUnreachable)))
	c := newChecker(t, stateless, health.Options{Nodes: nodes, LiveNodes: nodes, Fencers: []health.Fencer{proving("counted", health.NoProof, &asked)}})
	report, err = c.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome)
	require.Equal(t, health.ForceDeleted, report.Pods[1].Outcome, "a gone node fences the verdict itself")
	require.Zero(t, asked.Load())
}

// A fencer that panics leaves the pod in place: the panic goes up, and
// nothing was deleted.
func TestAPanickingFencerDeletesNothing(t *testing.T) {
	checker, pods := statefulOnLostNode(t, fencerFunc{"boom", func(context.Context, health.FenceQuery) (health.Fence, error) { panic("boom") }})
	require.PanicsWithValue(t, "boom", func() { _, _ = checker.CheckReport(context.Background()) })
	require.True(t, present(pods, "db-0"))
	require.Empty(t, pods.Deletes())
}

// New refuses Fencers that could not work or would never be asked.
func TestNewRefusesFencersThatCannotWork(t *testing.T) {
	var typedNil *typedNilFencer
	for _, tt := range []struct {
		name string
		opts health.Options
		want string
	}{
		{"nil", health.Options{Fencers: []health.Fencer{nil}}, "Options.Fencers[0] is nil"},
		{"typed nil", health.Options{Fencers: []health.Fencer{typedNil}}, "Options.Fencers[0] is nil"},
		{"no name", health.Options{Fencers: []health.Fencer{proving("", 0, nil)}}, "has no name"},
		{"twice", health.Options{Fencers: []health.Fencer{proving("a", 0, nil), proving("a", 0, nil)}}, `the name "a" is taken`},
		{"a built-in name", health.Options{Fencers: []health.Fencer{proving("node", 0, nil)}}, `the name "node" is taken`},
		{"with FenceNever", health.Options{Fencing: health.FenceNever, Fencers: []health.Fencer{proving("a", 0, nil)}}, "no fencer would be asked"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pods := fake.New(fake.Options{})
			_, err := health.New(pods, pods, tt.opts)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// Sightings keep each fencer's keys apart, and a dry run records none
// that a real check reads.
func TestFencersSightingsAreTheirOwn(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(fenceStart)
	seen := func(name string, firsts *[]time.Time) fencerFunc {
		return fencerFunc{name, func(_ context.Context, q health.FenceQuery) (health.Fence, error) {
			*firsts = append(*firsts, q.Sightings.FirstSeen("k"))
			return health.Fence{}, nil
		}}
	}
	var a, b []time.Time
	memory := health.NewMemory(health.MemoryOptions{})
	pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
	nodes := fake.NewNodes(newNode("n1", notReady, taint(corev1.TaintNodeUnreachable)))
	dry, err := health.New(pods, nil, health.Options{DryRun: true, Nodes: nodes, Clock: clk, Memory: memory, Fencers: []health.Fencer{seen("a", &a)}})
	require.NoError(t, err)
	_, err = dry.Check(context.Background())
	require.NoError(t, err)
	clk.SetTime(fenceStart.Add(time.Minute))
	real := newChecker(t, pods, health.Options{Nodes: nodes, Clock: clk, Memory: memory, Fencers: []health.Fencer{seen("a", &a), seen("b", &b)}})
	_, err = real.Check(context.Background())
	require.NoError(t, err)
	clk.SetTime(fenceStart.Add(2 * time.Minute))
	_, err = real.Check(context.Background())
	require.NoError(t, err)
	require.Equal(t, []time.Time{fenceStart, fenceStart.Add(time.Minute), fenceStart.Add(time.Minute)}, a, "a real check never counts a dry run's sighting")
	require.Equal(t, []time.Time{fenceStart.Add(time.Minute), fenceStart.Add(time.Minute)}, b)
}

// present reports whether the fake still holds the named pod of ns.
func present(pods *fake.Pods, name string) bool {
	_, err := pods.Get("ns", name)
	return err == nil
}

// typedNilFencer is a Fencer whose nil pointer a caller may pass by
// mistake.
type typedNilFencer struct{}

func (*typedNilFencer) Name() string { return "typed-nil" }
func (*typedNilFencer) Fence(context.Context, health.FenceQuery) (health.Fence, error) {
	return health.Fence{}, nil
}
