package controllerruntime

import rbacv1 "k8s.io/api/rbac/v1"

// The RBAC this package needs, as kubebuilder markers. controller-gen reads
// markers only from the packages it is pointed at, never from
// dependencies: copy these four lines next to your reconciler's own
// markers (and add create on pods if it creates replacements). The first
// two are PolicyRules, the last two EvidencePolicyRules; a test holds the
// markers and the functions to the same rules.
//
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;watch

// PolicyRules returns the rules, in the workload's namespace, of what a
// PodSource over the manager's cache, a Deleter and an EventObserver over
// mgr.GetEventRecorder send: list and watch pods (the cache's pod
// informer), delete pods, and create and patch events.k8s.io events (the
// events.k8s.io/v1 broadcaster creates an event and patches its series
// when it repeats). Nothing here reads a single pod, so get is not
// granted. Each call returns new slices that the caller may change.
func PolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "delete"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}

// EvidencePolicyRules returns the rules that node and claim evidence need
// on top of PolicyRules. Nodes are cluster-scoped and need a ClusterRole:
// list and watch (the cache's node informer behind Nodes over the
// manager's cache) and get (Nodes over mgr.GetAPIReader(), the live read
// that confirms a node is gone). Claims need list and watch in the
// workload's namespace (the cache's claim informer behind Claims). Each
// call returns new slices.
func EvidencePolicyRules() (cluster, namespaced []rbacv1.PolicyRule) {
	return []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		}, []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"list", "watch"}},
		}
}
