package kube

import (
	"context"
	"errors"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/podhealth/podhealth/fencing"
)

var _ fencing.LeaseGetter = (*LiveLeases)(nil)

// LiveLeases reads Leases straight from the API server, for a
// fencing.LeaseFencer: a Lease cache that lags would show a renewed Lease
// as expired. It sends one GET per self-fencing dead pod and check, and
// only for pods that need fencing and carry fencing.AnnotationLease.
// A LiveLeases is safe for concurrent use.
type LiveLeases struct {
	leases coordinationv1client.LeasesGetter
}

// NewLiveLeases returns a LiveLeases over client, typically
// clientset.CoordinationV1().
func NewLiveLeases(client coordinationv1client.LeasesGetter) (*LiveLeases, error) {
	if isNil(client) {
		return nil, errors.New("kube: NewLiveLeases: nil LeasesGetter (a typed nil too)")
	}
	return &LiveLeases{leases: client}, nil
}

// GetLease sends one GET for the Lease. Its errors come back as the API
// server gave them: NotFound is no evidence, anything else fails the check
// (the Checker wraps it in a *health.FenceError).
func (l *LiveLeases) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	return l.leases.Leases(namespace).Get(ctx, name, metav1.GetOptions{})
}

// LeasePolicyRules returns the rule a LiveLeases needs in the workload's
// namespace: get on Leases. It returns a new slice on each call.
func LeasePolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}}}
}
