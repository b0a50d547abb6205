package controllerruntime

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

var _ health.PodSource = (*ownedPodSource)(nil)

// ownedPodSource, Checkers.ForOwner's source, lists the pods that one
// owner controls (their controller
// reference names its UID), through a client.Reader, typically
// mgr.GetClient(): for an operator that finds its pods by owner, such as
// a database operator whose instance pods carry no label it could select
// on. With a field index of pods by their controller's name (kubebuilder's
// tutorial indexes Jobs so), the cache returns only the owner's pods;
// without one, it lists the namespace and keeps the owner's. Either way a
// pod whose controller has the owner's name but another UID (an owner
// deleted and created again) is left out.
//
// It honours the context, the read timeout and the copies as PodSource
// does. It is safe for concurrent use when its reader is.
type ownedPodSource struct {
	reader      client.Reader
	namespace   string
	owner       types.UID
	name, index string
}

// ControllerIndex is the name of a field index of pods by their
// controller's name, as ControllerName gives it: register it once, before
// the manager starts, and pass it to Checkers.ForOwner:
//
//	mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podhealthcr.ControllerIndex, podhealthcr.ControllerName)
//
// (and to a fake client's builder, WithIndex(&corev1.Pod{},
// ControllerIndex, ControllerName)). An operator that has such an index
// already passes its own name instead.
const ControllerIndex = "podhealth.io/controller"

// ControllerName is the value of ControllerIndex for obj: the name of its
// controller, or none.
func ControllerName(obj client.Object) []string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return []string{ref.Name}
	}
	return nil
}

// newOwnedPodSource returns a source of the pods that owner controls.
// owner must have a namespace, a name and a UID; index, when not empty, is
// the name of a field index on pods whose value is their controller's
// name.
func newOwnedPodSource(reader client.Reader, owner client.Object, index string) (*ownedPodSource, error) {
	if isNil(reader) {
		return nil, errors.New("controllerruntime: owned pods: nil client.Reader")
	}
	if err := validOwner(owner); err != nil {
		return nil, fmt.Errorf("controllerruntime: owned pods: %w", err)
	}
	return &ownedPodSource{reader: reader, namespace: owner.GetNamespace(), owner: owner.GetUID(), name: owner.GetName(), index: index}, nil
}

// ListPods lists the owner's pods.
func (s *ownedPodSource) ListPods(ctx context.Context) ([]*corev1.Pod, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("controllerruntime: listing pods: %w", err)
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	opts := []client.ListOption{client.InNamespace(s.namespace)}
	if s.index != "" {
		opts = append(opts, client.MatchingFields{s.index: s.name})
	}
	var list corev1.PodList
	if err := s.reader.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("controllerruntime: listing the pods of namespace %q that %s (uid %s) controls: %w", s.namespace, s.name, s.owner, err)
	}
	out := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == s.owner {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// NewOwnedDeleter returns a Deleter, as NewDeleter's, whose scope is the
// pods of owner's namespace that owner controls (their controller
// reference names its UID): it refuses any other pod without sending
// anything (*podsource.OutOfScopeError).
func NewOwnedDeleter(writer client.Writer, owner client.Object) (*Deleter, error) {
	if isNil(writer) {
		return nil, errors.New("controllerruntime: NewOwnedDeleter: nil client.Writer")
	}
	if err := validOwner(owner); err != nil {
		return nil, fmt.Errorf("controllerruntime: NewOwnedDeleter: %w", err)
	}
	return &Deleter{writer: writer, namespace: owner.GetNamespace(), selector: labels.Everything(), owner: owner.GetUID()}, nil
}

// validOwner says what an owner lacks to scope pods by.
func validOwner(owner client.Object) error {
	switch {
	case isNil(owner):
		return errors.New("nil owner")
	case owner.GetUID() == "":
		return fmt.Errorf("owner %q has no UID: pods are matched to it by UID (read it from the API server or the cache)", owner.GetName())
	case owner.GetName() == "":
		return errors.New("owner has no name")
	}
	return podsource.ValidateScope(owner.GetNamespace(), podsource.WholeNamespace())
}
