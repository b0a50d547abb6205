package health

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Options configure a Checker. The zero value is the default: force deletes
// are sent, logs go to the logger of each check's context (none: discarded),
// the real clock is used, the rules are DefaultRules(), there is no node
// evidence, the fencing policy is FenceStateful with claims' access modes
// unknown, there is no budget and no breaker, the Checker has a Memory of
// its own with default bounds, nobody is notified, and a pod on an
// unreachable node is alive until the rules call it dead.
type Options struct {
	// DryRun classifies and reports what would be force-deleted, and writes
	// nothing that a real check reads: it calls neither the Deleter nor the
	// Budget, and records neither deleted UIDs nor first sightings in the
	// Memory. It keeps its own record of when it first saw pods
	// terminating, apart in the Memory, and also counts the sightings of
	// real checks sharing the Memory, so that over time it tells what a real
	// check would do; a real check never counts a dry run's sightings, and
	// waits its own full period. Its health answer is the one the real check
	// would give if every force delete succeeded.
	DryRun bool
	// Logger gets one structured line per force delete (or would-be force
	// delete in dry run), with the keys pod, node, uid, rule, reason and
	// outcome, in Kubernetes' structured-logging style. The zero Logger
	// means the logger in each check's context (logr.FromContextOrDiscard).
	Logger logr.Logger
	// Clock measures the Memory's expiry, the budget's window and how long
	// pods have been seen in a state. Nil means the real clock.
	Clock clock.PassiveClock
	// Rules classify pods. Empty means DefaultRules().
	Rules Rules
	// Nodes gets a pod's node, typically from a node informer's cache, for
	// the node-aware rules and the fencing evidence. Nil means no node
	// evidence: TaintEvicted then waits for the pod's deletionTimestamp to
	// pass, the other node-aware rules have no opinion, and pods that need
	// fencing are held back.
	Nodes NodeGetter
	// LiveNodes is asked when Nodes says a node is missing, typically a
	// direct API client: a node is gone only when LiveNodes answers
	// NotFound too. Nil means a node is never confirmed gone.
	LiveNodes NodeGetter
	// Fencing says which dead pods need fencing evidence before a force
	// delete. The zero value is FenceStateful.
	Fencing Fencing
	// Claims tells the access modes of the claims a pod mounts. Nil means
	// they are unknown, and a pod that mounts any claim counts as stateful.
	Claims ClaimGetter
	// Budget, when not nil, limits force deletes per time window; share one
	// between Checkers to limit them together.
	Budget *DeleteBudget
	// Breaker stops force deletes when many nodes fail at once. The zero
	// value never trips.
	Breaker Breaker
	// Memory remembers deleted UIDs. Nil means a new Memory with default
	// bounds, private to this Checker. Share one Memory between Checkers
	// that see the same pods, and always when checkers are built per
	// reconcile.
	Memory *Memory
	// Observer, when not nil, is told the final report of each pod of each
	// check.
	Observer Observer
	// ReplaceUnreachable, when true, calls Unreachable a pod that the rules
	// call Alive when its node is marked unreachable by the node-lifecycle
	// controller: the node's Ready condition is Unknown or False and it
	// carries the node.kubernetes.io/unreachable or
	// node.kubernetes.io/not-ready taint with effect NoExecute. Such a pod
	// counts as not alive (rows D10 and D11), so that the caller creates a
	// replacement before the pod's toleration of the taint runs out; it is
	// never force-deleted on this evidence. Pods that need fencing under
	// Options.Fencing stay Alive: a second copy of them would be a second
	// writer. It needs node evidence: New refuses it without
	// Options.Nodes. The default is false.
	ReplaceUnreachable bool
	// UnreachableFor is how long a node must have been unreachable before
	// its pods are Unreachable, beyond the node-lifecycle controller's own
	// node-monitor-grace-period: both since the Ready condition's
	// lastTransitionTime and since this Checker (or one sharing its Memory)
	// first saw the node unreachable, on the Checker's clock, so that
	// neither a clock far ahead nor a fresh Checker shortens the wait (a
	// clock behind only lengthens it). The first sighting is kept in the
	// Memory and forgotten when no check sees the node unreachable for the
	// Memory's TTL. A node that comes back and fails again waits afresh, so
	// a node that flaps for less than UnreachableFor at a time never makes
	// its pods Unreachable. Zero, the default, means no extra wait, and reads
	// no clock. It needs ReplaceUnreachable; New refuses a negative value.
	UnreachableFor time.Duration
}

