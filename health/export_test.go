package health

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Internals that the external tests of this package reach. They exist only
// in test builds.

const (
	ReasonDeletionByTaintManager = reasonDeletionByTaintManager
	ForceDeleteNever             = forceDeleteNever
	DefaultMemoryCapacity        = defaultMemoryCapacity
	DefaultMemoryTTL             = defaultMemoryTTL
)

type Facts = facts

const (
	Deleting  = deleting
	Terminal  = terminal
	Disrupted = disrupted
)

var (
	TaintEvicted          = taintEvicted
	TerminatedByKubelet   = terminatedByKubelet
	GracefulDeletion      = gracefulDeletion
	FinishedPod           = finishedPod
	StaleDisruptionTarget = staleDisruptionTarget
	NodeGoneRule          = nodeGone
	OutOfService          = outOfService
	FactsOf               = factsOf
)

// WithWhen returns r declaring the facts it needs.
func WithWhen(r Rule, f Facts) Rule { r.when = f; return r }

// Classify judges pod from the pod alone, with no evidence at all: the
// rules that need evidence (TaintEvicted, whose verdict depends on the
// node or the clock, and the node rules) have no opinion. A nil pod is
// Alive with the reason "nil pod".
func (rs Rules) Classify(pod *corev1.Pod) Verdict {
	if pod == nil {
		return Verdict{State: Alive, Reason: "nil pod"}
	}
	return rs.classify(pod, factsOf(pod), nil)
}

// ClassifyAt judges pod as a Checker without node evidence (Options.Nodes
// nil) does when its clock reads now. A nil pod is Alive with the reason
// "nil pod".
func (rs Rules) ClassifyAt(pod *corev1.Pod, now time.Time) Verdict {
	if pod == nil {
		return Verdict{State: Alive, Reason: "nil pod"}
	}
	f := factsOf(pod)
	if f&(deleting|terminal) == 0 {
		return rs.classify(pod, f, nil)
	}
	ev := &evidence{ctx: context.Background(), now: now, haveNow: true, sightings: &checkSightings{record: newSightings(1, time.Minute)}}
	return rs.classify(pod, f, ev)
}

// GracePeriod is the grace period the rules read from a pod.
var GracePeriod = gracePeriod

// Seconds and AddSaturating are the saturating time arithmetic of the rules.
var (
	Seconds       = seconds
	AddSaturating = addSaturating
)

func (m *Memory) Remember(uid types.UID, now time.Time)       { m.ready().remember(uid, now) }
func (m *Memory) Remembers(uid types.UID, now time.Time) bool { return m.ready().remembers(uid, now) }
func (m *Memory) Len() int                                    { return m.ready().len() }

// DeleterFunc adapts a function to a Deleter.
type DeleterFunc func(ctx context.Context, pod *corev1.Pod) error

func (f DeleterFunc) ForceDelete(ctx context.Context, pod *corev1.Pod) error { return f(ctx, pod) }

// Removed reports whether the outcome counts as deleted.
func (o Outcome) Removed() bool { return o.removed() }

// Count returns how many pods of r have the state s.
func (r *Report) Count(s State) int {
	n := 0
	for i := range r.Pods {
		if r.Pods[i].Verdict.State == s {
			n++
		}
	}
	return n
}

// CountOutcome returns how many pods of r had the outcome o.
func (r *Report) CountOutcome(o Outcome) int {
	n := 0
	for i := range r.Pods {
		if r.Pods[i].Outcome == o {
			n++
		}
	}
	return n
}

// BuiltinFencers are the fencers every Checker asks first, for the
// conformance suite.
func BuiltinFencers(taints []ShutdownTaint) []Fencer { return builtinFencers(taints) }
