package health

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
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
	// NameReused: the UID precondition failed; a newer pod holds the name
	// and was left alone.
	NameReused
	// DeletedEarlier: this checker (or one sharing its Memory) force-deleted
	// this UID before; a lagging source still lists it. Not sent again.
	DeletedEarlier
	// BlockedByFinalizers: force-deleted before, and finalizers still hold
	// the pod. Not sent again; whatever owns the finalizers must act.
	BlockedByFinalizers
	// WouldForceDelete: dry run; the pod would have been force-deleted.
	WouldForceDelete
	// DeleteFailed: the force delete failed; PodReport.Err says why. It is
	// tried again on the next check.
	DeleteFailed
	// NotAttempted: the check stopped (its context ended) before this dead
	// pod's turn.
	NotAttempted
	// HeldBack: the pod is dead but was not force-deleted: the policy wants
	// more evidence, the pod opted out, the breaker is open, or the budget
	// is used up. PodReport.HeldBack says which.
	HeldBack
)

func (o Outcome) String() string {
	switch o {
	case NoAction:
		return "NoAction"
	case ForceDeleted:
		return "ForceDeleted"
	case WasAlreadyGone:
		return "WasAlreadyGone"
	case NameReused:
		return "NameReused"
	case DeletedEarlier:
		return "DeletedEarlier"
	case BlockedByFinalizers:
		return "BlockedByFinalizers"
	case WouldForceDelete:
		return "WouldForceDelete"
	case DeleteFailed:
		return "DeleteFailed"
	case NotAttempted:
		return "NotAttempted"
	case HeldBack:
		return "HeldBack"
	default:
		return "Outcome(?)"
	}
}

// Removed reports whether the outcome counts as deleted in the decision
// table. A dry run's WouldForceDelete does too: a dry run answers what the
// real check would answer if every delete succeeded.
func (o Outcome) Removed() bool {
	switch o {
	case ForceDeleted, WasAlreadyGone, NameReused, DeletedEarlier, BlockedByFinalizers, WouldForceDelete:
		return true
	}
	return false
}

func outcomeOf(r DeleteResult) Outcome {
	switch r {
	case AlreadyGone:
		return WasAlreadyGone
	case UIDMismatch:
		return NameReused
	default:
		return ForceDeleted
	}
}

// PodReport is what one check found and did about one pod.
type PodReport struct {
	Namespace string
	Name      string
	UID       types.UID
	NodeName  string
	Verdict   Verdict
	Outcome   Outcome
	// HeldBack says why, when Outcome is HeldBack.
	HeldBack string
	// Err is the DeleteError when Outcome is DeleteFailed.
	Err error
}

// Report is the full result of one check.
type Report struct {
	Healthy bool
	DryRun  bool
	// Pods lists every pod the source returned, in the source's order.
	Pods []PodReport
	// RetryAfter, when not zero, is how soon a pod held back by the budget
	// may be deleted: check again then.
	RetryAfter time.Duration
}

// Count returns how many pods have the given state.
func (r *Report) Count(s State) int {
	n := 0
	for i := range r.Pods {
		if r.Pods[i].Verdict.State == s {
			n++
		}
	}
	return n
}

// CountOutcome returns how many pods had the given outcome.
func (r *Report) CountOutcome(o Outcome) int {
	n := 0
	for i := range r.Pods {
		if r.Pods[i].Outcome == o {
			n++
		}
	}
	return n
}
