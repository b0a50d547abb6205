package health_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// A check that reports no verdict counts a running pod alive without asking
// StaleDisruptionTarget; a rule in its place, or any other rule about
// disrupted pods, is still asked.
func TestRulesAboutRunningDisruptedPodsAreStillAsked(t *testing.T) {
	stale := func() *corev1.Pod { return newPod("stale", disruption("EvictionByEvictionAPI")) }
	deadIfDisrupted := func(*corev1.Pod) (health.Verdict, bool) {
		return health.Verdict{State: health.Dead, Fenced: true, Reason: "disrupted"}, true
	}
	replaced := health.DefaultRules()
	last := &replaced[len(replaced)-1]
	require.Equal(t, health.RuleStaleDisruptionTarget, last.Name)
	last.Classify = deadIfDisrupted // same name and facts, another function
	before := append(health.Rules{health.WithWhen(health.Rule{Name: "DisruptedIsDead", Classify: deadIfDisrupted}, health.Disrupted)}, health.DefaultRules()...)
	undeclared := append(health.Rules{{Name: "DisruptedIsDead", Classify: func(p *corev1.Pod) (health.Verdict, bool) {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.DisruptionTarget {
				return deadIfDisrupted(p)
			}
		}
		return health.Verdict{}, false
	}}}, health.DefaultRules()...)

	for _, tt := range []struct {
		name        string
		rules       health.Rules
		wantDeleted []string
		wantHealthy bool
	}{
		{"default rules", nil, nil, true},
		{"StaleDisruptionTarget with another function", replaced, []string{"stale"}, false},
		{"a rule about disrupted pods before the defaults", before, []string{"stale"}, false},
		{"a rule of the caller's, declaring no facts", undeclared, []string{"stale"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pods := fake.New(fake.Options{}, stale())
			healthy, err := newChecker(t, pods, health.Options{Rules: tt.rules}).Check(context.Background())
			require.NoError(t, err)
			require.Equal(t, tt.wantHealthy, healthy)
			require.Equal(t, tt.wantDeleted, deletedNames(pods))
		})
	}
}

// A check that reports no verdict validates the whole list before it asks
// any rule or deletes anything, with and without node evidence for
// orphans.
func TestInvalidListReachesNoRuleAndDeletesNothing(t *testing.T) {
	for _, orphans := range []bool{false, true} {
		t.Run(fmt.Sprintf("orphans=%v", orphans), func(t *testing.T) {
			var asked atomic.Int64
			counting := health.WithWhen(health.Rule{Name: "Counting", Classify: func(*corev1.Pod) (health.Verdict, bool) {
				asked.Add(1)
				return health.Verdict{}, false
			}}, health.Deleting)
			list := []*corev1.Pod{taintEvicted("dead"), newPod("orphan", onNode("node-gone")), newPod("alive"), nil}
			var deletes atomic.Int64
			deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { deletes.Add(1); return nil })
			source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return list, nil })
			opts := health.Options{Rules: append(health.Rules{counting}, health.DefaultRules()...)}
			if orphans {
				opts.Nodes, opts.LiveNodes = fake.NewNodes(newNode("node-a")), fake.NewNodes(newNode("node-a"))
			}
			checker, err := health.New(source, deleter, opts)
			require.NoError(t, err)
			healthy, err := checker.Check(context.Background())
			require.False(t, healthy)
			var listErr *health.ListError
			require.ErrorAs(t, err, &listErr)
			require.ErrorContains(t, err, "nil pod at index 3")
			require.Zero(t, asked.Load(), "rules asked about an invalid list")
			require.Zero(t, deletes.Load())
		})
	}
}

// A check that reports no verdict, with node evidence for orphans, still
// force-deletes a running pod whose node a live read confirms gone, and
// looks each node up once per check, not once per pod.
func TestQuietCheckFindsOrphansWithOneLookupPerNode(t *testing.T) {
	list := []*corev1.Pod{newPod("orphan", onNode("node-gone"))}
	for i := range 50 {
		list = append(list, newPod(fmt.Sprintf("alive-%d", i), disruption("EvictionByEvictionAPI")))
	}
	pods := fake.New(fake.Options{}, list...)
	cache, live := fake.NewNodes(newNode("node-a")), fake.NewNodes(newNode("node-a"))
	checker := newChecker(t, pods, health.Options{Nodes: cache, LiveNodes: live})
	healthy, err := checker.Check(context.Background())
	require.NoError(t, err)
	require.True(t, healthy)
	require.Equal(t, []string{"orphan"}, deletedNames(pods))
	require.Equal(t, 2, cache.Gets(), "node cache reads: one per node")
	require.Equal(t, 1, live.Gets(), "live node reads: one per node missing from the cache")
}

