// Package replacements remembers the replacement pods an operator has
// created until its cache lists them, so that "(false, nil): create a
// replacement" cannot create two.
//
// An operator that checks its workload from an informer's cache creates a
// replacement when the check finds no live pod. Its cache shows the new pod
// only a moment later: a check in between sees no live pod again and, on its
// own, would create a second one. A [Tracker] closes that gap in the spirit
// of the expectations of Kubernetes' own controllers: the operator tells it
// about each pod it created ([Tracker.Created]), and before creating another
// it asks how many of them its cache does not list yet ([Tracker.Pending]
// with the pods the check listed, or [Tracker.PendingReport] with the
// check's report). While that number is above zero, it creates nothing and
// waits for the next pod event of the workload, or for [Tracker.Wait].
//
// A remembered pod is forgotten when a list contains it (matched by UID), or
// when it expires: after Options.TTL (5 minutes by default) without a list
// that contains it. The expiry keeps a lost watch event, or a pod deleted
// before the cache ever listed it, from blocking the workload for ever.
//
// Call Pending after every check of the workload, healthy or not, with the
// pods of that check's own list:
//
//   - a pod is forgotten as soon as a list contains it, so that when it goes
//     away later (it died too) the next replacement is not held up until
//     the TTL ends;
//   - a cache that catches up between the check and the call to Pending
//     cannot make it answer 0 for a pod the check did not count.
//
// Bad input never panics. A nil pod, or a pod with neither UID nor name,
// passed to Created is still remembered, as a pod that no list can confirm:
// the create succeeded, so the safe answer is "one pending" until the TTL
// ends. A pod with a name but no UID (client-go's fake clientset leaves the
// UID empty) is matched by namespace and name. Nil entries of a list are
// skipped. The workload key is any string the caller chooses, the empty
// string included.
//
// The package depends only on k8s.io/api, k8s.io/apimachinery,
// k8s.io/utils/clock and package health of this module, never on client-go
// or controller-runtime, so that operators on either can use it.
package replacements
