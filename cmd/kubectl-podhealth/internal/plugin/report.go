package plugin

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/podhealth/podhealth/health"
)

// ListGroupVersionKind is the apiVersion and kind of what -o json and
// -o yaml print. It is not served by any API server: it only names the
// document.
var ListGroupVersionKind = schema.GroupVersionKind{Group: "podhealth.io", Version: "v1alpha1", Kind: "PodHealthList"}

// Actions: what a run does, or would do, about a listed pod.
const (
	// ActionForceDelete: the pod is dead and the policy lets it go.
	ActionForceDelete = "force delete"
	// ActionHeldBack: the pod is dead, but the policy, the breaker, the
	// pod's annotation or the budget keeps it; HeldBack says why.
	ActionHeldBack = "held back"
	// ActionWait: the pod is terminating on a node that is not Ready, and
	// no rule calls it dead yet.
	ActionWait = "wait"
	// ActionRefused: the pod cannot be force-deleted safely (no name or
	// UID for the precondition).
	ActionRefused = "refused"
)

// PodHealthList is the document that -o json and -o yaml print. It is a
// plain value: safe for concurrent reads, not for concurrent changes.
type PodHealthList struct {
	metav1.TypeMeta `json:",inline"`
	// ScannedPods is how many pods the scan listed.
	ScannedPods int `json:"scannedPods"`
	// Warnings are what stderr said about missing evidence.
	Warnings []string `json:"warnings,omitempty"`
	// Items are the pods that are dead, held back, or terminating on a
	// node that is not Ready.
	Items []PodHealth `json:"items"`
}

// PodHealth is one listed pod.
type PodHealth struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	Node      string    `json:"node,omitempty"`
	// NodeState is Ready, NotReady since <age>, out-of-service, gone,
	// Unknown, or - for an unscheduled pod.
	NodeState string `json:"nodeState"`
	// NodeNotReadySince is the Ready condition's lastTransitionTime of a
	// node that is not Ready.
	NodeNotReadySince *metav1.Time `json:"nodeNotReadySince,omitempty"`
	DeletionTimestamp *metav1.Time `json:"deletionTimestamp,omitempty"`
	// Verdict is the library's: Dead or Terminating.
	Verdict string `json:"verdict"`
	// Rule and Reason are the library's rule that decided, and the
	// evidence it saw.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Action is one of the Action constants.
	Action string `json:"action"`
	// FencedBy, when the pod needs fencing evidence and a fencer's proof
	// lets it go, says which: the fencer, what it proves, by whom, since
	// when, on what evidence (health.Fence.String).
	FencedBy string `json:"fencedBy,omitempty"`
	// HeldBack says why, when Action is held back or refused.
	HeldBack string `json:"heldBack,omitempty"`
	// HeldBackReason is the library's reason type (health.HoldReason),
	// when Action is held back: HeldForFencing, HeldByBreaker,
	// HeldByBudget, HeldByAnnotation, HeldMalformed or HeldUnidentified.
	HeldBackReason string `json:"heldBackReason,omitempty"`
	// Hint says what an administrator can do about the pod.
	Hint string `json:"hint,omitempty"`
	// Result is what --force-delete did about the pod.
	Result string `json:"result,omitempty"`

	pod  *corev1.Pod // as the scan listed it
	hold health.Hold // why the library held it back
	done doneKind    // what --force-delete did, for the exit code
}

// doneKind sorts the results of --force-delete for the exit code.
type doneKind int

const (
	notDone     doneKind = iota // not attempted
	doneRemoved                 // force-deleted, or found gone or replaced
	doneHeld                    // held back by the real check
	doneFailed                  // the delete, or the read before it, failed
	doneLeft                    // no longer dead: left alone
)

// doneOf sorts a real check's outcome.
func doneOf(o health.Outcome) doneKind {
	switch o {
	case health.ForceDeleted, health.WasAlreadyGone, health.NameReused, health.DeletedEarlier, health.BlockedByFinalizers:
		return doneRemoved
	case health.HeldBack:
		return doneHeld
	case health.DeleteFailed, health.NotAttempted:
		return doneFailed
	}
	return doneLeft
}

// nodeView is what a run knows about one node, for the NODE STATE column.
type nodeView struct {
	state         string
	notReadySince *metav1.Time
	down          bool // health.NodeState.Down: no kubelet finishes a deletion
	known         bool // the node's state is not health.NodeUnknown
}

const (
	stateUnknown = "Unknown"
	stateGone    = "gone"
)

