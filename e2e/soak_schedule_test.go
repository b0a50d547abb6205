package e2e

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"
)

// soakFaultKind is a kind of fault the soak injects.
type soakFaultKind string

const (
	// A node's power fails: its containers stop at once and its heartbeat
	// stops. A careful admin may fence it (out-of-service taint, or
	// deleting the node for a machine that is replaced) once it is off.
	faultPowerOff soakFaultKind = "power off"
	// A node is cut off from the API server: its heartbeat stops, its
	// containers keep running, and on healing its kubelet catches up.
	faultPartition soakFaultKind = "network partition"
	// A node's kubelet stops: from the API server's side, a partition.
	faultKubeletStop soakFaultKind = "kubelet stop"
	// kube-apiserver stops and starts again.
	faultAPIServerRestart soakFaultKind = "API server restart"
	// An operator process (or the StatefulSet checker) restarts, losing
	// its memory and caches.
	faultOperatorRestart soakFaultKind = "operator restart"
	// An operator's informers lag: it restarts behind a proxy that delays
	// every watch event, and is restarted without it when the fault ends.
	faultInformerLag soakFaultKind = "informer lag"
)

// soakNodeFaults are the node faults, in the order the scheduler draws
// them from.
var soakNodeFaults = []soakFaultKind{faultPowerOff, faultPartition, faultKubeletStop}

// soakFence is how an admin fences a powered-off node.
type soakFence string

const (
	fenceNone     soakFence = ""
	fenceTaint    soakFence = "out-of-service taint"
	fenceDeletion soakFence = "node deleted"
)

// soakFault is one fault of a schedule. Times are offsets from the start
// of the soak.
type soakFault struct {
	Kind soakFaultKind
	// At is when the fault begins; For how long it lasts (the node comes
	// back, the lag ends). An API server or operator restart takes as long
	// as it takes; For is zero.
	At, For time.Duration
	// Node is the node of a node fault.
	Node string
	// Fence and FenceAfter: how and how long after At an admin fences a
	// powered-off node. A deleted node never comes back; Replacement is
	// the node that joins in its place when the fault ends.
	Fence       soakFence
	FenceAfter  time.Duration
	Replacement string
	// Target is the process an operator restart or an informer lag
	// hits; Lag is the watch delay of an informer lag.
	Target string
	Lag    time.Duration
	// Boot, for a restart, is how long the node boots (Ready=False, its
	// Lease renewed, no container started) before it is Ready.
	Boot time.Duration
	// CloudAfter is how long after a cloud shutdown's power-off the cloud
	// reports the instance shut down.
	CloudAfter time.Duration
}

func (f soakFault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%7.1fs %s", f.At.Seconds(), f.Kind)
	if f.Node != "" {
		fmt.Fprintf(&b, " of %s", f.Node)
	}
	if f.Target != "" {
		fmt.Fprintf(&b, " of %s", f.Target)
	}
	if f.For > 0 {
		fmt.Fprintf(&b, " for %.1fs", f.For.Seconds())
	}
	if f.Lag > 0 {
		fmt.Fprintf(&b, " (watch delay %.1fs)", f.Lag.Seconds())
	}
	if f.Fence != fenceNone {
		fmt.Fprintf(&b, ", fenced (%s) after %.1fs", f.Fence, f.FenceAfter.Seconds())
	}
	if f.Kind == faultCloudShutdown || f.Kind == faultShutdownRestart {
		fmt.Fprintf(&b, ", reported shut down after %.1fs", f.CloudAfter.Seconds())
	}
	if f.Boot > 0 {
		fmt.Fprintf(&b, ", booting for %.1fs", f.Boot.Seconds())
	}
	if f.Replacement != "" {
		fmt.Fprintf(&b, ", replaced by %s", f.Replacement)
	}
	return b.String()
}

// End is when the fault's effect on the workloads may end: the node comes
// back, or it is fenced, whichever is first; for the other faults, when
// they begin plus their duration.
func (f soakFault) End() time.Duration {
	if f.Fence != fenceNone && f.FenceAfter < f.For {
		return f.At + f.FenceAfter
	}
	return f.At + f.For
}

// soakScheduleOptions shape a schedule.
type soakScheduleOptions struct {
	// NodeFaults is the number of node faults, one node at a time;
	// ControlFaults the number of API server restarts, operator restarts
	// and informer lags, placed at random among them.
	NodeFaults, ControlFaults int
	// Nodes are the node names at the start.
	Nodes []string
	// Targets are the processes an operator restart or lag may hit.
	Targets []string
	// Cloud adds the cloud's fault kinds to the node faults, and fences
	// no power off by deleting its node (a volume of a deleted node waits
	// out the attach-detach controller's 6 minutes, far beyond the
	// recovery bound).
	Cloud bool
}

