package kube

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// PolicyRules returns the rules of the smallest namespaced Role that this
// package needs in the workload's namespace, exactly the requests its code
// sends: list and watch pods (a pod informer behind a ListerSource, or the
// LIST of a ClientSource), delete pods (a Deleter), and create and patch
// events (an EventObserver whose recorder writes through client-go's event
// broadcaster, which patches repeated events). Nothing here reads a single
// pod, so get is not granted. A program that also creates pods, as
// examples/operator does, must add create on pods. Each call returns new
// slices that the caller may change.
func PolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}
