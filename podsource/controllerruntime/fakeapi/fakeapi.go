package fakeapi

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// hiddenFinalizer is the finalizer the client keeps, hidden, on an object that
// has a deletionTimestamp and no finalizer of its own, so that the fake
// client stores it. Get and List remove it from what they return.
const hiddenFinalizer = "fakeapi.podhealth.io/no-kubelet"

// defaultGracePeriod is a pod's terminationGracePeriodSeconds when its spec
// has none, as the API server defaults it.
const defaultGracePeriod = 30

// NewClient returns a fake client, over client-go's scheme, that holds
// objs (copied, never changed) and answers deletes, creates and reads as
// the package documentation says. It returns an error when the fake client
// refuses an object.
func NewClient(objs ...client.Object) (*Client, error) {
	return NewClientFrom(fake.NewClientBuilder().WithScheme(scheme.Scheme), objs...)
}

// NewClientFrom builds the fake client of builder, an operator's own (its
// scheme, its custom resources, field indexes, status subresources and
// interceptors), seeded with objs too, and wraps it as NewClient's is. Pass
// the objects here rather than to builder.WithObjects, so that each gets
// what an API server would have given it: a UID when it has none, and a
// hidden finalizer when it has a deletionTimestamp and no finalizer of its
// own. objs are copied, never changed; builder is used once (Build). The
// builder's scheme must know core/v1, for the pods. It returns an error
// when builder is nil or the fake client refuses an object.
func NewClientFrom(builder *fake.ClientBuilder, objs ...client.Object) (*Client, error) {
	if builder == nil {
		return nil, fmt.Errorf("fakeapi: NewClientFrom: nil *fake.ClientBuilder")
	}
	seeded := make([]client.Object, 0, len(objs))
	for i, o := range objs {
		if o == nil {
			return nil, fmt.Errorf("fakeapi: object %d is nil", i)
		}
		o = o.DeepCopyObject().(client.Object)
		if o.GetUID() == "" {
			o.SetUID(uuid.NewUUID())
		}
		if o.GetDeletionTimestamp() != nil && len(o.GetFinalizers()) == 0 {
			o.SetFinalizers([]string{hiddenFinalizer})
		}
		seeded = append(seeded, o)
	}
	var built client.WithWatch
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("fakeapi: the fake client refused the objects: %v", r)
			}
		}()
		built = builder.WithObjects(seeded...).Build()
	}()
	if err != nil {
		return nil, err
	}
	if _, err := apiutil.GVKForObject(&corev1.Pod{}, built.Scheme()); err != nil {
		return nil, fmt.Errorf("fakeapi: NewClientFrom: the builder's scheme does not know pods (add k8s.io/client-go/kubernetes/scheme's AddToScheme): %w", err)
	}
	s := &server{}
	return &Client{WithWatch: interceptor.NewClient(built, interceptor.Funcs{
		Get:  s.get,
		List: s.list,
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return s.record(Request{Verb: "create"}, obj, c.Scheme(), s.create(ctx, c, obj, opts...))
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return s.record(Request{Verb: "update"}, obj, c.Scheme(), s.update(ctx, c, obj, opts...))
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return s.record(Request{Verb: "delete", Delete: (&client.DeleteOptions{}).ApplyOptions(opts)}, obj, c.Scheme(), s.delete(ctx, c, obj, opts...))
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return s.record(Request{Verb: "patch"}, obj, c.Scheme(), c.Patch(ctx, obj, patch, opts...))
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return s.record(Request{Verb: "deletecollection"}, obj, c.Scheme(), c.DeleteAllOf(ctx, obj, opts...))
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return s.record(Request{Verb: "update", Subresource: sub}, obj, c.Scheme(), c.SubResource(sub).Update(ctx, obj, opts...))
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return s.record(Request{Verb: "patch", Subresource: sub}, obj, c.Scheme(), c.SubResource(sub).Patch(ctx, obj, patch, opts...))
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj client.Object, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return s.record(Request{Verb: "create", Subresource: sub}, obj, c.Scheme(), c.SubResource(sub).Create(ctx, obj, subObj, opts...))
		},
	}), server: s}, nil
}

