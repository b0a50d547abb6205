package kube_test

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

// A database operator's instance pod fences itself with a Lease: it is
// held while the Lease may still be renewed, and force-deleted once the
// Lease has been unrenewed for its duration, the pod's deadline and the
// margin.
func ExampleNewLiveLeases() {
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	instance := examplePod("pg-1", "pg", "node-lost", true)
	instance.OwnerReferences = []metav1.OwnerReference{{APIVersion: "postgresql.cnpg.io/v1", Kind: "Cluster", Name: "pg", UID: "c", Controller: ptr.To(true)}}
	instance.Spec.Volumes = []corev1.Volume{{Name: "pgdata", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pg-1"}}}}
	instance.Annotations = map[string]string{fencing.AnnotationLease: "pg-primary", fencing.AnnotationDeadline: "10s"}
	client := fake.NewClientset(instance, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pg-primary"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pg-1"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-5 * time.Second)))},
	})
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("default"))
	pods := factory.Core().V1().Pods()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	clk := clocktesting.NewFakePassiveClock(now)
	selector := labels.SelectorFromSet(labels.Set{"app": "pg"})

	// readme:begin lease-fencer
	leases, err := kube.NewLiveLeases(client.CoordinationV1())
	if err != nil {
		fmt.Println(err)
		return
	}
	fencer, err := fencing.NewLeaseFencer(leases, fencing.LeaseOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	checker, err := kube.NewChecker(client, pods.Lister(), "default", selector, kube.CheckerOptions{
		Health: health.Options{Fencers: []health.Fencer{fencer}, Clock: clk},
	})
	// readme:end lease-fencer
	if err != nil {
		fmt.Println(err)
		return
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	report, _ := checker.CheckReport(ctx)
	fmt.Println(report.Pods[0].Outcome, report.RetryAfter)
	clk.SetTime(now.Add(report.RetryAfter))
	report, _ = checker.CheckReport(ctx)
	fmt.Println(report.Pods[0].Outcome)
	// Output:
	// HeldBack 27s
	// ForceDeleted
}