// Observer is told what a Checker decided and did about each pod. Observe
// is called once per listed pod and check, with the pod's final report (a
// dead pod's after its force delete), synchronously from the check: it must
// not mutate r.Pod, should return quickly, and must be safe for concurrent
// use. Implementations in this repository: podsource/kube.EventObserver
// (Kubernetes events) and the Metrics of examples/prometheus.
type Observer interface {
	Observe(ctx context.Context, r PodReport)
}

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
	budget    *DeleteBudget
	breaker   Breaker
	memory    *Memory
	observer  Observer
	// replaceUnreachable and unreachableFor are Options.ReplaceUnreachable
	// and Options.UnreachableFor (see unreachable.go).
	replaceUnreachable bool
	unreachableFor     time.Duration
	// deadBufs holds the slices of checks that met more pods to judge than
	// fit on the stack, for later checks to reuse.
	deadBufs sync.Pool // of *[]deadPod
	// evidences holds the evidence of finished checks, emptied, for later
	// checks to reuse with its tables.
	evidences sync.Pool // of *evidence
}

// New returns a Checker over source and deleter. The deleter may be nil only
// in dry run. Nil interfaces, typed nil pointers in them, unknown Fencing
// values and rules without a Classify function are refused with an error.
func New(source PodSource, deleter Deleter, opts Options) (*Checker, error) {
	if isNil(source) {
		return nil, errors.New("podhealth: New: nil PodSource")
	}
	if isNil(deleter) && !opts.DryRun {
		return nil, errors.New("podhealth: New: nil Deleter (only a dry run may have none)")
	}
	for name, v := range map[string]any{
		"Options.Nodes": opts.Nodes, "Options.LiveNodes": opts.LiveNodes, "Options.Claims": opts.Claims,
		"Options.Observer": opts.Observer, "Options.Breaker.Nodes": opts.Breaker.Nodes, "Options.Clock": opts.Clock,
	} {
		if v != nil && isNil(v) {
			return nil, fmt.Errorf("podhealth: New: %s holds a nil %T", name, v)
		}
	}
	switch opts.Fencing {
	case FenceStateful, FenceAlways, FenceNever:
	default:
		return nil, fmt.Errorf("podhealth: New: unknown Options.Fencing %d", int(opts.Fencing))
	}
	if err := opts.Rules.validate(); err != nil {
		return nil, fmt.Errorf("podhealth: New: %w", err)
	}
	if err := validateUnreachable(opts); err != nil {
		return nil, fmt.Errorf("podhealth: New: %w", err)
	}
	c := &Checker{
		source:    source,
		dryRun:    opts.DryRun,
		log:       opts.Logger,
		clock:     opts.Clock,
		rules:     opts.Rules,
		nodes:     opts.Nodes,
		liveNodes: opts.LiveNodes,
		policy:    policy{fencing: opts.Fencing, claims: opts.Claims},
		budget:    opts.Budget,
		breaker:   opts.Breaker,
		memory:    opts.Memory,
		observer:  opts.Observer,

		replaceUnreachable: opts.ReplaceUnreachable,
		unreachableFor:     opts.UnreachableFor,
	}
	if !isNil(deleter) {
		c.deleter = deleter
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if len(c.rules) == 0 {
		c.rules = DefaultRules()
	}
	c.evidenceRules = c.rules.needEvidence()
	c.factsRules = c.rules.needFacts()
	c.quickAlive = c.rules.aliveUnlessDeletingOrTerminal()
	c.orphans = c.nodes != nil && c.liveNodes != nil
	if c.memory == nil {
		c.memory = NewMemory(MemoryOptions{})
	}
	return c, nil
}

// isNil reports whether v is nil or a nil pointer, map, slice, channel or
// function held in an interface: what a constructor returns on error when
// its caller ignored the error.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

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
	if pod == nil {
		return Verdict{State: Alive, Reason: "nil pod"}
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
// evidence, see classifyQuietly), and a slice only when more than two pods
// need judging and no earlier check left one in deadBufs.
func (c *Checker) run(ctx context.Context, report *Report) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, stopped(err)
	}
	pods, err := c.source.ListPods(ctx)
	if err != nil {
		return false, &ListError{Err: err}
	}
	quiet := report == nil && c.observer == nil && c.quickAlive
	from := 0
	if quiet && !c.orphans && !c.replaceUnreachable {
		// The common case ends here, before anything else is set up:
		// every pod is running, or about to, and none is being deleted.
		if from = leadingAlive(pods); from == len(pods) {
			return from > 0, nil
		}
		// The next common case: a pod is alive, and the others are alive
		// too or were force-deleted by an earlier check and still listed
		// by a lagging cache (see skipRemembered in classifyQuietly).
		if from > 0 && c.nodes == nil && !c.dryRun && restAliveOrForceDeleted(pods[from:], c.memory) {
			return true, nil
		}
	}
	return c.judge(ctx, report, pods, quiet, from)
}

