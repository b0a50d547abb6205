//go:build go1.25

package sim

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// judge is the oracle: it reads the run's writes and force deletes, and
// says which promise a run broke.
//   - Never two processes write one resource at overlapping times, but for
//     a write in flight while its process was frozen: the window that
//     docs/safety.md names, counted apart.
//   - Every force delete was of a pod whose writers had all stopped (a
//     frozen one is the window again), and none of its processes that
//     still ran writes afterwards.
//   - A process whose Guard held the Lease has stopped by the Lease's
//     expiry plus the deadline, on its own clock, unless it was frozen.
//   - Once the last fault has healed, the data is written again within
//     recoveryBound, unless the workload's settings were refused (then
//     nothing may write); the Lease's holder on a node lost for good is
//     replaced within podRecovery where the operator saw it hold the
//     Lease.
func (w *world) judge(res *Result) {
	res.Violations = append(res.Violations, overlaps(w.writes, res)...)
	res.Violations = append(res.Violations, w.deadlinesMissed...)
	for _, fd := range w.forceDeletes {
		if len(fd.running) > 0 {
			res.Violations = append(res.Violations, fmt.Sprintf("at %s the force delete of %s (%s) freed writers still running %v", fd.at, fd.pod, fd.uid, fd.running))
		}
		// A process that ran without the Lease when its pod was freed
		// must never write: the proof said the pod would not.
		for _, wr := range w.writes {
			if wr.start >= fd.at && slices.Contains(fd.idle, wr.proc) {
				res.Violations = append(res.Violations, fmt.Sprintf("at %s %s wrote, though its pod %s (%s) was force deleted at %s as stopped", wr.start, wr.proc.name, fd.pod, fd.uid, fd.at))
				break
			}
		}
	}
	res.Recovered = -1
	for _, wr := range w.writes {
		if wr.resource == "data" && wr.start >= res.Healed {
			res.Recovered = wr.start - res.Healed
			break
		}
	}
	switch {
	case w.workloadMargin != 0:
		// The workload's settings are refused: it must not write, and
		// an overlap says it did.
	case res.Recovered < 0 || res.Recovered > w.recoveryBound():
		res.Violations = append(res.Violations, fmt.Sprintf("no write of the data within %s of the last heal at %s", w.recoveryBound(), res.Healed))
	}
	for _, l := range w.lost {
		if l.holder == nil || (w.annotated && len(w.annotations) == 0) || w.erasedAfter(l.at) || !w.sawHold(l) {
			continue
		}
		bound := w.podRecovery() + w.afresh(l.at) + w.restarted(l.at)
		if at, ok := w.replaced[string(l.holder.UID)]; !ok || at > l.at+bound {
			res.Violations = append(res.Violations, fmt.Sprintf("%s (%s), the Lease's holder on %s, lost for good at %s, not replaced within %s", l.holder.Name, l.holder.UID, l.name, l.at, bound))
		}
	}
}

// afresh is how much later than podRecovery a pod lost at at may be
// replaced because the Lease changed hands more than once after it: the
// fencer's takeover waits from its first sighting of the acquisition it
// reads now (docs/safety.md), so each acquisition after the first starts
// the wait again, and an operator that checks only at RetryAfter may see
// it up to one wait late: two waits for each. It counts at most
// maxAfresh of them: a Lease that keeps changing hands after a loss is a
// finding of its own, and a run must end.
func (w *world) afresh(at time.Duration) time.Duration {
	n := 0
	for _, a := range w.acquisitions {
		if a >= at {
			n++
		}
	}
	return time.Duration(min(max(n-1, 0), maxAfresh)) * 2 * w.wait()
}

// restarted is how much later than podRecovery a pod lost at at may be
// replaced because the operator restarted after the loss: its fresh
// Memory holds none of the sightings its wait had counted, and waits the
// whole wait again from its own first check (docs/safety.md), two waits
// if the Lease changes hands meanwhile. The latest restart counts.
func (w *world) restarted(at time.Duration) time.Duration {
	var last time.Duration
	for _, s := range w.operatorStarts {
		if s > at {
			last = max(last, s)
		}
	}
	if last == 0 {
		return 0
	}
	fromRestart := last - at + 2*w.wait() + time.Minute + 2*w.farthest
	return max(0, fromRestart-w.podRecovery())
}

