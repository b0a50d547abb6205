package controller

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Transform strips a pod or a node, on its way into the cache, to what the
// rules, the fencing policy, the Breaker and the grouping read, and leaves
// any other object as it is. It is a cache.TransformFunc: the cache hands it
// the object it decoded, which nothing else holds yet, so it may change it.
//
// A pod keeps its name, namespace, UID, resourceVersion, owners,
// finalizers, deletion fields and podhealth.io annotations; its node name,
// volumes and termination grace period; its phase and conditions. Its
// containers are cut to their names (a pod must have one), and managed
// fields, labels, other annotations and container statuses go. A node keeps
// its name, UID, labels (the Breaker reads the zone), taints and conditions.
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return stripPod(o), nil
	case *corev1.Node:
		return stripNode(o), nil
	}
	return obj, nil
}

func stripPod(pod *corev1.Pod) *corev1.Pod {
	var annotations map[string]string
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, "podhealth.io/") {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k] = v
		}
	}
	containers := make([]corev1.Container, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		containers[i] = corev1.Container{Name: c.Name}
	}
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:                       pod.Name,
			Namespace:                  pod.Namespace,
			UID:                        pod.UID,
			ResourceVersion:            pod.ResourceVersion,
			CreationTimestamp:          pod.CreationTimestamp,
			DeletionTimestamp:          pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Annotations:                annotations,
			OwnerReferences:            pod.OwnerReferences,
			Finalizers:                 pod.Finalizers,
		},
		Spec: corev1.PodSpec{
			NodeName:                      pod.Spec.NodeName,
			Volumes:                       pod.Spec.Volumes,
			TerminationGracePeriodSeconds: pod.Spec.TerminationGracePeriodSeconds,
			Containers:                    containers,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, Conditions: pod.Status.Conditions},
	}
}

func stripNode(node *corev1.Node) *corev1.Node {
	return &corev1.Node{
		TypeMeta: node.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              node.Name,
			UID:               node.UID,
			ResourceVersion:   node.ResourceVersion,
			CreationTimestamp: node.CreationTimestamp,
			DeletionTimestamp: node.DeletionTimestamp,
			Labels:            node.Labels,
		},
		Spec:   corev1.NodeSpec{Taints: node.Spec.Taints},
		Status: corev1.NodeStatus{Conditions: node.Status.Conditions},
	}
}