// judge is the rest of run, for a list whose first from pods are known
// alive and valid: it classifies the other pods, and force-deletes the dead
// ones.
func (c *Checker) judge(ctx context.Context, report *Report, pods []*corev1.Pod, quiet bool, from int) (bool, error) {
	k := check{Checker: c, ctx: ctx, log: c.log, report: report}
	if k.log.GetSink() == nil {
		k.log = logr.FromContextOrDiscard(ctx)
	}

	var buf [2]deadPod // the dead pods, on the stack while they are few
	var alive int
	var dead []deadPod
	var err error
	if quiet {
		alive, dead, err = k.classifyQuietly(pods, from, buf[:0])
	} else {
		alive, dead, err = k.classifyAll(pods, buf[:0])
	}
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
		res := k.removeDead(pod, d.verdict)
		k.finish(d.index, PodReport{Pod: pod, Verdict: d.verdict, Outcome: res.outcome, HeldBack: res.heldBack, Err: res.err})
		if k.report != nil && res.retryAfter > 0 && (k.report.RetryAfter == 0 || res.retryAfter < k.report.RetryAfter) {
			k.report.RetryAfter = res.retryAfter
		}
		switch {
		case res.err != nil:
			errs = append(errs, res.err)
		case res.outcome == NotAttempted: // gave up waiting for another check's delete
			errs = append(errs, stopped(context.Cause(ctx)))
		}
	}
	if len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	return alive > 0, nil
}

// leadingAlive returns how many pods at the start of the list are alive by
// their deletionTimestamp and phase alone, for a check that reports no
// verdict and looks no node up (see Rules.aliveUnlessDeletingOrTerminal):
// the index of the first pod that is nil, deleting, or in a phase that may
// be terminal, or len(pods). It reads two fields per pod and the length of
// a third, and nothing else, so that a list of running pods costs as
// little as it can.
func leadingAlive(pods []*corev1.Pod) int {
	for i, pod := range pods {
		if pod == nil || pod.DeletionTimestamp != nil || mayBeTerminal(pod.Status.Phase) {
			return i
		}
	}
	return len(pods)
}

// restAliveOrForceDeleted reports whether every pod of pods is alive by its
// deletionTimestamp and phase alone, or has a name and a UID that memory
// holds as force-deleted. It answers false at the first pod that needs the
// rules, nil pods included, which the full check then reports.
func restAliveOrForceDeleted(pods []*corev1.Pod, memory *Memory) bool {
	for _, pod := range pods {
		switch {
		case pod == nil:
			return false
		case pod.DeletionTimestamp == nil && !isTerminalPhase(pod):
		case pod.Name != "" && pod.UID != "" && memory.holds(pod.UID):
		default:
			return false
		}
	}
	return true
}

// mayBeTerminal reports whether phase has the length of Succeeded or
// Failed: it reads no byte of the phase, which for a running pod is enough
// to tell it is not terminal.
func mayBeTerminal(phase corev1.PodPhase) bool {
	return len(phase) == len(corev1.PodSucceeded) || len(phase) == len(corev1.PodFailed)
}

