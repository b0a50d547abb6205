package controllerruntime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/health/fencertest"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
)

// A LeaseFencer over the adapter's LiveLeases passes the conformance
// suite, reads a missing Lease as no evidence and a Forbidden as an error.
func TestLiveLeasesOverTheAPIReader(t *testing.T) {
	renewed := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	c := apiServer(t, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-primary"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pg-1"), LeaseDurationSeconds: ptr.To[int32](10),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-1", UID: "u1", Annotations: map[string]string{
		fencing.AnnotationLease: "pg-primary", fencing.AnnotationDeadline: "5s"}}}
	live, err := crh.NewLiveLeases(c)
	require.NoError(t, err)
	f, err := fencing.NewLeaseFencer(live, fencing.LeaseOptions{})
	require.NoError(t, err)
	wait := 10*time.Second + 5*time.Second + fencing.DefaultMargin
	q := health.FenceQuery{Pod: pod, NodeState: health.NodeUnreachable, Now: renewed.Add(time.Minute + wait)}
	require.NoError(t, fencertest.TestFencer(f,
		fencertest.Case{Name: "expired for the wait", Query: q, Earlier: []time.Time{renewed.Add(time.Minute)}, Want: health.PodStopped}))

	missing := pod.DeepCopy()
	missing.Annotations[fencing.AnnotationLease] = "gone"
	fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: missing, Now: renewed, Sightings: fencertest.NewRecord().At(renewed)})
	require.NoError(t, err)
	require.Contains(t, fence.Detail, "not found")

	forbidden := apierrors.NewForbidden(coordinationv1.Resource("leases"), "pg-primary", errors.New("RBAC"))
	denied, err := crh.NewLiveLeases(interceptor.NewClient(c, interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return forbidden
	}}))
	require.NoError(t, err)
	f, err = fencing.NewLeaseFencer(denied, fencing.LeaseOptions{})
	require.NoError(t, err)
	_, err = f.Fence(context.Background(), health.FenceQuery{Pod: pod, Now: renewed, Sightings: fencertest.NewRecord().At(renewed)})
	require.True(t, apierrors.IsForbidden(err), "%v", err)

	_, err = crh.NewLiveLeases(nil)
	require.ErrorContains(t, err, "nil client.Reader")
}
