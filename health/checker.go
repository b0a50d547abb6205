package health

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Checker answers whether one workload is healthy, force-deleting the pods
// that its rules call dead and its policy lets go. See the package
// documentation for the decision table.
//
// A Checker is safe for concurrent use by many goroutines. Concurrent checks
// that meet the same dead pod, in one Checker or in Checkers sharing a
// Memory, send one DELETE between them: the later ones wait for its result
// (or for their own context to end) and report DeletedEarlier when it
// removed the pod. The Observer hears each listed pod once per check, with
// its final report.
//
// A check does not recover panics. A panic in a dependency (PodSource,
// Deleter, Observer, Options.Nodes, Options.LiveNodes, Options.Claims,
// Breaker.Nodes) goes on up the stack and ends the check, which reports
// nothing more, and it leaves nothing held: a force delete in flight is
// ended, and checks waiting for it get DeleteFailed with an error, so none
// hangs; the pod is not remembered as deleted, and the next check decides
// about it afresh. A Deleter that panics may have sent its DELETE before it
// panicked, so the budget charge of that DELETE stays spent; if the DELETE
// went through, the next one finds the pod gone (WasAlreadyGone), since it
// carries the same UID precondition. First sightings recorded before the
// panic are kept: they are true.
type Checker struct {
	source        PodSource
	deleter       Deleter
	dryRun        bool
	log           logr.Logger
	clock         clock.PassiveClock
	rules         Rules
	evidenceRules bool
	// factsRules is true when every rule declares the facts it needs: a pod
	// with no facts is then alive without asking any rule.
	factsRules bool
	// quickAlive is true when the rules call alive every pod that is
	// neither deleting nor terminal nor on a node confirmed gone, whatever
	// its conditions (see Rules.aliveUnlessDeletingOrTerminal): a check
	// that reports no verdict then reads no condition of such a pod.
	quickAlive bool
	// orphans is true with Options.Nodes and Options.LiveNodes: a check
	// then looks up the node of every bound pod (see classify).
	orphans   bool
	nodes     NodeGetter
	liveNodes NodeGetter
	policy    policy
	// fencers are the built-in fencers, then Options.Fencers.
	fencers  []Fencer
	budget   *DeleteBudget
	breaker  Breaker
	memory   *Memory
	observer Observer
	// replaceUnreachable and unreachableFor are Options.ReplaceUnreachable
	// and Options.UnreachableFor (see evidence_unreachable.go).
	replaceUnreachable bool
	unreachableFor     time.Duration
	// nodesUnavailable is true from a check that found node evidence
	// unavailable (ErrNodesUnavailable) to one that read a node again, so
	// that each change is logged once.
	nodesUnavailable atomic.Bool
}

// deadBufs holds the slices of checks that met more pods to judge than fit
// on the stack, for later checks to reuse. It and evidences are shared by
// every Checker: a pool that a Checker held would keep the Checker, and the
// pods its source returned, reachable until the second garbage collection
// after its last check, which costs a program that makes a Checker per
// reconcile a heap of pod lists.
var deadBufs sync.Pool // of *[]deadPod

// evidences holds the evidence of finished checks, emptied, for later checks
// to reuse with its tables.
var evidences sync.Pool // of *evidence

// errNotNew is what a Checker that New did not make answers.
var errNotNew = errors.New("podhealth: the Checker was not made by New")

// Check lists the workload's pods, force-deletes the dead ones, and answers
// whether the workload is healthy, as the decision table in the package
// documentation says. It is the drop-in for a CheckRegistryServer-style
// caller: on (false, nil) the caller should create a replacement; on an
// error it should retry.
func (c *Checker) Check(ctx context.Context) (healthy bool, err error) {
	return c.run(ctx, nil)
}

// CheckReport does what Check does and also returns a Report that lists
// every pod with its verdict and the outcome of its force delete. The
// Report is filled in also when an error is returned, as far as the check
// got.
func (c *Checker) CheckReport(ctx context.Context) (Report, error) {
	var r Report
	healthy, err := c.run(ctx, &r)
	r.Healthy = healthy
	return r, err
}