// classifyQuietly classifies pods when no verdict is reported (no Report,
// no Observer) and the rules call alive every pod that is neither deleting
// nor terminal nor on a node confirmed gone (quickAlive); the first from
// pods are known alive (see leadingAlive). One pass validates each pod and
// reads its deletionTimestamp and phase, and, with node evidence for
// orphans or Options.ReplaceUnreachable, looks its node up in the check's
// table (see scanNodes): that is enough to count most pods alive, without
// reading their conditions. Only the others go through the rules, after
// the whole list is validated, so that no rule sees an invalid list. It
// returns the dead pods in list order, appended to dead.
func (k *check) classifyQuietly(pods []*corev1.Pod, from int, dead []deadPod) (alive int, _ []deadPod, _ error) {
	others := dead
	alive = from
	if k.orphans || k.replaceUnreachable {
		var err error
		if alive, others, err = k.scanNodes(pods, from, others); err != nil {
			return 0, nil, err
		}
	} else {
		for i := from; i < len(pods); i++ {
			// Skip the running pods up to the next one that needs a
			// closer look.
			n := leadingAlive(pods[i:])
			if alive, i = alive+n, i+n; i == len(pods) {
				break
			}
			switch pod := pods[i]; {
			case pod == nil:
				return 0, nil, nilPod(i)
			case pod.DeletionTimestamp == nil && !isTerminalPhase(pod):
				alive++
			default:
				if len(others) == cap(others) {
					others = k.grow(others, i, len(pods))
				}
				others = append(others, deadPod{index: i})
			}
		}
	}
	// Classify the others, keeping the dead ones in the same slice. Once a
	// pod is counted alive, the health answer is known unless a force
	// delete fails, so a pod that the Memory holds as force-deleted
	// changes nothing whatever its verdict: it is gone from the API server
	// (or held there by a finalizer), so sending its force delete again
	// could only answer NotFound or change nothing, and it would count at
	// most one more pod alive. It is not judged, which spares reading its
	// conditions and the clock. Without node evidence no rule records
	// anything while it judges, so nothing is lost; a dry run does not read
	// the Memory.
	skipRemembered := alive > 0 && !k.dryRun && k.nodes == nil
	dead = others[:0]
	for _, o := range others {
		if pod := pods[o.index]; skipRemembered && pod.Name != "" && pod.UID != "" && k.memory.holds(pod.UID) {
			continue
		}
		switch v := k.classify(pods[o.index]); v.State {
		case Alive:
			alive++
		case Dead:
			dead = append(dead, deadPod{index: o.index, verdict: v})
		}
	}
	return alive, dead, nil
}

// nodeBlock is how many pods scanNodes reads before it looks their nodes
// up.
const nodeBlock = 32

// scanNodes is classifyQuietly's pass with node evidence: a pod that is
// neither deleting nor terminal is alive unless its node is suspect (see
// suspectNode). It returns alive, counting the first from pods, and the
// pods to classify, in list order, appended to others.
//
// A pod's node name is a string of its own, away from the pod, so that
// looking it up right after reading the pod would wait for two reads from
// memory in turn, pod after pod. Instead the pods are read by blocks: the
// node names of a block are gathered, then touched all at once, so that
// their reads overlap, and only then looked up in the check's table (see
// nodeTable), in front of evidence.seen, where each node is looked up in
// Options.Nodes once per check.
func (k *check) scanNodes(pods []*corev1.Pod, from int, others []deadPod) (alive int, _ []deadPod, _ error) {
	type entry struct {
		index int
		node  string // "" for a pod to classify
	}
	var block [nodeBlock]entry
	alive = from
	e := k.getEvidence()
	// A short list meets few nodes more than once: filling the table would
	// cost more than it saves.
	tabled := len(pods)-from > 2*nodeBlock
	for start := from; start < len(pods); start += nodeBlock {
		n := 0
		for i := start; i < min(start+nodeBlock, len(pods)); i++ {
			switch pod := pods[i]; {
			case pod == nil:
				return 0, nil, nilPod(i)
			case pod.DeletionTimestamp != nil || isTerminalPhase(pod):
				block[n] = entry{index: i}
				n++
			case pod.Spec.NodeName == "":
				alive++ // no node, so not an orphan
			default:
				block[n] = entry{index: i, node: pod.Spec.NodeName}
				n++
			}
		}
		var touched byte
		for j := range n {
			if node := block[j].node; node != "" {
				touched |= node[len(node)-1]
			}
		}
		e.touched |= touched
		for j := range n {
			b := &block[j]
			if b.node != "" {
				suspect, ok := e.table.suspect(b.node)
				if !ok {
					suspect = k.suspectNode(e, b.node)
					if tabled {
						e.table.put(b.node, suspect)
					}
				}
				if !suspect {
					alive++
					continue
				}
			}
			if len(others) == cap(others) {
				others = k.grow(others, b.index, len(pods))
			}
			others = append(others, deadPod{index: b.index})
		}
	}
	return alive, others, nil
}

