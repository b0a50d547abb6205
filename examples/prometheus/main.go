// Command prometheus wires podhealth's Observer to Prometheus counters. It
// runs a few checks over an in-memory workload (a live pod, a pod that died
// with its node, a drained pod and a StatefulSet pod waiting for fencing
// evidence) and prints the counters in the Prometheus text format.
//
// It lives in a module of its own so that the library does not depend on
// the Prometheus client. Run it with: go -C examples/prometheus run .
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		return err
	}
	pods := fake.New(fake.Options{ListLag: 1}, workload()...)
	checker, err := health.New(pods, pods, health.Options{Observer: metrics})
	if err != nil {
		return err
	}
	for range 2 {
		if _, err := checker.Check(ctx); err != nil {
			return err
		}
	}

	families, err := reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(out, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "podhealth_") {
			continue
		}
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}

func workload() []*corev1.Pod {
	deleting := &metav1.Time{}
	disrupted := func(reason string) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason}}
	}
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name)},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	alive := pod("web-1", "node-a")
	dead := pod("web-2", "node-lost")
	dead.DeletionTimestamp, dead.Status.Conditions = deleting, disrupted("DeletionByTaintManager")
	drained := pod("web-3", "node-b")
	drained.DeletionTimestamp, drained.Status.Conditions = deleting, disrupted("EvictionByEvictionAPI")
	stateful := pod("db-0", "node-lost")
	stateful.DeletionTimestamp, stateful.Status.Conditions = deleting, disrupted("DeletionByTaintManager")
	stateful.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "uid-db"}}
	return []*corev1.Pod{alive, dead, drained, stateful}
}
