package metrics_test

import (
	"context"
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/metrics"
	"github.com/podhealth/podhealth/podsource/fake"
)

var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func node(name string, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
}

// evicted is a pod the taint-eviction controller marked 30 s before now
// and asked to delete then, with a grace period of 30 s.
func evicted(name, nodeName string) *corev1.Pod {
	grace := int64(30)
	deadline := metav1.NewTime(now)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name), DeletionTimestamp: &deadline, DeletionGracePeriodSeconds: &grace},
		Spec:       corev1.PodSpec{NodeName: nodeName},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager",
			LastTransitionTime: metav1.NewTime(now.Add(-30 * time.Second)),
		}}},
	}
}

func check(t *testing.T, obs *metrics.Observer, pods []*corev1.Pod, opts health.Options, interceptor fake.Interceptor) {
	t.Helper()
	src := fake.New(fake.Options{Interceptor: interceptor}, pods...)
	opts.Observer, opts.Clock = obs, clocktesting.NewFakePassiveClock(now)
	checker, err := health.New(src, src, opts)
	require.NoError(t, err)
	_, _ = checker.CheckReport(context.Background())
}

// TestObserverRecordsEveryOutcomeUnderItsNameAndLabels scrapes a registry
// after real checks: force deletes by outcome, held-back pods by reason, the
// breaker's state, and the age of a dead pod at its force delete in the
// default buckets, since its DisruptionTarget condition (30 s) and since
// its deletion was requested (30 s: the deadline less the grace period).
func TestObserverRecordsEveryOutcomeUnderItsNameAndLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := clocktesting.NewFakePassiveClock(now)
	obs, err := metrics.NewObserver(reg, metrics.Options{Clock: clk})
	require.NoError(t, err)
	lost := fake.NewNodes(node("node-lost", corev1.ConditionUnknown), node("a", corev1.ConditionTrue), node("b", corev1.ConditionTrue))
	allDown := fake.NewNodes(node("node-lost", corev1.ConditionUnknown), node("x", corev1.ConditionUnknown), node("y", corev1.ConditionFalse))

	stateful := evicted("db-0", "node-lost")
	stateful.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts"}}
	failing := fake.Interceptor{Delete: func(ctx context.Context, ns, name string, opts metav1.DeleteOptions, next fake.DeleteFunc) error {
		if name == "web-fails" {
			return errors.New("etcd is sad")
		}
		return next(ctx, ns, name, opts)
	}}

	check(t, obs, []*corev1.Pod{evicted("web-1", "node-lost"), stateful}, health.Options{Nodes: lost}, fake.Interceptor{})                                   // ForceDeleted, HeldForFencing
	check(t, obs, []*corev1.Pod{evicted("web-2", "node-lost")}, health.Options{Nodes: allDown, Breaker: health.Breaker{Nodes: allDown}}, fake.Interceptor{}) // HeldByBreaker
	requireGauge(t, reg, "podhealth_breaker_open", 1)
	check(t, obs, []*corev1.Pod{evicted("web-fails", "node-lost")}, health.Options{Nodes: lost}, failing) // DeleteFailed
	requireGauge(t, reg, "podhealth_breaker_open", 0)
	check(t, obs, []*corev1.Pod{evicted("web-3", "node-lost")}, health.Options{Nodes: lost, DryRun: true}, fake.Interceptor{}) // WouldForceDelete

	families := gather(t, reg)
	require.Empty(t, cmp.Diff([]string{
		"podhealth_breaker_open", "podhealth_dead_pod_age_at_force_delete_seconds", "podhealth_force_deletes_total", "podhealth_held_back_total",
	}, sortedNames(families)))

	require.Equal(t, dto.MetricType_COUNTER, families["podhealth_force_deletes_total"].GetType())
	require.Equal(t, map[string]float64{"outcome=DeleteFailed": 1, "outcome=ForceDeleted": 1, "outcome=WouldForceDelete": 1}, counters(families["podhealth_force_deletes_total"]))
	require.Equal(t, map[string]float64{"reason=HeldByBreaker": 1, "reason=HeldForFencing": 1}, counters(families["podhealth_held_back_total"]))
	require.Equal(t, dto.MetricType_GAUGE, families["podhealth_breaker_open"].GetType())

	age := families["podhealth_dead_pod_age_at_force_delete_seconds"]
	require.Equal(t, dto.MetricType_HISTOGRAM, age.GetType())
	require.Len(t, age.Metric, 2, "one series per since")
	for _, m := range age.Metric {
		require.Len(t, m.Label, 1)
		require.Equal(t, "since", m.Label[0].GetName())
		require.Contains(t, []string{"disruption_target", "deletion_request"}, m.Label[0].GetValue())
		h := m.GetHistogram()
		require.Equal(t, uint64(1), h.GetSampleCount(), "only the force delete that went through is timed")
		require.InDelta(t, 30, h.GetSampleSum(), 1e-9, "since %s", m.Label[0].GetValue())
		var bounds []float64
		for _, b := range h.Bucket {
			bounds = append(bounds, b.GetUpperBound())
			if b.GetUpperBound() < 30 {
				require.Zero(t, b.GetCumulativeCount(), "bucket %v", b.GetUpperBound())
			} else {
				require.Equal(t, uint64(1), b.GetCumulativeCount(), "bucket %v", b.GetUpperBound())
			}
		}
		require.Equal(t, metrics.DefaultBuckets, bounds)
	}
}