// Client is NewClient's and NewClientFrom's client: a client.WithWatch that
// answers as an API server does (see the package documentation), and
// tells what it served (Requests, Deletes), so that a test asserts the
// writes its code sent without an interceptor of its own. It is safe for
// concurrent use.
type Client struct {
	client.WithWatch
	server *server
}

var _ client.WithWatch = (*Client)(nil)

// Request is one write the client was sent, in the order answered, with what
// it answered. Reads (get, list, watch) are not recorded.
type Request struct {
	// Verb is the API server's: create, update, patch, delete or
	// deletecollection.
	Verb string
	// Subresource is the subresource written ("status"), or "".
	Subresource string
	// Kind is the object's kind ("Pod"), as the client's scheme names it.
	Kind            string
	Namespace, Name string
	// UID is the object's UID as sent (a delete's object usually has
	// none: its UID precondition is in Delete).
	UID types.UID
	// Delete holds a delete's options as sent: its grace period, its
	// preconditions, its propagation policy. Nil for other verbs.
	Delete *client.DeleteOptions
	// Err is what the client answered: nil, or the API server's error
	// (apierrors), or an error of the builder's interceptors.
	Err error
}

// Requests returns the writes the client was sent so far, in the order
// answered.
func (c *Client) Requests() []Request {
	c.server.requestsMu.Lock()
	defer c.server.requestsMu.Unlock()
	return append([]Request(nil), c.server.requests...)
}

// Deletes returns the deletes among Requests: what a test of a force
// delete asserts (how many, of which pod, with grace period 0 and which
// UID precondition, and what was answered).
func (c *Client) Deletes() []Request {
	var out []Request
	for _, r := range c.Requests() {
		if r.Verb == "delete" {
			out = append(out, r)
		}
	}
	return out
}

type server struct {
	mu sync.Mutex // serializes deletes: each reads, then writes

	requestsMu sync.Mutex
	requests   []Request
}

// record notes one write the caller sent, its kind as sch names it, and
// returns its answer.
func (s *server) record(r Request, obj client.Object, sch *runtime.Scheme, err error) error {
	r.Namespace, r.Name, r.UID, r.Err = obj.GetNamespace(), obj.GetName(), obj.GetUID(), err
	r.Kind = obj.GetObjectKind().GroupVersionKind().Kind
	if r.Kind == "" {
		if gvk, gerr := apiutil.GVKForObject(obj, sch); gerr == nil {
			r.Kind = gvk.Kind
		}
	}
	s.requestsMu.Lock()
	s.requests = append(s.requests, r)
	s.requestsMu.Unlock()
	return err
}

func (s *server) get(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	hide(obj)
	return nil
}

func (s *server) list(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.List(ctx, list, opts...); err != nil {
		return err
	}
	return meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(metav1.Object); ok {
			hide(obj)
		}
		return nil
	})
}

func (s *server) create(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	if obj.GetUID() == "" {
		obj.SetUID(uuid.NewUUID())
	}
	if ts := obj.GetCreationTimestamp(); ts.IsZero() {
		obj.SetCreationTimestamp(metav1.Now())
	}
	return c.Create(ctx, obj, opts...)
}

