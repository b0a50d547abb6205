package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
)

// soakHistory is everything a soak recorded, for soakCheck.
type soakHistory struct {
	// Containers is every container start and stop, and every node
	// disconnect and connect, in the order they happened.
	Containers []harness.ContainerEvent
	// Deletes is every DELETE of a pod the API server answered.
	Deletes []harness.PodDelete
	// Pods are the facts about each pod that the soak's pod watch saw.
	Pods map[types.UID]soakPod
	// Fences are the spans during which a node was fenced.
	Fences []soakFenceSpan
	// Faults are the faults as they were injected.
	Faults []soakInjected
	// Workloads are the workloads that must have a live pod after each
	// fault: see soakWorkloadOf.
	Workloads []string
	// End is when recording stopped.
	End time.Time
	// The cloud soak's: the attacher's log and the taint spans.
	Attaches []harness.AttachEvent
	Taints   []soakTaintSpan
	// Writes are the self-fencing database's writes to its volume, in
	// time order.
	Writes []volumeWrite
}

// soakPod is what the history checker needs to know of a pod.
type soakPod struct {
	Namespace, Name string
	Node            string // as last seen
	// Stateful: owned by a StatefulSet or mounting a claim, so that the
	// default policy force-deletes it only with fencing evidence.
	Stateful bool
	// Never: annotated podhealth.io/force-delete=never.
	Never bool
}

// soakFenceSpan is a span during which Node was fenced: it had the
// out-of-service taint, or had been deleted. Until is zero while it still
// is.
type soakFenceSpan struct {
	Node        string
	From, Until time.Time
}

func (s soakFenceSpan) covers(node string, t time.Time) bool {
	return s.Node == node && !t.Before(s.From) && (s.Until.IsZero() || t.Before(s.Until))
}

// soakInjected is a fault as injected: when it began and when its effect
// could end (the node came back or was fenced; a restart completed; the
// lag ended).
type soakInjected struct {
	Fault        soakFault
	Began, Ended time.Time
}

// soakViolation is a broken invariant, with the slice of the history that
// shows it.
type soakViolation struct {
	Invariant int
	What      string
	History   []string
	// Node is the node the violation is about, when it is about one
	// (invariants 6 and 7): what explains it is read for that node.
	Node string
}

func (v soakViolation) String() string {
	return fmt.Sprintf("invariant %d: %s\n    %s", v.Invariant, v.What, strings.Join(v.History, "\n    "))
}

// soakResult is what soakCheck found.
type soakResult struct {
	Violations []soakViolation
	// Recovery is, per fault kind, how long after each fault ended every
	// workload that had no live pod then had one again.
	Recovery map[soakFaultKind][]time.Duration
	// ForceDeletes counts the library's force DELETEs; ForceDeleted the
	// pods (UIDs) they were for.
	ForceDeletes, ForceDeleted int
}

// soakLibraryAgent reports whether a request came from podhealth: the
// example operators or the soak's StatefulSet checker, not the simulated
// kubelets, the controller-manager (PodGC) or the test itself.
func soakLibraryAgent(userAgent string) bool {
	for _, prefix := range []string{"podhealth-operator/", "podhealth-controllerruntime/", soakCheckerAgent, soakDatabaseAgent} {
		if strings.HasPrefix(userAgent, prefix) {
			return true
		}
	}
	return false
}

// soakIdentities are the stateful identities of a container: its pod's name
// if a StatefulSet owns it, and each claim it mounts (every claim of the
// soak is ReadWriteOnce).
func soakIdentities(e harness.ContainerEvent) []string {
	var ids []string
	if strings.HasPrefix(e.Owner, "StatefulSet/") {
		ids = append(ids, "StatefulSet pod "+e.Namespace+"/"+e.Pod)
	}
	for _, c := range e.Claims {
		ids = append(ids, "ReadWriteOnce claim "+e.Namespace+"/"+c)
	}
	return ids
}

