// Command metrics is what a user of the metrics module writes, built and run
// by the release rehearsal outside the repository at the module's floors
// (client_golang v1.11.1, client-go v0.31.0): a Checker from kube.NewChecker
// whose Observer records into a Prometheus registry. It checks a pod that
// the taint-eviction controller deleted from a lost node, on client-go's
// fake clientset, and prints the force deletes the registry counted.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/metrics"
	"github.com/podhealth/podhealth/podsource/kube"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	deleted := metav1.NewTime(time.Now().Add(-time.Minute))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "registry-0", UID: "uid-registry-0",
			Labels: map[string]string{"app": "registry"}, DeletionTimestamp: &deleted},
		Spec: corev1.PodSpec{NodeName: "node-lost"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager", LastTransitionTime: deleted,
		}}},
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-lost"},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}},
	}
	client := fake.NewSimpleClientset(pod, node)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := indexer.Add(pod); err != nil {
		return err
	}

	registry := prometheus.NewRegistry()
	observer, err := metrics.NewObserver(registry, metrics.Options{})
	if err != nil {
		return err
	}
	checker, err := kube.NewChecker(client, corelisters.NewPodLister(indexer), "default", labels.SelectorFromSet(labels.Set{"app": "registry"}),
		kube.CheckerOptions{Health: health.Options{Observer: observer}})
	if err != nil {
		return err
	}
	healthy, err := checker.Check(context.Background())
	if err != nil {
		return err
	}
	families, err := registry.Gather()
	if err != nil {
		return err
	}
	for _, family := range families {
		if family.GetName() != "podhealth_force_deletes_total" {
			continue
		}
		for _, m := range family.GetMetric() {
			for _, label := range m.GetLabel() {
				fmt.Printf("healthy=%v podhealth_force_deletes_total{%s=%q} %v\n", healthy, label.GetName(), label.GetValue(), m.GetCounter().GetValue())
			}
		}
	}
	return nil
}
