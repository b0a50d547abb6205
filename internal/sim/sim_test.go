//go:build go1.25

// The root module's go directive turns asynctimerchan on, which
// testing/synctest refuses.
//
//go:debug asynctimerchan=0

package sim_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/podhealth/podhealth/internal/sim"
)

var (
	seedsFlag   = flag.Uint64("sim.seeds", 0, "TestExplore: how many seeds to explore (0: skip)")
	firstFlag   = flag.Uint64("sim.first", 1, "TestExplore: the first seed")
	mutantsFlag = flag.Bool("sim.mutants", false, "TestTheSimulatorFindsEachReintroducedDefect: build and search each mutant")
	historyFlag = flag.Uint64("sim.history", 0, "TestHistory: the seed whose history to print (0: skip)")
	budgetFlag  = flag.Duration("sim.budget", 0, "TestFreshSeedsKeepThePromises: how long to explore fresh seeds (default $PODHEALTH_SIM_BUDGET, else 10s)")
)

// runSeed runs one seed in a bubble of its own.
func runSeed(t testing.TB, seed uint64, opts sim.Options) sim.Result {
	t.Helper()
	var res sim.Result
	tt, ok := t.(*testing.T)
	if !ok {
		panic("runSeed needs a *testing.T")
	}
	synctest.Test(tt, func(*testing.T) { res = sim.Run(seed, opts) })
	return res
}

// A seed replays exactly: the same history, byte for byte, run after run.
func TestASeedWritesTheSameHistoryTwice(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		a := runSeed(t, seed, sim.Options{})
		b := runSeed(t, seed, sim.Options{})
		if a.History != b.History {
			t.Fatalf("seed %d wrote two histories; the first difference:\n%s", seed, firstDifference(a.History, b.History))
		}
		if len(a.History) < 10_000 {
			t.Fatalf("seed %d wrote a history of %d bytes: too short to say anything", seed, len(a.History))
		}
	}
}

func firstDifference(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n  %s\n  %s", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("one history is longer: %d and %d lines", len(la), len(lb))
}

// explore runs seeds from first on, on every core, until n have run or
// the budget is spent, and returns what it saw.
type exploration struct {
	mu                 sync.Mutex
	seeds, steps       int
	simulated          time.Duration
	faults             int
	outside            int
	outsideCaught      int
	window, windowRuns int
	windowLongest      time.Duration
	recoveredLongest   time.Duration
	violations         []sim.Result
	recoveredLongestAt uint64
}

func explore(t *testing.T, first, n uint64, budget time.Duration, opts sim.Options) *exploration {
	t.Helper()
	var e exploration
	start := time.Now()
	onEveryCore(first, func(seed uint64) bool {
		return (n == 0 || seed < first+n) && (budget == 0 || time.Since(start) <= budget)
	}, func(seed uint64) {
		var res sim.Result
		synctest.Test(t, func(*testing.T) { res = sim.Run(seed, opts) })
		if len(res.Violations) > 0 {
			// A failing seed must replay: run it again.
			var again sim.Result
			synctest.Test(t, func(*testing.T) { again = sim.Run(seed, opts) })
			if again.History != res.History {
				t.Errorf("seed %d wrote two histories:\n%s", seed, firstDifference(res.History, again.History))
			}
		}
		e.add(seed, res)
	})
	return &e
}

// onEveryCore runs each for the seeds from first on, on every core, for
// as long as more says so of the next seed.
func onEveryCore(first uint64, more func(seed uint64) bool, each func(seed uint64)) {
	var mu sync.Mutex
	next := first
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				seed := next
				next++
				ok := more(seed)
				mu.Unlock()
				if !ok {
					return
				}
				each(seed)
			}
		}()
	}
	wg.Wait()
}

func (e *exploration) add(seed uint64, res sim.Result) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seeds++
	e.steps += res.Steps
	e.simulated += res.Simulated
	e.faults += len(res.Faults)
	e.window += res.Window
	if res.Window > 0 {
		e.windowRuns++
	}
	e.windowLongest = max(e.windowLongest, res.WindowLongest)
	if res.Recovered > e.recoveredLongest {
		e.recoveredLongest, e.recoveredLongestAt = res.Recovered, seed
	}
	switch {
	case res.Outside != "":
		e.outside++
		if len(res.Violations) > 0 {
			e.outsideCaught++
		}
	case len(res.Violations) > 0:
		res.History = "" // kept small; rerun the seed for it
		e.violations = append(e.violations, res)
	}
}

func (e *exploration) report(t *testing.T, took time.Duration) {
	t.Logf("%d seeds in %s: %.1f simulated hours, %d steps, %d faults; %d runs outside the promises (%d with violations); %d overlaps of a write in flight across a freeze, in %d runs (the longest %s); longest recovery after the last heal %s (seed %d); %d runs broke a promise",
		e.seeds, took.Round(time.Second), e.simulated.Hours(), e.steps, e.faults, e.outside, e.outsideCaught, e.window, e.windowRuns, e.windowLongest, e.recoveredLongest.Round(time.Millisecond), e.recoveredLongestAt, len(e.violations))
	for _, v := range e.violations {
		t.Errorf("%s", v.Summary())
	}
}

