//go:build go1.25

package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/selffence"
)

// Mutations reintroduce defects of earlier rounds, one at a time, for the
// tests that show the oracle finds them. The zero value is today's code.
type Mutations struct {
	// ProtocolForReplica states the Lease protocol for the replica too:
	// a takeover of the Lease then frees a replica that never held it.
	ProtocolForReplica bool
	// NoLivenessProbe runs a workload that cannot ask without the
	// liveness probe on the sidecar that docs/safety.md prescribes: a
	// sidecar that dies or freezes then stops nothing until it restarts.
	NoLivenessProbe bool
	// StartupProbe probes a workload that cannot ask as docs/safety.md
	// prescribed before: a startup probe of the sidecar's /may-write holds
	// its liveness probe, also of /may-write, until it passes; the kubelet
	// keeps that success in memory only, and after a restart of its own
	// holds the liveness probe again until the startup probe passes,
	// which behind a sidecar that no longer lets the pod write it never
	// does.
	StartupProbe bool
}

// Options configure a run. The zero value is a run inside the promises.
type Options struct {
	// Mutations reintroduce a defect.
	Mutations Mutations
	// Outside, when not empty, takes the run outside the documented
	// promises: "fast-clock" (a process's clock rate beyond the bound
	// the margin covers) or "ignores-guard" (the workload writes without
	// asking). Its violations are the oracle's to catch.
	Outside string
	// Faults, when not nil, replaces the faults drawn from the seed.
	Faults []Fault
}

// Fault is a fault that a test chooses: its kind's name (as in the
// history), when it starts and how long it lasts.
type Fault struct {
	Kind      string
	At, Lasts time.Duration
}

// Result is what a run did, and the oracle's verdict.
type Result struct {
	Seed uint64
	// History is the run's history, one event per line: the same seed
	// writes the same history.
	History string
	// Mode is how the primary fenced itself: "guard-writer", "asker"
	// (behind the sidecar) or "blind" (behind the sidecar).
	Mode string
	// Faults are the faults injected.
	Faults []string
	// Outside is Options.Outside.
	Outside string
	// Violations are the oracle's findings, empty when the run kept
	// every promise.
	Violations []string
	// Window counts the overlaps of writes in flight across a freeze,
	// and the longest.
	Window        int
	WindowLongest time.Duration
	// Recovered is how long after the last fault healed the data was
	// written again; Healed is when that was.
	Recovered, Healed time.Duration
	// Simulated is the run's simulated time; Steps its events.
	Simulated time.Duration
	Steps     int
}

// recoveryBound is how soon after the last fault heals the data must be
// written again: a holder that lost the Lease is stopped by the Lease's
// expiry plus the deadline (within one wait); its container comes back
// after up to two of the kubelet's longest restart backoffs (the
// sidecar's, then its workload's, which the sidecar's start stopped); its
// new Guard waits once more; and a minute to notice and start.
func (w *world) recoveryBound() time.Duration {
	return 2*restartBackoffMax + 2*w.wait() + time.Minute
}

// wait is the protocol's wait: the Lease's duration, the deadline and
// the margin.
func (w *world) wait() time.Duration {
	return w.protocol.Duration + w.protocol.Deadline + w.protocol.Margin
}

// podRecovery is how soon after a node is lost for good the Lease's
// holder on it is replaced: the node-lifecycle controller's grace and the
// toleration, the fencer's wait (from the eviction, at the latest), a
// check at RetryAfter, a minute to notice and create, and the clocks'
// offsets.
func (w *world) podRecovery() time.Duration {
	// A holder's renewTime ahead of the operator's clock lengthens the
	// fencer's wait by as much (docs/safety.md): two clocks differ by up
	// to twice the farthest offset.
	return nodeMonitorGrace + tolerationSeconds*time.Second + 2*w.wait() + time.Minute + 2*w.farthest
}

// fleet is the number of nodes.
const fleet = 4

