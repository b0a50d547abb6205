package plugin

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	// HeldBack says why, when Action is held back or refused.
	HeldBack string `json:"heldBack,omitempty"`
	// Hint says what an administrator can do about the pod.
	Hint string `json:"hint,omitempty"`
	// Result is what --force-delete did about the pod.
	Result string `json:"result,omitempty"`

	pod  *corev1.Pod // as the scan listed it
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

// DeepCopyObject makes PodHealthList a runtime.Object for the printers.
func (l *PodHealthList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := *l
	out.Warnings = append([]string(nil), l.Warnings...)
	out.Items = make([]PodHealth, len(l.Items))
	for i, it := range l.Items {
		out.Items[i] = it
		out.Items[i].NodeNotReadySince = it.NodeNotReadySince.DeepCopy()
		out.Items[i].DeletionTimestamp = it.DeletionTimestamp.DeepCopy()
	}
	return &out
}

// nodeView is what a run knows about one node, for the NODE STATE column.
type nodeView struct {
	state         string
	notReadySince *metav1.Time
	ready         bool // Ready=True
	known         bool // the node was read, or confirmed gone
}

const (
	stateUnknown = "Unknown"
	stateGone    = "gone"
)

// viewNode describes a node object; gone says a live read confirmed that
// it does not exist.
func viewNode(n *corev1.Node, gone bool, now time.Time) nodeView {
	if gone {
		return nodeView{state: stateGone, known: true}
	}
	if n == nil {
		return nodeView{state: stateUnknown}
	}
	var ready *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			ready = &n.Status.Conditions[i]
			break
		}
	}
	outOfService := false
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			outOfService = true
		}
	}
	switch {
	case ready == nil:
		return nodeView{state: stateUnknown, known: true}
	case ready.Status == corev1.ConditionTrue && outOfService:
		return nodeView{state: "Ready (out-of-service taint)", ready: true, known: true}
	case ready.Status == corev1.ConditionTrue:
		return nodeView{state: "Ready", ready: true, known: true}
	}
	since := ready.LastTransitionTime.DeepCopy()
	state := "NotReady since " + duration.HumanDuration(now.Sub(since.Time))
	if since.IsZero() {
		state, since = "NotReady", nil
	}
	if outOfService {
		state = "out-of-service, " + state
	}
	return nodeView{state: state, notReadySince: since, known: true}
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
	switch {
	case r.Outcome == health.WouldForceDelete:
		row.Action = ActionForceDelete
	case r.Outcome == health.HeldBack:
		row.Action = ActionHeldBack
		row.HeldBack = r.HeldBack
		row.Hint = heldBackHint(r.HeldBack, p.Spec.NodeName)
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

// heldBackHint says what can release a pod held back for the given reason.
func heldBackHint(why, node string) string {
	switch {
	case strings.HasPrefix(why, "needs fencing evidence"):
		return fencingHint(node)
	case strings.HasPrefix(why, "breaker open"):
		return "many nodes are not Ready at once: check the control plane and the network before force-deleting anything"
	case strings.HasPrefix(why, "force-delete budget"):
		return "run again to delete more, or raise --max-deletes"
	case strings.HasPrefix(why, "opted out"):
		return "remove the annotation " + health.AnnotationForceDelete + " to let it go"
	}
	return ""
}

// actionText is the ACTION column.
func actionText(row PodHealth) string {
	s := row.Action
	if row.HeldBack != "" {
		s += ": " + shortHeldBack(row.HeldBack)
	}
	switch {
	case row.Action == ActionHeldBack && shortHint(row.HeldBack) != "":
		s += "; " + shortHint(row.HeldBack)
	case row.Action == ActionWait:
		s += ": no rule calls it dead yet"
	}
	return s
}

// shortHeldBack shortens the library's fencing reason for the table; -o
// wide and -o json keep it whole.
func shortHeldBack(why string) string {
	if rest, ok := strings.CutPrefix(why, "needs fencing evidence (node gone, or not Ready with the out-of-service taint): "); ok {
		if owner, ok := strings.CutPrefix(rest, "owned by StatefulSet "); ok {
			return "StatefulSet " + owner + ": needs fencing evidence"
		}
		return rest + ": needs fencing evidence"
	}
	return why
}

// shortHint is the table's hint for a held-back pod.
func shortHint(why string) string {
	switch {
	case strings.HasPrefix(why, "needs fencing evidence"):
		return "taint the node out-of-service once it is powered off"
	case strings.HasPrefix(why, "breaker open"):
		return "check the control plane and network"
	case strings.HasPrefix(why, "force-delete budget"):
		return "run again or raise --max-deletes"
	}
	return ""
}

// resultText says what a real check did about one pod.
func resultText(r health.PodReport) string {
	switch r.Outcome {
	case health.ForceDeleted:
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
		return "held back: " + r.HeldBack
	case health.WouldForceDelete:
		return "would force-delete"
	}
	rule := r.Verdict.Rule
	if rule == "" {
		rule = "no rule"
	}
	return fmt.Sprintf("not deleted: no longer dead (%s by %s)", r.Verdict.State, rule)
}
