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

// startLeaseWatch starts a LeaseWatch on clk over a synced informer of
// namespace db's Leases in a fake clientset, stopped with the test.
func startLeaseWatch(t *testing.T, clk *clocktesting.FakeClock) (*fake.Clientset, *kube.LeaseWatch, context.Context) {
	t.Helper()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("db"))
	watch, err := kube.NewLeaseWatch(factory.Coordination().V1().Leases().Informer(), clk)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return client, watch, ctx
}

// A LeaseWatch records when the informer delivered each version of a
// Lease, on the clock it was given; a LeaseFencer with it waits from the
// delivery of the holder's last renewal, not from the first question.
func TestLeaseWatchStartsTheWaitWhenTheLastRenewalArrived(t *testing.T) {
	renewed := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(renewed)
	client, watch, ctx := startLeaseWatch(t, clk)

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

// A LeaseWatch remembers each holder it saw hold a Lease, a deleted
// Lease's too, and when it first saw the current acquisition, across the
// new holder's renewals: a takeover then frees the old holder's pod from
// the watch's sighting, while a pod it never saw hold the Lease gets no
// proof.
func TestLeaseWatchRemembersHoldersAndWhenATakeoverArrived(t *testing.T) {
	start := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	client, watch, ctx := startLeaseWatch(t, clk)
	leases := client.CoordinationV1().Leases("db")

	record := func(holder string, acquired time.Time, transitions int32, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-primary"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](10),
				AcquireTime: ptr.To(metav1.NewMicroTime(acquired)), LeaseTransitions: ptr.To(transitions), RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
		}
	}
	_, err := leases.Create(ctx, record("pg-1", start, 0, start), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return watch.HolderSeen("db", "pg-primary", "pg-1") }, 5*time.Second, 10*time.Millisecond)

	clk.Step(time.Minute) // pg-2 takes it over
	took := clk.Now()
	_, err = leases.Update(ctx, record("pg-2", took, 1, took), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := watch.AcquisitionSeen("db", "pg-primary", "pg-2", took, 1); return ok }, 5*time.Second, 10*time.Millisecond)
	clk.Step(3 * time.Second) // and renews
	_, err = leases.Update(ctx, record("pg-2", took, 1, clk.Now()), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l, _ := leases.Get(ctx, "pg-primary", metav1.GetOptions{})
		_, ok := watch.LeaseSeen("db", "pg-primary", l.ResourceVersion)
		return ok
	}, 5*time.Second, 10*time.Millisecond)
	at, ok := watch.AcquisitionSeen("db", "pg-primary", "pg-2", took, 1)
	require.True(t, ok)
	require.Equal(t, took, at, "the renewal does not move the acquisition's sighting")
	_, ok = watch.AcquisitionSeen("db", "pg-primary", "pg-2", took, 2)
	require.False(t, ok, "another acquisition")
	require.True(t, watch.HolderSeen("db", "pg-primary", "pg-1"), "the old holder is remembered")
	require.False(t, watch.HolderSeen("db", "pg-primary", "pg-3"))

	live, err := kube.NewLiveLeases(client.CoordinationV1())
	require.NoError(t, err)
	f, err := fencing.NewLeaseFencer(live, fencing.LeaseOptions{Seen: watch})
	require.NoError(t, err)
	wait := 10*time.Second + 5*time.Second + fencing.DefaultMargin
	now := took.Add(wait)
	for _, tt := range []struct {
		pod  string
		want health.Proof
	}{{"pg-1", health.PodStopped}, {"pg-3", health.NoProof}} {
		pod := selfFencingPod()
		pod.Name = tt.pod
		fence, err := f.Fence(ctx, health.FenceQuery{Pod: pod, Now: now, Sightings: fencertest.NewRecord().At(now)})
		require.NoError(t, err)
		require.Equal(t, tt.want, fence.Proves, "%s: %s", tt.pod, fence.Detail)
	}

	require.NoError(t, leases.Delete(ctx, "pg-primary", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { _, ok := watch.AcquisitionSeen("db", "pg-primary", "pg-2", took, 1); return !ok }, 5*time.Second, 10*time.Millisecond)
	require.True(t, watch.HolderSeen("db", "pg-primary", "pg-1"), "a deleted Lease's holders are kept")
}
