//go:build go1.25

package sim

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// faultKind is a kind of fault that a run injects.
type faultKind int

const (
	partition faultKind = iota
	freezeNode
	freezeProcess
	powerOff
	kubeletCrash
	oomKill
	blockLogs
	clearHolder
	deleteLease
	takeLease
	restartOperator
	// nodeLost powers a node off for good; its Node stays, NotReady.
	nodeLost
	faultKinds
)

func (k faultKind) String() string {
	return [...]string{"partition", "freeze-node", "freeze-process", "power-off", "kubelet-crash", "oom-kill",
		"block-logs", "clear-holder", "delete-lease", "take-lease", "restart-operator", "node-lost"}[k]
}

// fault is one fault of a run: its kind, when it starts, and how long it
// lasts (zero for one that is over at once).
type fault struct {
	kind faultKind
	at   time.Duration
	dur  time.Duration
}

func (f fault) String() string {
	return fmt.Sprintf("%s at %s for %s", f.kind, f.at, f.dur)
}

// drawFaults draws a run's faults: one to four, starting between the
// first and the eleventh minute, each lasting up to seven minutes; or, in
// a quarter of the runs, a cascade: the faults of one incident, each
// starting within 20 s of the one before and lasting up to 30 s (a node
// in trouble: its partition, then its kubelet restarting, then a process
// stalling). Drawn apart, faults seldom meet within one deadline. In a
// quarter of the runs, two to six short kubelet restarts come on top.
func (w *world) drawFaults() []fault {
	n := 1 + w.faults.IntN(4)
	var faults []fault
	lostOne := false
	for i := range n {
		f := fault{kind: faultKind(w.faults.IntN(int(faultKinds))), at: time.Minute + time.Duration(w.faults.Int64N(int64(10*time.Minute)))}
		if w.cascade && i > 0 {
			f.at = faults[i-1].at + time.Duration(w.faults.Int64N(int64(20*time.Second)))
		}
		if f.kind == nodeLost && lostOne {
			// One node lost for good per run: with the candidates'
			// anti-affinity, it takes at most one of them, and the other
			// takes over.
			f.kind = powerOff
		}
		lostOne = lostOne || f.kind == nodeLost
		switch f.kind {
		case partition, freezeNode, freezeProcess, powerOff, kubeletCrash:
			longest := 7 * time.Minute
			if w.cascade {
				longest = 30 * time.Second
			}
			f.dur = time.Second + time.Duration(w.faults.Int64N(int64(longest)))
		}
		faults = append(faults, f)
	}
	if w.routineRestarts {
		// Kubelets restart in routine work (an upgrade, a change of
		// their configuration) for a few seconds, beside whatever else
		// goes wrong.
		for range 2 + w.faults.IntN(5) {
			faults = append(faults, fault{kind: kubeletCrash, at: time.Minute + time.Duration(w.faults.Int64N(int64(10*time.Minute))),
				dur: time.Second + time.Duration(w.faults.Int64N(int64(4*time.Second)))})
		}
	}
	return faults
}

// targetNode is the node a fault hits: the Lease holder's, most often.
func (w *world) targetNode() *node {
	if w.rng.IntN(10) < 7 {
		if run := w.holderRun(); run != nil {
			return run.node
		}
	}
	return w.nodes[w.rng.IntN(len(w.nodes))]
}

// holderRun is the pod that the Lease names, or a candidate.
func (w *world) holderRun() *podRun {
	ordinal := w.rng.IntN(replicaOrdinal)
	if l, ok := w.store.leases[key(namespace, primaryLease)]; ok && l.Spec.HolderIdentity != nil {
		fmt.Sscanf(*l.Spec.HolderIdentity, setName+"-%d", &ordinal) //nolint:errcheck // another holder keeps the draw
	}
	return w.runOf(ordinal)
}

// runOf is the pod of ordinal that a node runs, the newest first.
func (w *world) runOf(ordinal int) *podRun {
	var found *podRun
	for _, n := range w.nodes {
		for _, uid := range sortedKeys(n.known) {
			if run := n.known[uid]; run.ordinal == ordinal && !run.deleting {
				found = run
			}
		}
	}
	return found
}

