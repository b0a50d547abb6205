package health

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// objectRef names an object in logs the way Kubernetes' structured logging
// does: "namespace/name" as text, {"name", "namespace"} as JSON.
type objectRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

func (r objectRef) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// MarshalLog keeps logr sinks from printing the String form in JSON.
func (r objectRef) MarshalLog() any {
	type plain objectRef
	return plain(r)
}

func podKeys(pod *corev1.Pod, v Verdict) []any {
	return []any{
		"pod", objectRef{Name: pod.Name, Namespace: pod.Namespace},
		"uid", string(pod.UID),
		"node", objectRef{Name: pod.Spec.NodeName},
		"rule", v.Rule, "reason", v.Reason,
	}
}

func keyOf(pod *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}
