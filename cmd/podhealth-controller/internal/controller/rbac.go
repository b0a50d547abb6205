package controller

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// ClusterRules are the rules of the ClusterRole that podhealth-controller
// needs, and exactly the requests it sends outside leader election
// (config/rbac/cluster_role.yaml holds them): it caches pods, nodes and
// namespaces cluster-wide, force-deletes pods, reads a node and a claim
// live to confirm that a node is gone or what a claim's access modes are,
// records events.k8s.io events, and asks the API server who a client of
// its secure /metrics endpoint is and whether it may read them.
func ClusterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
}

// NamespaceRules are the rules of the Role that the namespaced mode
// (Options.WatchNamespaces) needs in each namespace it acts in: it caches
// and force-deletes the namespace's pods, reads a claim live, and records
// events about its pods and their owners there.
func NamespaceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}

// NamespacedModeClusterRules are the rules of the ClusterRole that the
// namespaced mode needs besides NamespaceRules: nodes, read only, and the
// reviews of the secure /metrics endpoint. Every pod right is in the
// namespaces' Roles; no Namespace is read.
func NamespacedModeClusterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
}

// OutOfServiceRules are the rules of the ClusterRole that
// Options.ApplyOutOfService needs besides ClusterRules: patching nodes, to
// apply and remove the out-of-service taint and its mark. Nothing else
// the controller does writes a node, so the manifests grant it only with
// the flag (config/out-of-service, the chart's outOfService.enabled).
func OutOfServiceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"patch"}}}
}

// FenceLeaseRules are the rules of the ClusterRole that a LeaseFencer
// (--fence-lease) needs besides ClusterRules: get on the Leases that
// self-fencing pods name (config/fence-lease).
func FenceLeaseRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}}}
}

// NetworkFenceRules are the rules of the ClusterRole that a
// NetworkFenceFencer (--network-fence-driver, --network-fence-class)
// needs besides ClusterRules: list on csi-addons NetworkFences
// (config/fence-network).
func NetworkFenceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{"csiaddons.openshift.io"}, Resources: []string{"networkfences"}, Verbs: []string{"list"}}}
}

// MetricsReaderRules are the rules of the ClusterRole that a client of
// the secure /metrics endpoint needs (Prometheus' service account, say).
func MetricsReaderRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
}

// LeaderElectionRules are the rules of the Role, in the controller's own
// namespace, that leader election needs: its Lease, and the core events it
// records about the Lease.
func LeaderElectionRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}

// NodeLeaseRules are the rules that the Breaker's view of the nodes needs:
// it caches the node Leases of kube-node-lease, to count a node that
// stopped renewing its Lease as not Ready. The manifests grant them in a
// ClusterRole, since an overlay's namespace would move a Role in
// kube-node-lease away; the cache reads that namespace only.
func NodeLeaseRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"list", "watch"}},
	}
}
