// Package fake provides Pods, an in-memory health.PodSource and
// health.Deleter for tests, with fault injection.
//
// Pods behaves like a small API server behind a lagging informer cache:
//
//   - Delete honours DeleteOptions as the API server does: a UID
//     precondition that does not match fails with a Conflict, a missing pod
//     with NotFound, a grace period of 0 removes the pod at once, a longer
//     one only sets deletionTimestamp (no kubelet ever confirms it), and
//     finalizers keep a deleted pod until they are removed.
//   - Every error it returns is a real k8s.io/apimachinery/pkg/api/errors
//     error, so apierrors.IsNotFound and friends work on it.
//   - Options.ListLag keeps a removed or replaced pod in the list for N more
//     ListPods calls, like an informer that has not seen the event yet.
//   - An Interceptor can wrap ListPods and Delete to inject any error or
//     change any answer, in the style of controller-runtime's interceptor
//     package.
//   - Every delete is recorded with its name, UID precondition and grace
//     period; see Deletes.
//
// ReadyNode, LostNode, TaintEvicted and Drained build nodes and pods as a
// real control plane leaves them (the fixtures of testdata/real-cluster):
// a heartbeating node, one whose kubelet stopped posting status, a pod
// the taint-eviction controller deleted, and a pod drained through the
// Eviction API. They return new objects and change none.
//
// Pods never mutates a stored pod: every change stores a new object, so
// pods returned by ListPods stay as they were, as with an informer cache.
// Pods is safe for concurrent use.
package fake