// soakWorkloadOf is the workload a container serves: each StatefulSet pod
// is one (every identity must come back), and every other pod serves the
// workload its workloadLabel names.
func soakWorkloadOf(e harness.ContainerEvent) string {
	if strings.HasPrefix(e.Owner, "StatefulSet/") {
		return "StatefulSet pod " + e.Pod
	}
	return e.Labels[workloadLabel]
}

func soakDescribe(e harness.ContainerEvent, t0 time.Time) string {
	if e.Pod == "" {
		return fmt.Sprintf("%8.3fs node %s %s (%s)", e.At.Sub(t0).Seconds(), e.Node, e.Kind, e.Why)
	}
	return fmt.Sprintf("%8.3fs node %s %s container of %s/%s uid %s (%s)", e.At.Sub(t0).Seconds(), e.Node, e.Kind, e.Namespace, e.Pod, e.UID, e.Why)
}

// soakCheck checks the four invariants of the soak over the history:
//  1. no stateful identity has containers running on two nodes at once;
//  2. every force DELETE of the library has a UID precondition, and none is
//     for a pod the policy holds back (a stateful pod on a node that is not
//     fenced, or a pod annotated never);
//  3. no pod receives more than one force DELETE of the library;
//  4. after each fault ends, every workload that had no live pod (a running
//     container on a node that reaches the API server) has one again
//     within bound;
//  5. the self-fencing database's volume never has two writers at once.
func soakCheck(h soakHistory, bound time.Duration) soakResult {
	var t0 time.Time
	if len(h.Containers) > 0 {
		t0 = h.Containers[0].At
	}
	res := soakResult{Recovery: map[soakFaultKind][]time.Duration{}}
	res.Violations = append(res.Violations, soakCheckSingleWriter(h, t0)...)
	deletes, violations := soakCheckForceDeletes(h, t0)
	res.Violations = append(res.Violations, violations...)
	res.ForceDeletes, res.ForceDeleted = deletes.requests, deletes.pods
	recovery, violations := soakCheckRecovery(h, bound, t0)
	res.Violations = append(res.Violations, violations...)
	res.Recovery = recovery
	res.Violations = append(res.Violations, soakCheckOneWriter(h.Writes, t0)...)
	return res
}

func soakCheckSingleWriter(h soakHistory, t0 time.Time) []soakViolation {
	var out []soakViolation
	running := map[string]map[types.UID]harness.ContainerEvent{}
	for _, e := range h.Containers {
		for _, id := range soakIdentities(e) {
			switch e.Kind {
			case harness.ContainerStarted:
				for _, other := range running[id] {
					if other.Node != e.Node {
						out = append(out, soakViolation{Invariant: 1,
							What:    fmt.Sprintf("%s runs on %s and %s at once", id, other.Node, e.Node),
							History: soakSliceOf(h.Containers, t0, other.At, e.At, other.Node, e.Node)})
					}
				}
				if running[id] == nil {
					running[id] = map[types.UID]harness.ContainerEvent{}
				}
				running[id][e.UID] = e
			case harness.ContainerStopped:
				delete(running[id], e.UID)
			}
		}
	}
	return out
}

// soakSliceOf is the part of the container history from..to on the given
// nodes.
func soakSliceOf(events []harness.ContainerEvent, t0, from, to time.Time, nodes ...string) []string {
	var out []string
	for _, e := range events {
		if e.At.Before(from) || e.At.After(to) {
			continue
		}
		for _, n := range nodes {
			if e.Node == n {
				out = append(out, soakDescribe(e, t0))
				break
			}
		}
	}
	return out
}

type soakDeleteCounts struct{ requests, pods int }