// suspectNode reports whether a running pod on the named node needs the
// rules after all: the node is confirmed gone (NodeGone), or, under
// Options.ReplaceUnreachable, marked unreachable (the pod may be
// Unreachable; how long it has been so is left to classify).
func (k *check) suspectNode(e *evidence, name string) bool {
	return (k.orphans && e.gone(name)) || (k.replaceUnreachable && e.unreachable(name))
}

// classifyAll validates the pods, then classifies every one, filling in
// the report and telling the observer about the pods that are not dead (a
// dead pod is finished after its force delete). It returns the dead pods
// in list order, appended to dead.
func (k *check) classifyAll(pods []*corev1.Pod, dead []deadPod) (alive int, _ []deadPod, _ error) {
	if err := validate(pods); err != nil {
		return 0, nil, err
	}
	if k.report != nil {
		k.report.Pods = make([]PodReport, len(pods))
	}
	for i, pod := range pods {
		v := k.classify(pod)
		switch v.State {
		case Alive:
			alive++
		case Dead:
			if len(dead) == cap(dead) {
				dead = k.grow(dead, i, len(pods))
			}
			dead = append(dead, deadPod{index: i, verdict: v})
			continue // finished after its force delete
		}
		if k.report != nil || k.observer != nil {
			k.finish(i, PodReport{Pod: pod, Verdict: v})
		}
	}
	return alive, dead, nil
}