func TestNewObserverRefusesANilOrUsedRegistry(t *testing.T) {
	_, err := metrics.NewObserver(nil, metrics.Options{})
	require.ErrorContains(t, err, "nil prometheus.Registerer")
	reg := prometheus.NewRegistry()
	_, err = metrics.NewObserver(reg, metrics.Options{})
	require.NoError(t, err)
	_, err = metrics.NewObserver(reg, metrics.Options{})
	var already prometheus.AlreadyRegisteredError
	require.ErrorAs(t, err, &already, "one Observer per registry")
}

func TestAgeIsZeroForAClockBehindAndCustomBucketsAreUsed(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs, err := metrics.NewObserver(reg, metrics.Options{Clock: clocktesting.NewFakePassiveClock(now.Add(-time.Hour)), Buckets: []float64{1, 2}})
	require.NoError(t, err)
	obs.Observe(context.Background(), health.PodReport{Pod: evicted("p", "n"), Outcome: health.ForceDeleted})
	for _, m := range gather(t, reg)["podhealth_dead_pod_age_at_force_delete_seconds"].Metric {
		require.Zero(t, m.GetHistogram().GetSampleSum(), "a clock behind gives age zero, never a negative one")
		require.Len(t, m.GetHistogram().Bucket, 2)
	}
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func sortedNames(fams map[string]*dto.MetricFamily) []string {
	var names []string
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func counters(mf *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mf.Metric {
		key := ""
		for _, l := range m.Label {
			key += l.GetName() + "=" + l.GetValue()
		}
		out[key] = m.GetCounter().GetValue()
	}
	return out
}

func requireGauge(t *testing.T, reg *prometheus.Registry, name string, want float64) {
	t.Helper()
	mf := gather(t, reg)[name]
	require.NotNil(t, mf, name)
	require.Equal(t, want, mf.Metric[0].GetGauge().GetValue(), name)
}

// TestBreakerGaugeFollowsEveryDeadPodThatReachesTheBreaker: after the
// Breaker held a pod back (1), a dead pod that it lets on sets the gauge to
// 0 whatever happens next: a dry run's WouldForceDelete and a pod held by
// the budget included, which left it at 1 for ever. A pod held back before
// the Breaker (fencing) says nothing about it and leaves it as it is.
func TestBreakerGaugeFollowsEveryDeadPodThatReachesTheBreaker(t *testing.T) {
	allDown := fake.NewNodes(node("node-lost", corev1.ConditionUnknown), node("x", corev1.ConditionUnknown), node("y", corev1.ConditionFalse))
	lost := fake.NewNodes(node("node-lost", corev1.ConditionUnknown), node("a", corev1.ConditionTrue), node("b", corev1.ConditionTrue))
	stateful := evicted("db-0", "node-lost")
	stateful.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts"}}
	spent, err := health.NewDeleteBudget(1, time.Hour)
	require.NoError(t, err)
	require.True(t, spentBudget(t, spent))

	tests := []struct {
		name string
		pod  *corev1.Pod
		opts health.Options
		want float64
	}{
		{"a force delete sent", evicted("web-1", "node-lost"), health.Options{Nodes: lost, Breaker: health.Breaker{Nodes: lost}}, 0},
		{"a dry run's would-be force delete", evicted("web-2", "node-lost"), health.Options{Nodes: lost, Breaker: health.Breaker{Nodes: lost}, DryRun: true}, 0},
		{"a pod held by the budget, after the Breaker", evicted("web-3", "node-lost"), health.Options{Nodes: lost, Breaker: health.Breaker{Nodes: lost}, Budget: spent}, 0},
		{"a failed force delete", evicted("web-fails", "node-lost"), health.Options{Nodes: lost, Breaker: health.Breaker{Nodes: lost}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			obs, err := metrics.NewObserver(reg, metrics.Options{})
			require.NoError(t, err)
			check(t, obs, []*corev1.Pod{evicted("web-0", "node-lost")}, health.Options{Nodes: allDown, Breaker: health.Breaker{Nodes: allDown}}, fake.Interceptor{})
			requireGauge(t, reg, "podhealth_breaker_open", 1)

			check(t, obs, []*corev1.Pod{stateful}, health.Options{Nodes: lost, Breaker: health.Breaker{Nodes: lost}}, fake.Interceptor{})
			requireGauge(t, reg, "podhealth_breaker_open", 1) // held for fencing: the Breaker was not asked

			check(t, obs, []*corev1.Pod{tt.pod}, tt.opts, fake.Interceptor{Delete: func(ctx context.Context, ns, name string, opts metav1.DeleteOptions, next fake.DeleteFunc) error {
				if name == "web-fails" {
					return errors.New("etcd is sad")
				}
				return next(ctx, ns, name, opts)
			}})
			requireGauge(t, reg, "podhealth_breaker_open", tt.want)
		})
	}
}

// spentBudget spends budget's one delete and reports whether it was spent.
func spentBudget(t *testing.T, budget *health.DeleteBudget) bool {
	t.Helper()
	src := fake.New(fake.Options{}, evicted("spender", "node-lost"))
	checker, err := health.New(src, src, health.Options{Nodes: fake.NewNodes(node("node-lost", corev1.ConditionUnknown)), Budget: budget})
	require.NoError(t, err)
	_, err = checker.Check(context.Background())
	require.NoError(t, err)
	return len(src.Deletes()) == 1
}

// TestNewObserverRefusesBucketsThatAreNotFiniteAndIncreasing: Prometheus
// panics at the first observation on such bounds, inside the check that
// has just sent a DELETE. NewObserver says so instead, and registers
// nothing.
func TestNewObserverRefusesBucketsThatAreNotFiniteAndIncreasing(t *testing.T) {
	for _, tt := range []struct {
		name    string
		buckets []float64
		want    string
	}{
		{"decreasing", []float64{5, 1}, "not above"},
		{"repeated", []float64{1, 1}, "not above"},
		{"NaN", []float64{1, math.NaN()}, "not a finite"},
		{"+Inf", []float64{1, math.Inf(1)}, "not a finite"},
		{"-Inf", []float64{math.Inf(-1), 1}, "not a finite"},
		{"empty", []float64{}, "empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			_, err := metrics.NewObserver(reg, metrics.Options{Buckets: tt.buckets})
			require.ErrorContains(t, err, tt.want)
			require.Empty(t, gather(t, reg), "nothing registered")
		})
	}
	reg := prometheus.NewRegistry()
	obs, err := metrics.NewObserver(reg, metrics.Options{Buckets: []float64{0.5, 1, 60}})
	require.NoError(t, err)
	require.NotPanics(t, func() {
		obs.Observe(context.Background(), health.PodReport{Pod: evicted("p", "n"), Outcome: health.ForceDeleted})
	})
}

// TestAFailedNewObserverLeavesTheRegistryAsItWas: when the registry refuses
// the last of podhealth's collectors, the three registered before it are
// taken off again, so none stays on the registry at zero for ever, and a
// later NewObserver on the same registry succeeds.
func TestAFailedNewObserverLeavesTheRegistryAsItWas(t *testing.T) {
	reg := prometheus.NewRegistry()
	refusing := refusingRegisterer{Registerer: reg, refuse: "podhealth_dead_pod_age_at_force_delete_seconds"}
	_, err := metrics.NewObserver(refusing, metrics.Options{})
	require.ErrorContains(t, err, "refused podhealth_dead_pod_age_at_force_delete_seconds")
	obs, err := metrics.NewObserver(reg, metrics.Options{})
	require.NoError(t, err, "nothing left behind blocks a later NewObserver")
	obs.Observe(context.Background(), health.PodReport{Pod: evicted("p", "n"), Outcome: health.ForceDeleted})
	require.Equal(t, map[string]float64{"outcome=ForceDeleted": 1}, counters(gather(t, reg)["podhealth_force_deletes_total"]))
}

// refusingRegisterer refuses the collector that describes the metric
// refuse, and passes every other call on.
type refusingRegisterer struct {
	prometheus.Registerer
	refuse string
}

func (r refusingRegisterer) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc, 8)
	c.Describe(descs)
	close(descs)
	for d := range descs {
		if strings.Contains(d.String(), `"`+r.refuse+`"`) {
			return errors.New("refused " + r.refuse)
		}
	}
	return r.Registerer.Register(c)
}