func (s *server) delete(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	do := (&client.DeleteOptions{}).ApplyOptions(opts)
	if len(do.DryRun) > 0 && do.DryRun[0] == metav1.DryRunAll {
		// A dry run is checked as a delete would be (the object exists,
		// its UID precondition holds) and changes nothing.
		return s.checkDelete(ctx, c, obj, do)
	}
	current, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return c.Delete(ctx, obj, opts...)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return err
	}
	if do.Preconditions != nil && do.Preconditions.UID != nil && *do.Preconditions.UID != current.GetUID() {
		gvk, err := apiutil.GVKForObject(obj, c.Scheme())
		if err != nil {
			return err
		}
		// The API server's own answer, word for word: its storage names
		// the kind where NewConflict expects a resource.
		return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, obj.GetName(),
			fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). "+
				"The object might have been deleted and then recreated", *do.Preconditions.UID, current.GetUID()))
	}
	if do.Preconditions != nil && do.Preconditions.ResourceVersion != nil && *do.Preconditions.ResourceVersion != current.GetResourceVersion() {
		gvk, err := apiutil.GVKForObject(obj, c.Scheme())
		if err != nil {
			return err
		}
		return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, obj.GetName(),
			fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). "+
				"The object might have been modified", *do.Preconditions.ResourceVersion, current.GetResourceVersion()))
	}
	pod, isPod := current.(*corev1.Pod)
	if !isPod {
		return c.Delete(ctx, obj, opts...)
	}
	own := ownFinalizers(pod)
	hidden := hasFinalizer(pod, hiddenFinalizer)
	grace := int64(defaultGracePeriod)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if do.GracePeriodSeconds != nil {
		grace = *do.GracePeriodSeconds
	}
	// A graceful delete of a pod on a node waits for its kubelet, which, on
	// a lost node, never answers: the hidden finalizer makes the fake client
	// mark the pod rather than remove it.
	added := false
	if pod.DeletionTimestamp == nil && grace != 0 && pod.Spec.NodeName != "" && !hidden {
		pod.Finalizers = append(pod.Finalizers, hiddenFinalizer)
		if err := c.Update(ctx, pod); err != nil {
			return err
		}
		added = true
	}
	// The delete itself, with the caller's options, so that the builder's
	// own interceptors see it as sent (and may fail it). The fake client
	// removes a pod without finalizers, and marks one with some; on a
	// Terminating pod it changes nothing.
	if err := c.Delete(ctx, obj, opts...); err != nil {
		if added {
			s.dropHidden(ctx, c, obj) // the delete did not happen: nor does its mark
		}
		return err
	}
	// A delete with grace 0 finishes the pod's deletion, unless finalizers
	// of its own hold it: the hidden one goes, and the fake client removes
	// a pod that has a deletionTimestamp and no finalizers.
	if grace == 0 && hidden && len(own) == 0 {
		return s.dropHidden(ctx, c, obj)
	}
	return nil
}

// dropHidden removes hiddenFinalizer from the stored object at obj's key.
func (s *server) dropHidden(ctx context.Context, c client.WithWatch, obj client.Object) error {
	current, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return nil
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !hasFinalizer(current, hiddenFinalizer) {
		return nil
	}
	hide(current)
	return c.Update(ctx, current)
}

// hide removes hiddenFinalizer from obj's finalizers.
// checkDelete answers a dry-run delete: NotFound for a missing object, a
// Conflict for a UID precondition that does not hold, else nil.
func (s *server) checkDelete(ctx context.Context, c client.WithWatch, obj client.Object, do *client.DeleteOptions) error {
	current, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return err
	}
	if do.Preconditions != nil && do.Preconditions.UID != nil && *do.Preconditions.UID != current.GetUID() {
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, obj.GetName(),
			fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s)", *do.Preconditions.UID, current.GetUID()))
	}
	return nil
}

// update keeps hiddenFinalizer on an object that holds it: the caller read the
// object without it (Get hides it), and an API server would not drop a
// finalizer it never showed, so a stuck Terminating pod stays stuck.
func (s *server) update(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if current, ok := obj.DeepCopyObject().(client.Object); ok {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); err == nil && hasFinalizer(current, hiddenFinalizer) && !hasFinalizer(obj, hiddenFinalizer) {
			obj.SetFinalizers(append(obj.GetFinalizers(), hiddenFinalizer))
			defer hide(obj) // the caller's object shows what Get would
		}
	}
	return c.Update(ctx, obj, opts...)
}

func hasFinalizer(obj metav1.Object, f string) bool {
	for _, x := range obj.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

func hide(obj metav1.Object) {
	fs := obj.GetFinalizers()
	for i, f := range fs {
		if f == hiddenFinalizer {
			rest := append(append([]string(nil), fs[:i]...), fs[i+1:]...)
			if len(rest) == 0 {
				rest = nil
			}
			obj.SetFinalizers(rest)
			return
		}
	}
}

// ownFinalizers returns pod's finalizers other than hiddenFinalizer.
func ownFinalizers(pod *corev1.Pod) []string {
	var out []string
	for _, f := range pod.Finalizers {
		if f != hiddenFinalizer {
			out = append(out, f)
		}
	}
	return out
}
