package kube_test

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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/health/fencertest"
	"github.com/podhealth/podhealth/podsource/kube"
)

// selfFencingPod is a pod that states the protocol, being deleted: the
// fencer proves nothing before the deletion began.
func selfFencingPod() *corev1.Pod {
	deleted := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-1", UID: "u1", DeletionTimestamp: &deleted, Annotations: map[string]string{
		fencing.AnnotationLease: "pg-primary", fencing.AnnotationDeadline: "5s",
	}}}
}

// A LeaseFencer over LiveLeases sends one GET per question (it reads the
// live Lease, never a cache), passes the conformance suite, and fails on
// a Forbidden with the API error reachable.
func TestLiveLeasesReadTheLiveLease(t *testing.T) {
	renewed := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	client := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-primary"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pg-1"), LeaseDurationSeconds: ptr.To[int32](10),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
	})
	live, err := kube.NewLiveLeases(client.CoordinationV1())
	require.NoError(t, err)
	f, err := fencing.NewLeaseFencer(live, fencing.LeaseOptions{})
	require.NoError(t, err)
	wait := 10*time.Second + 5*time.Second + fencing.DefaultMargin
	pod := selfFencingPod()
	q := health.FenceQuery{Pod: pod, NodeState: health.NodeUnreachable, Now: renewed.Add(time.Minute + wait)}
	require.NoError(t, fencertest.TestFencer(f,
		fencertest.Case{Name: "expired for the wait", Query: q, Earlier: []time.Time{renewed.Add(time.Minute)}, Want: health.PodStopped},
		fencertest.Case{Name: "first seen", Query: q, Want: health.NoProof},
	))

	client.ClearActions()
	rec := fencertest.NewRecord()
	for i := range 3 {
		now := renewed.Add(time.Duration(i) * time.Second)
		_, err := f.Fence(context.Background(), health.FenceQuery{Pod: pod, Now: now, Sightings: rec.At(now)})
		require.NoError(t, err)
	}
	gets := 0
	for _, a := range client.Actions() {
		if a.Matches("get", "leases") && a.GetNamespace() == "db" {
			gets++
		}
	}
	require.Equal(t, 3, gets, "one live GET per question")

	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "pg-primary", errors.New("RBAC"))
	client.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, forbidden })
	_, err = f.Fence(context.Background(), health.FenceQuery{Pod: pod, Now: renewed, Sightings: rec.At(renewed)})
	require.True(t, apierrors.IsForbidden(err), "%v", err)
}

func TestNewLiveLeasesRefusesNil(t *testing.T) {
	_, err := kube.NewLiveLeases(nil)
	require.ErrorContains(t, err, "nil LeasesGetter")
}

func TestLeasePolicyRulesGrantGetOnLeases(t *testing.T) {
	rules := kube.LeasePolicyRules()
	require.Len(t, rules, 1)
	require.Equal(t, []string{"coordination.k8s.io"}, rules[0].APIGroups)
	require.Equal(t, []string{"leases"}, rules[0].Resources)
	require.Equal(t, []string{"get"}, rules[0].Verbs)
	rules[0].Verbs[0] = "delete"
	require.Equal(t, []string{"get"}, kube.LeasePolicyRules()[0].Verbs, "each call returns new slices")
}
