package health_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// BenchmarkBreaker measures what a Breaker adds to a check that reaches
// dead pods not yet force-deleted: 1,000 running pods spread over the
// cluster's nodes, and one taint-evicted pod on each failed node. The
// checker runs dry, so that every check reaches the dead pods, as the first
// check after a failure does. Compare breaker=on with breaker=off at the
// same sizes: the difference is the Breaker's cost per check, which grows
// with the cluster's nodes and not with the pods.
//
// The Breaker lists the nodes from a slice built beforehand, as an
// informer's lister lists its cache, so that what is measured is the
// Breaker's own work.
func BenchmarkBreaker(b *testing.B) {
	const pods = 1_000
	for _, nodes := range []int{100, 1_000} {
		for _, failed := range []int{1, 10} {
			for _, on := range []bool{false, true} {
				b.Run(fmt.Sprintf("nodes=%d/failed=%d/breaker=%s", nodes, failed, onOff(on)), func(b *testing.B) {
					benchmarkBreaker(b, pods, nodes, failed, on)
				})
			}
		}
	}
}

func benchmarkBreaker(b *testing.B, pods, nodes, failed int, on bool) {
	cluster := make([]*corev1.Node, nodes)
	for i := range cluster {
		ready := corev1.ConditionTrue
		var taints []corev1.Taint
		if i < failed {
			ready = corev1.ConditionUnknown
			taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
		}
		cluster[i] = &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("worker-%04d", i),
				Labels: map[string]string{corev1.LabelTopologyZone: fmt.Sprintf("zone-%c", 'a'+i%3)},
			},
			Spec:   corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
		}
	}
	list := make([]*corev1.Pod, 0, pods+failed)
	for i := range pods {
		list = append(list, newPod(fmt.Sprintf("alive-%d", i), onNode(cluster[i%nodes].Name)))
	}
	for i := range failed {
		list = append(list, newPod(fmt.Sprintf("dead-%d", i), onNode(cluster[i].Name), deleting, disruption(health.ReasonDeletionByTaintManager)))
	}
	cache := fake.NewNodes(cluster...)
	opts := health.Options{DryRun: true, Nodes: cache, LiveNodes: fake.NewNodes(cluster...)}
	if on {
		opts.Breaker = health.Breaker{Nodes: nodeListerFunc(func(context.Context) ([]*corev1.Node, error) { return cluster, nil })}
	}
	source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return list, nil })
	checker, err := health.New(source, nil, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	r, err := checker.CheckReport(ctx)
	if err != nil || r.CountOutcome(health.WouldForceDelete) != failed {
		b.Fatalf("CheckReport() = %d would-be force deletes, %v; want %d, nil", r.CountOutcome(health.WouldForceDelete), err, failed)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if healthy, err := checker.Check(ctx); err != nil || !healthy {
			b.Fatalf("Check() = %v, %v", healthy, err)
		}
	}
}