// run adds what a run holds beyond the world.
type runState struct {
	mode         containerKind
	protocol     selffence.Options
	askEvery     time.Duration
	writeTakes   time.Duration
	watchLag     time.Duration
	ignoresGuard bool
	fastClock    bool
	// outside says why a run left the promises, when the faults drawn
	// took it there.
	outside   string
	mutations Mutations

	store    *store
	api      apiFaults
	nodes    []*node
	nodeOf   map[*process]*node
	procs    []*process
	procSeq  int
	operator *process

	writes       []*write
	open         map[*process][]*write
	forceDeletes []forceDelete
	// deadlinesMissed are the oracle's findings of holders that outlived
	// their deadline.
	deadlinesMissed []string
	// lost are the nodes lost for good.
	lost []lostNode
	// evidenceErased are the times of outside edits that left the Lease
	// with no holder: a pod lost before one is not proven stopped by it.
	evidenceErased []time.Duration
	// holderChanges are the times the Lease's holder changed; operatorStarts
	// those an operator process started.
	holderChanges, operatorStarts []time.Duration
	// acquisitions are the times the Lease was acquired: a holder, an
	// acquireTime or leaseTransitions new (a Guard's claim, or an outside
	// edit naming another holder).
	acquisitions []time.Duration
	// farthest is the largest clock offset drawn, either way.
	farthest time.Duration
	// replaced is when a pod of a lost node got its successor, by UID.
	replaced map[string]time.Duration
	// onlyAtRetryAfter: the operator checks again only at RetryAfter
	// (and after a long resync), not every reconcileEvery; noLeaseWatch:
	// its Checkers has no Lease watch, so waits run from its checks.
	onlyAtRetryAfter, noLeaseWatch bool
	// annotated: the candidates carry annotations, as Stamp wrote them
	// (none when it refused), and the operator reads them rather than
	// stating the protocol in process.
	annotated   bool
	annotations map[string]string
	// workloadMargin, when not zero, is the margin the workload's Guard
	// is given instead of the protocol's (one past fencing.MaxDuration).
	workloadMargin time.Duration
	// cascade: the run's faults are one incident's (drawFaults).
	cascade bool
	// routineRestarts: short kubelet restarts come on top of the faults
	// (drawFaults).
	routineRestarts bool
	// leaseReads are the answers to the operator's reads of the Lease
	// that named a holder: what its fencer saw, without a watch.
	leaseReads []leaseRead

	logsBlock   atomic.Bool
	unblockLogs chan struct{}
}

// Run runs the seed's simulation, and judges it. It must be called in a
// testing/synctest bubble, which it ends with no goroutine of its own.
func Run(seed uint64, opts Options) Result {
	w := newWorld(seed)
	w.nodeOf = map[*process]*node{}
	w.open = map[*process][]*write{}
	w.replaced = map[string]time.Duration{}
	w.unblockLogs = make(chan struct{})
	w.store = newStore(w)
	w.mutations = opts.Mutations
	w.ignoresGuard = opts.Outside == "ignores-guard"
	w.fastClock = opts.Outside == "fast-clock"
	w.drawSettings()

	for i := range fleet {
		n := &node{name: fmt.Sprintf("node-%d", i), powered: true, kubeletUp: true, known: map[string]*podRun{}}
		w.nodes = append(w.nodes, n)
		now := metav1.NewTime(origin)
		w.store.putNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, UID: w.store.newUID("node")},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}}})
		w.after(time.Duration(w.rng.Int64N(int64(heartbeatEvery))), func() { w.heartbeat(n) })
		w.after(time.Duration(w.rng.Int64N(int64(kubeletSyncEvery))), func() { w.kubeletSync(n) })
	}
	w.after(nodeMonitorPeriod, w.nodeLifecycle)
	w.after(0, w.statefulSet)
	w.after(0, w.startOperator)

	faults := w.drawFaults()
	if opts.Faults != nil {
		faults = nil
		for _, f := range opts.Faults {
			kind := faultKinds
			for k := range faultKinds {
				if k.String() == f.Kind {
					kind = k
				}
			}
			if kind == faultKinds {
				panic(fmt.Sprintf("sim: no fault %q", f.Kind))
			}
			faults = append(faults, fault{kind: kind, at: f.At, dur: f.Lasts})
		}
	}
	var healed time.Duration
	res := Result{Seed: seed, Mode: w.mode.String(), Outside: opts.Outside}
	for _, f := range faults {
		res.Faults = append(res.Faults, f.String())
		w.at(f.at, func() { w.inject(f) })
		healed = max(healed, f.at+f.dur)
	}
	// The API server's faults heal with the last fault.
	w.at(healed, func() {
		w.api = apiFaults{maxDelay: 5 * time.Millisecond}
		w.logf("heal: the API server answers promptly")
	})
	// The run lasts until every bound the oracle applies has passed; the
	// clocks' offsets and the Lease's acquisitions, which lengthen the
	// pod's bound, happen as the run goes, so the end moves with them.
	end := healed + w.recoveryBound() + time.Minute
	podEnd := func(f fault) time.Duration {
		return f.at + w.podRecovery() + w.afresh(f.at) + w.restarted(f.at) + time.Minute
	}
	for {
		for _, f := range faults {
			if f.kind == nodeLost {
				end = max(end, podEnd(f))
			}
		}
		w.run(end)
		if w.queue.Len() == 0 || !slices.ContainsFunc(faults, func(f fault) bool { return f.kind == nodeLost && podEnd(f) > end }) {
			break
		}
	}
	if res.Outside == "" {
		res.Outside = w.outside
	}
	res.History = w.hist.String()
	res.Healed, res.Simulated, res.Steps = healed, end, w.steps
	w.judge(&res)

	close(w.unblockLogs)
	w.teardown(w.procs)
	return res
}