// Fresh seeds, for a fixed budget, keep every promise; a failing seed is
// printed, to be saved in testdata/seeds.
func TestFreshSeedsKeepThePromises(t *testing.T) {
	budget := *budgetFlag
	if budget == 0 {
		budget = 10 * time.Second
		if s := os.Getenv("PODHEALTH_SIM_BUDGET"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				t.Fatalf("PODHEALTH_SIM_BUDGET=%q: %v", s, err)
			}
			budget = d
		}
	}
	first := uint64(time.Now().UnixNano())
	t.Logf("fresh seeds from %d", first)
	start := time.Now()
	e := explore(t, first, 0, budget, sim.Options{})
	e.report(t, time.Since(start))
}

// Every saved seed keeps every promise, and breaks one with the mutation
// that reintroduces what it found: a seed that no longer exercises its
// defect fails here rather than passing for nothing.
func TestSavedSeedsKeepThePromises(t *testing.T) {
	f, err := os.Open("testdata/seeds")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	n := 0
	for s.Scan() {
		line, _, _ := strings.Cut(s.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		seed, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil || len(fields) > 2 {
			t.Fatalf("testdata/seeds: %q: want a seed and a mutation's name", line)
		}
		n++
		if res := runSeed(t, seed, sim.Options{}); len(res.Violations) > 0 || res.Outside != "" {
			t.Errorf("%s", res.Summary())
		}
		if len(fields) == 1 {
			continue
		}
		m := mutationNamed(fields[1])
		if m == nil || len(m.edits) > 0 {
			t.Fatalf("testdata/seeds: %q: no mutation of the run's options named %q", line, fields[1])
		}
		if res := runSeed(t, seed, m.opts); len(res.Violations) == 0 || res.Outside != "" {
			t.Errorf("seed %d keeps every promise with mutation %s: it no longer tests what it found", seed, m.name)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("testdata/seeds holds no seed")
	}
}

// The command that explores many seeds: go test ./internal/sim -run
// TestExplore -sim.seeds=1000000 -timeout 0 -v.
func TestExplore(t *testing.T) {
	if *seedsFlag == 0 {
		t.Skip("-sim.seeds=N explores N seeds")
	}
	start := time.Now()
	e := explore(t, *firstFlag, *seedsFlag, 0, sim.Options{})
	e.report(t, time.Since(start))
}

// TestHistory prints a seed's history and the oracle's verdict: go test
// ./internal/sim -run TestHistory -sim.history=SEED.
func TestHistory(t *testing.T) {
	if *historyFlag == 0 {
		t.Skip("-sim.history=SEED prints the seed's history")
	}
	res := runSeed(t, *historyFlag, sim.Options{})
	fmt.Print(res.History)
	fmt.Println(res.Summary())
}

// A run outside the promises is labelled so, and the oracle catches what
// it breaks: a workload that writes without asking its Guard, and a clock
// beyond the rate bound that the margin covers, each beside a partition
// of the Lease holder's node.
func TestTheOracleCatchesRunsOutsideThePromises(t *testing.T) {
	for _, outside := range []string{"ignores-guard", "fast-clock"} {
		t.Run(outside, func(t *testing.T) {
			caught := 0
			for seed := uint64(1); seed <= 40; seed++ {
				res := runSeed(t, seed, sim.Options{Outside: outside, Faults: []sim.Fault{{Kind: "partition", At: 3 * time.Minute, Lasts: 7 * time.Minute}}})
				if res.Outside != outside {
					t.Fatalf("seed %d: labelled %q", seed, res.Outside)
				}
				if len(res.Violations) > 0 {
					caught++
				}
			}
			t.Logf("%d of 40 runs broke a promise", caught)
			if caught == 0 {
				t.Fatal("the oracle caught nothing in 40 runs outside the promises")
			}
		})
	}
}

// kubeletRestartThenFreeze is TestAKubeletRestartHoldsBackNoLivenessProbe's
// schedule: a partition of the holder's node, a kubelet restart while the
// sidecar answers false, then a freeze of a process.
var kubeletRestartThenFreeze = []sim.Fault{
	{Kind: "partition", At: 2 * time.Minute, Lasts: time.Minute},
	{Kind: "kubelet-crash", At: 2*time.Minute + 10*time.Second, Lasts: 5 * time.Second},
	{Kind: "freeze-process", At: 2*time.Minute + 17*time.Second, Lasts: 7 * time.Minute},
}

// A kubelet that restarts while the sidecar answers false (its Lease lost
// in a partition, its stop still to come at the deadline), then a freeze
// of the sidecar: the liveness probe of /live, with no startup probe,
// stops the workload; the probes first prescribed, a startup probe that
// the restarted kubelet runs again before it runs the liveness probe,
// never did, and the workload wrote beside its successor. The schedule
// was chosen from the kubelet's code (docs/safety.md); each seed draws
// the rest of the run.
func TestAKubeletRestartHoldsBackNoLivenessProbe(t *testing.T) {
	faults := kubeletRestartThenFreeze
	broke := 0
	for seed := uint64(1); seed <= 40; seed++ {
		if res := runSeed(t, seed, sim.Options{Faults: faults}); len(res.Violations) > 0 || res.Outside != "" {
			t.Errorf("%s", res.Summary())
		}
		res := runSeed(t, seed, sim.Options{Faults: faults, Mutations: sim.Mutations{StartupProbe: true}})
		if len(res.Violations) > 0 && res.Outside == "" {
			broke++
		}
	}
	t.Logf("the startup probe's mutation broke %d of 40 runs", broke)
	if broke == 0 {
		t.Fatal("with the startup probe, no run broke a promise: the schedule no longer shows what it found")
	}
}