// inject starts f, and schedules its end.
func (w *world) inject(f fault) {
	switch f.kind {
	case partition:
		n := w.targetNode()
		n.partitioned = true
		w.logf("fault: %s partitioned for %s", n.name, f.dur)
		w.after(f.dur, func() { n.partitioned = false; w.logf("heal: %s reconnected", n.name) })
	case freezeNode:
		n := w.targetNode()
		w.logf("fault: %s frozen for %s", n.name, f.dur)
		n.frozen = true
		for _, p := range w.procsOn(n) {
			w.freeze(p)
		}
		w.after(f.dur, func() {
			n.frozen = false
			w.logf("heal: %s thawed", n.name)
			for _, p := range w.procsOn(n) {
				p.thaw()
			}
		})
	case freezeProcess:
		run := w.holderRun()
		if run == nil {
			return
		}
		c := run.containers[w.rng.IntN(len(run.containers))]
		if c.proc == nil || c.proc.dead {
			return
		}
		p := c.proc
		w.logf("fault: %s frozen for %s", p.name, f.dur)
		w.freeze(p)
		w.after(f.dur, func() {
			if !run.node.frozen {
				w.logf("heal: %s thawed", p.name)
				p.thaw()
			}
		})
	case powerOff, nodeLost:
		n := w.targetNode()
		if f.kind == nodeLost {
			n.lostForGood = true
			w.logf("fault: %s lost for good", n.name)
			w.lost = append(w.lost, lostNode{name: n.name, at: w.now, holder: w.holderOn(n)})
		} else {
			w.logf("fault: %s powered off for %s", n.name, f.dur)
		}
		n.powered = false
		for _, p := range w.procsOn(n) {
			w.kill(p, "its node lost power")
		}
		n.known = map[string]*podRun{}
		if f.kind == powerOff {
			w.after(f.dur, func() {
				if !n.lostForGood {
					n.powered = true
					w.logf("heal: %s powered on", n.name)
				}
			})
		}
	case kubeletCrash:
		n := w.targetNode()
		w.logf("fault: the kubelet of %s down for %s", n.name, f.dur)
		n.kubeletUp = false
		w.after(f.dur, func() {
			n.kubeletUp = true
			w.logf("heal: the kubelet of %s back", n.name)
			// What its probes learned was in its memory.
			for _, run := range n.known {
				for _, c := range run.containers {
					c.startedUp = false
				}
			}
		})
	case oomKill:
		run := w.holderRun()
		if run == nil {
			return
		}
		c := run.containers[w.rng.IntN(len(run.containers))]
		if c.proc != nil && !c.proc.frozen {
			w.kill(c.proc, "OOM-killed")
		}
	case blockLogs:
		w.logf("fault: log sinks block")
		w.logsBlock.Store(true)
	case clearHolder, deleteLease, takeLease:
		w.editLease(f.kind)
	case restartOperator:
		w.logf("fault: the operator restarts")
		w.kill(w.operator, "restarted")
		w.after(5*time.Second, w.startOperator)
	}
}

// lostNode is a node lost for good, and the pod on it that the Lease
// named then, if any: where the operator saw it hold the Lease (see
// sawHold), the fencer proves it stopped, by its unrenewed record or the
// takeover it saw, and it must be replaced within podRecovery. A
// candidate that never held the Lease, and the replica, wait for node
// evidence, which a node that stays NotReady never gives
// (docs/safety.md).
type lostNode struct {
	name   string
	at     time.Duration
	holder *corev1.Pod
}

// holderOn is the pod bound to n that the Lease names, if any.
func (w *world) holderOn(n *node) *corev1.Pod {
	l, ok := w.store.leases[key(namespace, primaryLease)]
	if !ok || l.Spec.HolderIdentity == nil {
		return nil
	}
	pod, ok := w.store.pods[key(namespace, *l.Spec.HolderIdentity)]
	if !ok || pod.Spec.NodeName != n.name {
		return nil
	}
	return pod.DeepCopy()
}

// freeze freezes p: its writes in flight are now in the window.
func (w *world) freeze(p *process) {
	p.freeze()
	for _, wr := range w.open[p] {
		wr.frozen = true
	}
}

// procsOn are the processes a node runs now, in order.
func (w *world) procsOn(n *node) []*process {
	var procs []*process
	for _, p := range w.procs {
		if w.nodeOf[p] == n && !p.dead {
			procs = append(procs, p)
		}
	}
	return procs
}

// editLease is an outside edit of the primary Lease, as an admin's.
func (w *world) editLease(kind faultKind) {
	l, err := w.store.getLease(namespace, primaryLease)
	if err != nil {
		w.logf("fault: %s: no Lease", kind)
		return
	}
	switch kind {
	case clearHolder:
		l.Spec.HolderIdentity = nil
		_, err = w.store.updateLease(l)
		w.evidenceErased = append(w.evidenceErased, w.now)
	case deleteLease:
		err = w.store.deleteLease(namespace, primaryLease)
		w.evidenceErased = append(w.evidenceErased, w.now)
	case takeLease:
		l.Spec.HolderIdentity = ptr.To("intruder")
		_, err = w.store.updateLease(l)
	}
	w.logf("fault: %s (%v)", kind, err)
}