// countingClock counts how often it is read.
type countingClock struct {
	clock.PassiveClock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	return c.PassiveClock.Now()
}

// A check reads the clock only when something needs it: not for live pods,
// with or without node evidence, nor for dead pods that the Memory holds
// when a pod is alive; once when such pods are all it lists.
func TestCheckReadsTheClockOnlyWhenNeeded(t *testing.T) {
	clk := &countingClock{PassiveClock: clocktesting.NewFakePassiveClock(deletedAt.Add(time.Hour))}
	alive := fake.New(fake.Options{}, newPod("a"), newPod("b", disruption("EvictionByEvictionAPI")))
	_, err := newChecker(t, alive, health.Options{Clock: clk}).Check(context.Background())
	require.NoError(t, err)
	require.Zero(t, clk.reads.Load(), "clock reads in a check of live pods")
	nodes := func() *fake.Nodes { return fake.NewNodes(newNode("node-a")) }
	_, err = newChecker(t, alive, health.Options{Clock: clk, Nodes: nodes(), LiveNodes: nodes()}).Check(context.Background())
	require.NoError(t, err)
	require.Zero(t, clk.reads.Load(), "clock reads in a check of live pods that looks their node up")

	list := []*corev1.Pod{newPod("a"), taintEvicted("dead1"), taintEvicted("dead2")}
	source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return list, nil })
	var deletes atomic.Int64
	deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { deletes.Add(1); return nil })
	checker, err := health.New(source, deleter, health.Options{Clock: clk})
	require.NoError(t, err)
	_, err = checker.Check(context.Background()) // deletes them
	require.NoError(t, err)
	require.Equal(t, int64(2), deletes.Load())
	clk.reads.Store(0)
	_, err = checker.Check(context.Background()) // a pod is alive, the others are in the Memory
	require.NoError(t, err)
	require.Zero(t, clk.reads.Load(), "clock reads in a check of a live pod and remembered dead pods")
	require.Equal(t, int64(2), deletes.Load())

	list = list[1:] // no pod alive: the remembered pods are judged
	_, err = checker.Check(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(1), clk.reads.Load(), "clock reads in a check of remembered dead pods alone")
	require.Equal(t, int64(2), deletes.Load())
}

// Once the dead pods are remembered, a check without node evidence makes
// at most four allocations, whatever the number of pods: the evidence that
// TaintEvicted reads, and the slice of the pods to judge, which fits on the
// stack for two of them and is reused from an earlier check for more (one
// allocation is allowed for a garbage collection that emptied the pool).
func TestCheckOfRememberedDeadPodsAllocatesAtMostFourTimes(t *testing.T) {
	for _, tt := range []struct{ pods, deadEvery int }{
		{10, 5}, // two dead pods
		{1_000, 100},
		{10_000, 100},
		{100_000, 100},
	} {
		t.Run(fmt.Sprintf("pods=%d/dead=1in%d", tt.pods, tt.deadEvery), func(t *testing.T) {
			list := make([]*corev1.Pod, tt.pods)
			for i := range list {
				if i%tt.deadEvery == 0 {
					list[i] = taintEvicted(fmt.Sprintf("dead-%d", i))
				} else {
					list[i] = newPod(fmt.Sprintf("pod-%d", i))
				}
			}
			source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return list, nil })
			var deletes atomic.Int64
			deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { deletes.Add(1); return nil })
			checker, err := health.New(source, deleter, health.Options{})
			require.NoError(t, err)
			check := func() {
				if healthy, err := checker.Check(context.Background()); err != nil || !healthy {
					t.Fatalf("Check() = %v, %v", healthy, err)
				}
			}
			check()
			require.Equal(t, int64(tt.pods/tt.deadEvery), deletes.Load(), "the first check force-deletes the dead pods")
			require.LessOrEqual(t, testing.AllocsPerRun(5, check), 4.0)
			require.Equal(t, int64(tt.pods/tt.deadEvery), deletes.Load(), "later checks find them in the Memory")
		})
	}
}