// viewNode describes a node object as the library reads it
// (health.NodeStateOf); gone says a live read confirmed that it does not
// exist.
func viewNode(n *corev1.Node, gone bool, now time.Time) nodeView {
	state := health.NodeStateOf(n)
	if gone {
		state = health.NodeGone
	}
	switch state {
	case health.NodeGone:
		return nodeView{state: stateGone, down: true, known: true}
	case health.NodeUnknown:
		return nodeView{state: stateUnknown}
	case health.NodeReady:
		// A taint left on a Ready node is stale: its kubelet reports.
		switch {
		case hasTaint(n, corev1.TaintNodeOutOfService):
			return nodeView{state: "Ready (out-of-service taint)", known: true}
		case hasTaint(n, corev1.TaintNodeUnreachable) || hasTaint(n, corev1.TaintNodeNotReady):
			return nodeView{state: "Ready (stale node-lifecycle taint)", known: true}
		}
		return nodeView{state: "Ready", known: true}
	}
	var since *metav1.Time
	for i := range n.Status.Conditions {
		if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady && !c.LastTransitionTime.IsZero() {
			since = c.LastTransitionTime.DeepCopy()
		}
	}
	text := "NotReady"
	if since != nil {
		text = "NotReady since " + duration.HumanDuration(now.Sub(since.Time))
	}
	if state == health.NodeOutOfService {
		text = "out-of-service, " + text
	}
	return nodeView{state: text, notReadySince: since, down: true, known: true}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// fencingHint is the next step for a pod held back for fencing evidence.
func fencingHint(node string) string {
	if node == "" {
		node = "NODE"
	}
	return "once node " + node + " is powered off: kubectl taint node " + node + " " + corev1.TaintNodeOutOfService + "=nodeshutdown:NoExecute"
}

// describe fills in the row of a pod that a dry-run check reported.
func describe(r health.PodReport, node nodeView) PodHealth {
	p := r.Pod
	row := PodHealth{
		Namespace:         p.Namespace,
		Name:              p.Name,
		UID:               p.UID,
		Node:              p.Spec.NodeName,
		NodeState:         node.state,
		NodeNotReadySince: node.notReadySince,
		DeletionTimestamp: p.DeletionTimestamp.DeepCopy(),
		Verdict:           r.Verdict.State.String(),
		Rule:              r.Verdict.Rule,
		Reason:            r.Verdict.Reason,
		pod:               p,
	}
	if p.Spec.NodeName == "" {
		row.NodeState = "-"
	}
	if r.FencedBy != nil {
		row.FencedBy = r.FencedBy.String()
	}
	switch {
	case r.Outcome == health.WouldForceDelete:
		row.Action = ActionForceDelete
	case r.Outcome == health.HeldBack:
		row.heldBack(r.HeldBack)
	case r.Verdict.State == health.Dead:
		row.Action = ActionRefused
		if r.Err != nil {
			row.HeldBack = r.Err.Error()
		}
	default:
		row.Action = ActionWait
		row.Hint = "the kubelet has not confirmed the graceful deletion; " + fencingHint(p.Spec.NodeName)
	}
	return row
}

// heldBack records that the library held the row's pod back, and why.
func (row *PodHealth) heldBack(hold health.Hold) {
	row.Action, row.HeldBack, row.HeldBackReason, row.hold = ActionHeldBack, hold.String(), hold.Reason.String(), hold
	row.Hint = heldBackHint(hold.Reason, row.Node)
}

// heldBackHint says what can release a pod held back for the given reason.
func heldBackHint(reason health.HoldReason, node string) string {
	switch reason {
	case health.HeldForFencing:
		return fencingHint(node)
	case health.HeldByBreaker:
		return "many nodes are not Ready at once: check the control plane and the network before force-deleting anything"
	case health.HeldByBudget:
		return "run again to delete more, or raise --max-deletes"
	case health.HeldByAnnotation:
		return "remove the annotation " + health.AnnotationForceDelete + " to let it go"
	}
	return ""
}

// actionText is the ACTION column.
func actionText(row PodHealth) string {
	s := row.Action
	if row.HeldBack != "" {
		s += ": " + shortHeldBack(row)
	}
	switch {
	case row.Action == ActionHeldBack && shortHint(row.hold.Reason) != "":
		s += "; " + shortHint(row.hold.Reason)
	case row.Action == ActionWait:
		s += ": no rule calls it dead yet"
	}
	return s
}

// shortHeldBack shortens the library's reason for the table; -o wide and
// -o json keep it whole.
func shortHeldBack(row PodHealth) string {
	if row.hold.Reason != health.HeldForFencing {
		return row.HeldBack
	}
	if row.pod != nil {
		for _, ref := range row.pod.OwnerReferences {
			if ref.Kind == "StatefulSet" {
				return "StatefulSet " + ref.Name + ": needs fencing evidence"
			}
		}
	}
	return row.hold.Detail + ": needs fencing evidence"
}

// shortHint is the table's hint for a pod held back for reason.
func shortHint(reason health.HoldReason) string {
	switch reason {
	case health.HeldForFencing:
		return "taint the node out-of-service once it is powered off"
	case health.HeldByBreaker:
		return "check the control plane and network"
	case health.HeldByBudget:
		return "run again or raise --max-deletes"
	}
	return ""
}

// resultText says what a real check did about one pod.
func resultText(r health.PodReport) string {
	switch r.Outcome {
	case health.ForceDeleted:
		if r.FencedBy != nil {
			return "force-deleted; fenced: " + r.FencedBy.String()
		}
		return "force-deleted"
	case health.WasAlreadyGone:
		return "already gone"
	case health.NameReused:
		return "left alone: a newer pod holds the name"
	case health.DeletedEarlier:
		return "force-deleted earlier"
	case health.BlockedByFinalizers:
		return "force-deleted earlier; finalizers still hold it"
	case health.DeleteFailed:
		return fmt.Sprintf("delete failed: %v", r.Err)
	case health.NotAttempted:
		return "not attempted: interrupted"
	case health.HeldBack:
		return "held back: " + r.HeldBack.String()
	case health.WouldForceDelete:
		return "would force-delete"
	}
	rule := r.Verdict.Rule
	if rule == "" {
		rule = "no rule"
	}
	return fmt.Sprintf("not deleted: no longer dead (%s by %s)", r.Verdict.State, rule)
}
