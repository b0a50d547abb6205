package monitoring

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// dir is the monitoring component, in the controller's module.
var dir = filepath.Join("..", "..", "..", "cmd", "podhealth-controller", "config", "monitoring")

func readStrict(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, into), path)
}

// The fields of Prometheus Operator's objects that the component sets, as
// its CRDs name them. The operator's Go types would bring newer releases of
// modules that every other module here builds (cbor, kube-openapi), so
// these are decoded strictly: a field the component sets and these do not
// name fails the test.
type (
	objectMeta struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	}
	serviceMonitor struct {
		APIVersion string     `json:"apiVersion"`
		Kind       string     `json:"kind"`
		Metadata   objectMeta `json:"metadata"`
		Spec       struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port          string `json:"port"`
				Path          string `json:"path"`
				Scheme        string `json:"scheme"`
				Authorization struct {
					Type        string `json:"type"`
					Credentials struct {
						Name string `json:"name"`
						Key  string `json:"key"`
					} `json:"credentials"`
				} `json:"authorization"`
				TLSConfig struct {
					InsecureSkipVerify bool `json:"insecureSkipVerify"`
				} `json:"tlsConfig"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	prometheusRuleObject struct {
		APIVersion string     `json:"apiVersion"`
		Kind       string     `json:"kind"`
		Metadata   objectMeta `json:"metadata"`
		// Spec is Prometheus' own rule file format, which the operator
		// writes for Prometheus as it is: ruleGroups parses it so.
		Spec json.RawMessage `json:"spec"`
	}
)

func prometheusRule(t *testing.T) *prometheusRuleObject {
	var rule prometheusRuleObject
	readStrict(t, filepath.Join(dir, "prometheus_rule.yaml"), &rule)
	require.Equal(t, "monitoring.coreos.com/v1", rule.APIVersion)
	require.Equal(t, "PrometheusRule", rule.Kind)
	return &rule
}

// ruleGroups passes the PrometheusRule's groups through Prometheus' own
// rule file parser, as Prometheus loads what the operator writes.
func ruleGroups(t *testing.T) []rulefmt.RuleGroup {
	t.Helper()
	file, err := yaml.JSONToYAML(prometheusRule(t).Spec)
	require.NoError(t, err)
	groups, errs := rulefmt.Parse(file, false, model.UTF8Validation, parser.NewParser(parser.Options{}), nil)
	require.Empty(t, errs, "Prometheus' rule parser")
	require.NotEmpty(t, groups.Groups)
	return groups.Groups
}

func TestServiceMonitorScrapesOverHTTPSWithTheTokenOfAnAccountBoundToTheMetricsReader(t *testing.T) {
	var monitor serviceMonitor
	readStrict(t, filepath.Join(dir, "service_monitor.yaml"), &monitor)
	require.Equal(t, "monitoring.coreos.com/v1", monitor.APIVersion)
	require.Equal(t, "ServiceMonitor", monitor.Kind)
	var service corev1.Service
	readStrict(t, filepath.Join(dir, "..", "metrics_service.yaml"), &service)

	require.Equal(t, service.Namespace, monitor.Metadata.Namespace)
	for k, v := range monitor.Spec.Selector.MatchLabels {
		require.Equal(t, v, service.Labels[k], "the ServiceMonitor selects the metrics Service by %s", k)
	}
	require.Len(t, monitor.Spec.Endpoints, 1)
	endpoint := monitor.Spec.Endpoints[0]
	ports := []string{}
	for _, p := range service.Spec.Ports {
		ports = append(ports, p.Name)
	}
	require.Contains(t, ports, endpoint.Port)
	require.Equal(t, "https", endpoint.Scheme, "the controller serves metrics over HTTPS only by default")
	require.Equal(t, "/metrics", endpoint.Path)
	// Not bearerTokenFile (Prometheus' own token), which Prometheus
	// Operator deprecates and OpenShift's user-workload monitoring refuses:
	// strict decoding fails on it.
	require.Equal(t, "Bearer", endpoint.Authorization.Type)
	require.Equal(t, corev1.ServiceAccountTokenKey, endpoint.Authorization.Credentials.Key)

	// The Secret it names is a token of a ServiceAccount of the component,
	// in the ServiceMonitor's namespace (where the operator reads it),
	// bound to the ClusterRole that may get /metrics.
	var (
		account corev1.ServiceAccount
		secret  corev1.Secret
		binding rbacv1.ClusterRoleBinding
		reader  rbacv1.ClusterRole
	)
	docs := strings.Split(readFile(t, filepath.Join(dir, "metrics_scraper.yaml")), "\n---\n")
	require.Len(t, docs, 3)
	for i, into := range []any{&account, &secret, &binding} {
		require.NoError(t, yaml.UnmarshalStrict([]byte(docs[i]), into))
	}
	readStrict(t, filepath.Join(dir, "..", "metrics_reader_role.yaml"), &reader)
	require.Equal(t, endpoint.Authorization.Credentials.Name, secret.Name)
	require.Equal(t, corev1.SecretTypeServiceAccountToken, secret.Type)
	require.Equal(t, monitor.Metadata.Namespace, secret.Namespace)
	require.Equal(t, account.Name, secret.Annotations[corev1.ServiceAccountNameKey])
	require.Equal(t, secret.Namespace, account.Namespace)
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name}, binding.RoleRef)
	require.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account.Name, Namespace: account.Namespace}}, binding.Subjects)
	require.Equal(t, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, reader.Rules)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// series is an in-memory storage of float samples, for the PromQL engine.
type series struct {
	labels  labels.Labels
	samples []chunks.Sample
}

type sample struct {
	t int64
	f float64
}

func (s sample) T() int64                    { return s.t }
func (s sample) ST() int64                   { return 0 }
func (s sample) F() float64                  { return s.f }
func (sample) H() *histogram.Histogram       { return nil }
func (sample) FH() *histogram.FloatHistogram { return nil }
func (sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s sample) Copy() chunks.Sample         { return s }

type seriesSet struct {
	series []storage.Series
	next   int
}

func (s *seriesSet) Next() bool                      { s.next++; return s.next <= len(s.series) }
func (s *seriesSet) At() storage.Series              { return s.series[s.next-1] }
func (*seriesSet) Err() error                        { return nil }
func (*seriesSet) Warnings() annotations.Annotations { return nil }

func queryable(all []series) storage.Queryable {
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
			set := &seriesSet{}
			for _, s := range all {
				if matchesAll(s.labels, matchers) {
					set.series = append(set.series, storage.NewListSeries(s.labels, s.samples))
				}
			}
			slices.SortFunc(set.series, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
			return set
		},
	}}
}

func matchesAll(l labels.Labels, matchers []*labels.Matcher) bool {
	for _, m := range matchers {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

const step = 30 * time.Second

var start = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// sampled is a series scraped every step from start for the given minutes,
// with value(minute) as its value.
func sampled(minutes int, value func(m float64) float64, lbls ...string) series {
	s := series{labels: labels.FromStrings(lbls...)}
	for at := time.Duration(0); at <= time.Duration(minutes)*time.Minute; at += step {
		s.samples = append(s.samples, sample{t: timestamp.FromTime(start.Add(at)), f: value(at.Minutes())})
	}
	return s
}

// outage is two hours of a controller's metrics through a zone outage:
//   - the Breaker is open from minute 10 to minute 40;
//   - two StatefulSet pods wait for fencing from minute 5 to minute 30;
//   - force deletes fail once a minute from minute 50 to minute 60;
//   - the Memory sheds one pod at minute 80;
//   - dead pods are force-deleted throughout, 3 a minute, 2 s after their
//     DisruptionTarget, and held back by the Breaker and for fencing;
//   - of two replicas, podhealth-controller-0 leads until minute 70, none
//     from 70 to 85, podhealth-controller-1 from 85;
//   - an out-of-service taint the controller applied stays from minute 20
//     to minute 100;
//   - no replica is scraped from minute 100 to minute 115.
func outage() []series {
	var ages []series
	for _, le := range []string{"0.5", "1", "5", "+Inf"} {
		for _, since := range []string{"disruption_target", "deletion_request"} {
			ages = append(ages, sampled(120, func(m float64) float64 {
				if le == "0.5" || le == "1" {
					return 0
				}
				return m * 3
			}, "__name__", "podhealth_dead_pod_age_at_force_delete_seconds_bucket", "le", le, "since", since, "pod", "podhealth-controller-0"))
		}
	}
	down := func(s series) series { return gap(s, 100, 115) }
	return append(ages,
		down(sampled(120, during(10, 40, func(float64) float64 { return 1 }),
			"__name__", "podhealth_breaker_open", "pod", "podhealth-controller-0")),
		down(sampled(120, func(float64) float64 { return 0 },
			"__name__", "podhealth_breaker_open", "pod", "podhealth-controller-1")),
		down(sampled(120, during(0, 70, func(float64) float64 { return 1 }),
			"__name__", "leader_election_master_status", "name", "podhealth-controller", "pod", "podhealth-controller-0")),
		down(sampled(120, during(85, 121, func(float64) float64 { return 1 }),
			"__name__", "leader_election_master_status", "name", "podhealth-controller", "pod", "podhealth-controller-1")),
		// Another program's leader election, in a pod with no podhealth
		// metric, that never leads: no concern of these alerts.
		sampled(120, func(float64) float64 { return 0 },
			"__name__", "leader_election_master_status", "name", "other", "pod", "other-0"),
		sampled(120, during(20, 100, func(m float64) float64 { return (m - 20) * 60 }),
			"__name__", "podhealth_out_of_service_taint_oldest_seconds", "pod", "podhealth-controller-0"),
		sampled(120, during(20, 100, func(float64) float64 { return 1 }),
			"__name__", "podhealth_out_of_service_tainted_nodes", "pod", "podhealth-controller-0"),
		sampled(120, during(20, 121, func(float64) float64 { return 1 }),
			"__name__", "podhealth_out_of_service_taints_applied_total", "pod", "podhealth-controller-0"),
		sampled(120, during(100, 121, func(float64) float64 { return 1 }),
			"__name__", "podhealth_out_of_service_taints_removed_total", "pod", "podhealth-controller-0"),
		sampled(120, during(5, 30, func(m float64) float64 { return (m - 5) * 60 }),
			"__name__", "podhealth_fencing_held_oldest_seconds", "pod", "podhealth-controller-0"),
		sampled(120, during(5, 30, func(float64) float64 { return 2 }),
			"__name__", "podhealth_fencing_held_pods", "pod", "podhealth-controller-0"),
		sampled(120, func(m float64) float64 {
			return float64(min(max(int(m)-50, 0), 10))
		}, "__name__", "podhealth_force_deletes_total", "outcome", "DeleteFailed", "pod", "podhealth-controller-0"),
		sampled(120, func(m float64) float64 { return m * 3 },
			"__name__", "podhealth_force_deletes_total", "outcome", "ForceDeleted", "pod", "podhealth-controller-0"),
		sampled(120, func(m float64) float64 {
			if m >= 80 {
				return 1
			}
			return 0
		}, "__name__", "podhealth_memory_shed_total", "pod", "podhealth-controller-0"),
		sampled(120, func(m float64) float64 { return m * 2 },
			"__name__", "podhealth_held_back_total", "reason", "HeldByBreaker", "pod", "podhealth-controller-0"),
		sampled(120, func(m float64) float64 { return m },
			"__name__", "podhealth_held_back_total", "reason", "HeldForFencing", "pod", "podhealth-controller-0"),
	)
}

// gap is s without its samples from minute from until minute to: nothing
// scraped them.
func gap(s series, from, to float64) series {
	var kept []chunks.Sample
	for _, sm := range s.samples {
		m := timestamp.Time(sm.T()).Sub(start).Minutes()
		if m < from || m >= to {
			kept = append(kept, sm)
		}
	}
	s.samples = kept
	return s
}

// during is value from minute from until minute to, and 0 outside.
func during(from, to float64, value func(m float64) float64) func(m float64) float64 {
	return func(m float64) float64 {
		if m >= from && m < to {
			return value(m)
		}
		return 0
	}
}

func engine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
}

func instant(t *testing.T, e *promql.Engine, q storage.Queryable, expr string, at time.Time) promql.Vector {
	t.Helper()
	query, err := e.NewInstantQuery(context.Background(), q, nil, expr, at)
	require.NoError(t, err, expr)
	res := query.Exec(context.Background())
	require.NoError(t, res.Err, expr)
	v, err := res.Vector()
	require.NoError(t, err, expr)
	return v
}

// firing evaluates the alerting rule every step, as Prometheus does, and
// returns the minutes (from start) at which it fires: its expression has
// returned a sample at every evaluation for at least its for duration.
func firing(t *testing.T, e *promql.Engine, q storage.Queryable, rule rulefmt.Rule, minutes int) []float64 {
	t.Helper()
	var fired []float64
	var activeSince *time.Time
	for at := time.Duration(0); at <= time.Duration(minutes)*time.Minute; at += step {
		now := start.Add(at)
		if len(instant(t, e, q, rule.Expr, now)) == 0 {
			activeSince = nil
			continue
		}
		if activeSince == nil {
			activeSince = &now
		}
		if now.Sub(*activeSince) >= time.Duration(rule.For) {
			fired = append(fired, at.Minutes())
		}
	}
	return fired
}

// span is the first and last minute of fired, which must be one run of
// steps.
func span(t *testing.T, fired []float64) [2]float64 {
	t.Helper()
	if len(fired) == 0 {
		return [2]float64{-1, -1}
	}
	for i := 1; i < len(fired); i++ {
		require.InDelta(t, step.Minutes(), fired[i]-fired[i-1], 1e-9, "the alert fires in one stretch: %v", fired)
	}
	return [2]float64{fired[0], fired[len(fired)-1]}
}

func TestEveryAlertFiresExactlyWhileItsConditionHasHeldForItsDuration(t *testing.T) {
	rules := map[string]rulefmt.Rule{}
	for _, g := range ruleGroups(t) {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "alerting rules only")
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			require.NotEmpty(t, r.Annotations["description"], r.Alert)
			require.Contains(t, []string{"info", "warning", "critical"}, r.Labels["severity"], r.Alert)
			rules[r.Alert] = r
		}
	}
	// Each alert's first and last minute of firing over the outage.
	want := map[string][2]float64{
		// Open from 10 to 40, for 15 minutes: from 25 until it closes.
		"PodhealthBreakerOpen": {25, 39.5},
		// A failed delete each minute from 51 to 60. A range is open on
		// its left, so the 10-minute increase is positive from 51 until
		// 69, the last window that still holds the sample before the
		// last failure (59.5); firing starts 5 minutes after 51.
		"PodhealthForceDeleteErrors": {56, 69},
		// The oldest hold passes 600 s after minute 15, until the pods go
		// at 30.
		"PodhealthPodsWaitForFencing": {15.5, 29.5},
		// One pod shed at 80: the 15-minute increase sees it until 94,
		// the last window that holds the sample before it (79.5).
		"PodhealthMemoryShedding": {80, 94},
		// The last samples before the gap are at 99.5; the lookback (5
		// minutes, open on its left) has none from 104.5, and the
		// replicas are back at 115: absent for 5 minutes from 109.5.
		"PodhealthControllerDown": {109.5, 114.5},
		// Nobody leads from 70 until 85, for 5 minutes: from 75.
		"PodhealthNoLeader": {75, 84.5},
		// The taint passes an hour after minute 80, until it comes off
		// at 100.
		"PodhealthOutOfServiceTaintLingers": {80.5, 99.5},
	}
	require.ElementsMatch(t, keys(want), keys(rules), "every alert has its case here")

	e, q := engine(), queryable(outage())
	for name, rule := range rules {
		t.Run(name, func(t *testing.T) {
			got := span(t, firing(t, e, q, rule, 120))
			require.InDelta(t, want[name][0], got[0], 1e-9, "first minute firing")
			require.InDelta(t, want[name][1], got[1], 1e-9, "last minute firing")
		})
	}
}

func TestQuietMetricsFireNoAlert(t *testing.T) {
	quiet := []series{
		sampled(60, func(float64) float64 { return 0 }, "__name__", "podhealth_breaker_open"),
		sampled(60, func(float64) float64 { return 0 }, "__name__", "podhealth_fencing_held_oldest_seconds"),
		sampled(60, func(float64) float64 { return 0 }, "__name__", "podhealth_fencing_held_pods"),
		sampled(60, func(float64) float64 { return 0 }, "__name__", "podhealth_force_deletes_total", "outcome", "DeleteFailed"),
		sampled(60, func(m float64) float64 { return m }, "__name__", "podhealth_force_deletes_total", "outcome", "ForceDeleted"),
		sampled(60, func(float64) float64 { return 0 }, "__name__", "podhealth_memory_shed_total"),
		sampled(60, func(float64) float64 { return 1 }, "__name__", "leader_election_master_status", "name", "podhealth-controller"),
		sampled(60, func(float64) float64 { return 600 }, "__name__", "podhealth_out_of_service_taint_oldest_seconds"),
	}
	e, q := engine(), queryable(quiet)
	for _, g := range ruleGroups(t) {
		for _, r := range g.Rules {
			require.Empty(t, firing(t, e, q, r, 60), r.Alert)
		}
	}
}

func TestAlertDescriptionsExpandWithTheirValuesAndQueries(t *testing.T) {
	e, q := engine(), queryable(outage())
	at := start.Add(20 * time.Minute)
	queryFunc := func(ctx context.Context, expr string, ts time.Time) (promql.Vector, error) {
		return instant(t, e, q, expr, ts), nil
	}
	defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	for _, g := range ruleGroups(t) {
		for _, r := range g.Rules {
			if r.Alert != "PodhealthPodsWaitForFencing" {
				continue
			}
			v := instant(t, e, q, r.Expr, at)
			require.Len(t, v, 1)
			data := template.AlertTemplateData(map[string]string{}, nil, "", promql.Sample{F: v[0].F})
			expanded, err := template.NewTemplateExpander(context.Background(), defs+r.Annotations["description"], "description",
				data, model.Time(timestamp.FromTime(at)), queryFunc, nil, nil).Expand()
			require.NoError(t, err)
			require.Contains(t, expanded, "2 dead pods are held back for fencing; the oldest for 15m 0s.")
			return
		}
	}
	t.Fatal("no rule PodhealthPodsWaitForFencing")
}

func TestDashboardIsGrafanaJSONWhoseQueriesEvaluate(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(dir, "dashboard.json"))
	require.NoError(t, err)
	var dashboard struct {
		UID           string `json:"uid"`
		Title         string `json:"title"`
		SchemaVersion int    `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Name       string          `json:"name"`
				Type       string          `json:"type"`
				Query      json.RawMessage `json:"query"`
				Definition string          `json:"definition"`
				IncludeAll bool            `json:"includeAll"`
				AllValue   string          `json:"allValue"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource struct {
				Type string `json:"type"`
				UID  string `json:"uid"`
			} `json:"datasource"`
			GridPos struct{ X, Y, W, H int } `json:"gridPos"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &dashboard))
	require.NotEmpty(t, dashboard.UID)
	require.NotEmpty(t, dashboard.Title)
	require.GreaterOrEqual(t, dashboard.SchemaVersion, 36, "a dashboard of Grafana 9 or later")
	// The data source, and the cluster and the job (one installation's
	// replicas) to show, each "All" by default, as a Prometheus that
	// scrapes many clusters or installations labels them.
	vars := dashboard.Templating.List
	require.Len(t, vars, 3)
	require.Equal(t, "datasource", vars[0].Name)
	require.Equal(t, "datasource", vars[0].Type)
	require.JSONEq(t, `"prometheus"`, string(vars[0].Query))
	e, q := engine(), queryable(outage())
	for i, name := range []string{"cluster", "job"} {
		v := vars[i+1]
		require.Equal(t, name, v.Name)
		require.Equal(t, "query", v.Type)
		require.Equal(t, "${datasource}", v.Datasource.UID)
		require.True(t, v.IncludeAll, name)
		require.Equal(t, ".*", v.AllValue, "%s: All matches series without the label too", name)
		selector, ok := strings.CutPrefix(v.Definition, "label_values(")
		require.True(t, ok, v.Definition)
		selector, ok = strings.CutSuffix(selector, ", "+name+")")
		require.True(t, ok, v.Definition)
		require.NotEmpty(t, instant(t, e, q, allValues(selector), start.Add(20*time.Minute)), "%s: %s", name, selector)
	}

	readsOutOfService := map[string]bool{}
	selectors := regexp.MustCompile(`(podhealth_[a-z_]+)(\{[^}]*\})?`)
	ids := map[int]bool{}
	cells := map[[2]int]int{} // each of the 24 columns' rows, to catch overlaps
	require.NotEmpty(t, dashboard.Panels)
	for _, p := range dashboard.Panels {
		require.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		require.Contains(t, []string{"stat", "timeseries"}, p.Type, p.Title)
		require.Equal(t, "prometheus", p.Datasource.Type, p.Title)
		require.Equal(t, "${datasource}", p.Datasource.UID, "%s: the data source is the dashboard's variable", p.Title)
		require.True(t, p.GridPos.W > 0 && p.GridPos.H > 0 && p.GridPos.X >= 0 && p.GridPos.X+p.GridPos.W <= 24, "%s: gridPos %+v", p.Title, p.GridPos)
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				require.Zero(t, cells[[2]int{x, y}], "%s overlaps panel %d", p.Title, cells[[2]int{x, y}])
				cells[[2]int{x, y}] = p.ID
			}
		}
		require.NotEmpty(t, p.Targets, p.Title)
		for _, target := range p.Targets {
			require.NotEmpty(t, target.RefID)
			for _, m := range selectors.FindAllStringSubmatch(target.Expr, -1) {
				require.Contains(t, m[2], `cluster=~"$cluster"`, "%s: %s shows every cluster whatever is chosen", p.Title, m[0])
				require.Contains(t, m[2], `job=~"$job"`, "%s: %s shows every job whatever is chosen", p.Title, m[0])
				if strings.HasPrefix(m[1], "podhealth_out_of_service_") {
					readsOutOfService[m[1]] = true
				}
			}
			require.NotEmpty(t, instant(t, e, q, allValues(target.Expr), start.Add(20*time.Minute)), "%s: %s returns nothing over the outage", p.Title, target.Expr)
		}
	}
	for _, name := range []string{"podhealth_out_of_service_tainted_nodes", "podhealth_out_of_service_taint_oldest_seconds", "podhealth_out_of_service_taints_applied_total"} {
		require.True(t, readsOutOfService[name], "no panel shows %s", name)
	}
}

// allValues is expr with the dashboard's variables at "All", as Grafana
// sends it.
func allValues(expr string) string {
	return strings.NewReplacer("$cluster", ".*", "$job", ".*").Replace(expr)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
