package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/cmd/podhealth-controller/internal/controller"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/metrics"
)

// registered are the names of the metrics the controller registers
// itself (controller-runtime's own, such as controller_runtime_*, are not
// read by the monitoring objects): what run registers, on a registry of
// the test's.
func registered(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	observer, err := metrics.NewObserver(reg, metrics.Options{})
	require.NoError(t, err)
	// Vectors show in Gather once they have a sample: one pod
	// force-deleted and one held back give every one of them one.
	now := metav1.Now()
	dead := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", DeletionTimestamp: &now}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager", LastTransitionTime: now},
	}}}
	observer.Observe(context.Background(), health.PodReport{Pod: dead, Verdict: health.Verdict{State: health.Dead}, Outcome: health.ForceDeleted})
	observer.Observe(context.Background(), health.PodReport{Pod: dead, Verdict: health.Verdict{State: health.Dead}, Outcome: health.HeldBack, HeldBack: health.Hold{Reason: health.HeldByBreaker}})
	require.NoError(t, reg.Register(memoryShed(health.NewMemory(health.MemoryOptions{}))))
	for _, c := range fencingHolds(func() (int, time.Duration) { return 2, 90 * time.Second }) {
		require.NoError(t, reg.Register(c))
	}
	// With --apply-out-of-service.
	require.NoError(t, reg.Register(outOfServiceCollector{stats: func() controller.OutOfServiceStats {
		return controller.OutOfServiceStats{Applied: 1, Tainted: 1, OldestAge: time.Minute}
	}}))
	families, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	return names
}

// TestMonitoringNamesOnlyMetricsTheControllerRegisters: every podhealth_*
// name in the alert rules and the dashboard is one the controller
// exports (a histogram's by its _bucket, _sum and _count series), so that
// a renamed metric cannot leave an alert that never fires.
func TestMonitoringNamesOnlyMetricsTheControllerRegisters(t *testing.T) {
	names := registered(t)
	require.True(t, names["podhealth_fencing_held_pods"])
	require.True(t, names["podhealth_force_deletes_total"])
	read := 0
	for _, file := range []string{"prometheus_rule.yaml", "dashboard.json"} {
		data, err := os.ReadFile(filepath.Join("config", "monitoring", file))
		require.NoError(t, err)
		for _, name := range regexp.MustCompile(`podhealth_[a-z_]+`).FindAllString(string(data), -1) {
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if trimmed, ok := strings.CutSuffix(name, suffix); ok && names[trimmed] {
					base = trimmed
				}
			}
			require.True(t, names[base], "%s names %s, which the controller does not export", file, name)
			read++
		}
	}
	require.Greater(t, read, 10)
}

func TestFencingHoldGaugesReadTheReconcilersHolds(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	for _, c := range fencingHolds(func() (int, time.Duration) { return 2, 90 * time.Second }) {
		require.NoError(t, reg.Register(c))
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP podhealth_fencing_held_oldest_seconds How long the dead pod held back for fencing longest has been held (0 when none is).
# TYPE podhealth_fencing_held_oldest_seconds gauge
podhealth_fencing_held_oldest_seconds 90
# HELP podhealth_fencing_held_pods Dead pods whose last check held them back for fencing evidence: their node must be deleted, or tainted out-of-service once powered off.
# TYPE podhealth_fencing_held_pods gauge
podhealth_fencing_held_pods 2
`)))
}