func soakCheckForceDeletes(h soakHistory, t0 time.Time) (soakDeleteCounts, []soakViolation) {
	var out []soakViolation
	var counts soakDeleteCounts
	byUID := map[types.UID][]harness.PodDelete{}
	for _, d := range h.Deletes {
		if !d.Force() || !soakLibraryAgent(d.UserAgent) {
			continue
		}
		counts.requests++
		line := fmt.Sprintf("%8.3fs force DELETE of %s/%s by %q: HTTP %d, precondition uid %q", d.At.Sub(t0).Seconds(), d.Namespace, d.Name, d.UserAgent, d.Code, d.PreconditionUID)
		if d.PreconditionUID == "" {
			out = append(out, soakViolation{Invariant: 2, What: "a force DELETE without a UID precondition", History: []string{line}})
			continue
		}
		byUID[d.PreconditionUID] = append(byUID[d.PreconditionUID], d)
		pod, ok := h.Pods[d.PreconditionUID]
		switch {
		case !ok:
			out = append(out, soakViolation{Invariant: 2, What: "a force DELETE of a pod the soak never saw, which it cannot vouch for", History: []string{line}})
		case pod.Never:
			out = append(out, soakViolation{Invariant: 2, What: "a force DELETE of a pod annotated never", History: []string{line}})
		case pod.Stateful && !soakFenced(h.Fences, pod.Node, d.At):
			history := []string{line, fmt.Sprintf("pod %s/%s is stateful and on node %s, which was not fenced then", pod.Namespace, pod.Name, pod.Node)}
			for _, f := range h.Fences {
				if f.Node == pod.Node {
					history = append(history, fmt.Sprintf("node %s fenced from %.3fs until %s", f.Node, f.From.Sub(t0).Seconds(), soakUntil(f.Until, t0)))
				}
			}
			out = append(out, soakViolation{Invariant: 2, What: "a force DELETE of a stateful pod without fencing", History: history})
		}
	}
	uids := make([]types.UID, 0, len(byUID))
	for uid := range byUID {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	for _, uid := range uids {
		ds := byUID[uid]
		if len(ds) > 1 {
			var history []string
			for _, d := range ds {
				history = append(history, fmt.Sprintf("%8.3fs force DELETE of %s/%s by %q: HTTP %d", d.At.Sub(t0).Seconds(), d.Namespace, d.Name, d.UserAgent, d.Code))
			}
			out = append(out, soakViolation{Invariant: 3, What: fmt.Sprintf("pod uid %s received %d force DELETEs", uid, len(ds)), History: history})
		}
	}
	counts.pods = len(byUID)
	return counts, out
}

func soakFenced(fences []soakFenceSpan, node string, t time.Time) bool {
	for _, f := range fences {
		if f.covers(node, t) {
			return true
		}
	}
	return false
}

func soakUntil(t, t0 time.Time) string {
	if t.IsZero() {
		return "the end"
	}
	return fmt.Sprintf("%.3fs", t.Sub(t0).Seconds())
}

// soakLiveness is which workloads had a live pod from At on.
type soakLiveness struct {
	At   time.Time
	Live map[string]bool
}

// soakTimeline replays the container history into the workloads that were
// live after each event.
func soakTimeline(events []harness.ContainerEvent) []soakLiveness {
	connected := map[string]bool{}
	running := map[string]map[types.UID]harness.ContainerEvent{} // by node
	var out []soakLiveness
	for _, e := range events {
		switch e.Kind {
		case harness.NodeConnected:
			connected[e.Node] = true
		case harness.NodeDisconnected:
			connected[e.Node] = false
		case harness.ContainerStarted:
			if running[e.Node] == nil {
				running[e.Node] = map[types.UID]harness.ContainerEvent{}
			}
			running[e.Node][e.UID] = e
		case harness.ContainerStopped:
			delete(running[e.Node], e.UID)
		}
		live := map[string]bool{}
		for node, cs := range running {
			if !connected[node] {
				continue
			}
			for _, c := range cs {
				live[soakWorkloadOf(c)] = true
			}
		}
		out = append(out, soakLiveness{At: e.At, Live: live})
	}
	return out
}

// soakStable is how long a workload must stay live to count as back: a
// container that a reconnected kubelet is about to stop (its pod was
// deleted meanwhile) is live for a sync or two, and is no recovery.
const soakStable = 2 * time.Second

// soakBackAt is when workload w is back for good after end: the first
// instant at or after end from which it stays live for soakStable (or
// until the history ends), or until it is lost again while another of
// the faults is underway. That fault's own check then judges the
// workload's return, from its own end (which is after the loss): a pod
// that came back within the bound and died a second later with the next
// node that failed is the next fault's to bring back, not this one's.
// It is zero if there is none.
func soakBackAt(timeline []soakLiveness, w string, end, historyEnd time.Time, others []soakInjected) time.Time {
	underway := func(t time.Time) bool {
		for _, g := range others {
			if !g.Began.IsZero() && !g.Began.After(t) && (g.Ended.IsZero() || !g.Ended.Before(t)) {
				return true
			}
		}
		return false
	}
	i := sort.Search(len(timeline), func(i int) bool { return timeline[i].At.After(end) })
	candidate := time.Time{}
	if i > 0 && timeline[i-1].Live[w] {
		candidate = end
	}
	for ; i < len(timeline); i++ {
		l := timeline[i]
		switch {
		case !candidate.IsZero() && l.At.Sub(candidate) >= soakStable:
			return candidate
		case l.Live[w] && candidate.IsZero():
			candidate = l.At
		case !l.Live[w] && !candidate.IsZero() && underway(l.At):
			return candidate
		case !l.Live[w]:
			candidate = time.Time{}
		}
	}
	if !candidate.IsZero() && historyEnd.Sub(candidate) >= soakStable {
		return candidate
	}
	return time.Time{}
}

func soakCheckRecovery(h soakHistory, bound time.Duration, t0 time.Time) (map[soakFaultKind][]time.Duration, []soakViolation) {
	timeline := soakTimeline(h.Containers)
	recovery := map[soakFaultKind][]time.Duration{}
	var out []soakViolation
	for i, f := range h.Faults {
		others := slices.Delete(slices.Clone(h.Faults), i, i+1)
		worst := time.Duration(0)
		for _, w := range h.Workloads {
			back := soakBackAt(timeline, w, f.Ended, h.End, others)
			if back.IsZero() || back.Sub(f.Ended) > bound {
				out = append(out, soakViolation{Invariant: 4,
					What:    fmt.Sprintf("workload %s had no live pod within %v of the end of fault %s (ended at %.3fs; back at %s)", w, bound, f.Fault, f.Ended.Sub(t0).Seconds(), soakUntil(back, t0)),
					History: soakWorkloadSlice(h.Containers, t0, w, f.Began, f.Ended.Add(bound))})
				continue
			}
			if d := back.Sub(f.Ended); d > worst {
				worst = d
			}
		}
		recovery[f.Fault.Kind] = append(recovery[f.Fault.Kind], worst)
	}
	return recovery, out
}

// soakWorkloadSlice is the history of workload w's containers from..to,
// with every node event in that span.
func soakWorkloadSlice(events []harness.ContainerEvent, t0 time.Time, w string, from, to time.Time) []string {
	var out []string
	for _, e := range events {
		if e.At.Before(from) || e.At.After(to) {
			continue
		}
		if e.Pod == "" || soakWorkloadOf(e) == w {
			out = append(out, soakDescribe(e, t0))
		}
	}
	return out
}

// TestSoakCheckerFindsEachBrokenInvariant feeds the history checker small
// histories, each breaking one invariant, and a clean one that breaks none.
func TestSoakCheckerFindsEachBrokenInvariant(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	dbPod := func(kind harness.ContainerEventKind, s float64, node string, uid types.UID) harness.ContainerEvent {
		return harness.ContainerEvent{At: at(s), Kind: kind, Node: node, Namespace: ns, Pod: "db-0", UID: uid, Owner: "StatefulSet/db", Claims: []string{"data-db-0"}}
	}
	webPod := func(kind harness.ContainerEventKind, s float64, node string, uid types.UID) harness.ContainerEvent {
		return harness.ContainerEvent{At: at(s), Kind: kind, Node: node, Namespace: ns, Pod: "web-" + string(uid), UID: uid, Labels: map[string]string{workloadLabel: "web"}}
	}
	nodeEvent := func(kind harness.ContainerEventKind, s float64, node string) harness.ContainerEvent {
		return harness.ContainerEvent{At: at(s), Kind: kind, Node: node}
	}
	force := func(s float64, name string, uid types.UID, agent string) harness.PodDelete {
		return harness.PodDelete{At: at(s), UserAgent: agent, Namespace: ns, Name: name, Code: 200, GracePeriodSeconds: ptr.To[int64](0), PreconditionUID: uid}
	}
	const operator = "podhealth-operator/v0.0.0 (linux/amd64)"
	partition := soakInjected{Fault: soakFault{Kind: faultPartition, Node: "node-a"}, Began: at(1), Ended: at(20)}
	// A clean history: db-0 stays on node-a through a partition (held
	// back), web's pod on node-a is force-deleted once and replaced on
	// node-b, and everything is live 2 s after the partition ends.
	clean := soakHistory{
		Containers: []harness.ContainerEvent{
			nodeEvent(harness.NodeConnected, 0, "node-a"), nodeEvent(harness.NodeConnected, 0, "node-b"),
			dbPod(harness.ContainerStarted, 0.5, "node-a", "db-1"), webPod(harness.ContainerStarted, 0.5, "node-a", "w1"),
			nodeEvent(harness.NodeDisconnected, 1, "node-a"),
			webPod(harness.ContainerStarted, 10, "node-b", "w2"),
			nodeEvent(harness.NodeConnected, 20, "node-a"),
			webPod(harness.ContainerStopped, 20.2, "node-a", "w1"), dbPod(harness.ContainerStopped, 20.2, "node-a", "db-1"),
			dbPod(harness.ContainerStarted, 22, "node-b", "db-2"),
		},
		Deletes: []harness.PodDelete{
			force(9, "web-w1", "w1", operator),
			force(20.2, "db-0", "db-1", harness.KubeletUserAgent+"/node-a"), // the kubelet finishing a graceful delete
		},
		Pods: map[types.UID]soakPod{
			"w1":   {Namespace: ns, Name: "web-w1", Node: "node-a"},
			"db-1": {Namespace: ns, Name: "db-0", Node: "node-a", Stateful: true},
		},
		Faults:    []soakInjected{partition},
		Workloads: []string{"StatefulSet pod db-0", "web"},
		End:       at(60),
	}
	clean.Writes = []volumeWrite{{"pgs-a", at(1)}, {"pgs-a", at(1.1)}, {"pgs-b", at(19)}, {"pgs-b", at(19.1)}}
	got := soakCheck(clean, soakRecoveryBound)
	require.Empty(t, got.Violations, "a clean history")
	require.Equal(t, 1, got.ForceDeletes)
	require.Equal(t, 1, got.ForceDeleted)
	require.Equal(t, []time.Duration{2 * time.Second}, got.Recovery[faultPartition], "db-0 was back 2 s after the partition ended")

	tests := []struct {
		name      string
		break_    func(h *soakHistory)
		invariant int
	}{
		{"a StatefulSet pod started on a second node while the first still runs", func(h *soakHistory) {
			h.Containers = append(h.Containers[:6:6], dbPod(harness.ContainerStarted, 12, "node-b", "db-2"))
			h.Containers = append(h.Containers, nodeEvent(harness.NodeConnected, 20, "node-a"), dbPod(harness.ContainerStopped, 20.2, "node-a", "db-1"))
		}, 1},
		{"a force DELETE without a UID precondition", func(h *soakHistory) {
			h.Deletes[0].PreconditionUID = ""
		}, 2},
		{"a force DELETE of a stateful pod on a node that is not fenced", func(h *soakHistory) {
			h.Deletes = append(h.Deletes, force(12, "db-0", "db-1", soakCheckerAgent))
		}, 2},
		{"a force DELETE of a pod annotated never", func(h *soakHistory) {
			h.Pods["w1"] = soakPod{Namespace: ns, Name: "web-w1", Node: "node-a", Never: true}
		}, 2},
		{"a force DELETE of a pod the soak never saw", func(h *soakHistory) {
			delete(h.Pods, "w1")
		}, 2},
		{"a second force DELETE of the same pod", func(h *soakHistory) {
			h.Deletes = append(h.Deletes, force(9.5, "web-w1", "w1", "podhealth-controllerruntime/v0.0.0"))
		}, 3},
		{"a workload that does not come back within the bound", func(h *soakHistory) {
			h.Containers = h.Containers[:len(h.Containers)-1]
		}, 4},
		{"the database's old primary writes again after its replacement did", func(h *soakHistory) {
			h.Writes = []volumeWrite{{"pgs-a", at(1)}, {"pgs-a", at(1.1)}, {"pgs-b", at(19)}, {"pgs-a", at(19.1)}, {"pgs-b", at(19.2)}}
		}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := clean
			h.Containers = append([]harness.ContainerEvent(nil), clean.Containers...)
			h.Deletes = append([]harness.PodDelete(nil), clean.Deletes...)
			h.Pods = map[types.UID]soakPod{}
			for uid, p := range clean.Pods {
				h.Pods[uid] = p
			}
			tt.break_(&h)
			res := soakCheck(h, soakRecoveryBound)
			require.NotEmpty(t, res.Violations)
			for _, v := range res.Violations {
				require.Equal(t, tt.invariant, v.Invariant, "%s", v)
				require.NotEmpty(t, v.History, "a violation shows its slice of the history")
			}
		})
	}

	t.Run("a stateful pod force-deleted while its node is fenced is no violation", func(t *testing.T) {
		h := clean
		h.Deletes = append(append([]harness.PodDelete(nil), clean.Deletes...), force(12, "db-0", "db-1", soakCheckerAgent))
		h.Fences = []soakFenceSpan{{Node: "node-a", From: at(11)}}
		require.Empty(t, soakCheck(h, soakRecoveryBound).Violations)
		h.Fences = []soakFenceSpan{{Node: "node-a", From: at(5), Until: at(11)}}
		require.NotEmpty(t, soakCheck(h, soakRecoveryBound).Violations, "the fence was lifted before the delete")
	})

	// The partition ends at 20 s and db-0 is back on node-b at 22 s; node-b
	// powers off at lost s, which stops both workloads' pods, and is fenced
	// at 30 s; both are back on node-a at back s.
	secondFailure := func(lost, back float64) soakHistory {
		h := clean
		powerOff := soakInjected{Fault: soakFault{Kind: faultPowerOff, Node: "node-b"}, Began: at(23), Ended: at(30)}
		h.Faults = []soakInjected{partition, powerOff}
		h.Containers = append(append([]harness.ContainerEvent(nil), clean.Containers...),
			nodeEvent(harness.NodeDisconnected, lost, "node-b"),
			dbPod(harness.ContainerStopped, lost, "node-b", "db-2"), webPod(harness.ContainerStopped, lost, "node-b", "w2"),
			dbPod(harness.ContainerStarted, back, "node-a", "db-3"), webPod(harness.ContainerStarted, back, "node-a", "w3"))
		h.End = at(back + 10)
		return h
	}
	t.Run("a workload back within the bound and lost with the next failed node is that failure's to bring back", func(t *testing.T) {
		got := soakCheck(secondFailure(23, 115), soakRecoveryBound)
		require.Empty(t, got.Violations, "back 95 s after the partition ended, 85 s after the power off's")
		require.Equal(t, []time.Duration{2 * time.Second}, got.Recovery[faultPartition])
		require.Equal(t, []time.Duration{85 * time.Second}, got.Recovery[faultPowerOff])
	})
	t.Run("the next failure's bound still holds", func(t *testing.T) {
		violations := soakCheck(secondFailure(23, 125), soakRecoveryBound).Violations
		require.NotEmpty(t, violations)
		for _, v := range violations {
			require.Equal(t, 4, v.Invariant)
			require.Contains(t, v.What, "power off", "%s", v)
		}
	})
	t.Run("a workload lost when no other fault is underway was not back", func(t *testing.T) {
		h := secondFailure(23, 115)
		h.Faults[1].Began = at(23.5)
		violations := soakCheck(h, soakRecoveryBound).Violations
		require.NotEmpty(t, violations)
		for _, v := range violations {
			require.Equal(t, 4, v.Invariant)
			require.Contains(t, v.What, "partition", "%s", v)
		}
	})
}
