package controllerruntime

import (
	"context"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/fencing"
)

var _ fencing.LeaseGetter = (*LiveLeases)(nil)

// LiveLeases reads Leases for a fencing.LeaseFencer through a reader that
// goes to the API server: mgr.GetAPIReader(), never the cache, which would
// show a renewed Lease as expired while it lags. It sends one GET per
// self-fencing dead pod and check (get on leases in the pod's namespace,
// kube.LeasePolicyRules). A missing Lease is the reader's NotFound,
// wrapped. A LiveLeases is safe for concurrent use when its reader is.
type LiveLeases struct {
	reader client.Reader
}

// NewLiveLeases returns a LiveLeases over reader, typically
// mgr.GetAPIReader().
func NewLiveLeases(reader client.Reader) (*LiveLeases, error) {
	if isNil(reader) {
		return nil, errors.New("controllerruntime: NewLiveLeases: nil client.Reader")
	}
	return &LiveLeases{reader: reader}, nil
}

// GetLease reads the Lease namespace/name.
func (l *LiveLeases) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	var lease coordinationv1.Lease
	if err := l.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &lease); err != nil {
		return nil, fmt.Errorf("controllerruntime: getting lease %s/%s: %w", namespace, name, err)
	}
	return &lease, nil
}

// The RBAC that CheckersOptions.FenceLease needs, as a kubebuilder marker to copy
// next to your reconciler's own (see rbac.go): get, for the live reads,
// and list and watch, for the cache's Lease informer. LeasePolicyRules
// returns the same rule; a test holds the two to it.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch

// LeasePolicyRules returns the rule, in the workloads' namespaces, that
// CheckersOptions.FenceLease needs. Each call returns new slices.
func LeasePolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch"}}}
}
