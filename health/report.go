package health

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Outcome says what the Checker did about one pod.
type Outcome int

const (
	// NoAction: the pod is not dead, nothing was to be done.
	NoAction Outcome = iota
	// ForceDeleted: the force delete was accepted.
	ForceDeleted
	// WasAlreadyGone: the pod no longer existed (NotFound).
	WasAlreadyGone
	// NameReused: the UID precondition failed (Conflict); a newer pod holds
	// the name and was left alone.
	NameReused
	// DeletedEarlier: this checker (or one sharing its Memory) force-deleted
	// this UID before, or another check was deleting it at the same moment;
	// a lagging source still lists it. Not sent again.
	DeletedEarlier
	// BlockedByFinalizers: force-deleted before, and finalizers still hold
	// the pod. Not sent again; whatever owns the finalizers must act.
	BlockedByFinalizers
	// WouldForceDelete: dry run; the pod would have been force-deleted.
	WouldForceDelete
	// DeleteFailed: the force delete failed or was refused; PodReport.Err
	// says why. It is tried again on the next check.
	DeleteFailed
	// NotAttempted: the check stopped (its context ended) before this dead
	// pod's turn.
	NotAttempted
	// HeldBack: the pod is dead but was not force-deleted: the policy wants
	// more evidence, the pod opted out or is malformed or unidentified,
	// the breaker is open, or the budget is used up. PodReport.HeldBack
	// says which (Hold.Reason).
	HeldBack
)

var outcomeNames = [...]string{
	NoAction:            "NoAction",
	ForceDeleted:        "ForceDeleted",
	WasAlreadyGone:      "WasAlreadyGone",
	NameReused:          "NameReused",
	DeletedEarlier:      "DeletedEarlier",
	BlockedByFinalizers: "BlockedByFinalizers",
	WouldForceDelete:    "WouldForceDelete",
	DeleteFailed:        "DeleteFailed",
	NotAttempted:        "NotAttempted",
	HeldBack:            "HeldBack",
}

func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return "Outcome(?)"
	}
	return outcomeNames[o]
}

// PodReport is what one check found and did about one pod. It is built once
// per pod and check, and handed both to the Report and to the Observer.
type PodReport struct {
	// Pod is the source's own object: read-only.
	Pod     *corev1.Pod
	Verdict Verdict
	Outcome Outcome
	// HeldBack says why, when Outcome is HeldBack; the zero Hold
	// otherwise.
	HeldBack Hold
	// FencedBy, when the pod needed fencing evidence and a fencer's proof
	// let it go (ForceDeleted, WouldForceDelete, DeleteFailed...), is that
	// proof, with Fence.Fencer naming the fencer. Nil otherwise, and for a
	// verdict fenced by its own rule (Verdict.Fenced), whose reason says
	// why.
	FencedBy *Fence
	// Err is the *DeleteError when Outcome is DeleteFailed; when Outcome is
	// HeldBack, an error wrapping ErrClaimUnavailable (its claim could not
	// be read), a *FenceError (a fencer failed) or ErrUnidentifiedPod (it
	// has no name or UID).
	Err error
}

// Report is the full result of one check.
type Report struct {
	Healthy bool
	// Pods lists every pod the source returned, in the source's order.
	Pods []PodReport
	// RetryAfter, when not zero, is how soon a pod's verdict or outcome
	// changes with time alone, whichever comes first: a pod held back by
	// the budget may be deleted; a taint-evicted pod without node
	// evidence is dead once its deletion deadline passes (TaintEvicted);
	// a pod terminating on a node that is down is dead once its margin
	// has passed (TerminatingTooLong); a pod on an unreachable node is
	// Unreachable once Options.UnreachableFor has passed. It is measured
	// on the Checker's clock. Check again then; zero means that no pod
	// changes with time alone.
	RetryAfter time.Duration
	// NodeEvidence is the error that made node evidence unavailable
	// during this check (it wraps ErrNodesUnavailable), or nil: every node
	// not read before it counted as NodeUnknown.
	NodeEvidence error
}
