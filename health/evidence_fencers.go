package health

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The built-in fencers' names, which Options.Fencers may not take.
const (
	fencerNode     = "node"
	fencerShutdown = "shutdown-taint"
	fencerKubelet  = "kubelet"
)

// builtinFencers are the evidence every Checker asks first, in this order:
// what the node says, then the authorities' shutdown taints, then the
// kubelet's last report. A verdict that is fenced itself (Verdict.Fenced:
// its rule saw such evidence) asks no fencer, nor reads a claim.
func builtinFencers(taints []ShutdownTaint) []Fencer {
	fencers := []Fencer{nodeFencer{}}
	if len(taints) > 0 {
		fencers = append(fencers, shutdownFencer{taints: taints})
	}
	return append(fencers, kubeletFencer{})
}

// nodeFencer: a node that a live read confirmed gone, or that is not Ready
// under the out-of-service taint, runs nothing (NodeState.Fences).
type nodeFencer struct{}

func (nodeFencer) Name() string { return fencerNode }

func (nodeFencer) Fence(_ context.Context, q FenceQuery) (Fence, error) {
	if q.Pod == nil {
		return Fence{}, nil // a question about no pod proves nothing
	}
	switch q.NodeState {
	case NodeGone:
		return Fence{Proves: NodeStopped, By: "a live read of the node"}, nil
	case NodeOutOfService:
		return Fence{Proves: NodeStopped, By: "the out-of-service taint"}, nil
	}
	return Fence{}, nil
}

// shutdownFencer: Options.ShutdownTaints, each after its wait (see
// ShutdownTaint).
type shutdownFencer struct{ taints []ShutdownTaint }

func (shutdownFencer) Name() string { return fencerShutdown }

func (f shutdownFencer) Fence(_ context.Context, q FenceQuery) (Fence, error) {
	node, state := q.Node, q.NodeState
	if q.Pod == nil || node == nil || q.Sightings == nil || (state != NodeNotReady && state != NodeUnreachable) {
		return Fence{}, nil
	}
	var answer Fence
	for _, t := range f.taints {
		switch shutdownCandidate(node, t) {
		case notCandidate:
			continue
		case untrusted:
			answer.Detail = "node " + node.Name + " carries " + t.Key + ", but its provider (" + node.Spec.ProviderID + ") may report a running instance shut down: no fencing evidence"
			continue
		}
		first := q.Sightings.FirstSeen(shutdownKey(t.Key, node))
		left := ShutdownWaitLeft(node, t, first, q.Now)
		if left <= 0 {
			return Fence{Proves: NodeStopped, By: "taint " + t.Key}, nil // no wait of another taint is the pod's
		}
		if answer.RetryAfter == 0 || left < answer.RetryAfter {
			answer.RetryAfter = left
		}
		answer.Detail = fmt.Sprintf("node %s carries %s, which fences once seen for %v (%v to go)", node.Name, t.Key, t.After, left.Round(time.Millisecond))
	}
	return answer, nil
}

// kubeletFencer: a pod in a terminal phase was reported so by its kubelet
// once its containers had stopped, and a terminal phase is final.
type kubeletFencer struct{}

func (kubeletFencer) Name() string { return fencerKubelet }

func (kubeletFencer) Fence(_ context.Context, q FenceQuery) (Fence, error) {
	if q.Pod == nil || !isTerminalPhase(q.Pod) {
		return Fence{}, nil
	}
	return Fence{Proves: PodStopped, By: "the kubelet (phase " + string(q.Pod.Status.Phase) + ")"}, nil
}

var (
	_ Fencer = nodeFencer{}
	_ Fencer = shutdownFencer{}
	_ Fencer = kubeletFencer{}
)

// validateFencers checks Options.Fencers.
func validateFencers(opts Options) error {
	if len(opts.Fencers) == 0 {
		return nil
	}
	if opts.Fencing == FenceNever {
		return errors.New("Options.Fencers is set, but Options.Fencing is FenceNever: no pod needs fencing evidence, so no fencer would be asked")
	}
	seen := map[string]bool{fencerNode: true, fencerShutdown: true, fencerKubelet: true}
	var errs []error
	for i, f := range opts.Fencers {
		if isNil(f) {
			errs = append(errs, fmt.Errorf("Options.Fencers[%d] is nil", i))
			continue
		}
		switch name := f.Name(); {
		case name == "":
			errs = append(errs, fmt.Errorf("Options.Fencers[%d] (%T) has no name", i, f))
		case seen[name]:
			errs = append(errs, fmt.Errorf("Options.Fencers[%d] (%T): the name %q is taken (built-in: %s, %s, %s)", i, f, name, fencerNode, fencerShutdown, fencerKubelet))
		default:
			seen[name] = true
		}
	}
	return errors.Join(errs...)
}
