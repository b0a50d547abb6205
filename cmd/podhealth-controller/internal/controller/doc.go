// Package controller is podhealth-controller's reconciler: it force-deletes
// the pods that died with their node, in the namespaces that opt in, for
// every workload at once and without changing its operator.
//
// Pods are grouped by their controlling owner (a ReplicaSet, a
// StatefulSet, a Job, an operator's custom resource...); a pod without one
// is a group of its own. Each group is judged by a podhealth Checker built
// for it: the library's rules, node evidence from the cache with a live
// read to confirm that a node is gone, the default fencing policy (a
// StatefulSet pod or a single-writer volume waits for the out-of-service
// taint or the node's deletion), a Breaker and one DeleteBudget for the
// whole cluster. The reconciler never creates, evicts or patches a pod: the
// owners recreate what it removes.
//
// A pod event enqueues its own group only, and only when the pod could be
// dead (it is being deleted, or it failed); a node event enqueues the
// groups with a pod on that node, and only when what the node says
// changed (health.NodeStateOf, or its out-of-service taint) or it was
// deleted. A namespace that gets the label enqueues its groups. A healthy
// cluster therefore costs no reconcile and no API request. The cache
// indexes pods by group and by node (SetupWithManager), so that a
// reconcile reads its group's pods, and a node event the pods on that
// node, without copying a namespace's or the cluster's.
//
// [Transform] strips from the cached pods and nodes what no rule reads, so
// that a cluster-wide cache stays small.
package controller