// Classify returns the verdict that the Checker's rules give pod, with the
// Checker's node evidence, as a check would; it deletes nothing. It lets an
// informer handler recognise a dead pod exactly as the Checker will. A nil
// pod is Alive with the reason "nil pod".
func (c *Checker) Classify(ctx context.Context, pod *corev1.Pod) Verdict {
	switch {
	case pod == nil:
		return Verdict{State: Alive, Reason: "nil pod"}
	case c.source == nil:
		return Verdict{State: Alive, Reason: errNotNew.Error()}
	}
	k := check{Checker: c, ctx: ctx, classifyOnly: true}
	return k.classify(pod)
}

// check is the state of one run.
type check struct {
	*Checker
	ctx        context.Context
	log        logr.Logger
	now        time.Time // read on first use, see time
	haveNow    bool
	report     *Report
	evidence   *evidence   // made on first use
	disruption *disruption // read on first use
	deadBuf    *[]deadPod  // from deadBufs, when the stack's buffer is too small
	// classifyOnly is true for Classify, which records first sightings but
	// opens no generation of them (see sightings).
	classifyOnly bool
}

// run is Check, filling in report when it is not nil. With no report and
// no dead pod it allocates nothing; with no report, no observer and dead
// pods that the Memory remembers, little: the evidence of the rules that
// judge them (none are judged when a pod is alive and there is no node
// evidence, see classifyPods), and a slice only when more than two pods
// need judging and no earlier check left one in deadBufs.
func (c *Checker) run(ctx context.Context, report *Report) (bool, error) {
	if c.source == nil {
		return false, errNotNew
	}
	if err := ctx.Err(); err != nil {
		return false, stopped(err)
	}
	pods, err := c.source.ListPods(ctx)
	if err != nil {
		return false, &ListError{Err: err}
	}
	return c.judge(ctx, report, pods)
}

// judge is the rest of run: it classifies the pods, and force-deletes the
// dead ones. Its stages, each in the files named after it, in turn:
//   - evidence (evidence*.go): a check that reports no verdict, with node
//     evidence for orphans or early replacement, first screens the pods by
//     their nodes (evidence_screen.go); without it, it screens them by
//     their facts alone (classify_quiet.go);
//   - classify (classify*.go): the rules give the other pods their
//     verdicts, reading the node evidence found, or looking it up through
//     the same evidence; the policy decides which alive pods on nodes that
//     may be unreachable are Unreachable (policy_replace.go);
//   - then each dead pod passes the policy (policy*.go, which asks the
//     fencers for proof), the release (release*.go: the breaker, the
//     budget, the DELETE) and the report (report*.go) in turn.
//
// The quiet path (a check that reports no verdict, with the rules of
// quickAlive) cuts a check of 10,000 running pods from 81 to 9.9 ns per
// pod in BenchmarkRealistic.
func (c *Checker) judge(ctx context.Context, report *Report, pods []*corev1.Pod) (bool, error) {
	k := check{Checker: c, ctx: ctx, report: report}
	quiet := report == nil && c.observer == nil && c.quickAlive
	var buf [2]deadPod // the pods to classify, then the dead ones, on the stack while they are few
	todo := buf[:0]
	var alive int
	var err error
	switch {
	case !quiet:
		// Every pod goes through the rules, for its verdict.
	case c.orphans || c.replaceUnreachable:
		alive, todo, err = k.screen(pods, todo)
	default:
		var done bool
		if alive, todo, done, err = k.screenByFacts(pods, todo); done {
			return alive > 0, nil
		}
	}
	if err != nil {
		return false, err
	}
	k.log = c.log
	if k.log.GetSink() == nil {
		k.log = logr.FromContextOrDiscard(ctx)
	}
	alive, dead, err := k.classifyPods(pods, todo, alive, !quiet)
	if err != nil {
		return false, err
	}
	defer k.release(dead)
	defer k.releaseEvidence()

	var errs []error
	for n, d := range dead {
		pod := pods[d.index]
		if err := ctx.Err(); err != nil {
			for _, rest := range dead[n:] {
				k.finish(rest.index, PodReport{Pod: pods[rest.index], Verdict: rest.verdict, Outcome: NotAttempted})
			}
			errs = append(errs, stopped(err))
			break
		}
		// Policy, release, report: each dead pod passes the three stages
		// in turn.
		decided := k.decide(pod, d.verdict)
		res := k.removeDead(pod, decided)
		k.logResult(pod, d.verdict, decided, res)
		k.finish(d.index, PodReport{Pod: pod, Verdict: d.verdict, Outcome: res.outcome, HeldBack: res.heldBack, FencedBy: res.fencedBy, Err: res.err})
		if res.retryAfter > 0 {
			k.getEvidence().wake.add(res.retryAfter) // into the report with the rules' waits
		}
		switch {
		case res.err != nil:
			errs = append(errs, res.err)
		case res.outcome == NotAttempted: // gave up waiting for another check's delete
			errs = append(errs, stopped(context.Cause(ctx)))
		}
	}
	if err := ctx.Err(); err != nil && len(errs) == 0 {
		// The context ended during the check, maybe in a node read that
		// then counted as unknown: what the check found is not an answer
		// (row D7), however it turned out.
		errs = append(errs, stopped(err))
	}
	if len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	return alive > 0, nil
}