// A check that reports nothing takes shortcuts that a reported check does
// not (see TestRulesAboutRunningDisruptedPodsAreStillAsked); over lists
// longer than the blocks it reads pods in, with phases that have the
// length of a terminal one, orphans of gone nodes whose names share their
// ends with live ones, and nil pods anywhere, it still answers as a
// reported check does and force-deletes the same pods, with and without
// node evidence, and again when the pods it force-deleted are listed once
// more and remembered.
func TestQuietCheckAnswersAsAReportedCheck(t *testing.T) {
	const gone = "ip-10-0-9-99.ec2.internal" // same length and ends as the live ones
	const lost = "ip-10-0-3-33.ec2.internal" // marked unreachable by the node controller
	live := []*corev1.Node{newNode("node-a"), newNode("ip-10-0-1-11.ec2.internal"), newNode("ip-10-0-2-22.ec2.internal"), newNode("n"), newNode(lost, markedUnreachable)}
	nodeNames := []string{"node-a", "ip-10-0-1-11.ec2.internal", "ip-10-0-2-22.ec2.internal", "n", gone, lost, ""}
	phases := []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, "", "Queued", "Scheduled", corev1.PodSucceeded, corev1.PodFailed}
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 14))
		n := r.IntN(150)
		list := make([]*corev1.Pod, 0, n)
		for i := range n {
			var opts []podOption
			opts = append(opts, onNode(nodeNames[r.IntN(len(nodeNames))]))
			if r.IntN(3) == 0 {
				opts = append(opts, phase(phases[r.IntN(len(phases))]))
			}
			switch r.IntN(12) {
			case 0:
				opts = append(opts, deleting, disruption(health.ReasonDeletionByTaintManager))
			case 1:
				opts = append(opts, deleting, disruption("EvictionByEvictionAPI"))
			case 2:
				opts = append(opts, phase(corev1.PodFailed), disruption(string(corev1.PodReasonTerminationByKubelet)))
			case 3:
				opts = append(opts, disruption("PreemptionByScheduler"))
			}
			list = append(list, newPod(fmt.Sprintf("p%03d", i), opts...))
		}
		if n > 0 && r.IntN(6) == 0 {
			list[r.IntN(n)] = nil
		}
		for _, mode := range []string{"no evidence", "evidence", "evidence, ReplaceUnreachable", "ReplaceUnreachable without live reads"} {
			t.Run(fmt.Sprintf("seed=%d/pods=%d/%s", seed, n, mode), func(t *testing.T) {
				check := func(reported bool) func() (healthy bool, deleted []string, err error) {
					var stored []*corev1.Pod
					for _, p := range list {
						if p != nil {
							stored = append(stored, p)
						}
					}
					pods := fake.New(fake.Options{}, stored...)
					source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return list, nil })
					var opts health.Options
					switch mode {
					case "evidence":
						opts.Nodes, opts.LiveNodes = fake.NewNodes(live...), fake.NewNodes(live...)
					case "evidence, ReplaceUnreachable":
						opts.Nodes, opts.LiveNodes, opts.ReplaceUnreachable = fake.NewNodes(live...), fake.NewNodes(live...), true
					case "ReplaceUnreachable without live reads":
						opts.Nodes, opts.ReplaceUnreachable = fake.NewNodes(live...), true
					}
					opts.Clock = clocktesting.NewFakePassiveClock(deletedAt.Add(time.Hour))
					checker, err := health.New(source, pods, opts)
					require.NoError(t, err)
					return func() (healthy bool, deleted []string, err error) {
						if reported {
							var r health.Report
							r, err = checker.CheckReport(context.Background())
							healthy = r.Healthy
						} else {
							healthy, err = checker.Check(context.Background())
						}
						return healthy, deletedNames(pods), err
					}
				}
				reported, quiet := check(true), check(false)
				for round := 1; round <= 2; round++ {
					// The second round lists the pods that the first one
					// force-deleted again, as a lagging cache does.
					wantHealthy, wantDeleted, wantErr := reported()
					gotHealthy, gotDeleted, gotErr := quiet()
					require.Equal(t, wantHealthy, gotHealthy, "round %d", round)
					require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr), "round %d", round)
					require.Empty(t, cmp.Diff(wantDeleted, gotDeleted), "round %d", round)
				}
			})
		}
	}
}