// maxAfresh is how many acquisitions after the first afresh counts.
const maxAfresh = 3

// leaseRead is an answer to the operator's read of the Lease: when it
// arrived, and the holder it named.
type leaseRead struct {
	at     time.Duration
	holder string
}

// sawHold reports whether the operator that decides on the pod lost at
// l.at holds the evidence that the pod held the Lease, which a takeover
// needs to prove it stopped (docs/safety.md): with a Lease watch, unless
// it was started after a takeover that followed the loss; without one,
// an answer to its fencer's own read of the Lease that named the pod
// after the loss, with no restart of the operator since (its Memory holds
// the sighting until the check at RetryAfter, however long the wait).
func (w *world) sawHold(l lostNode) bool {
	if !w.noLeaseWatch {
		return !w.restartedAfterTakeover(l.at)
	}
	for _, r := range w.leaseReads {
		if r.holder == l.holder.Name && r.at >= l.at && !slices.ContainsFunc(w.operatorStarts, func(s time.Duration) bool { return s >= r.at }) {
			return true
		}
	}
	return false
}

// erasedAfter reports whether an outside edit left the Lease with no
// holder after at: the record that would have proven a pod lost at at
// stopped is gone, and the fencer rightly proves nothing.
func (w *world) erasedAfter(at time.Duration) bool {
	for _, e := range w.evidenceErased {
		if e >= at {
			return true
		}
	}
	return false
}

// restartedAfterTakeover reports whether an operator started after a
// takeover of the Lease that followed at: its new watch never saw the pod
// lost at at hold the Lease, and a takeover proves only that the holder
// it replaced stopped (docs/safety.md), so the fencer rightly proves
// nothing for that pod.
func (w *world) restartedAfterTakeover(at time.Duration) bool {
	for _, c := range w.holderChanges {
		for _, r := range w.operatorStarts {
			if c >= at && r >= c {
				return true
			}
		}
	}
	return false
}

// renewed is told of a successful write of the Lease by p, sent at
// sent: its Guard holds the Lease from then, and the protocol says p has
// stopped by the Lease's expiry plus the deadline on p's clock, unless it
// renews again. A process frozen meanwhile is the window, not a finding.
func (w *world) renewed(p *process, sent time.Duration) {
	p.renewedAt = sent
	deadline := sent + scale(w.protocol.Duration+w.protocol.Deadline, p.rate) + time.Millisecond
	w.at(deadline, func() {
		if p.renewedAt != sent || p.dead || p.frozen || p.frozenAt > sent {
			return
		}
		w.deadlinesMissed = append(w.deadlinesMissed, fmt.Sprintf("%s held the Lease from a write sent at %s and still ran at %s, past the Lease's expiry plus the deadline on its clock", p.name, sent, w.now))
		w.logf("oracle: %s outlived its deadline", p.name)
	})
}

// overlaps finds the writes of two processes to one resource at
// overlapping times.
func overlaps(writes []*write, res *Result) []string {
	byResource := map[string][]*write{}
	for _, wr := range writes {
		byResource[wr.resource] = append(byResource[wr.resource], wr)
	}
	var found []string
	for _, resource := range sortedKeys(byResource) {
		list := byResource[resource]
		sort.SliceStable(list, func(i, j int) bool { return list[i].start < list[j].start })
		// A sweep: the writes still open at each start.
		var open []*write
		for _, wr := range list {
			kept := open[:0]
			for _, o := range open {
				if endOf(o) > wr.start {
					kept = append(kept, o)
				}
			}
			open = kept
			for _, o := range open {
				if o.proc == wr.proc {
					continue
				}
				overlap := min(endOf(o), endOf(wr)) - wr.start
				if o.frozen || wr.frozen {
					res.Window++
					res.WindowLongest = max(res.WindowLongest, overlap)
					continue
				}
				found = append(found, fmt.Sprintf("%s written by %s from %s and by %s from %s (overlap %s)", resource, o.proc.name, o.start, wr.proc.name, wr.start, overlap))
			}
			open = append(open, wr)
		}
	}
	return found
}

// endOf is when a write ended; one still in flight at the run's end has
// not.
func endOf(wr *write) time.Duration {
	if wr.end < 0 {
		return 1<<63 - 1
	}
	return wr.end
}
