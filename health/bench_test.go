package health_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// BenchmarkCheck measures one check over 10 to 100,000 distinct pods. With
// all pods alive the check must not allocate, and ns/pod should stay flat
// as n grows. With 1% dead, the first check deletes them and every later one
// finds them in the Memory, as when an informer lags.
func BenchmarkCheck(b *testing.B) {
	for _, deadPercent := range []int{0, 1} {
		for _, n := range []int{10, 1_000, 10_000, 100_000} {
			b.Run(fmt.Sprintf("dead=%d%%/pods=%d", deadPercent, n), func(b *testing.B) {
				pods := make([]*corev1.Pod, n)
				for i := range pods {
					if deadPercent > 0 && i%(100/deadPercent) == 0 {
						pods[i] = taintEvicted(fmt.Sprintf("pod-%d", i))
					} else {
						pods[i] = newPod(fmt.Sprintf("pod-%d", i))
					}
				}
				source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return pods, nil })
				deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { return nil })
				checker, err := health.New(source, deleter, health.Options{})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if healthy, err := checker.Check(ctx); err != nil || !healthy {
						b.Fatalf("Check() = %v, %v", healthy, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/pod")
			})
		}
	}
}

// BenchmarkCheckReplaceUnreachable is BenchmarkCheck's all-alive case with
// Options.ReplaceUnreachable over a node cache: every pod's node is looked
// up in the check's table (one GetNode per node and check), and with its
// node Ready the check must still not allocate. With 1% of the pods on an
// unreachable node, those are classified in full.
func BenchmarkCheckReplaceUnreachable(b *testing.B) {
	for _, unreachablePercent := range []int{0, 1} {
		for _, n := range []int{10, 1_000, 100_000} {
			b.Run(fmt.Sprintf("unreachable=%d%%/pods=%d", unreachablePercent, n), func(b *testing.B) {
				pods := make([]*corev1.Pod, n)
				for i := range pods {
					if unreachablePercent > 0 && i%(100/unreachablePercent) == 0 {
						pods[i] = newPod(fmt.Sprintf("pod-%d", i), onNode("node-lost"))
					} else {
						pods[i] = newPod(fmt.Sprintf("pod-%d", i))
					}
				}
				source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return pods, nil })
				deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { return nil })
				checker, err := health.New(source, deleter, health.Options{
					Nodes:              fake.NewNodes(newNode("node-a"), newNode("node-lost", markedUnreachable)),
					ReplaceUnreachable: true,
				})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if healthy, err := checker.Check(ctx); err != nil || !healthy {
						b.Fatalf("Check() = %v, %v", healthy, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/pod")
			})
		}
	}
}
