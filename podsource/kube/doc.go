// Package kube binds package health to a Kubernetes API server through
// client-go. It is the only package of this module that imports client-go.
//
// It provides:
//
//   - ListerSource, a health.PodSource over an informer's lister: a check
//     sends no LIST request, and the cached pods are never changed;
//   - ClientSource, a health.PodSource that lists through the typed client,
//     for programs without an informer;
//   - Deleter, a health.Deleter that sends DELETE with a grace period of 0
//     and a UID precondition, and refuses pods outside its namespace and
//     label selector without sending anything;
//   - EventObserver, a health.Observer that records a Kubernetes event for
//     each force delete (or, in a dry run, each one that would be sent);
//   - DeadPodHandler, an informer event handler that reports a pod as soon
//     as it becomes dead, so that a controller can check its workload at
//     once instead of at the next resync;
//   - NodeSource, LiveNodes and ClaimSource, the node and claim evidence of
//     health.Options (Nodes, LiveNodes, Claims) and health.Breaker, over informer
//     listers (and one live read to confirm that a node is gone);
//   - PolicyRules and EvidencePolicyRules, the RBAC rules all of the above
//     need.
//
// A typical controller wires them as follows (error handling elided):
//
//	factory := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithNamespace(ns))
//	lister := factory.Core().V1().Pods().Lister()
//	selector := labels.SelectorFromSet(labels.Set{"app": "registry"})
//	source, _ := kube.NewListerSource(lister, ns, selector)
//	deleter, _ := kube.NewDeleter(client.CoreV1(), ns, kube.DeleterOptions{Selector: selector})
//	observer, _ := kube.NewEventObserver(recorder, kube.EventObserverOptions{Object: owner})
//	checker, _ := health.New(source, deleter, health.Options{Observer: observer})
//	healthy, err := checker.Check(ctx)
//
// Constructors check their input and return an error, never panic. Every
// namespace is required: nothing in this package acts across namespaces.
// The label selectors of the sources and of the Deleter are required too,
// and a selector of every pod is refused: nil, labels.Everything(),
// labels.Nothing() (what metav1.LabelSelectorAsSelector(nil) returns; it
// renders as "", which the API server reads as "every pod") and any other
// empty selector. A forgotten selector therefore cannot make a check answer
// healthy from another workload's pod, nor force-delete that workload's
// dead pods. A tool that means the whole namespace says so with
// podsource.WholeNamespace().
//
// # Concurrency
//
// ListerSource, ClientSource, Deleter, NodeSource, LiveNodes, ClaimSource
// and EventObserver are safe for concurrent use (EventObserver as far as
// its recorder is, which client-go's recorders are). The handler returned by DeadPodHandler is safe for
// concurrent use when its enqueue function is.
package kube
