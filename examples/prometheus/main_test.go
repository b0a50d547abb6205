package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

func TestMetricsCountDecisionsAndForceDeletes(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	require.NoError(t, err)
	pods := fake.New(fake.Options{ListLag: 1}, workload()...)
	checker, err := health.New(pods, pods, health.Options{Observer: metrics})
	require.NoError(t, err)
	for range 2 {
		_, err := checker.Check(context.Background())
		require.NoError(t, err)
	}

	tests := []struct {
		labels []string
		want   float64
	}{
		{[]string{"Alive", "", "NoAction"}, 2},
		{[]string{"Dead", "TaintEvicted", "ForceDeleted"}, 1},
		{[]string{"Dead", "TaintEvicted", "DeletedEarlier"}, 1}, // the lagging second list
		{[]string{"Dead", "TaintEvicted", "HeldBack"}, 2},       // the StatefulSet pod, twice
		{[]string{"Terminating", "GracefulDeletion", "NoAction"}, 2},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, testutil.ToFloat64(metrics.decisions.WithLabelValues(tt.labels...)), "decisions%v", tt.labels)
	}
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.forceDeletes.WithLabelValues("TaintEvicted", "ForceDeleted")))
	require.Equal(t, 1, testutil.CollectAndCount(metrics.forceDeletes), "one force delete series")
}

func TestRunPrintsTheCounters(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	text := out.String()
	require.True(t, strings.Contains(text, `podhealth_force_deletes_total{outcome="ForceDeleted",rule="TaintEvicted"} 1`), text)
	require.True(t, strings.Contains(text, `podhealth_decisions_total{outcome="HeldBack",rule="TaintEvicted",state="Dead"} 2`), text)
}

func TestRegisteringTwiceIsAnError(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := NewMetrics(reg)
	require.NoError(t, err)
	_, err = NewMetrics(reg)
	require.Error(t, err)
}
