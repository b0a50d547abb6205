package controllerruntime

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

var _ health.PodSource = (*PodSource)(nil)

// PodSource lists a workload's pods through a client.Reader: typically
// mgr.GetClient(), which reads the manager's cache and sends no request.
//
// The manager's cache ignores the context of a read, so ListPods checks it
// first: a check whose context is done lists nothing. A cache that has not
// synced its pod informer yet is waited for at most 10 seconds.
//
// The pods it returns belong to the list that ListPods allocated for the
// call (controller-runtime's cache hands out copies unless it is told not
// to); a Checker never changes them.
//
// A PodSource is safe for concurrent use when its reader is, as the
// manager's client is.
type PodSource struct {
	reader    client.Reader
	namespace string
	selector  labels.Selector
}

// NewPodSource returns a source that lists the pods of namespace that match
// selector through reader.
//
// namespace and selector are required, and refused as
// refuses them (podsource.ValidateScope): an empty or invalid namespace, and a
// nil selector or one of every pod (labels.Everything(), labels.Nothing(),
// any other empty selector). Pass podsource.WholeNamespace() to list every pod
// of the namespace on purpose.
func NewPodSource(reader client.Reader, namespace string, selector labels.Selector) (*PodSource, error) {
	if isNil(reader) {
		return nil, errors.New("controllerruntime: NewPodSource: nil client.Reader")
	}
	if err := podsource.ValidateScope(namespace, selector); err != nil {
		return nil, fmt.Errorf("controllerruntime: NewPodSource: %w", err)
	}
	return &PodSource{reader: reader, namespace: namespace, selector: selector}, nil
}

// ListPods lists the pods of the source's namespace that match its
// selector. It returns an error wrapping ctx.Err() when ctx is done, and
// wraps the reader's errors so that apierrors.IsXxx still reaches them.
func (s *PodSource) ListPods(ctx context.Context) ([]*corev1.Pod, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("controllerruntime: listing pods: %w", err)
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	var list corev1.PodList
	if err := s.reader.List(ctx, &list, client.InNamespace(s.namespace), client.MatchingLabelsSelector{Selector: s.selector}); err != nil {
		return nil, fmt.Errorf("controllerruntime: listing pods of namespace %q matching %q: %w", s.namespace, s.selector, err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