// grow returns s, full after seen of total pods, with room for more: three
// times as many as the share of pods in s so far predicts for the whole
// list, and at least twice as many as s holds, so that a list with 1% dead
// pods usually grows it once. The room comes from a slice that an earlier
// check released, if one is big enough.
func (k *check) grow(s []deadPod, seen, total int) []deadPod {
	want := max(2*cap(s), 3*len(s)*total/max(seen, 1), 16)
	if k.deadBuf == nil {
		k.deadBuf, _ = k.deadBufs.Get().(*[]deadPod)
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
	k.deadBufs.Put(k.deadBuf)
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

// classify gives pod its verdict, reading its facts once and asking for
// node evidence only for pods that are deleting or terminal, or bound to a
// node when a node can be confirmed gone (Options.Nodes and
// Options.LiveNodes) or, under Options.ReplaceUnreachable, when the rules
// call it alive: then each pod costs one lookup of its node in the
// check's table, and each node one lookup per check.
func (k *check) classify(pod *corev1.Pod) Verdict {
	v := k.classifyByRules(pod)
	if v.State == Alive && k.replaceUnreachable {
		return k.unreachable(pod, v)
	}
	return v
}

// classifyByRules is the verdict of the rules alone.
func (k *check) classifyByRules(pod *corev1.Pod) Verdict {
	f := factsOf(pod)
	if k.orphans && pod.Spec.NodeName != "" && k.getEvidence().gone(pod.Spec.NodeName) {
		f |= onGoneNode
	}
	switch {
	case f == 0 && k.factsRules:
		return aliveByDefault // the common case: a running pod, no rule applies
	case k.evidenceRules && f&(deleting|terminal|onGoneNode) != 0:
		return k.rules.classify(pod, f, k.getEvidence())
	default:
		return k.rules.classify(pod, f, nil)
	}
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

// deadPod is a dead pod's place in the list, with its verdict.
type deadPod struct {
	index   int
	verdict Verdict
}

// result is what happened to one dead pod.
type result struct {
	outcome    Outcome
	heldBack   string // why, when outcome is HeldBack
	retryAfter time.Duration
	err        error
}

// errDeletePanicked is the result that waiters on a force delete see when
// the Deleter panicked; the panic itself goes on up the stack.
var errDeletePanicked = errors.New("the force delete panicked")

// removeDead force-deletes one dead pod, unless something says it must not
// or need not be sent: a missing name or UID, a dry run, the Memory, the
// policy, the breaker, the budget, or another check already deleting it.
func (k *check) removeDead(pod *corev1.Pod, v Verdict) result {
	if pod.Name == "" || pod.UID == "" {
		err := &DeleteError{Pod: keyOf(pod), UID: pod.UID, Err: ErrUnidentifiedPod}
		k.log.Error(err, "not force-deleting pod", podKeys(pod, v)...)
		return result{outcome: DeleteFailed, err: err}
	}
	if !k.dryRun && k.memory.remembers(pod.UID, k.time()) {
		return k.deletedEarlier(pod)
	}
	if why := k.holdBack(pod, v); why != "" {
		k.log.V(1).Info("holding back force delete", append(podKeys(pod, v), "heldBack", why)...)
		return result{outcome: HeldBack, heldBack: why}
	}
	if k.dryRun {
		k.log.Info("would force-delete pod", podKeys(pod, v)...)
		return result{outcome: WouldForceDelete}
	}

	call, owner := k.memory.inflight.claim(pod.UID)
	if !owner {
		// Another check is deleting this pod; share its result.
		select {
		case <-call.done:
		case <-k.ctx.Done():
			return result{outcome: NotAttempted}
		}
		if call.res.outcome.removed() {
			return k.deletedEarlier(pod)
		}
		return call.res
	}
	// Whatever happens from here on, a panic included, the claim is
	// released and its waiters get a result.
	res := result{outcome: DeleteFailed, err: &DeleteError{Pod: keyOf(pod), UID: pod.UID, Err: errDeletePanicked}}
	defer func() {
		if res.outcome.removed() {
			k.memory.remember(pod.UID, k.clock.Now())
		}
		k.memory.inflight.finish(pod.UID, call, res)
	}()
	if k.memory.remembers(pod.UID, k.clock.Now()) {
		res = k.deletedEarlier(pod) // another check finished it just now
		return res
	}
	res = k.send(pod, v)
	return res
}

func (k *check) deletedEarlier(pod *corev1.Pod) result {
	if len(pod.Finalizers) > 0 {
		return result{outcome: BlockedByFinalizers}
	}
	return result{outcome: DeletedEarlier}
}

// send spends the budget and sends the DELETE.
func (k *check) send(pod *corev1.Pod, v Verdict) result {
	if k.budget != nil {
		// Charged when the DELETE is sent, on the clock of that moment, so
		// that the budget holds in every window however long deletes take.
		if ok, retryAfter := k.budget.take(k.clock.Now()); !ok {
			why := fmt.Sprintf("force-delete budget of %d per %v used up", k.budget.max, k.budget.window)
			k.log.V(1).Info("holding back force delete", append(podKeys(pod, v), "heldBack", why)...)
			return result{outcome: HeldBack, heldBack: why, retryAfter: retryAfter}
		}
	}
	err := k.deleter.ForceDelete(k.ctx, pod)
	var res result
	switch {
	case err == nil:
		res = result{outcome: ForceDeleted}
	case isContextError(err):
		res = result{outcome: DeleteFailed, err: &DeleteError{Pod: keyOf(pod), UID: pod.UID, Err: err}}
	case apierrors.IsNotFound(err):
		res = result{outcome: WasAlreadyGone}
	case apierrors.IsConflict(err):
		res = result{outcome: NameReused}
	default:
		res = result{outcome: DeleteFailed, err: &DeleteError{Pod: keyOf(pod), UID: pod.UID, Err: err}}
	}
	if res.err != nil {
		k.log.Error(res.err, "force delete failed", podKeys(pod, v)...)
	} else {
		k.log.Info("force-deleted pod", append(podKeys(pod, v), "outcome", res.outcome.String())...)
	}
	return res
}

// holdBack returns why the pod's annotation, its malformed status, the
// policy or the breaker keeps a dead pod, or "".
func (k *check) holdBack(pod *corev1.Pod, v Verdict) string {
	if optedOut(pod) {
		return "opted out by annotation " + AnnotationForceDelete + "=" + forceDeleteNever
	}
	if why := malformed(pod); why != "" {
		return why
	}
	if !v.Fenced {
		if why := k.policy.needsFencing(k.ctx, pod); why != "" && !fenced(pod, k.getEvidence()) {
			return "needs fencing evidence (node gone, or not Ready with the out-of-service taint): " + why
		}
	}
	if k.breaker.Nodes != nil {
		if k.disruption == nil {
			k.disruption = k.breaker.read(k.ctx)
		}
		if why := k.breaker.tripped(k.disruption, pod.Spec.NodeName); why != "" {
			return "breaker open: " + why
		}
	}
	return ""
}

// getEvidence returns the check's evidence, made on first use. A check
// takes it from the Checker's pool, with the tables of an earlier check,
// emptied, so that looking up the same nodes again allocates nothing.
func (k *check) getEvidence() *evidence {
	if k.evidence == nil {
		e, _ := k.evidences.Get().(*evidence)
		if e == nil {
			e = new(evidence)
		}
		seen, reasons, table := e.seen, e.reasons, e.table
		*e = evidence{ctx: k.ctx, nodes: k.nodes, live: k.liveNodes, clock: k.clock, now: k.now, haveNow: k.haveNow, seen: seen, reasons: reasons, table: table, ownSightings: k.firstSightings()}
		e.sightings = &e.ownSightings
		k.evidence = e
	}
	return k.evidence
}

// releaseEvidence gives the check's evidence back to the Checker's pool,
// emptied, once no rule of the check can read it any more.
func (k *check) releaseEvidence() {
	e := k.evidence
	if e == nil {
		return
	}
	k.evidence = nil
	clear(e.seen)
	clear(e.reasons)
	e.table.reset()
	seen, reasons, table := e.seen, e.reasons, e.table
	*e = evidence{seen: seen, reasons: reasons, table: table}
	k.evidences.Put(e)
}

// firstSightings returns the first-seen records that this check writes and
// reads. A dry run writes only a record of its own, which real checks never
// read, and reads the real checks' record without writing it.
func (k *check) firstSightings() checkSightings {
	if k.dryRun {
		return checkSightings{record: k.memory.dryRunSightings, shared: k.memory.sightings, peek: k.classifyOnly}
	}
	return checkSightings{record: k.memory.sightings, peek: k.classifyOnly}
}

// objectRef names an object in logs the way Kubernetes' structured logging
// does: "namespace/name" as text, {"name", "namespace"} as JSON.
type objectRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

func (r objectRef) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// MarshalLog keeps logr sinks from printing the String form in JSON.
func (r objectRef) MarshalLog() any {
	type plain objectRef
	return plain(r)
}

func podKeys(pod *corev1.Pod, v Verdict) []any {
	return []any{
		"pod", objectRef{Name: pod.Name, Namespace: pod.Namespace},
		"uid", string(pod.UID),
		"node", objectRef{Name: pod.Spec.NodeName},
		"rule", v.Rule, "reason", v.Reason,
	}
}

func keyOf(pod *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}

// validate rejects a list that cannot be judged, before anything is
// deleted: a nil pod is a broken source (row D6).
func validate(pods []*corev1.Pod) error {
	for i, pod := range pods {
		if pod == nil {
			return nilPod(i)
		}
	}
	return nil
}

func nilPod(index int) error {
	return &ListError{Err: fmt.Errorf("the source returned a nil pod at index %d", index)}
}

// stopped wraps the error of an ended context (row D7).
func stopped(err error) error {
	return fmt.Errorf("podhealth: check stopped: %w", err)
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
