package kube

import (
	"context"
	"errors"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/podhealth/podhealth/fencing"
)

var _ fencing.NetworkFenceLister = (*LiveNetworkFences)(nil)

// LiveNetworkFences lists csi-addons NetworkFences straight from the API
// server, for a fencing.NetworkFenceFencer: a cache that lags would still
// show a withdrawn fence. It sends one LIST per dead pod that needs
// fencing and check, and only when no earlier fencer proved the pod
// fenced. A cluster without the NetworkFence resource answers NotFound,
// which fails the check (the Checker wraps it in a *health.FenceError).
// A LiveNetworkFences is safe for concurrent use.
type LiveNetworkFences struct {
	client dynamic.Interface
}

// NewLiveNetworkFences returns a LiveNetworkFences over client.
func NewLiveNetworkFences(client dynamic.Interface) (*LiveNetworkFences, error) {
	if isNil(client) {
		return nil, errors.New("kube: NewLiveNetworkFences: nil dynamic.Interface (a typed nil too)")
	}
	return &LiveNetworkFences{client: client}, nil
}

// ListNetworkFences sends one LIST, read from etcd (no resourceVersion).
func (l *LiveNetworkFences) ListNetworkFences(ctx context.Context) ([]unstructured.Unstructured, error) {
	list, err := l.client.Resource(fencing.NetworkFenceResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// NetworkFencePolicyRules returns the rule a LiveNetworkFences needs, in a
// ClusterRole: list on NetworkFences, which are cluster-scoped. It returns
// a new slice on each call.
func NetworkFencePolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{fencing.NetworkFenceResource.Group}, Resources: []string{fencing.NetworkFenceResource.Resource}, Verbs: []string{"list"}}}
}
