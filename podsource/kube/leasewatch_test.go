package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/health/fencertest"
	"github.com/podhealth/podhealth/podsource/kube"
)

// A LeaseWatch records when the informer delivered each version of a
// Lease, on the clock it was given; a LeaseFencer with it waits from the
// delivery of the holder's last renewal, not from the first question.
func TestLeaseWatchStartsTheWaitWhenTheLastRenewalArrived(t *testing.T) {
	renewed := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(renewed)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("db"))
	watch, err := kube.NewLeaseWatch(factory.Coordination().V1().Leases().Informer(), clk)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	created, err := client.CoordinationV1().Leases("db").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-primary", ResourceVersion: "1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pg-1"), LeaseDurationSeconds: ptr.To[int32](10),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := watch.LeaseSeen("db", "pg-primary", created.ResourceVersion); return ok }, 5*time.Second, 10*time.Millisecond)
	at, _ := watch.LeaseSeen("db", "pg-primary", created.ResourceVersion)
	require.Equal(t, renewed, at)
	_, ok := watch.LeaseSeen("db", "pg-primary", "another")
	require.False(t, ok, "another version is not known")

	live, err := kube.NewLiveLeases(client.CoordinationV1())
	require.NoError(t, err)
	f, err := fencing.NewLeaseFencer(live, fencing.LeaseOptions{Seen: watch})
	require.NoError(t, err)
	pod := selfFencingPod() // deadline 5s
	wait := 10*time.Second + 5*time.Second + fencing.DefaultMargin
	now := renewed.Add(wait)
	fence, err := f.Fence(ctx, health.FenceQuery{Pod: pod, Now: now, Sightings: fencertest.NewRecord().At(now)})
	require.NoError(t, err)
	require.Equal(t, health.PodStopped, fence.Proves, "the first question comes after the whole wait since the watch saw the record: %s", fence.Detail)

	require.NoError(t, client.CoordinationV1().Leases("db").Delete(ctx, "pg-primary", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { _, ok := watch.LeaseSeen("db", "pg-primary", created.ResourceVersion); return !ok }, 5*time.Second, 10*time.Millisecond, "a deleted Lease is forgotten")

	_, err = kube.NewLeaseWatch(nil, nil)
	require.ErrorContains(t, err, "nil Lease informer")
}