// drawSettings draws the run's protocol settings, workload, and API
// faults from the seed.
func (w *world) drawSettings() {
	w.mode = []containerKind{guardWriter, asker, blind}[w.settings.IntN(3)]
	w.protocol = selffence.Options{
		Duration:  []time.Duration{5 * time.Second, 15 * time.Second}[w.settings.IntN(2)],
		Deadline:  []time.Duration{3 * time.Second, 10 * time.Second}[w.settings.IntN(2)],
		StopTakes: time.Second,
		Margin:    2 * time.Second,
	}
	w.askEvery, w.writeTakes = time.Second, 200*time.Millisecond
	w.watchLag = []time.Duration{0, 500 * time.Millisecond, 5 * time.Second}[w.settings.IntN(3)]
	if w.settings.IntN(2) == 0 {
		w.api = apiFaults{
			fail:       w.settings.Float64() * 0.03,
			conflict:   w.settings.Float64() * 0.01,
			lostBefore: w.settings.Float64() * 0.01,
			lostAfter:  w.settings.Float64() * 0.01,
			maxDelay:   []time.Duration{5 * time.Millisecond, 200 * time.Millisecond, 2 * time.Second}[w.settings.IntN(3)],
		}
	} else {
		w.api = apiFaults{maxDelay: 5 * time.Millisecond}
	}
	w.onlyAtRetryAfter = w.settings.IntN(2) == 0
	w.noLeaseWatch = w.settings.IntN(2) == 0
	if w.settings.IntN(5) == 0 {
		// A deadline longer than the Memory's TTL (10 minutes): the
		// fencer's wait then outlasts what one check remembers.
		w.protocol.Deadline = 11 * time.Minute
	}
	w.logf("settings: mode %s, duration %s, deadline %s, watch lag up to %s, operator checks only at RetryAfter %t, without a Lease watch %t, api faults %+v",
		w.mode, w.protocol.Duration, w.protocol.Deadline, w.watchLag, w.onlyAtRetryAfter, w.noLeaseWatch, w.api)
	// How the protocol is stated: by the operator in process, or by the
	// annotations that selffence.Options.Stamp writes on the candidates'
	// template, which the fencer reads.
	w.annotated = w.settings.IntN(2) == 0
	if w.annotated {
		stamp := w.protocol
		stamp.Lease = primaryLease
		if w.settings.IntN(10) == 0 {
			// Stamped with the Options of one pod's Guard, Identity and
			// all: what a template cannot state (each pod holds the Lease
			// under its own name), which Stamp refuses.
			stamp.Identity = podName(0)
		}
		var template corev1.PodTemplateSpec
		if err := stamp.Stamp(&template); err != nil {
			w.logf("settings: the template's annotations are refused: %v", err)
		}
		w.annotations = template.Annotations
		w.logf("settings: the candidates' template carries %v", w.annotations)
	}
	if w.settings.IntN(40) == 0 {
		// A margin that no Lease can state, as a flag could set it: a
		// wait summed from it would wrap around to a short one, so the
		// workload's Guard refuses it, and nothing is written.
		w.workloadMargin = math.MaxInt64 - time.Duration(w.settings.Int64N(int64(time.Hour)))
		w.logf("settings: the workload's margin %s", w.workloadMargin)
	}
	// Drawn last, so that the runs that draw neither a cascade nor
	// routine restarts draw what they drew before there were either.
	w.cascade = w.settings.IntN(4) == 0
	if w.cascade {
		w.logf("settings: the faults are one incident's cascade")
	}
	w.routineRestarts = w.settings.IntN(4) == 0
	if w.routineRestarts {
		w.logf("settings: kubelets restart in routine work too")
	}
}

// rateBound is the documented bound on the difference of two clocks'
// rates, in parts per million: the margin over the Lease's duration and
// deadline, which the margin covers over one wait.
func (w *world) rateBound() uint64 {
	return uint64(1e6 * w.protocol.Margin / (w.protocol.Duration + w.protocol.Deadline))
}

// drawRate draws a process's clock rate: within half the bound of the
// true rate, so that any two differ by less than the bound; with the
// fast-clock option, at half or double the true rate.
func (w *world) drawRate() uint64 {
	half := w.rateBound() / 2
	r := 1e6 - half + uint64(w.rng.Int64N(int64(2*half)))
	if w.fastClock {
		// Half speed or double: two clocks four times apart.
		r = []uint64{500_000, 2_000_000}[w.rng.IntN(2)]
	}
	return r
}

// drawOffset draws a process's clock offset: within a second either way,
// as NTP keeps it, or, one time in ten, up to an hour (a clock far off).
func (w *world) drawOffset() time.Duration {
	span := time.Second
	if w.rng.IntN(10) == 0 {
		span = time.Hour
	}
	d := time.Duration(w.rng.Int64N(int64(2*span))) - span
	w.farthest = max(w.farthest, d, -d)
	return d
}

// Summary is one line about a result.
func (r Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: mode %s, faults %v", r.Seed, r.Mode, r.Faults)
	if r.Outside != "" {
		fmt.Fprintf(&b, ", outside the promises (%s)", r.Outside)
	}
	if len(r.Violations) > 0 {
		fmt.Fprintf(&b, ", violations %q", r.Violations)
	}
	return b.String()
}
