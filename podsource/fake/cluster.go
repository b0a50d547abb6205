package fake

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The words Kubernetes' controllers write, as a real control plane
// (v1.37) left them in the fixtures of testdata/real-cluster.
const (
	reasonNodeStatusUnknown      = "NodeStatusUnknown"
	messageNodeStatusUnknown     = "Kubelet stopped posting node status."
	reasonKubeletReady           = "KubeletReady"
	messageKubeletReady          = "kubelet is posting ready status"
	reasonDeletionByTaintManager = "DeletionByTaintManager"
	messageTaintManager          = "Taint manager: deleting due to NoExecute taint"
	reasonEvictionByEvictionAPI  = "EvictionByEvictionAPI"
	messageEvictionAPI           = "Eviction API: evicting"
	defaultGracePeriodSeconds    = 30
)

// ReadyNode returns a node named name whose kubelet posted Ready at at,
// as the API server serves a heartbeating node.
func ReadyNode(name string, at time.Time) *corev1.Node {
	t := metav1.NewTime(at.UTC().Truncate(time.Second))
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: t},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: t, LastTransitionTime: t,
			Reason: reasonKubeletReady, Message: messageKubeletReady,
		}}},
	}
}

// LostNode returns a copy of node as the node-lifecycle controller leaves a
// node whose kubelet stopped posting status, once it noticed at at: every
// condition Unknown since at (Ready with reason NodeStatusUnknown), and
// the node.kubernetes.io/unreachable taints NoSchedule and NoExecute added
// at at. A node without conditions gets a Ready one. The taint-eviction
// controller then evicts every pod that does not tolerate the NoExecute
// taint: see TaintEvicted. node is not changed.
func LostNode(node *corev1.Node, at time.Time) *corev1.Node {
	n := node.DeepCopy()
	t := metav1.NewTime(at.UTC().Truncate(time.Second))
	if len(n.Status.Conditions) == 0 {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady}}
	}
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		if c.Status != corev1.ConditionUnknown {
			c.LastTransitionTime = t
		}
		c.Status = corev1.ConditionUnknown
		if c.Type == corev1.NodeReady {
			c.Reason, c.Message = reasonNodeStatusUnknown, messageNodeStatusUnknown
		}
	}
	taints := n.Spec.Taints[:0:0]
	for _, taint := range n.Spec.Taints {
		if taint.Key != corev1.TaintNodeUnreachable && taint.Key != corev1.TaintNodeNotReady {
			taints = append(taints, taint)
		}
	}
	n.Spec.Taints = append(taints,
		corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &t},
		corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &t},
	)
	return n
}

// TaintEvicted returns a copy of pod as the taint-eviction controller
// leaves it when, at at, its toleration of its node's NoExecute taint has
// run out: the condition DisruptionTarget=True with reason
// DeletionByTaintManager since at, then a graceful delete, whose
// deletionTimestamp is at plus the grace period (the pod's
// terminationGracePeriodSeconds, 30 s when unset). No kubelet confirms it,
// so on a real cluster the pod stays so, Terminating, for ever. pod is not
// changed; it should be bound to a lost node (LostNode) and have a UID, as
// every pod an API server serves has. The condition's observedGeneration,
// a field from k8s.io/api v0.33 on, is left unset.
func TaintEvicted(pod *corev1.Pod, at time.Time) *corev1.Pod {
	return disrupted(pod, at, reasonDeletionByTaintManager, messageTaintManager)
}

// Drained returns a copy of pod as an eviction through the Eviction API
// (kubectl drain, the cluster autoscaler) leaves it at at on a Ready node:
// DisruptionTarget=True with reason EvictionByEvictionAPI, and a graceful
// delete that its kubelet is carrying out. podhealth must leave it to
// finish. pod is not changed.
func Drained(pod *corev1.Pod, at time.Time) *corev1.Pod {
	return disrupted(pod, at, reasonEvictionByEvictionAPI, messageEvictionAPI)
}

// disrupted marks a copy of pod DisruptionTarget=True for reason at at,
// and deletes it gracefully then, as the API server records it.
func disrupted(pod *corev1.Pod, at time.Time, reason, message string) *corev1.Pod {
	p := pod.DeepCopy()
	t := metav1.NewTime(at.UTC().Truncate(time.Second))
	condition := corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, LastTransitionTime: t,
		Reason: reason, Message: message,
	}
	replaced := false
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.DisruptionTarget {
			p.Status.Conditions[i], replaced = condition, true
		}
	}
	if !replaced {
		p.Status.Conditions = append(p.Status.Conditions, condition)
	}
	if p.DeletionTimestamp == nil {
		grace := int64(defaultGracePeriodSeconds)
		if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
		deadline := metav1.NewTime(t.Add(time.Duration(grace) * time.Second))
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &deadline, &grace
		p.Generation++ // the API server counts the graceful delete as a change of spec
	}
	return p
}