// soakSchedule draws the schedule of seed: the same seed and options give
// the same schedule. Node faults come one after the other, each on a node
// drawn from those up at its start, sometimes right after the previous one
// ends, so that a fault can begin while the workloads are still recovering
// from the last. Powered-off nodes are fenced (an out-of-service taint or,
// for a machine that is replaced, deletion) in two of three faults, once
// the taint-eviction controller has had time to evict their pods, or not
// at all before they come back; a partitioned node never is. With Cloud,
// the first node faults take each kind once, in a drawn order. The other
// faults fall anywhere in the schedule, overlapping node faults.
func soakSchedule(seed int64, opts soakScheduleOptions) []soakFault {
	rng := rand.New(rand.NewSource(seed))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int63n(int64(hi-lo)+1)).Round(100*time.Millisecond)
	}
	nodes := append([]string(nil), opts.Nodes...)
	nextNode := len(nodes)
	kinds := soakNodeFaults
	var firsts []soakFaultKind // the kinds the first faults take, in order
	if opts.Cloud {
		kinds = append(append([]soakFaultKind(nil), soakNodeFaults...), faultCloudShutdown, faultShutdownRestart)
		// Every kind at least once, given enough faults: a schedule of the
		// cloud soak must meet each of its new faults.
		firsts = append([]soakFaultKind(nil), kinds...)
		rng.Shuffle(len(firsts), func(i, j int) { firsts[i], firsts[j] = firsts[j], firsts[i] })
	}
	var faults []soakFault
	at := 5 * time.Second
	for i := 0; i < opts.NodeFaults; i++ {
		kind := kinds[rng.Intn(len(kinds))]
		if i < len(firsts) {
			kind = firsts[i]
		}
		f := soakFault{Kind: kind, At: at, Node: nodes[rng.Intn(len(nodes))]}
		switch f.Kind {
		case faultCloudShutdown:
			f.For = between(15*time.Second, 30*time.Second)
			f.CloudAfter = between(0, 3*time.Second)
		case faultShutdownRestart:
			// Back soon after the report: the node controller's grace
			// period, the cloud's next look, the shutdown taint's wait.
			f.CloudAfter = between(0, 2*time.Second)
			f.For = between(8*time.Second, 14*time.Second)
			// It boots: its kubelet renews the Lease and posts
			// Ready=False, under the cloud's taint, for this long.
			f.Boot = between(3*time.Second, 8*time.Second)
		case faultPowerOff:
			f.For = between(12*time.Second, 30*time.Second)
			switch rng.Intn(3) {
			case 0:
				f.Fence = fenceTaint
			case 1:
				f.Fence = fenceDeletion
			}
			if f.Fence != fenceNone {
				// The node controller needs NodeMonitorGracePeriod and the
				// pods their 2 s toleration before an admin would know.
				f.FenceAfter = between(9*time.Second, f.For-time.Second)
			}
			if f.Fence == fenceDeletion && opts.Cloud {
				f.Fence = fenceTaint
			}
			if f.Fence == fenceDeletion {
				nextNode++
				f.Replacement = fmt.Sprintf("node-%d", nextNode)
				for j, n := range nodes {
					if n == f.Node {
						nodes[j] = f.Replacement
					}
				}
			}
		default:
			// Some shorter than the node controller's grace period (no
			// eviction), most longer.
			f.For = between(3*time.Second, 25*time.Second)
		}
		faults = append(faults, f)
		at += f.For + between(0, 8*time.Second)
	}
	total := at
	controlKinds := []soakFaultKind{faultAPIServerRestart, faultOperatorRestart, faultInformerLag}
	for i := 0; i < opts.ControlFaults; i++ {
		f := soakFault{Kind: controlKinds[rng.Intn(len(controlKinds))], At: between(5*time.Second, total)}
		switch f.Kind {
		case faultOperatorRestart:
			f.Target = opts.Targets[rng.Intn(len(opts.Targets))]
		case faultInformerLag:
			f.Target = opts.Targets[rng.Intn(len(opts.Targets))]
			f.For = between(8*time.Second, 20*time.Second)
			f.Lag = between(2*time.Second, 5*time.Second)
		}
		faults = append(faults, f)
	}
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].At < faults[j].At })
	return faults
}