// grow returns s, full after seen of total pods, with room for more: three
// times as many as the share of pods in s so far predicts for the whole
// list, and at least twice as many as s holds, so that a list with 1% dead
// pods usually grows it once. The room comes from a slice that an earlier
// check released, if one is big enough.
func (k *check) grow(s []deadPod, seen, total int) []deadPod {
	want := max(2*cap(s), 3*len(s)*total/max(seen, 1), 16)
	if k.deadBuf == nil {
		k.deadBuf, _ = deadBufs.Get().(*[]deadPod)
		if k.deadBuf == nil {
			k.deadBuf = new([]deadPod)
		}
	}
	if cap(*k.deadBuf) < want {
		*k.deadBuf = make([]deadPod, 0, want)
	}
	bigger := (*k.deadBuf)[:len(s)]
	copy(bigger, s)
	return bigger
}

// release gives the slice that grow made back for another check, once
// dead, which lies in it, is no longer used.
func (k *check) release(dead []deadPod) {
	if k.deadBuf == nil {
		return
	}
	clear(dead) // the verdicts' strings
	*k.deadBuf = (*k.deadBuf)[:0]
	deadBufs.Put(k.deadBuf)
	k.deadBuf = nil
}

// time is the Checker's clock, read once per check when first needed: a
// check of live pods does not read it, with or without node evidence.
func (k *check) time() time.Time {
	if k.evidence != nil {
		return k.evidence.time()
	}
	if !k.haveNow {
		k.now, k.haveNow = k.clock.Now(), true
	}
	return k.now
}

// finish hands one pod's final report to the Report and to the Observer.
func (k *check) finish(index int, r PodReport) {
	if k.report != nil {
		k.report.Pods[index] = r
	}
	if k.observer != nil {
		k.observer.Observe(k.ctx, r)
	}
}

// soonest is how soon a check expects a verdict to change with time alone
// (a deadline that passes, a wait that ends): the soonest of the waits
// that its stages meet, the rules', early replacement's, the fencers' and
// the budget's. It becomes Report.RetryAfter; zero while no wait is met.
type soonest time.Duration

// add notes a wait of d.
func (s *soonest) add(d time.Duration) {
	if d > 0 && (*s == 0 || d < time.Duration(*s)) {
		*s = soonest(d)
	}
}

// deadPod is a dead pod's place in the list, with its verdict.
type deadPod struct {
	index   int
	verdict Verdict
}
