package health

import "time"

// State is what a rule decided about a pod.
type State int

const (
	// Alive pods count towards a healthy workload.
	Alive State = iota
	// Terminating pods are in a graceful deletion that is still in
	// progress. They are neither alive nor dead and are never force-deleted.
	Terminating
	// Finished pods have stopped for good (phase Succeeded or Failed) but no
	// rule calls them dead. They are not alive, and they are left alone.
	Finished
	// Dead pods are force-deleted by the Checker.
	Dead
	// Unreachable pods run, as far as anyone can tell, on a node that the
	// node-lifecycle controller has marked unreachable or not ready: they
	// are not alive, so that a caller replaces them elsewhere, and not dead:
	// they are never force-deleted on this evidence. Only a Checker with
	// Options.ReplaceUnreachable gives this verdict.
	Unreachable
)

var stateNames = [...]string{Alive: "Alive", Terminating: "Terminating", Finished: "Finished", Dead: "Dead", Unreachable: "Unreachable"}

func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "State(?)"
	}
	return stateNames[s]
}

// Verdict is the classification of one pod.
type Verdict struct {
	State State
	// Rule names the rule that decided; empty when no rule matched and the
	// pod is alive by default. DefaultRules lists the built-in names.
	Rule string
	// Reason is the evidence the rule saw, for logs, events and reports.
	Reason string
	// Fenced is true when the evidence shows the pod's containers cannot be
	// running any more: they stopped, or the node is gone or powered off.
	// Pods that need fencing (see Fencing) are force-deleted only on such a
	// verdict or on such node evidence.
	Fenced bool
}

// Proof is the kind of thing a Fence proves about a pod's containers, in
// the terms the policy acts on.
type Proof int

const (
	// NoProof: the fencer cannot say that the pod's containers have
	// stopped.
	NoProof Proof = iota
	// PodStopped: this pod's processes have stopped and will not write
	// again (the kubelet reported them stopped; the workload fenced
	// itself). It frees the pod, its name and its claims, and says nothing
	// about the node or its other pods: it never leads to the
	// out-of-service taint, and it does not detach a volume.
	PodStopped
	// NodeStopped: the node is stopped or cut off, so no container on it
	// runs or reaches its storage. It frees every pod of the node, and it
	// is the only proof on which the out-of-service taint may follow.
	NodeStopped
)

var proofNames = [...]string{NoProof: "NoProof", PodStopped: "PodStopped", NodeStopped: "NodeStopped"}

func (p Proof) String() string {
	if p < 0 || int(p) >= len(proofNames) {
		return "Proof(?)"
	}
	return proofNames[p]
}

// Fence is a Fencer's answer about one pod. The zero Fence proves nothing.
type Fence struct {
	Proves Proof
	// Since is when the proof began to hold, on the Checker's clock,
	// where the fencer can tell; zero when it cannot.
	Since time.Time
	// By names the authority that holds the proof, for logs and events:
	// "lease db/pg-1", "the out-of-service taint".
	By string
	// Detail is for people: the evidence, or, with NoProof, what is
	// missing or still awaited. The Checker puts it in the hold's detail.
	Detail string
	// RetryAfter, with NoProof, is how soon the answer may change with
	// time alone (a wait that ends); zero when only an event can change
	// it. It becomes the report's RetryAfter when it is the soonest.
	RetryAfter time.Duration
	// Fencer is the name of the fencer that answered, which the Checker
	// fills in PodReport.FencedBy; a fencer need not set it.
	Fencer string
}

// String says which fencer proved what, by whom, since when, and on what
// evidence: "fencer lease: lease db/pg proves PodStopped since
// 2026-12-05T08:00:27Z: …". Parts that are empty are left out.
func (f Fence) String() string {
	s := ""
	if f.Fencer != "" {
		s = "fencer " + f.Fencer + ": "
	}
	if f.By != "" {
		s += f.By + " proves "
	}
	s += f.Proves.String()
	if !f.Since.IsZero() {
		s += " since " + f.Since.UTC().Format(time.RFC3339)
	}
	if f.Detail != "" {
		s += ": " + f.Detail
	}
	return s
}
