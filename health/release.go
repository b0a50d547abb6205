package health

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The release stage: a dead pod that the policy lets go (policy.go's
// decide) is force-deleted here, unless the Breaker is tripped
// (release_breaker.go), once across the checks that share a Memory, within
// the DeleteBudget (release_budget.go). It logs nothing: the report stage logs
// what happened (report_logging.go).

// result is what happened to one dead pod.
type result struct {
	outcome    Outcome
	heldBack   Hold   // why, when outcome is HeldBack
	fencedBy   *Fence // the fencer's proof that let it go, if one did
	retryAfter time.Duration
	err        error
	// shared: the result of another check's delete, which that check
	// logs.
	shared bool
}

// errDeletePanicked is the result that waiters on a force delete see when
// the Deleter panicked; the panic itself goes on up the stack.
var errDeletePanicked = errors.New("the force delete panicked")

// removeDead carries out the policy's decision about one dead pod: it
// force-deletes it, unless the decision holds it, the breaker holds every
// pod, a dry run only says it would, or another check is already deleting
// it.
func (k *check) removeDead(pod *corev1.Pod, d decision) result {
	switch {
	case d.deletedEarlier:
		return k.deletedEarlier(pod)
	case d.hold.Reason != NotHeld:
		// An error with a hold is evidence that could not be read, or a
		// source that serves unidentified pods: retry, it is no verdict.
		return result{outcome: HeldBack, heldBack: d.hold, err: d.err}
	}
	if why := k.breakerTripped(pod); why != "" {
		return result{outcome: HeldBack, heldBack: Hold{Reason: HeldByBreaker, Detail: why}}
	}
	switch {
	case k.dryRun:
		return result{outcome: WouldForceDelete, fencedBy: d.proof}
	}

	call, owner := k.memory.inflight.claim(pod.UID)
	if !owner {
		// Another check is deleting this pod; share its result, which
		// that check logs.
		select {
		case <-call.done:
		case <-k.ctx.Done():
			return result{outcome: NotAttempted}
		}
		if call.res.outcome.removed() {
			return k.deletedEarlier(pod)
		}
		res := call.res
		res.fencedBy, res.shared = d.proof, true
		return res
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
	res = k.send(pod, d)
	return res
}

func (k *check) deletedEarlier(pod *corev1.Pod) result {
	if len(pod.Finalizers) > 0 {
		return result{outcome: BlockedByFinalizers}
	}
	return result{outcome: DeletedEarlier}
}

// send spends the budget and sends the DELETE.
func (k *check) send(pod *corev1.Pod, d decision) result {
	if k.budget != nil {
		// Charged when the DELETE is sent, on the clock of that moment, so
		// that the budget holds in every window however long deletes take.
		if ok, retryAfter := k.budget.take(k.clock.Now()); !ok {
			hold := Hold{Reason: HeldByBudget, Detail: fmt.Sprintf("%d per %v", k.budget.max, k.budget.window)}
			return result{outcome: HeldBack, heldBack: hold, retryAfter: retryAfter}
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
	res.fencedBy = d.proof
	return res
}

// removed reports whether the outcome counts as deleted in the decision
// table: the release stage remembers such a pod as force-deleted. A dry
// run's WouldForceDelete counts too: a dry run answers what the real check
// would answer if every delete succeeded.
func (o Outcome) removed() bool {
	switch o {
	case ForceDeleted, WasAlreadyGone, NameReused, DeletedEarlier, BlockedByFinalizers, WouldForceDelete:
		return true
	}
	return false
}
