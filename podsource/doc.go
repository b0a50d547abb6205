// Package podsource states the contract that every health.PodSource
// honours, and holds TestPodSource, a conformance suite that checks any
// implementation against it, in the spirit of testing/fstest.TestFS.
//
// The contract, in addition to what health.PodSource documents:
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
// Filter narrows any source to the pods that a function keeps, without a
// second list.
//
// Implementations: package podsource/fake (in memory, for tests) and
// package podsource/kube (client-go).
package podsource
