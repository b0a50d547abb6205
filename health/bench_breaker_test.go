package health_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// BenchmarkBreaker measures what a Breaker adds to a check that reaches
// dead pods not yet force-deleted: 1,000 running pods spread over the
// cluster's nodes, and one taint-evicted pod on each failed node. The
// checkers run dry, so that every check reaches the dead pods, as the first
// check after a failure does.
//
// Every iteration runs, in turn and in alternating order, a check without
// and one with a Breaker, over the same pods and node evidence, each timed
// on the thread's CPU time (see cpuClock). The metrics are the Breaker's
// cost per check (breaker-ns/check: the difference), the same per node of
// the cluster (breaker-ns/node), and the allocations of one check with
// and without a Breaker. The Breaker lists the nodes from a slice built
// beforehand, as an informer's lister lists its cache, so that what is
// measured is the Breaker's own work.
func BenchmarkBreaker(b *testing.B) {
	const pods = 1_000
	for _, nodes := range []int{100, 1_000} {
		for _, failed := range []int{1, 10} {
			b.Run(fmt.Sprintf("nodes=%d/failed=%d", nodes, failed), func(b *testing.B) {
				benchmarkBreaker(b, pods, nodes, failed)
			})
		}
	}
}

func benchmarkBreaker(b *testing.B, pods, nodes, failed int) {
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
	source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return list, nil })
	ctx := context.Background()
	var checks [2]func()
	for i, on := range []bool{false, true} {
		opts := health.Options{DryRun: true, Nodes: fake.NewNodes(cluster...), LiveNodes: fake.NewNodes(cluster...)}
		if on {
			opts.Breaker = health.Breaker{Nodes: nodeListerFunc(func(context.Context) ([]*corev1.Node, error) { return cluster, nil })}
		}
		checker, err := health.New(source, nil, opts)
		if err != nil {
			b.Fatal(err)
		}
		r, err := checker.CheckReport(ctx)
		if err != nil || r.CountOutcome(health.WouldForceDelete) != failed {
			b.Fatalf("breaker %v: CheckReport() = %d would-be force deletes, %v; want %d, nil", on, r.CountOutcome(health.WouldForceDelete), err, failed)
		}
		checks[i] = func() {
			if healthy, err := checker.Check(ctx); err != nil || !healthy {
				b.Fatalf("breaker %v: Check() = %v, %v", on, healthy, err)
			}
		}
	}

	var spent [2]time.Duration
	runtime.LockOSThread() // for cpuClock
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for i := range b.N {
		for j := range checks {
			c := (i + j) % len(checks)
			start := cpuClock()
			checks[c]()
			spent[c] += cpuClock() - start
		}
	}
	cost := float64(spent[1]-spent[0]) / float64(b.N)
	b.ReportMetric(cost, "breaker-ns/check")
	b.ReportMetric(cost/float64(nodes), "breaker-ns/node")
	b.ReportMetric(float64(spent[1])/float64(b.N), "check-ns/op")
	b.ReportMetric(allocsPerCall(10, checks[0]), "allocs-off/op")
	b.ReportMetric(allocsPerCall(10, checks[1]), "allocs-on/op")
}
