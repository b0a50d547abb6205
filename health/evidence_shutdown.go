package health

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TaintCloudShutdown is the taint that the cloud node-lifecycle controller
// of k8s.io/cloud-provider puts on a node whose Ready condition is not
// True once its cloud reports the node's instance shut down, and removes
// when the node is Ready again. What "shut down" means differs between
// clouds: docs/safety.md says what each provider reports.
const TaintCloudShutdown = "node.cloudprovider.kubernetes.io/shutdown"

// ShutdownTaint names a taint that an authority outside the node (the
// cloud, a fencing tool) puts on a node whose machine it knows to be
// powered off, for Options.ShutdownTaints. A node that carries it is
// fencing evidence, like the out-of-service taint, only when all of these
// hold:
//   - the node's Ready condition is Unknown: the node-lifecycle
//     controller's word that the kubelet has stopped both posting status
//     and renewing its Lease. Ready=False is posted by a kubelet that runs
//     (the first seconds of every boot say "container runtime network not
//     ready"), so it is no evidence, nor is a node without a Ready
//     condition, or one that cannot be read;
//   - the taint, with any effect, has been on the node for at least After,
//     as this Checker (or one sharing its Memory) saw it since the Ready
//     condition's last transition: measured on the Checker's clock from the
//     first check that saw it under that transition (the taint carries no
//     time of its own), and from the transition's lastTransitionTime too, so
//     that neither a sighting from before the node came back and failed
//     again, nor a clock far ahead, shortens the wait. A fresh Memory waits
//     After again;
//   - for TaintCloudShutdown, the node's provider is not one that may call
//     a running instance shut down (kubevirt://, and AWS Fargate nodes; see
//     docs/safety.md).
//
// A check that sees the node Ready, or without the taint, forgets its
// first sighting, and a new Ready transition starts a new one, so a node
// that comes back and goes down again waits After afresh, however briefly
// it was back and whether or not a check saw it. While a pod waits for
// After, its hold's detail says so and the report's RetryAfter says when
// the wait ends.
type ShutdownTaint struct {
	// Key is the taint's key. Kubernetes' own node.kubernetes.io/ taints
	// are refused: out-of-service already fences, and the others are set
	// on silence (unreachable, not-ready) or on pressure.
	Key string
	// After is how long the taint must have been seen before it fences: at
	// least as long as the authority may report a machine shut down before
	// it is powered off. It must be positive.
	After time.Duration
}

// validateShutdownTaints checks Options.ShutdownTaints.
func validateShutdownTaints(opts Options) error {
	if len(opts.ShutdownTaints) == 0 {
		return nil
	}
	switch {
	case opts.Nodes == nil:
		return errors.New("Options.ShutdownTaints needs node evidence (Options.Nodes): without it no taint is ever read")
	case opts.Fencing == FenceNever:
		return errors.New("Options.ShutdownTaints is set, but Options.Fencing is FenceNever: no pod needs fencing evidence, so it would have no effect")
	}
	seen := make(map[string]bool, len(opts.ShutdownTaints))
	var errs []error
	for i, t := range opts.ShutdownTaints {
		field := fmt.Sprintf("Options.ShutdownTaints[%d]", i)
		switch {
		case t.Key == "":
			errs = append(errs, fmt.Errorf("%s has no Key", field))
		case len(validation.IsQualifiedName(t.Key)) > 0:
			errs = append(errs, fmt.Errorf("%s: %q is not a taint key: %s", field, t.Key, strings.Join(validation.IsQualifiedName(t.Key), "; ")))
		case strings.HasPrefix(t.Key, "node.kubernetes.io/"):
			errs = append(errs, fmt.Errorf("%s: %q is Kubernetes' own taint: %s already fences, and the others are set when a node is silent or under pressure, which a running node can be", field, t.Key, corev1.TaintNodeOutOfService))
		case seen[t.Key]:
			errs = append(errs, fmt.Errorf("%s: %q is named twice", field, t.Key))
		}
		seen[t.Key] = true
		if t.After <= 0 {
			errs = append(errs, fmt.Errorf("%s (%s): After %v is not positive: a report of a shutdown may precede the power-off, and only a stated wait covers that", field, t.Key, t.After))
		}
	}
	return errors.Join(errs...)
}

