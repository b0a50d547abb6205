package health

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// result is what happened to one dead pod.
type result struct {
	outcome    Outcome
	heldBack   Hold   // why, when outcome is HeldBack
	fencedBy   *Fence // the fencer's proof that let it go, if one did
	retryAfter time.Duration
	err        error
}

// errDeletePanicked is the result that waiters on a force delete see when
// the Deleter panicked; the panic itself goes on up the stack.
var errDeletePanicked = errors.New("the force delete panicked")

// removeDead force-deletes one dead pod, unless something says it must not
// or need not be sent: a missing name or UID, a dry run, the Memory, the
// policy, the breaker, the budget, or another check already deleting it.
func (k *check) removeDead(pod *corev1.Pod, v Verdict) result {
	if pod.Name == "" || pod.UID == "" {
		// Without a UID precondition the DELETE could hit a newer pod of
		// the same name; every Deleter refuses it too. No API server
		// serves such a pod, so the caller's source is wrong (a fake
		// client that sets no UIDs, a transform that drops them): fail
		// the check, so that it is seen rather than silently held.
		res := k.held(pod, v, Hold{Reason: HeldUnidentified, Detail: "the pod has no name or no UID, so its force delete could not carry a UID precondition"})
		res.err = fmt.Errorf("podhealth: dead pod %q of namespace %q (uid %q): %w (no API server serves such a pod: does the source's client set UIDs? podsource/controllerruntime/fakeapi does)",
			pod.Name, pod.Namespace, pod.UID, ErrUnidentifiedPod)
		return res
	}
	if !k.dryRun && k.memory.remembers(pod.UID, k.time()) {
		return k.deletedEarlier(pod)
	}
	hold, proof, err := k.holdBack(pod, v)
	if hold.Reason != NotHeld {
		res := k.held(pod, v, hold)
		res.err = err // evidence that could not be read: retry, it is no verdict
		return res
	}
	if k.dryRun {
		k.log.Info("would force-delete pod", proofKeys(podKeys(pod, v), proof)...)
		return result{outcome: WouldForceDelete, fencedBy: proof}
	}

	call, owner := k.memory.inflight.claim(pod.UID)
	if !owner {
		// Another check is deleting this pod; share its result.
		select {
		case <-call.done:
		case <-k.ctx.Done():
			return result{outcome: NotAttempted}
		}
		if call.res.outcome.removed() {
			return k.deletedEarlier(pod)
		}
		res := call.res
		res.fencedBy = proof
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
	res = k.send(pod, v, proof)
	return res
}

func (k *check) deletedEarlier(pod *corev1.Pod) result {
	if len(pod.Finalizers) > 0 {
		return result{outcome: BlockedByFinalizers}
	}
	return result{outcome: DeletedEarlier}
}

// send spends the budget and sends the DELETE.
func (k *check) send(pod *corev1.Pod, v Verdict, proof *Fence) result {
	if k.budget != nil {
		// Charged when the DELETE is sent, on the clock of that moment, so
		// that the budget holds in every window however long deletes take.
		if ok, retryAfter := k.budget.take(k.clock.Now()); !ok {
			res := k.held(pod, v, Hold{Reason: HeldByBudget, Detail: fmt.Sprintf("%d per %v", k.budget.max, k.budget.window)})
			res.retryAfter = retryAfter
			return res
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
	res.fencedBy = proof
	if res.err != nil {
		k.log.Error(res.err, "force delete failed", proofKeys(podKeys(pod, v), proof)...)
	} else {
		k.log.Info("force-deleted pod", proofKeys(append(podKeys(pod, v), "outcome", res.outcome.String()), proof)...)
	}
	return res
}

// proofKeys adds to a log line's keys the fencer's proof that let the pod
// go, when one did.
func proofKeys(keys []any, proof *Fence) []any {
	if proof == nil {
		return keys
	}
	keys = append(keys, "fencer", proof.Fencer, "fencedBy", proof.By, "proves", proof.Proves.String())
	if !proof.Since.IsZero() {
		keys = append(keys, "fencedSince", proof.Since.UTC().Format(time.RFC3339))
	}
	return append(keys, "fenceDetail", proof.Detail)
}

// holdBack returns why the pod's annotation, its malformed status, the
// policy or the breaker keeps a dead pod; the zero Hold if nothing does,
// with the fencer's proof that let it go when it needed one.
// The error, with a hold, is a read that failed on the way (a claim's,
// wrapping ErrClaimUnavailable): the pod is held, and the check fails so
// that its caller retries.
func (k *check) holdBack(pod *corev1.Pod, v Verdict) (Hold, *Fence, error) {
	if optedOut(pod) {
		return Hold{Reason: HeldByAnnotation, Detail: AnnotationForceDelete + "=" + forceDeleteNever}, nil, nil
	}
	if why := malformed(pod); why != "" {
		return Hold{Reason: HeldMalformed, Detail: why}, nil, nil
	}
	var proof *Fence
	if !v.Fenced {
		if why, err := k.policy.needsFencing(k.ctx, pod); why != "" {
			var waiting string
			var fenceErr error
			proof, waiting, fenceErr = k.fence(pod, v)
			switch {
			case proof != nil:
			case waiting != "":
				return Hold{Reason: HeldForFencing, Detail: why + "; " + waiting}, nil, errors.Join(err, fenceErr)
			default:
				return Hold{Reason: HeldForFencing, Detail: why}, nil, errors.Join(err, fenceErr)
			}
		}
	}
	if k.breaker.Nodes != nil {
		if k.disruption == nil {
			k.disruption = k.breaker.read(k.ctx)
		}
		if why := k.breaker.tripped(k.disruption, pod.Spec.NodeName); why != "" {
			return Hold{Reason: HeldByBreaker, Detail: why}, nil, nil
		}
	}
	return Hold{}, proof, nil
}

// held logs and returns the result of a dead pod held back.
func (k *check) held(pod *corev1.Pod, v Verdict, hold Hold) result {
	k.log.V(1).Info("holding back force delete", append(podKeys(pod, v), "heldBack", hold.Reason.String(), "detail", hold.Detail)...)
	return result{outcome: HeldBack, heldBack: hold}
}
