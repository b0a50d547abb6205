package health_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// BenchmarkHeldForFencing measures a check of a StatefulSet whose node
// failed: 100 of its 10,000 pods are taint-evicted on one unreachable node
// that carries the cloud's shutdown taint, not yet seen for its After, so
// every check asks the fencers about each of them and holds them all.
func BenchmarkHeldForFencing(b *testing.B) {
	const n, dead = 10_000, 100
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		if i < dead {
			pods[i] = evictedOn(fmt.Sprintf("db-%d", i), "node-lost", ownedByStatefulSet)
		} else {
			pods[i] = newPod(fmt.Sprintf("db-%d", i), ownedByStatefulSet)
		}
	}
	lost := newNode("node-lost", notReady, taint(corev1.TaintNodeUnreachable), cloudShutdown)
	source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return pods, nil })
	deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { return nil })
	checker, err := health.New(source, deleter, health.Options{
		Nodes:          fake.NewNodes(lost, newNode("node-a")),
		ShutdownTaints: []health.ShutdownTaint{{Key: health.TaintCloudShutdown, After: time.Hour}},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		report, err := checker.CheckReport(ctx)
		if err != nil || !report.Healthy || report.Pods[0].Outcome != health.HeldBack {
			b.Fatalf("CheckReport() = %v, %v", report.Healthy, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/dead, "ns/held")
}