// With Options.Breaker, podhealth_breaker_open reads that Breaker's state
// at each scrape: 1 through a mass failure, and 0 as soon as every node
// recovers, though no dead pod reached the Breaker after the outage (the
// gauge that followed pods stayed 1, and PodhealthBreakerOpen fired over
// a healthy cluster). A pod report moves it no more.
func TestBreakerOpenGaugeFollowsTheBreakersOwnState(t *testing.T) {
	reg := prometheus.NewRegistry()
	nodes := fake.NewNodes(node("a", corev1.ConditionUnknown), node("b", corev1.ConditionUnknown), node("c", corev1.ConditionUnknown), node("d", corev1.ConditionTrue))
	breaker := health.Breaker{Nodes: nodes}
	obs, err := metrics.NewObserver(reg, metrics.Options{Breaker: breaker})
	require.NoError(t, err)
	requireGauge(t, reg, "podhealth_breaker_open", 1)

	check(t, obs, []*corev1.Pod{evicted("web-1", "a")}, health.Options{Nodes: nodes, Breaker: breaker}, fake.Interceptor{})
	requireGauge(t, reg, "podhealth_breaker_open", 1)
	for _, n := range []string{"a", "b", "c"} {
		nodes.Set(node(n, corev1.ConditionTrue))
	}
	requireGauge(t, reg, "podhealth_breaker_open", 0)

	_, err = metrics.NewObserver(prometheus.NewRegistry(), metrics.Options{BreakerTimeout: time.Second})
	require.ErrorContains(t, err, "would do nothing")
	_, err = metrics.NewObserver(prometheus.NewRegistry(), metrics.Options{Breaker: breaker, BreakerTimeout: -time.Second})
	require.ErrorContains(t, err, "negative")
}
