package controllerruntime_test

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

// instances is a database operator's glue: its instance pods are found by
// the owner index, fence themselves with a Lease, and are checked once per
// reconcile of their Cluster, by checkers of one Checkers built at setup.
type instances struct {
	checkers *podhealthcr.Checkers
}

// newInstances builds the glue at setup; clk is the checks' clock (nil:
// the real one), which a test sets.
func newInstances(mgr podhealthcr.Manager, recorder record.EventRecorder, clk clock.PassiveClock) (*instances, error) {
	checkers, err := podhealthcr.NewCheckers(mgr, podhealthcr.CheckersOptions{
		CoreEventRecorder: recorder, FenceLease: true, Health: health.Options{Clock: clk}})
	return &instances{checkers: checkers}, err
}

// check force-deletes the cluster's dead instances once fenced, and says
// whether one runs and when to look again. Each instance writes only while
// it holds the cluster's primary Lease, and stops within 10 s of losing it:
// the operator says so here, from its own resource, not on the pods.
func (i *instances) check(ctx context.Context, cluster client.Object) (bool, time.Duration, error) {
	protocol := func(*corev1.Pod) (fencing.LeaseProtocol, bool) {
		return fencing.LeaseProtocol{Lease: cluster.GetName() + "-primary", Deadline: 10 * time.Second}, true
	}
	checker, err := i.checkers.ForOwner(cluster, ".metadata.controller", podhealthcr.CheckOptions{LeaseProtocol: protocol})
	if err != nil {
		return false, 0, err
	}
	report, err := checker.CheckReport(ctx)
	return report.Healthy, report.RetryAfter, err
}

// A Postgres operator's primary, on a node that stopped reporting, fences
// itself with the Lease pg-primary (15 s) and a 10 s deadline: it is held
// until the Lease has been unrenewed for both plus the margin, then
// force-deleted, so that the operator can promote a replica elsewhere.
func ExampleCheckers_ForOwner() {
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	cluster := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "postgresql.example.com/v1", Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg", UID: "pg-uid"},
	}
	lost, primary, _ := exampleObjects()
	primary.Namespace, primary.Name, primary.Labels = "db", "pg-1", nil
	primary.OwnerReferences = []metav1.OwnerReference{{APIVersion: "postgresql.example.com/v1", Kind: "Cluster", Name: "pg", UID: "pg-uid", Controller: ptr.To(true)}}
	primary.Spec.Volumes = []corev1.Volume{{Name: "pgdata", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pg-1"}}}}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-primary"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pg-1"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-5 * time.Second)))},
	}
	byController := func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{ref.Name}
		}
		return nil
	}
	c, err := fakeapi.NewClientFrom(fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithIndex(&corev1.Pod{}, ".metadata.controller", byController), lost, primary, lease)
	if err != nil {
		fmt.Println(err)
		return
	}
	recorder := record.NewFakeRecorder(10)
	clk := clocktesting.NewFakePassiveClock(now)
	glue, err := newInstances(&exampleManager{c: c}, recorder, clk)
	if err != nil {
		fmt.Println(err)
		return
	}

	for range 3 { // the operator requeues often; the hold is one event
		healthy, retry, err := glue.check(context.Background(), cluster)
		fmt.Println(healthy, retry, err)
		clk.SetTime(clk.Now().Add(time.Second))
	}
	clk.SetTime(now.Add(27 * time.Second))
	healthy, retry, err := glue.check(context.Background(), cluster)
	fmt.Println(healthy, retry, err)
	fmt.Println(len(recorder.Events), "events")
	// Output:
	// false 27s <nil>
	// false 26s <nil>
	// false 25s <nil>
	// false 0s <nil>
	// 2 events
}

// exampleManager is the part of a manager that NewCheckers uses.
type exampleManager struct{ c client.Client }

func (m *exampleManager) GetClient() client.Client    { return m.c }
func (m *exampleManager) GetAPIReader() client.Reader { return m.c }
