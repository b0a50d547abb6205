package controllerruntime

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/fencing"
)

var _ fencing.NetworkFenceLister = (*LiveNetworkFences)(nil)

// LiveNetworkFences lists csi-addons NetworkFences for a
// fencing.NetworkFenceFencer, as unstructured objects, through a reader
// that goes to the API server: mgr.GetAPIReader(), never the cache, which
// would still show a withdrawn fence while it lags. It sends one LIST per
// question (list on networkfences, cluster-wide:
// kube.NetworkFencePolicyRules). A cluster without the resource answers an
// error, which fails the check. A LiveNetworkFences is safe for concurrent
// use when its reader is.
type LiveNetworkFences struct {
	reader client.Reader
}

// NewLiveNetworkFences returns a LiveNetworkFences over reader, typically
// mgr.GetAPIReader().
func NewLiveNetworkFences(reader client.Reader) (*LiveNetworkFences, error) {
	if isNil(reader) {
		return nil, errors.New("controllerruntime: NewLiveNetworkFences: nil client.Reader")
	}
	return &LiveNetworkFences{reader: reader}, nil
}

// ListNetworkFences lists every NetworkFence.
func (l *LiveNetworkFences) ListNetworkFences(ctx context.Context) ([]unstructured.Unstructured, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(fencing.NetworkFenceResource.GroupVersion().WithKind("NetworkFenceList"))
	if err := l.reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("controllerruntime: listing NetworkFences: %w", err)
	}
	return list.Items, nil
}
