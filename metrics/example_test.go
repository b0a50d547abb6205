package metrics_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/metrics"
	"github.com/podhealth/podhealth/podsource/fake"
)

// One Observer per registry (here a fresh one; in an operator, its
// metrics registry) serves every Checker.
func ExampleNewObserver() {
	reg := prometheus.NewRegistry()
	obs, err := metrics.NewObserver(reg, metrics.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	stateful := evicted("db-0", "node-lost")
	stateful.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts"}}
	pods := fake.New(fake.Options{}, evicted("web-0", "node-lost"), stateful)
	nodes := fake.NewNodes(node("node-lost", corev1.ConditionUnknown))
	checker, err := health.New(pods, pods, health.Options{Nodes: nodes, Observer: obs})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := checker.Check(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	families, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range families {
		for _, m := range f.Metric {
			switch {
			case m.Counter != nil:
				fmt.Println(f.GetName(), m.Label[0].GetValue(), m.Counter.GetValue())
			case m.Histogram != nil:
				fmt.Println(f.GetName(), m.Label[0].GetValue(), m.Histogram.GetSampleCount(), "sample")
			}
		}
	}
	// Output:
	// podhealth_dead_pod_age_at_force_delete_seconds deletion_request 1 sample
	// podhealth_dead_pod_age_at_force_delete_seconds disruption_target 1 sample
	// podhealth_force_deletes_total ForceDeleted 1
	// podhealth_held_back_total HeldForFencing 1
}
