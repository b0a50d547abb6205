// Package podsource states the contracts that every health.PodSource and
// health.Deleter honour, and holds their conformance suites, TestPodSource
// and TestDeleter, which check any implementation against them, in the
// spirit of testing/fstest.TestFS. Each returns nil, or an error joining
// every failure it found, so that a test calls it as
//
//	if err := podsource.TestDeleter(newDeleter); err != nil {
//		t.Fatal(err)
//	}
//
// The PodSource contract, in addition to what health.PodSource documents:
//
//   - ListPods returns the workload's pods: no nil entries, each with a
//     name and a UID, no pod twice.
//   - Listing does not change any pod returned before: a source replaces
//     its objects rather than mutating them, as informer caches do.
//   - With no change in between, two lists return the same pods.
//   - When ctx is already done, ListPods returns an error that wraps
//     ctx.Err().
//   - ListPods is safe for concurrent use.
//
// The Deleter contract (health.Deleter), as TestDeleter checks it against
// a store that answers as the API server does for pods on a lost node:
//
//   - A force delete that returns nil removed the pod: its grace period
//     was 0 (a graceful delete would leave it Terminating for ever).
//   - The delete carries a precondition on the pod's UID: when a newer pod
//     holds the name, the answer is a Conflict (apierrors.IsConflict) and
//     the newer pod is left alone.
//   - A missing pod is a NotFound (apierrors.IsNotFound), never nil.
//   - ForceDelete never changes its pod argument.
//   - When ctx is already done, ForceDelete returns an error that wraps
//     ctx.Err() and deletes nothing.
//   - ForceDelete is safe for concurrent use.
//
// TestDeleter builds a fresh deleter and store for each property through a
// NewDeleterFunc that the caller writes: podsource/fake.Pods is its own
// store; a deleter over client-go's fake clientset needs reactors that
// enforce the UID precondition and the grace period, since the fake's
// tracker deletes whatever it is asked to.
//
// Filter narrows any source to the pods that a function keeps, without a
// second list.
//
// Implementations: package podsource/fake (in memory, for tests),
// package podsource/kube (client-go) and package
// podsource/controllerruntime (controller-runtime; a module of its own,
// whose fakeapi package gives controller-runtime's fake client the API
// server's answers that TestDeleter needs). All pass both suites.
package podsource
