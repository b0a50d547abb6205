package health

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
