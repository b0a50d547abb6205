// Package controllerruntime binds package health to controller-runtime
// (sigs.k8s.io/controller-runtime), for operators built with kubebuilder or
// operator-sdk. It lives in a module of its own, so that users of the root
// module never get controller-runtime in their module graph. Its floors
// (go.mod): Go 1.22, controller-runtime v0.19.0, k8s.io v0.31.0 and the
// root module v0.1.0 (which has no controller-runtime), so adding it
// upgrades nothing for an operator on those or later.
//
// It provides:
//   - PodSource, a health.PodSource over a client.Reader (the manager's
//     cache): a check sends no request. The cache ignores the context of a
//     read, so ListPods checks it first;
//   - Deleter, a health.Deleter over a client.Writer that sends DELETE with
//     a grace period of 0 and a UID precondition, and refuses pods outside
//     its namespace and label selector without sending anything;
//   - Nodes and Claims, the node and claim evidence of health.Options,
//     read from the manager's cache, with Nodes over mgr.GetAPIReader() as
//     the live read that confirms that a node is gone;
//   - EventObserver, a health.Observer that records events through an
//     events.k8s.io/v1 recorder (mgr.GetEventRecorder from
//     controller-runtime v0.23 on), with podsource.EventFor's reasons;
//   - DeadPodPredicate, a predicate that lets a pod event through when the
//     pod becomes dead by a Checker's own rules, so that its owner is
//     reconciled at once;
//   - PolicyRules, EvidencePolicyRules and kubebuilder RBAC markers (in
//     rbac.go) for what all of the above send;
//   - Checkers, built once at setup from the manager: it owns what an
//     operator's checks share (the Memory, the record of holds, the node
//     and claim readers, the Lease watch) and hands out, per reconcile, a
//     checker of one workload's pods (For, by label; ForOwner, by owner),
//     so that a reconciler's glue stays short and nothing is kept in a
//     package-level variable.
//
// At setup, and in a reconciler (examples/controllerruntime in full):
//
//	checkers, err := controllerruntime.NewCheckers(mgr, controllerruntime.CheckersOptions{
//		EventRecorder: mgr.GetEventRecorder("podhealth"), // v0.23 on; see CheckersOptions
//	})
//	// per reconcile:
//	checker, err := checkers.For(req.Namespace, selector, controllerruntime.CheckOptions{EventObject: &owner})
//	report, err := checker.CheckReport(ctx) // (false, nil): create a replacement
//
// What this package shares with podsource/kube lives in package podsource,
// which neither binding owns: every namespace and selector is checked by
// podsource.ValidateScope (a selector of every pod, such as nil,
// labels.Everything(), labels.Nothing() or any empty selector, is refused,
// and podsource.WholeNamespace() selects a whole namespace on purpose); a
// pod outside the scope is refused with a *podsource.OutOfScopeError; the
// delete options are podsource.ForceDeleteOptions; and the events'
// reasons, actions and messages are podsource.EventFor's.
//
// examples/controllerruntime is a complete manager and reconciler built on
// this package and on package replacements.
//
// # Testing with controller-runtime's fake client
//
// controller-runtime's fake client (pkg/client/fake) ignores UID
// preconditions, so a deleter that forgets them passes a test on it, and it
// refuses to be seeded with a pod that has a deletionTimestamp and no
// finalizers: the very pod that died with its node. It also removes a pod
// at once on a graceful delete, where an API server leaves a pod on a lost
// node Terminating for ever. Tests on the bare fake client therefore prove
// little about force deletes. Package fakeapi wraps it with interceptors
// (pkg/client/interceptor) that answer as an API server does, with the API
// server's own errors: this module's tests, and the example's, run on it.
//
// # Concurrency
//
// Checkers, PodSource, Deleter, Nodes, Claims and EventObserver are safe
// for concurrent use when the client or recorder under them is, as the
// manager's are. The predicate of DeadPodPredicate is safe for concurrent
// use.
package controllerruntime
