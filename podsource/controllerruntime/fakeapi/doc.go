// Package fakeapi wraps controller-runtime's fake client so that it answers
// as an API server does where podhealth's behaviour depends on it.
// controller-runtime's fake client (sigs.k8s.io/controller-runtime/pkg/client/fake)
// on its own:
//
//   - ignores UID preconditions: a force delete of a pod whose name a newer
//     pod has taken deletes the newer pod, where an API server answers 409
//     Conflict;
//   - refuses to be seeded with an object that has a deletionTimestamp and
//     no finalizers, which is exactly the pod that died with its node (the
//     taint-eviction controller deleted it gracefully, and no kubelet will
//     ever confirm it);
//   - removes a pod at once on a graceful delete, where an API server only
//     marks a pod bound to a node for deletion and waits for its kubelet;
//   - leaves a created or seeded object without a UID.
//
// A test on the bare fake client can therefore pass with a deleter that
// sends no UID precondition or a graceful delete. NewClient's client
// fixes all four with interceptors (package
// sigs.k8s.io/controller-runtime/pkg/client/interceptor) that return the
// API server's own errors (k8s.io/apimachinery/pkg/api/errors):
//
//   - a delete whose UID or resourceVersion precondition does not match
//     the stored object is refused with a Conflict and changes nothing;
//   - an object may be seeded with a deletionTimestamp and no finalizers:
//     the client keeps it with a hidden finalizer of its own that Get
//     and List never show, and that an Update keeps, so that a Get then
//     Update of a stuck Terminating pod leaves it stuck;
//   - a delete with DryRun All is checked (NotFound, the UID precondition)
//     and changes nothing;
//   - a delete of a pod bound to a node, with a grace period other than 0,
//     only sets its deletionTimestamp: the pod stays, Terminating, as on a
//     lost node; a delete with a grace period of 0 (or of a pod not bound
//     to a node) removes it, unless it has finalizers of its own;
//   - a create sets a random UID and the creation timestamp when the object
//     has none, and a seeded object without a UID gets one.
//
// The client tells what it served (Client.Requests, Client.Deletes): every
// write in the order answered, with its answer, and each delete with its
// options as sent, so that a test checks the force deletes its code sent
// without an interceptor of its own.
//
// NewClient builds the fake client over client-go's scheme. NewClientFrom
// wraps an operator's own fake.ClientBuilder instead, keeping its scheme
// and custom resources, field indexes (a List by an owner index works),
// status subresources and interceptors. The builder's interceptors sit
// beneath this package's: its Delete interceptor sees every delete that
// passes the UID precondition, once, with the options it was sent with
// (the grace period, the precondition), and an error it returns is the
// answer, with nothing removed or marked; a delete refused for its UID
// precondition is answered before it, as an API server refuses it before
// any admission. The hidden finalizer is added (a graceful delete of a
// pod on a node) and removed (a grace-0 delete) with Updates that its
// Update interceptor sees too.
//
// What it does not do: the deletionTimestamp of a graceful delete is the
// time of the delete, not that time plus the grace period, and
// deletionGracePeriodSeconds is not set; watches (client.WithWatch) show
// the hidden finalizer, and a Patch that sets the finalizers replaces it
// (use Update on such a pod). Wrap the client again with interceptor.NewClient to
// inject faults of your own.
//
// # Status, and failing a node in a test
//
// Like an API server, the client keeps a Pod's and a Node's status apart
// (controller-runtime's fake client treats every built-in kind with a
// status subresource so): an Update saves the object but drops any change
// to its status, without an error. Write status with c.Status().Update.
// Seed objects keep the status they are given.
//
// FailNode and EvictPod do, on a running client, what the node-lifecycle
// and taint-eviction controllers do, each write through the right
// subresource; package podsource/fake's ReadyNode, LostNode, TaintEvicted
// and Drained build the same objects to seed NewClient with, as a real
// control plane leaves them.
//
// The client is safe for concurrent use; its deletes are serialized.
package fakeapi
