package database_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/podhealth/podhealth/internal/readme"
	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/controllerruntime/examples/database"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

// manager is the part of a ctrl.Manager that the glue uses, over a fake.
type manager struct{ c client.Client }

func (m manager) GetClient() client.Client    { return m.c }
func (m manager) GetAPIReader() client.Reader { return m.c }

// A Cluster's primary and a replica on a node that stopped: the reconcile
// holds the primary until the primary Lease has gone unrenewed for its
// duration, the Cluster's stop deadline and the margin, asks the operator
// to fail over, and comes back at RetryAfter, when the primary is
// force-deleted with its UID. The replica, which writes its own volume
// outside the Lease, states no protocol: it stays, held for node evidence.
func TestTheGlueForceDeletesAFencedPrimaryAtRetryAfter(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, database.AddToScheme(scheme))

	cluster := &database.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg", UID: "pg-uid"},
		Spec:       database.ClusterSpec{StopDeadline: metav1.Duration{Duration: time.Second}},
	}
	owner := []metav1.OwnerReference{{APIVersion: database.GroupVersion.String(), Kind: "Cluster", Name: "pg", UID: "pg-uid", Controller: ptr.To(true)}}
	primary := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-1", OwnerReferences: owner, Labels: map[string]string{database.RoleLabel: database.RolePrimary}},
		Spec: corev1.PodSpec{NodeName: "node-a", Volumes: []corev1.Volume{{Name: "pgdata", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pgdata-pg-1"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	replica := primary.DeepCopy()
	replica.Name, replica.Labels[database.RoleLabel] = "pg-2", database.RoleReplica
	replica.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "pgdata-pg-2"
	other := primary.DeepCopy() // another operator's instance in the namespace
	other.Name, other.OwnerReferences[0].Name, other.OwnerReferences[0].UID = "other-1", "other", "other-uid"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-primary"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pg-1"), LeaseDurationSeconds: ptr.To[int32](1),
			RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))},
	}
	c, err := fakeapi.NewClientFrom(fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&corev1.Pod{}, podhealthcr.ControllerIndex, podhealthcr.ControllerName),
		cluster, primary, replica, other, node, lease)
	require.NoError(t, err)
	require.NoError(t, fakeapi.FailNode(ctx, c, "node-a", time.Now()))
	require.NoError(t, fakeapi.EvictPod(ctx, c, types.NamespacedName{Namespace: "db", Name: "pg-1"}, time.Now()))
	require.NoError(t, fakeapi.EvictPod(ctx, c, types.NamespacedName{Namespace: "db", Name: "pg-2"}, time.Now()))
	require.NoError(t, fakeapi.EvictPod(ctx, c, types.NamespacedName{Namespace: "db", Name: "other-1"}, time.Now()))

	var seeded corev1.Pod // with the UID the fake gave it
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(primary), &seeded))
	evictions := len(c.Deletes()) // the taint-eviction controller's
	events := record.NewFakeRecorder(10)
	var failovers int
	r := &database.Reconciler{Client: c, Events: events,
		Failover: func(context.Context, *database.Cluster) error { failovers++; return nil }}
	require.NoError(t, r.SetupPods(manager{c})) // as SetupWithManager does
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "db", Name: "pg"}}

	res, err := r.Reconcile(ctx, req)
	require.NoError(t, err)
	require.Equal(t, 1, failovers, "no instance runs: the operator fails over")
	require.Greater(t, res.RequeueAfter, time.Duration(0), "the held primary is looked at again")
	require.LessOrEqual(t, res.RequeueAfter, 4*time.Second, "1 s Lease + 1 s deadline + 2 s margin")
	require.Len(t, c.Deletes(), evictions, "held: the Lease does not yet prove the primary stopped")
	held := []string{<-events.Events, <-events.Events}
	require.Contains(t, strings.Join(held, "\n"), "pg-primary")

	time.Sleep(res.RequeueAfter) // the caller comes back only at RetryAfter
	res, err = r.Reconcile(ctx, req)
	require.NoError(t, err)
	require.Zero(t, res.RequeueAfter, "the replica waits for an event: node evidence")
	deletes := c.Deletes()[evictions:]
	require.Len(t, deletes, 1, "the primary alone: not the replica, not the other Cluster's instance")
	require.Equal(t, "pg-1", deletes[0].Name)
	require.Equal(t, seeded.UID, *deletes[0].Delete.Preconditions.UID)
	require.Equal(t, int64(0), *deletes[0].Delete.GracePeriodSeconds)
	var fenced bool
	for len(events.Events) > 0 {
		fenced = fenced || strings.Contains(<-events.Events, "fenced: fencer lease")
	}
	require.True(t, fenced)
	var stays corev1.Pod
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(replica), &stays), "the replica is not freed by the primary's Lease")
}

// A database operator's whole glue fits in 40 lines, as
// readme.GlueLines counts the lines that the package marks as
// podhealth's; docs/operators.md states the count.
func TestTheGlueIsAtMost40Lines(t *testing.T) {
	n, err := readme.GlueLines(os.DirFS("."), "reconciler.go", "cluster.go", "doc.go")
	require.NoError(t, err)
	t.Logf("the glue: %d lines", n)
	require.LessOrEqual(t, n, 40)
}
