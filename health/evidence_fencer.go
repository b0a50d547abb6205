package health

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FenceQuery is what a Checker asks a Fencer about one dead pod that needs
// fencing evidence. Its objects are the Checker's own (a cache's, say) and
// must not be mutated; the query, Sightings included, is valid only
// during the call.
type FenceQuery struct {
	Pod     *corev1.Pod
	Verdict Verdict
	// NodeState is what node evidence says about the pod's node, and Node
	// the object it read: nil when there is no node evidence, the read
	// failed, or the node is NodeGone.
	NodeState NodeState
	Node      *corev1.Node
	// Now is the check's time, on the Checker's clock (Options.Clock).
	Now time.Time
	// Sightings records when a fact was first seen, in the Checker's
	// Memory, so that a fencer can measure a wait on the Checker's own
	// clock rather than on a timestamp written by another machine.
	Sightings Sightings
}

// Sightings is a record of first sightings, kept by the Checker's Memory
// (bounded, and shared between Checkers that share the Memory). Keys are
// the fencer's own: a Checker keeps each fencer's apart. Implementations
// are safe for concurrent use.
type Sightings interface {
	// FirstSeen records that key is seen at the check's time, and returns
	// when it was first seen: that time, for a key that is new or was
	// forgotten. A dry run reads the real checks' sightings and records
	// only its own.
	FirstSeen(key string) time.Time
	// Forget forgets key, so that its next sighting starts afresh.
	Forget(key string)
}

// Fencer is an authority that can say that a pod's containers cannot run
// any more: its node is stopped or cut off, or the pod's own processes
// have stopped. A Checker asks its fencers about each dead pod that needs
// fencing evidence (see Fencing) and whose verdict is not fenced already
// (Verdict.Fenced): first the built-in ones (a gone or out-of-service
// node, Options.ShutdownTaints, a terminal phase reported by the kubelet),
// then Options.Fencers, in order, and force-deletes the pod on the first
// proof.
//
// The contract, which package fencertest checks:
//
//   - Name is constant, not empty, and unique among a Checker's fencers;
//     errors and holds name the fencer by it.
//   - Fence proves only what it can show from what it read now. A value
//     it cannot read, a missing field or object, an answer it does not
//     understand is NoProof; a read that failed (a timeout, RBAC denied)
//     is an error, and the pod is held back (fail closed). With an error
//     the Fence is ignored.
//   - Time alone proves nothing: a fencer that measures a wait measures it
//     on Now from a sighting in Sightings, so that a Checker's clock far
//     ahead, or a fresh Memory, cannot shorten it.
//   - Fence never mutates the query's objects, and is safe for concurrent
//     use. When ctx is done it returns the answer it would give, or an
//     error wrapping ctx.Err().
type Fencer interface {
	Name() string
	Fence(ctx context.Context, q FenceQuery) (Fence, error)
}

// ErrFenceUnavailable is wrapped by the *FenceError of a fencer whose
// evidence could not be read: the pod is held back, and the check fails so
// that its caller retries.
var ErrFenceUnavailable = errors.New("podhealth: fencing evidence could not be read")

// FenceError is the error of a fencer that failed about one pod. It
// unwraps to ErrFenceUnavailable and to the fencer's own error.
type FenceError struct {
	Fencer string
	Pod    types.NamespacedName
	Err    error
}

func (e *FenceError) Error() string {
	return fmt.Sprintf("podhealth: fencer %q about pod %s: %v", e.Fencer, e.Pod, e.Err)
}

func (e *FenceError) Unwrap() []error { return []error{ErrFenceUnavailable, e.Err} }

// fenceKeyPrefix keeps the fencers' sightings apart from the Checker's
// own (pods' UIDs, nodes) and from each other's in the Memory.
const fenceKeyPrefix = "fence\x00"

func fenceKey(fencer, key string) string { return fenceKeyPrefix + fencer + "\x00" + key }

// FirstSeen makes the check's evidence the Sightings of a FenceQuery, for
// the fencer being asked (asking).
func (e *evidence) FirstSeen(key string) time.Time {
	return e.sightings.see(fenceKey(e.asking, key), e.time())
}

// Forget is Sightings.Forget for the fencer being asked.
func (e *evidence) Forget(key string) { e.sightings.forget(fenceKey(e.asking, key)) }

var _ Sightings = (*evidence)(nil)

// fence asks the Checker's fencers whether pod's containers can no longer
// run, and returns the first proof. err joins a *FenceError per fencer
// that failed (before the proof, if one came). Without proof, waiting
// joins what the fencers said they miss or await; the soonest RetryAfter
// goes to the report.
func (k *check) fence(pod *corev1.Pod, v Verdict) (proof *Fence, waiting string, err error) {
	ev := k.getEvidence()
	state, node := ev.node(pod.Spec.NodeName)
	q := FenceQuery{Pod: pod, Verdict: v, NodeState: state, Node: node, Sightings: ev}
	var errs []error
	for _, f := range k.fencers {
		name := f.Name()
		ev.asking = name
		q.Now = ev.time()
		fence, ferr := f.Fence(k.ctx, q)
		ev.asking = ""
		switch {
		case ferr != nil:
			errs = append(errs, &FenceError{Fencer: name, Pod: keyOf(pod), Err: ferr})
			waiting = joinDetail(waiting, "fencer "+name+" failed: "+ferr.Error())
		case fence.Proves == PodStopped || fence.Proves == NodeStopped:
			fence.Fencer = name
			return &fence, "", errors.Join(errs...)
		default:
			waiting = joinDetail(waiting, fence.Detail)
			ev.wake.add(fence.RetryAfter)
		}
	}
	return nil, waiting, errors.Join(errs...)
}

// joinDetail adds one fencer's detail to the others'; the common case of
// one detail builds no new string.
func joinDetail(details, detail string) string {
	switch {
	case detail == "":
		return details
	case details == "":
		return detail
	}
	return details + "; " + detail
}