// untrustedShutdown reports whether node's provider may report its
// instance shut down while it runs, so that TaintCloudShutdown on it is no
// fencing evidence:
//   - kubevirt://: cloud-provider-kubevirt calls a VirtualMachineInstance in
//     phase Unknown ("host probably down") shut down: silence;
//   - aws:// nodes named fargate-...: cloud-provider-aws answers for a
//     Fargate node from its network interface, and its older interface
//     calls the node shut down while the interface exists.
func untrustedShutdown(node *corev1.Node) bool {
	id := node.Spec.ProviderID
	switch {
	case strings.HasPrefix(id, "kubevirt://"):
		return true
	case strings.HasPrefix(id, "aws://"):
		return strings.HasPrefix(id[strings.LastIndexByte(id, '/')+1:], "fargate-")
	}
	return false
}

// shutdownKey is the key of a node's first sighting with a shutdown taint
// under the Ready transition of node's Ready condition, in the Memory's
// first-seen record, apart from the pods' UIDs and the nodes' unreachable
// sightings. A new transition is a new key: a sighting from before the
// node last came back never counts for the wait after it.
func shutdownKey(taint string, node *corev1.Node) string {
	var since int64
	if ready := readyCondition(node); ready != nil {
		since = ready.LastTransitionTime.UnixNano()
	}
	return "shutdown\x00" + taint + "\x00" + node.Name + "\x00" + strconv.FormatInt(since, 36)
}

// ShutdownTaintOf returns the first of taints that node carries and that
// may fence it: node's Ready condition is Unknown, it is not out of
// service already, and for TaintCloudShutdown its provider is not one that
// may call a running instance shut down. It does not measure how long the
// taint has been there: that is the caller's part (a Checker counts each
// taint's After from its first sighting under the node's current Ready
// transition, ShutdownWaitLeft). It is false for a nil node. podhealth-controller reads
// nodes through it before it applies the out-of-service taint, so that it
// and the Checker never disagree about a node.
func ShutdownTaintOf(node *corev1.Node, taints []ShutdownTaint) (ShutdownTaint, bool) {
	for _, t := range taints {
		if shutdownCandidate(node, t) == candidate {
			return t, true
		}
	}
	return ShutdownTaint{}, false
}

// candidacy is what a node is to one shutdown taint, before its After.
type candidacy int

const (
	notCandidate candidacy = iota // not tainted, Ready, or unreadable
	untrusted                     // tainted, but by a provider that infers shutdowns
	candidate
)

func shutdownCandidate(node *corev1.Node, t ShutdownTaint) candidacy {
	if state := NodeStateOf(node); state != NodeNotReady && state != NodeUnreachable {
		return notCandidate // NodeStateOf(nil) is NodeUnknown
	}
	if readyCondition(node).Status != corev1.ConditionUnknown {
		return notCandidate // False: posted by a kubelet that runs
	}
	if !hasTaint(node, t.Key) {
		return notCandidate
	}
	if t.Key == TaintCloudShutdown && untrustedShutdown(node) {
		return untrusted
	}
	return candidate
}

// ShutdownWaitLeft returns how much longer taint t must be seen on node
// before it fences, given that it was first seen at first under the
// node's current Ready transition (see ShutdownTaint): After less the
// shorter of the times since first and since the Ready condition's
// lastTransitionTime, neither counted below zero, so a clock set back
// counts nothing. A caller that tracks its own sightings (the
// out-of-service taint of podhealth-controller) must start a new one
// when the transition changes, as a Checker does, and pass the live node
// it is about to act on.
func ShutdownWaitLeft(node *corev1.Node, t ShutdownTaint, first, now time.Time) time.Duration {
	seen := now.Sub(first)
	if ready := readyCondition(node); ready != nil && !ready.LastTransitionTime.IsZero() {
		seen = min(seen, now.Sub(ready.LastTransitionTime.Time))
	}
	return t.After - max(seen, 0)
}

// forgetShutdowns forgets the first sightings of the shutdown taints that
// node no longer carries: one that is put back waits afresh. A node that
// came back (Ready) and went down again has a new Ready transition, so
// its sightings from before are never read again, and age out of the
// Memory.
func (e *evidence) forgetShutdowns(f nodeFact) {
	if f.node == nil {
		return
	}
	for _, t := range e.shutdownTaints {
		if f.state == NodeReady || !hasTaint(f.node, t.Key) {
			e.sightings.forget(fenceKey(fencerShutdown, shutdownKey(t.Key, f.node)))
		}
	}
}

func hasTaint(node *corev1.Node, key string) bool {
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].Key == key {
			return true
		}
	}
	return false
}
