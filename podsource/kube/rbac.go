package kube

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// PolicyRules returns the rules of the smallest namespaced Role that this
// package needs in the workload's namespace: get, list and watch pods (for
// an informer or a ClientSource), delete pods (for a Deleter), and create
// and patch events (for an EventObserver whose recorder writes through
// client-go's event broadcaster, which patches repeated events). A program
// that also creates pods, as examples/operator does, must add create on
// pods. Each call returns new slices that the caller may change.
func PolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}
