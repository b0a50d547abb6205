package controller

import (
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
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
// termination grace period and the volumes that the fencing policy may
// count (see keepVolume); its phase and conditions (all of them: a pod with
// two of one type is malformed, and is not force-deleted). Its containers,
// managed fields, labels, other annotations and container statuses go. A
// node keeps its name, UID, labels (the Breaker reads the zone), taints,
// provider ID, conditions and addresses (the NetworkFence fencer reads
// them); a node Lease its name, renew time and duration; a workload's
// Lease (--fence-lease) its holder, acquire time and transitions too,
// which the Lease watch reads.
// TestEveryShippedRuleAndFencerJudgesTheCachedObjectsAsTheWholeOnes holds
// each shipped rule and fencer to that.
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return stripPod(o), nil
	case *corev1.Node:
		return stripNode(o), nil
	case *coordinationv1.Lease:
		return stripLease(o), nil
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
	var volumes []corev1.Volume
	for i := range pod.Spec.Volumes {
		if keepVolume(&pod.Spec.Volumes[i].VolumeSource) {
			volumes = append(volumes, pod.Spec.Volumes[i])
		}
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
			Tolerations:                   outOfServiceTolerations(pod.Spec.Tolerations),
			Volumes:                       volumes,
			TerminationGracePeriodSeconds: pod.Spec.TerminationGracePeriodSeconds,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, Conditions: pod.Status.Conditions},
	}
}

// keepVolume is false for a volume that only the node it runs on writes,
// or that the API server fills (configMap, secret, projected, emptyDir,
// downwardAPI), which almost every pod has (the service-account token) and
// which never needs fencing; any other volume is kept whole, so that the
// policy sees every claim and single-writer volume, even one of a kind it
// learns later. A volume source that also sets any other kind (the API
// server refuses two) is kept.
func keepVolume(src *corev1.VolumeSource) bool {
	rest := *src
	rest.ConfigMap, rest.Secret, rest.Projected, rest.EmptyDir, rest.DownwardAPI = nil, nil, nil, nil, nil
	return rest != corev1.VolumeSource{}
}

// outOfServiceMark keeps of a node's annotations only the out-of-service
// controller's mark.
func outOfServiceMark(annotations map[string]string) map[string]string {
	v, ok := annotations[AnnotationOutOfServiceApplied]
	if !ok {
		return nil
	}
	return map[string]string{AnnotationOutOfServiceApplied: v}
}

// outOfServiceTolerations keeps of a pod's tolerations only one that
// tolerates the out-of-service taint, which almost no pod has: the
// out-of-service controller reads it to see which pods the taint evicts.
func outOfServiceTolerations(tolerations []corev1.Toleration) []corev1.Toleration {
	// Every pod event passes here: nothing is allocated unless kept.
	for i := range tolerations {
		if toleratesOutOfServiceTaint(&tolerations[i]) {
			return []corev1.Toleration{tolerations[i]}
		}
	}
	return nil
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
			Annotations:       outOfServiceMark(node.Annotations),
		},
		// The provider ID tells health.ShutdownTaintOf whose word a
		// shutdown taint is.
		Spec: corev1.NodeSpec{Taints: node.Spec.Taints, ProviderID: node.Spec.ProviderID},
		// The addresses tell fencing.NetworkFenceFencer which fences
		// cover the node.
		Status: corev1.NodeStatus{Conditions: node.Status.Conditions, Addresses: node.Status.Addresses},
	}
}

func stripLease(lease *coordinationv1.Lease) *coordinationv1.Lease {
	stripped := &coordinationv1.Lease{
		TypeMeta: lease.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:            lease.Name,
			Namespace:       lease.Namespace,
			UID:             lease.UID,
			ResourceVersion: lease.ResourceVersion,
		},
		Spec: coordinationv1.LeaseSpec{RenewTime: lease.Spec.RenewTime, LeaseDurationSeconds: lease.Spec.LeaseDurationSeconds},
	}
	if lease.Namespace != corev1.NamespaceNodeLease {
		// A workload's Lease (--fence-lease): the Lease watch reads who
		// holds it and since which acquisition, without which a takeover
		// frees nobody.
		stripped.Spec.HolderIdentity = lease.Spec.HolderIdentity
		stripped.Spec.AcquireTime = lease.Spec.AcquireTime
		stripped.Spec.LeaseTransitions = lease.Spec.LeaseTransitions
	}
	return stripped
}
