package kube

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

var (
	_ health.PodSource = (*ListerSource)(nil)
	_ health.PodSource = (*ClientSource)(nil)
)

// ListerSource lists a workload's pods from an informer's cache: a
// ListPods call sends no request to the API server.
//
// The pods it returns are the cache's own objects, not copies: callers
// must treat them as read-only, as health.PodSource requires. ListerSource
// itself never changes them.
//
// A ListerSource is safe for concurrent use.
type ListerSource struct {
	lister    corelisters.PodLister
	namespace string
	selector  labels.Selector
}

// NewListerSource returns a source that lists the pods of namespace that
// match selector from lister, typically
// factory.Core().V1().Pods().Lister() of a started and synced informer.
//
// namespace is required. selector is required too and must select the
// workload's pods: nil, labels.Everything(), labels.Nothing() and any
// other empty selector are refused with an error, so that a forgotten
// selector cannot widen a workload to the whole namespace. Pass
// podsource.WholeNamespace() to list every pod of the namespace on purpose.
func NewListerSource(lister corelisters.PodLister, namespace string, selector labels.Selector) (*ListerSource, error) {
	if isNil(lister) {
		return nil, errors.New("kube: NewListerSource: nil PodLister (a typed nil too)")
	}
	if err := checkScope("NewListerSource", namespace, selector); err != nil {
		return nil, err
	}
	return &ListerSource{lister: lister, namespace: namespace, selector: selector}, nil
}

// ListPods returns the cached pods of the source's namespace that match its
// selector. It returns an error wrapping ctx.Err() when ctx is done.
func (s *ListerSource) ListPods(ctx context.Context) ([]*corev1.Pod, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kube: listing pods from cache: %w", err)
	}
	pods, err := s.lister.Pods(s.namespace).List(s.selector)
	if err != nil {
		return nil, fmt.Errorf("kube: listing pods of namespace %q matching %q from cache: %w", s.namespace, s.selector, err)
	}
	return pods, nil
}

// ClientSource lists a workload's pods straight from the API server with
// one LIST request per ListPods call, for programs that run no informer. The
// read is consistent (no resourceVersion is set), so it never lags.
//
// The pods it returns point into a list that ListPods allocated for the
// call and does not keep.
//
// A ClientSource is safe for concurrent use.
type ClientSource struct {
	pods      corev1client.PodsGetter
	namespace string
	selector  labels.Selector
	// labelSelector is selector.String(), computed once.
	labelSelector string
}

// NewClientSource returns a source that lists the pods of namespace that
// match selector through the typed client pods, typically
// clientset.CoreV1().
//
// namespace is required. selector is required too, and refused as
// NewListerSource refuses it: nil, labels.Everything(), labels.Nothing()
// (which would send an empty labelSelector, read by the API server as
// "every pod") and any other empty selector. Pass podsource.WholeNamespace() to list
// every pod of the namespace on purpose.
func NewClientSource(pods corev1client.PodsGetter, namespace string, selector labels.Selector) (*ClientSource, error) {
	if isNil(pods) {
		return nil, errors.New("kube: NewClientSource: nil PodsGetter (a typed nil too)")
	}
	if err := checkScope("NewClientSource", namespace, selector); err != nil {
		return nil, err
	}
	return &ClientSource{pods: pods, namespace: namespace, selector: selector, labelSelector: selector.String()}, nil
}

// ListPods sends one LIST request for the pods of the source's namespace
// that match its selector. It returns an error wrapping ctx.Err() when ctx
// is done, without sending anything; an API error is wrapped so that
// apierrors.IsXxx still reaches it.
func (s *ClientSource) ListPods(ctx context.Context) ([]*corev1.Pod, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kube: listing pods: %w", err)
	}
	list, err := s.pods.Pods(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: s.labelSelector})
	if err != nil {
		return nil, fmt.Errorf("kube: listing pods of namespace %q matching %q: %w", s.namespace, s.labelSelector, err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// checkScope validates the namespace and selector given to a constructor
// (see podsource.ValidateScope).
func checkScope(fn, namespace string, selector labels.Selector) error {
	if err := podsource.ValidateScope(namespace, selector); err != nil {
		return fmt.Errorf("kube: %s: %w", fn, err)
	}
	return nil
}