// Once a pod is counted alive, a quiet check without node evidence does not
// judge the pods that the Memory remembers as force-deleted: their verdict
// cannot change its answer. It still judges them when no pod is alive, with
// node evidence, and in a dry run.
func TestQuietCheckSkipsRememberedPodsOnlyWhenTheyCannotChangeTheAnswer(t *testing.T) {
	for _, tt := range []struct {
		name      string
		withAlive bool
		opts      health.Options
		wantAsked int64 // on the second check
	}{
		{"a pod alive", true, health.Options{}, 0},
		{"no pod alive", false, health.Options{}, 2},
		{"a pod alive, node evidence", true, health.Options{Nodes: fake.NewNodes(newNode("node-a")), LiveNodes: fake.NewNodes(newNode("node-a"))}, 2},
		{"a pod alive, dry run", true, health.Options{DryRun: true}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var asked atomic.Int64
			counting := health.WithWhen(health.Rule{Name: "Counting", Classify: func(*corev1.Pod) (health.Verdict, bool) {
				asked.Add(1)
				return health.Verdict{}, false
			}}, health.Deleting)
			list := []*corev1.Pod{taintEvicted("dead-1"), taintEvicted("dead-2")}
			if tt.withAlive {
				list = append(list, newPod("alive"))
			}
			source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return list, nil }) // lags: lists the deleted pods again
			var deletes atomic.Int64
			deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { deletes.Add(1); return nil })
			opts := tt.opts
			opts.Rules = append(health.Rules{counting}, health.DefaultRules()...)
			opts.Clock = clocktesting.NewFakePassiveClock(deletedAt.Add(time.Hour))
			checker, err := health.New(source, deleter, opts)
			require.NoError(t, err)
			for n := 1; n <= 2; n++ {
				asked.Store(0)
				healthy, err := checker.Check(context.Background())
				require.NoError(t, err)
				require.Equal(t, tt.withAlive, healthy)
				if n == 1 {
					require.Equal(t, int64(2), asked.Load(), "pods judged by the first check")
				}
			}
			require.Equal(t, tt.wantAsked, asked.Load(), "remembered pods judged by the second check")
			wantDeletes := int64(2)
			if tt.opts.DryRun {
				wantDeletes = 0
			}
			require.Equal(t, wantDeletes, deletes.Load())
		})
	}
}

// A quiet check under ReplaceUnreachable counts no pod of an unreachable
// node alive, however long the list (short lists are scanned without the
// node table, long ones with it), just as a reported check does.
func TestQuietCheckCountsNoUnreachablePodAlive(t *testing.T) {
	lost := newNode("ip-10-0-3-33.ec2.internal", markedUnreachable)
	for _, tt := range []struct {
		n         int
		liveReads bool
	}{{1, false}, {1, true}, {2, false}, {64, true}, {65, false}, {65, true}, {200, false}, {200, true}} {
		n := tt.n
		t.Run(fmt.Sprintf("pods=%d/live reads=%v", n, tt.liveReads), func(t *testing.T) {
			list := make([]*corev1.Pod, n)
			for i := range list {
				list[i] = newPod(fmt.Sprintf("p%03d", i), onNode(lost.Name))
			}
			source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return list, nil })
			opts := health.Options{Nodes: fake.NewNodes(lost), ReplaceUnreachable: true}
			if tt.liveReads {
				opts.LiveNodes = fake.NewNodes(lost)
			}
			checker, err := health.New(source, fake.New(fake.Options{}, list...), opts)
			require.NoError(t, err)
			healthy, err := checker.Check(context.Background())
			require.NoError(t, err)
			require.False(t, healthy, "Check")
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.False(t, report.Healthy, "CheckReport")
			require.Equal(t, health.Unreachable, report.Pods[0].Verdict.State)
		})
	}
}

// Past the Memory's TTL a force-deleted pod that is still listed is judged,
// and force-deleted, again by a check that reports it, or that finds no pod
// alive; a quiet check that counts a pod alive leaves it alone while the
// Memory still holds its UID.
func TestExpiredForceDeletedPodIsJudgedAgainOnlyWhenItCanMatter(t *testing.T) {
	for _, tt := range []struct {
		name        string
		withAlive   bool
		reported    bool
		wantDeletes int64 // after the TTL
	}{
		{"quiet check, a pod alive", true, false, 0},
		{"reported check, a pod alive", true, true, 1},
		{"quiet check, no pod alive", false, false, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(deletedAt.Add(time.Hour))
			list := []*corev1.Pod{taintEvicted("dead")}
			if tt.withAlive {
				list = append(list, newPod("a"))
			}
			source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return list, nil })
			var deletes atomic.Int64
			deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { deletes.Add(1); return nil })
			memory := health.NewMemory(health.MemoryOptions{TTL: time.Minute})
			checker, err := health.New(source, deleter, health.Options{Clock: clk, Memory: memory})
			require.NoError(t, err)
			_, err = checker.Check(context.Background())
			require.NoError(t, err)
			require.Equal(t, int64(1), deletes.Load(), "the first check force-deletes the dead pod")

			clk.Step(2 * time.Minute) // the cache still lists it
			if tt.reported {
				_, err = checker.CheckReport(context.Background())
			} else {
				_, err = checker.Check(context.Background())
			}
			require.NoError(t, err)
			require.Equal(t, 1+tt.wantDeletes, deletes.Load())
		})
	}
}
