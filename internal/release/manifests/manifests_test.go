package manifests_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/podhealth/podhealth/internal/release/manifests"
)

var (
	chartDir  = filepath.Join("..", "..", "..", "charts", "podhealth-controller")
	configDir = filepath.Join("..", "..", "..", "cmd", "podhealth-controller", "config")
)

const namespace = "podhealth-system"

// byKey indexes objects by kind, namespace and name, with the one label
// the two tools set each their own way (app.kubernetes.io/managed-by:
// Helm or kustomize) left out.
func byKey(t *testing.T, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range objs {
		o = o.DeepCopy()
		labels := o.GetLabels()
		require.Contains(t, []string{"Helm", "kustomize"}, labels["app.kubernetes.io/managed-by"], "%s %s", o.GetKind(), o.GetName())
		delete(labels, "app.kubernetes.io/managed-by")
		o.SetLabels(labels)
		key := o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
		require.NotContains(t, out, key, "rendered twice")
		out[key] = o.Object
	}
	return out
}

func keys(m map[string]map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func chart(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Chart(chartDir, namespace, values)
	require.NoError(t, err)
	return objs
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s/%s rendered", kind, ns, name)
	return nil
}

// TestChartAtItsDefaultsRendersTheKustomizeBase: the kustomize base is the
// source of truth, and the chart at its default values renders the same
// objects, field for field (but for who manages them).
func TestChartAtItsDefaultsRendersTheKustomizeBase(t *testing.T) {
	base, err := manifests.Kustomize(configDir)
	require.NoError(t, err)
	want, got := byKey(t, base), byKey(t, chart(t, nil))
	require.Equal(t, keys(want), keys(got))
	for k := range want {
		require.Empty(t, cmp.Diff(want[k], got[k]), k)
	}
}

// fullValues sets every value to something other than its default.
func fullValues() map[string]any {
	return map[string]any{
		"image":             map[string]any{"repository": "registry.example/podhealth-controller", "tag": "v0.2.0", "digest": "sha256:" + strings.Repeat("ab", 32), "pullPolicy": "Always"},
		"replicas":          3,
		"namespaceSelector": "team in (shop, web)",
		"dryRun":            true,
		"budget":            map[string]any{"maxForceDeletes": 0, "window": "2m"},
		"breaker":           map[string]any{"unhealthyShare": 0.5, "minUnhealthy": 5, "recheckInterval": "30s"},
		"memoryCapacity":    float64(1_000_000), // as a values file gives it
		"resources":         map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "256Mi"}},
		"priorityClassName": "platform-critical",
		"metrics":           map[string]any{"secure": false},
		"shutdownTaints":    []any{cloudShutdown, map[string]any{"key": "fencing.example.com/off", "after": "1m"}},
		"outOfService":      map[string]any{"enabled": true},
		"extraArgs":         []any{"--workers=8"},
		"leaderElection":    map[string]any{"leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "4s"},
	}
}

func TestChartLintsCleanAtItsDefaultsAndWithEveryValueSet(t *testing.T) {
	require.NoError(t, manifests.Lint(chartDir, namespace, nil))
	require.NoError(t, manifests.Lint(chartDir, namespace, fullValues()))
	require.NoError(t, manifests.Lint(chartDir, namespace, map[string]any{"watchNamespaces": []any{"shop", "tools"},
		"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}, "dashboard": map[string]any{"enabled": true}}}))
}

// TestChartPassesEveryValueAsItsFlag: each value set reaches the
// controller as its flag, and a value left null adds none (the base's
// three flags at the defaults, above).
func TestChartPassesEveryValueAsItsFlag(t *testing.T) {
	objs := chart(t, fullValues())
	deployment := find(t, objs, "Deployment", namespace, "podhealth-controller")
	containers, _, err := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	c := containers[0].(map[string]any)
	require.Equal(t, "registry.example/podhealth-controller@sha256:"+strings.Repeat("ab", 32), c["image"], "the digest pins the image")
	require.Equal(t, "Always", c["imagePullPolicy"])
	require.Equal(t, []any{
		"--leader-elect=true", "--leader-election-id=$(SERVICE_ACCOUNT_NAME)", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081",
		"--leader-election-lease-duration=30s", "--leader-election-renew-deadline=20s", "--leader-election-retry-period=4s",
		"--namespace-selector=team in (shop, web)", "--dry-run", "--max-force-deletes=0", "--force-delete-window=2m",
		"--breaker-unhealthy-share=0.5", "--breaker-min-unhealthy=5", "--breaker-recheck-interval=30s",
		"--memory-capacity=1000000", "--metrics-secure=false",
		"--shutdown-taint=node.cloudprovider.kubernetes.io/shutdown=2s", "--shutdown-taint=fencing.example.com/off=1m", "--apply-out-of-service", "--workers=8",
	}, c["args"])
	// Helm merges a map value into the default's: the limit stays unless
	// set to null.
	require.Equal(t, map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "256Mi"}, "limits": map[string]any{"memory": "512Mi"}}, c["resources"])
	replicas, _, _ := unstructured.NestedInt64(deployment.Object, "spec", "replicas")
	require.EqualValues(t, 3, replicas)
	priority, _, _ := unstructured.NestedString(deployment.Object, "spec", "template", "spec", "priorityClassName")
	require.Equal(t, "platform-critical", priority)
	service := find(t, objs, "Service", namespace, "podhealth-controller-metrics")
	ports, _, _ := unstructured.NestedSlice(service.Object, "spec", "ports")
	require.Equal(t, "http", ports[0].(map[string]any)["name"], "plain metrics are not named https")
}

func rulesOf(t *testing.T, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(data, &obj))
	return obj["rules"].([]any)
}

// TestChartNamespacedModeRendersARoleAndBindingPerNamespace: with
// watchNamespaces the cluster-wide ClusterRole is gone, a ClusterRole
// reads nodes (the rules of config/namespaced, which the controller's
// tests hold equal to its code), each namespace gets a Role with the
// namespace rules and a RoleBinding of the controller's ServiceAccount,
// and the Deployment names them in --watch-namespaces.
func TestChartNamespacedModeRendersARoleAndBindingPerNamespace(t *testing.T) {
	objs := chart(t, map[string]any{"watchNamespaces": []any{"shop", "tools"}})
	for _, o := range objs {
		require.False(t, o.GetKind() == "ClusterRole" && o.GetName() == "podhealth-controller", "the cluster-wide ClusterRole is not rendered")
		require.False(t, o.GetKind() == "ClusterRoleBinding" && o.GetName() == "podhealth-controller")
	}
	nodes := find(t, objs, "ClusterRole", "", "podhealth-controller-nodes")
	require.Equal(t, rulesOf(t, filepath.Join(configDir, "namespaced", "cluster_role.yaml")), nodes.Object["rules"])
	find(t, objs, "ClusterRoleBinding", "", "podhealth-controller-nodes")
	for _, ns := range []string{"shop", "tools"} {
		role := find(t, objs, "Role", ns, "podhealth-controller")
		require.Equal(t, rulesOf(t, filepath.Join(configDir, "namespaced", "namespace_role.yaml")), role.Object["rules"])
		binding := find(t, objs, "RoleBinding", ns, "podhealth-controller")
		require.Equal(t, map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "podhealth-controller"}, binding.Object["roleRef"])
		require.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "podhealth-controller", "namespace": namespace}}, binding.Object["subjects"])
	}
	deployment := find(t, objs, "Deployment", namespace, "podhealth-controller")
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	require.Contains(t, containers[0].(map[string]any)["args"], "--watch-namespaces=shop,tools")
}

// TestChartMonitoringIsTheComponents: the chart's ServiceMonitor,
// PrometheusRule and dashboard are config/monitoring's, whose tests
// evaluate them.
func TestChartMonitoringIsTheComponents(t *testing.T) {
	objs := chart(t, map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}, "dashboard": map[string]any{"enabled": true}}})
	for file, kind := range map[string]string{"service_monitor.yaml": "ServiceMonitor", "prometheus_rule.yaml": "PrometheusRule"} {
		data, err := os.ReadFile(filepath.Join(configDir, "monitoring", file))
		require.NoError(t, err)
		var want map[string]any
		require.NoError(t, yaml.Unmarshal(data, &want))
		got := find(t, objs, kind, namespace, "podhealth-controller")
		require.Empty(t, cmp.Diff(want["spec"], got.Object["spec"]), kind)
	}
	// The ServiceMonitor's credentials: the component's account, token
	// Secret and binding, field for field but the labels (the chart's own).
	scraper, err := os.ReadFile(filepath.Join(configDir, "monitoring", "metrics_scraper.yaml"))
	require.NoError(t, err)
	for _, doc := range strings.Split(string(scraper), "\n---\n") {
		var want map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &want))
		meta := want["metadata"].(map[string]any)
		ns, _ := meta["namespace"].(string)
		got := find(t, objs, want["kind"].(string), ns, meta["name"].(string))
		delete(meta, "labels")
		gotCopy := got.DeepCopy()
		unstructured.RemoveNestedField(gotCopy.Object, "metadata", "labels")
		require.Empty(t, cmp.Diff(want, gotCopy.Object), "%s %s", want["kind"], meta["name"])
	}
	dashboard, err := os.ReadFile(filepath.Join(configDir, "monitoring", "dashboard.json"))
	require.NoError(t, err)
	cm := find(t, objs, "ConfigMap", namespace, "podhealth-controller-dashboard")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "dashboard.json")
	require.Equal(t, strings.TrimSuffix(string(dashboard), "\n"), data)
	require.Equal(t, "1", cm.GetLabels()["grafana_dashboard"])
}

var cloudShutdown = map[string]any{"key": "node.cloudprovider.kubernetes.io/shutdown", "after": "2s"}

// TestChartOutOfServiceRendersTheBaseWithItsComponent: with
// outOfService.enabled and the component's shutdown taint, the chart
// renders what the base with config/out-of-service renders, field for
// field: node patch, and the two flags.
func TestChartOutOfServiceRendersTheBaseWithItsComponent(t *testing.T) {
	dir := t.TempDir()
	abs, err := filepath.Abs(configDir)
	require.NoError(t, err)
	rel, err := filepath.Rel(dir, abs) // kustomize takes no absolute base
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- "+rel+"\ncomponents:\n- "+filepath.Join(rel, "out-of-service")+"\n"), 0o644))
	base, err := manifests.Kustomize(dir)
	require.NoError(t, err)
	want, got := byKey(t, base), byKey(t, chart(t, map[string]any{"outOfService": map[string]any{"enabled": true}, "shutdownTaints": []any{cloudShutdown}}))
	require.Equal(t, keys(want), keys(got))
	for k := range want {
		require.Empty(t, cmp.Diff(want[k], got[k]), k)
	}
	require.Contains(t, keys(got), "ClusterRole /podhealth-controller-out-of-service")
	require.NoError(t, manifests.Lint(chartDir, namespace, map[string]any{"outOfService": map[string]any{"enabled": true}, "shutdownTaints": []any{cloudShutdown}}))
}

// TestChartOptionalPartsRenderTheBaseWithTheirComponents: fencing.lease,
// fencing.networkFence.drivers and priorityClassQuota.enabled render what
// the base with config/fence-lease, config/fence-network and
// config/priority-quota renders, field for field: each read it grants and
// its flag, and the quota that admits system-cluster-critical pods where
// the API server limits that class to namespaces with one (GKE).
func TestChartOptionalPartsRenderTheBaseWithTheirComponents(t *testing.T) {
	for _, tt := range []struct {
		component string
		values    map[string]any
	}{
		{"fence-lease", map[string]any{"fencing": map[string]any{"lease": true}}},
		{"fence-network", map[string]any{"fencing": map[string]any{"networkFence": map[string]any{"drivers": []any{"rbd.csi.ceph.com"}}}}},
		{"priority-quota", map[string]any{"priorityClassQuota": map[string]any{"enabled": true}}},
	} {
		t.Run(tt.component, func(t *testing.T) {
			dir := t.TempDir()
			abs, err := filepath.Abs(configDir)
			require.NoError(t, err)
			rel, err := filepath.Rel(dir, abs)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- "+rel+"\ncomponents:\n- "+filepath.Join(rel, tt.component)+"\n"), 0o644))
			base, err := manifests.Kustomize(dir)
			require.NoError(t, err)
			want, got := byKey(t, base), byKey(t, chart(t, tt.values))
			require.Equal(t, keys(want), keys(got))
			for k := range want {
				require.Empty(t, cmp.Diff(want[k], got[k]), k)
			}
			require.Greater(t, len(got), len(byKey(t, chart(t, nil))), "the component adds objects")
			require.NoError(t, manifests.Lint(chartDir, namespace, tt.values))
		})
	}
}

// TestThePodDisruptionBudgetAllowsADrainAtAnyReplicaCount: with every
// replica healthy, the budget the chart renders allows one eviction at 1,
// 2 and 3 replicas, as the disruption controller counts it (desired
// healthy pods from minAvailable, or the replicas less maxUnavailable,
// percentages rounded up). Before, minAvailable: 1 allowed none at one
// replica, and every drain of its node was refused.
func TestThePodDisruptionBudgetAllowsADrainAtAnyReplicaCount(t *testing.T) {
	for _, replicas := range []int{1, 2, 3} {
		objs := chart(t, map[string]any{"replicas": replicas})
		pdb := find(t, objs, "PodDisruptionBudget", namespace, "podhealth-controller")
		spec, _, _ := unstructured.NestedMap(pdb.Object, "spec")
		var desiredHealthy int
		switch {
		case spec["maxUnavailable"] != nil:
			v := intstr.Parse(fmt.Sprint(spec["maxUnavailable"]))
			n, err := intstr.GetScaledValueFromIntOrPercent(&v, replicas, true)
			require.NoError(t, err)
			desiredHealthy = replicas - n
		case spec["minAvailable"] != nil:
			v := intstr.Parse(fmt.Sprint(spec["minAvailable"]))
			n, err := intstr.GetScaledValueFromIntOrPercent(&v, replicas, true)
			require.NoError(t, err)
			desiredHealthy = n
		default:
			t.Fatalf("the budget sets neither minAvailable nor maxUnavailable: %v", spec)
		}
		require.Equal(t, 1, replicas-desiredHealthy, "evictions allowed at %d replicas", replicas)
	}
}

// TestChartTakesTheValuesEveryChartTakes: a platform team's production
// values (a private registry's pull secret, a node pool with its taint,
// zone spread, its own labels and security contexts, no budget, a parent
// chart's global values) land in the Deployment as given, the built-in
// tolerations and the selector stay, and the chart lints.
func TestChartTakesTheValuesEveryChartTakes(t *testing.T) {
	zoneSpread := map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "podhealth-controller"}}}
	values := map[string]any{
		"imagePullSecrets":          []any{map[string]any{"name": "regcred"}},
		"nodeSelector":              map[string]any{"node-pool": "system"},
		"tolerations":               []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}},
		"affinity":                  map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64", "arm64"}}}}}}}},
		"topologySpreadConstraints": []any{zoneSpread},
		"podLabels":                 map[string]any{"team": "platform"},
		"podAnnotations":            map[string]any{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
		"podSecurityContext":        map[string]any{"runAsNonRoot": true, "fsGroup": 65532},
		"securityContext":           map[string]any{"readOnlyRootFilesystem": true},
		"podDisruptionBudget":       map[string]any{"enabled": false},
		"global":                    map[string]any{"imageRegistry": "registry.example"},
	}
	objs := chart(t, values)
	deployment := find(t, objs, "Deployment", namespace, "podhealth-controller")
	spec, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template", "spec")
	require.Equal(t, values["imagePullSecrets"], spec["imagePullSecrets"])
	require.Equal(t, values["nodeSelector"], spec["nodeSelector"])
	require.Equal(t, values["affinity"], spec["affinity"])
	require.Equal(t, []any{map[string]any{"maxSkew": int64(1), "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "podhealth-controller"}}}}, spec["topologySpreadConstraints"])
	// Helm merges a map given with the chart's own: the defaults stay
	// unless set to null.
	require.Equal(t, map[string]any{"runAsNonRoot": true, "fsGroup": int64(65532), "runAsUser": int64(65532), "runAsGroup": int64(65532),
		"seccompProfile": map[string]any{"type": "RuntimeDefault"}}, spec["securityContext"])
	tolerations := spec["tolerations"].([]any)
	require.Len(t, tolerations, 3, "the built-in two and the pool's")
	require.Equal(t, "node.kubernetes.io/unreachable", tolerations[0].(map[string]any)["key"])
	require.Equal(t, "dedicated", tolerations[2].(map[string]any)["key"])
	container := spec["containers"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false, "capabilities": map[string]any{"drop": []any{"ALL"}}}, container["securityContext"])
	labels, _, _ := unstructured.NestedStringMap(deployment.Object, "spec", "template", "metadata", "labels")
	require.Equal(t, map[string]string{"team": "platform", "app.kubernetes.io/name": "podhealth-controller"}, labels)
	selector, _, _ := unstructured.NestedStringMap(deployment.Object, "spec", "selector", "matchLabels")
	require.Equal(t, map[string]string{"app.kubernetes.io/name": "podhealth-controller"}, selector, "the selector is immutable: pod labels never join it")
	annotations, _, _ := unstructured.NestedStringMap(deployment.Object, "spec", "template", "metadata", "annotations")
	require.Equal(t, map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}, annotations)
	for _, o := range objs {
		require.NotEqual(t, "PodDisruptionBudget", o.GetKind(), "podDisruptionBudget.enabled: false")
	}
	require.NoError(t, manifests.Lint(chartDir, namespace, values))
}

// TestChartMonitoringPlugsIntoTheUsualStacks: kube-prometheus-stack
// selects ServiceMonitors and PrometheusRules by its release label and may
// look in its own namespace: the labels, the namespace and the interval
// given land on them, and a ServiceMonitor in another namespace selects
// the Service in the release's.
func TestChartMonitoringPlugsIntoTheUsualStacks(t *testing.T) {
	stack := map[string]any{"release": "kube-prometheus-stack"}
	objs := chart(t, map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "labels": stack, "interval": "30s", "namespace": "monitoring"},
		"prometheusRule": map[string]any{"enabled": true, "labels": stack, "namespace": "monitoring"},
	}})
	sm := find(t, objs, "ServiceMonitor", "monitoring", "podhealth-controller")
	require.Equal(t, "kube-prometheus-stack", sm.GetLabels()["release"])
	require.Equal(t, "podhealth-controller", sm.GetLabels()["app.kubernetes.io/name"], "the chart's own labels stay")
	names, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	require.Equal(t, []string{namespace}, names)
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.Equal(t, "30s", endpoints[0].(map[string]any)["interval"])
	rule := find(t, objs, "PrometheusRule", "monitoring", "podhealth-controller")
	require.Equal(t, "kube-prometheus-stack", rule.GetLabels()["release"])
	// The operator reads the token Secret in the ServiceMonitor's
	// namespace: it, and its account, are there.
	secret := find(t, objs, "Secret", "monitoring", "podhealth-controller-metrics-scraper-token")
	require.Equal(t, "podhealth-controller-metrics-scraper", secret.GetAnnotations()["kubernetes.io/service-account.name"])
	find(t, objs, "ServiceAccount", "monitoring", "podhealth-controller-metrics-scraper")
	binding := find(t, objs, "ClusterRoleBinding", "", "podhealth-controller-metrics-scraper")
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	require.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "podhealth-controller-metrics-scraper", "namespace": "monitoring"}}, subjects)

	same := chart(t, map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}})
	sm = find(t, same, "ServiceMonitor", namespace, "podhealth-controller")
	_, found, _ := unstructured.NestedMap(sm.Object, "spec", "namespaceSelector")
	require.False(t, found, "in the release's namespace it needs no namespace selector")
}

// TestChartTakesTheDurationsTheControllerTakes: durations the flag check
// accepts, in several parts, with fractions and in every unit, render.
func TestChartTakesTheDurationsTheControllerTakes(t *testing.T) {
	for _, d := range []string{"1m30s", "2.5s", "500ms", "1h", "90s", "1.5ns", "250us", "999999h"} {
		_, err := manifests.Chart(chartDir, namespace, map[string]any{"budget": map[string]any{"window": d}, "breaker": map[string]any{"recheckInterval": d},
			"shutdownTaints": []any{map[string]any{"key": "example.com/off", "after": d}}})
		require.NoError(t, err, d)
	}
}

func TestChartRefusesValuesTheControllerWouldRefuseOrIgnore(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"a misspelt value":                        {"dryrun": true},
		"a digest that is none":                   {"image": map[string]any{"repository": "r", "tag": "t", "digest": "latest"}},
		"a selector in the namespaced mode":       {"watchNamespaces": []any{"shop"}, "namespaceSelector": "team=a"},
		"a name that is no namespace's":           {"watchNamespaces": []any{"Shop_1"}},
		"a namespace twice":                       {"watchNamespaces": []any{"shop", "shop"}},
		"out of service without evidence":         {"outOfService": map[string]any{"enabled": true}},
		"out of service, namespaced":              {"outOfService": map[string]any{"enabled": true}, "shutdownTaints": []any{cloudShutdown}, "watchNamespaces": []any{"shop"}},
		"Kubernetes' own taint as evidence":       {"shutdownTaints": []any{map[string]any{"key": "node.kubernetes.io/unreachable", "after": "1m"}}},
		"a shutdown taint with no wait":           {"shutdownTaints": []any{map[string]any{"key": "node.cloudprovider.kubernetes.io/shutdown", "after": "0s"}}},
		"a shutdown taint without a key":          {"shutdownTaints": []any{map[string]any{"after": "2s"}}},
		"a share above 1":                         {"breaker": map[string]any{"unhealthyShare": 1.5}},
		"a share of 0":                            {"breaker": map[string]any{"unhealthyShare": 0}},
		"a negative budget":                       {"budget": map[string]any{"maxForceDeletes": -1}},
		"a window that is no duration":            {"budget": map[string]any{"window": "soon"}},
		"no replica":                              {"replicas": 0},
		"an argument that is no flag":             {"extraArgs": []any{"workers=8"}},
		"a fence driver named twice":              {"fencing": map[string]any{"networkFence": map[string]any{"drivers": []any{"rbd.csi.ceph.com", "rbd.csi.ceph.com"}}}},
		"an empty fence class":                    {"fencing": map[string]any{"networkFence": map[string]any{"classes": []any{""}}}},
		"a misspelt fencing value":                {"fencing": map[string]any{"leases": true}},
		"a priority quota without a class":        {"priorityClassQuota": map[string]any{"enabled": true}, "priorityClassName": ""},
		"a pull secret that is only a name":       {"imagePullSecrets": []any{"regcred"}},
		"a node selector's number":                {"nodeSelector": map[string]any{"pool": 1}},
		"a misspelt node selector":                {"nodeSelectors": map[string]any{"pool": "system"}},
		"a spread without its key":                {"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1}}},
		"a scrape interval Prometheus can't read": {"metrics": map[string]any{"serviceMonitor": map[string]any{"interval": "30 seconds"}}},
		"a window of zero":                        {"budget": map[string]any{"window": "0s"}},
		"a recheck of zero in two parts":          {"breaker": map[string]any{"recheckInterval": "0m0s"}},
		"a window beyond Go's range":              {"budget": map[string]any{"window": "9999999999h"}},
		"a window that rounds down to zero":       {"budget": map[string]any{"window": "0.5ns"}},
		"a shutdown taint's key named twice":      {"shutdownTaints": []any{cloudShutdown, cloudShutdown}},
		"a taint name over 63 characters":         {"shutdownTaints": []any{map[string]any{"key": "example.com/" + strings.Repeat("n", 64), "after": "2s"}}},
		"a shutdown taint's wait beyond range":    {"shutdownTaints": []any{map[string]any{"key": "example.com/off", "after": "9999999999h"}}},
		"a name override that is no DNS label":    {"nameOverride": "Podhealth"},
		"a full name too long for the Service":    {"fullnameOverride": strings.Repeat("p", 56)},
		"no account created and none named":       {"serviceAccount": map[string]any{"create": false}},
		"a misspelt account value":                {"serviceAccount": map[string]any{"annotation": map[string]any{}}},
		"a lease no longer than its renewal":      {"leaderElection": map[string]any{"leaseDuration": "10s"}},
		"a renewal of two retries":                {"leaderElection": map[string]any{"renewDeadline": "1m", "leaseDuration": "2m", "retryPeriod": "50s"}},
		"a retry period of zero":                  {"leaderElection": map[string]any{"retryPeriod": "0s"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := manifests.Chart(chartDir, namespace, values)
			require.Error(t, err)
		})
	}
}

// TestInstallPinsTheImageByDigestAfterTheNamespace: the install file of a
// release creates the namespace first, then holds the base's objects with
// the image named by digest, and refuses an image named by tag alone.
func TestInstallPinsTheImageByDigestAfterTheNamespace(t *testing.T) {
	image := "ghcr.io/podhealth/podhealth-controller:v0.2.0@sha256:" + strings.Repeat("cd", 32)
	data, err := manifests.Install(configDir, image)
	require.NoError(t, err)
	objs, err := manifests.Decode(data)
	require.NoError(t, err)
	require.Equal(t, "Namespace", objs[0].GetKind())
	require.Equal(t, namespace, objs[0].GetName())
	base, err := manifests.Kustomize(configDir)
	require.NoError(t, err)
	want, got := byKey(t, base), byKey(t, objs[1:])
	require.Equal(t, keys(want), keys(got))
	deployment := got["Deployment "+namespace+"/podhealth-controller"]
	containers, _, _ := unstructured.NestedSlice(deployment, "spec", "template", "spec", "containers")
	require.Equal(t, "ghcr.io/podhealth/podhealth-controller@sha256:"+strings.Repeat("cd", 32), containers[0].(map[string]any)["image"])
	require.NotContains(t, string(data), "podhealth-controller:dev")

	for _, unpinned := range []string{"ghcr.io/podhealth/podhealth-controller:v0.2.0", "podhealth-controller", "ghcr.io/x@sha256:short"} {
		_, err := manifests.Install(configDir, unpinned)
		require.True(t, errors.Is(err, manifests.ErrImageNotPinned), "%s: %v", unpinned, err)
	}
}

// everyValueOn renders the chart with every optional part on that the
// cluster-wide mode allows, so that a naming test sees every object.
func everyValueOn() map[string]any {
	return map[string]any{
		"metrics":      map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}, "dashboard": map[string]any{"enabled": true}},
		"outOfService": map[string]any{"enabled": true}, "shutdownTaints": []any{cloudShutdown},
		"fencing":            map[string]any{"lease": true, "networkFence": map[string]any{"drivers": []any{"rbd.csi.ceph.com"}}},
		"priorityClassQuota": map[string]any{"enabled": true},
	}
}

// TestTwoReleasesInOneClusterShareNoName: two releases of the chart, in
// two namespaces, with every part on, render no two objects of one kind,
// namespace and name (the ClusterRoles, their bindings and the Roles in
// kube-node-lease were the base's names for every release), each binding
// names its own release's ServiceAccount and a role that release renders,
// and each Deployment runs as that account, whose name is its Lease's.
// The namespaced mode's objects too.
func TestTwoReleasesInOneClusterShareNoName(t *testing.T) {
	for _, mode := range []map[string]any{everyValueOn(), {"watchNamespaces": []any{"shop"}}} {
		seen := map[string]string{}
		for _, release := range []struct{ name, namespace, fullname string }{
			{"podhealth-controller", "podhealth-system", "podhealth-controller"},
			{"acme", "acme-system", "acme-podhealth-controller"},
			{"podhealth-controller-canary", "canary", "podhealth-controller-canary"},
		} {
			objs, err := manifests.ChartAs(chartDir, release.name, release.namespace, mode)
			require.NoError(t, err)
			roles := map[string]bool{}
			for _, o := range objs {
				key := o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
				require.Empty(t, seen[key], "%s rendered by releases %s and %s", key, seen[key], release.name)
				seen[key] = release.name
				require.True(t, strings.HasPrefix(o.GetName(), release.fullname), "%s is not named after the release %s", key, release.name)
				if o.GetKind() == "Role" || o.GetKind() == "ClusterRole" {
					roles[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = true
				}
			}
			for _, o := range objs {
				switch o.GetKind() {
				case "RoleBinding", "ClusterRoleBinding":
					// The controller's account, or the ServiceMonitor's scraper.
					account := release.fullname
					if strings.HasSuffix(o.GetName(), "-metrics-scraper") {
						account = release.fullname + "-metrics-scraper"
					}
					require.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": account, "namespace": release.namespace}}, o.Object["subjects"], o.GetName())
					ref, _, _ := unstructured.NestedStringMap(o.Object, "roleRef")
					ns := o.GetNamespace()
					if ref["kind"] == "ClusterRole" {
						ns = ""
					}
					require.True(t, roles[ref["kind"]+" "+ns+"/"+ref["name"]], "%s %s binds %s %s, which the release does not render", o.GetKind(), o.GetName(), ref["kind"], ref["name"])
				}
			}
			deployment := find(t, objs, "Deployment", release.namespace, release.fullname)
			account, _, _ := unstructured.NestedString(deployment.Object, "spec", "template", "spec", "serviceAccountName")
			require.Equal(t, release.fullname, account)
			find(t, objs, "ServiceAccount", release.namespace, release.fullname)
		}
	}
}

// TestChartNamesFollowTheOverrides: fullnameOverride names every object,
// nameOverride is the name label and every selector's (so that two
// releases in one namespace select their own replicas, also in the default
// spread), and an existing ServiceAccount is run as, and named by every
// binding, without one rendered.
func TestChartNamesFollowTheOverrides(t *testing.T) {
	objs := chart(t, map[string]any{"fullnameOverride": "ph", "nameOverride": "ph-controller",
		"serviceAccount": map[string]any{"create": false, "name": "platform-robot"}})
	for _, o := range objs {
		require.True(t, strings.HasPrefix(o.GetName(), "ph"), "%s %s", o.GetKind(), o.GetName())
		require.NotEqual(t, "ServiceAccount", o.GetKind(), "serviceAccount.create: false")
		require.Equal(t, "ph-controller", o.GetLabels()["app.kubernetes.io/name"], "%s %s", o.GetKind(), o.GetName())
		if subjects, ok := o.Object["subjects"]; ok {
			require.Equal(t, "platform-robot", subjects.([]any)[0].(map[string]any)["name"])
		}
	}
	deployment := find(t, objs, "Deployment", namespace, "ph")
	selector, _, _ := unstructured.NestedStringMap(deployment.Object, "spec", "selector", "matchLabels")
	require.Equal(t, map[string]string{"app.kubernetes.io/name": "ph-controller"}, selector)
	spread, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "topologySpreadConstraints")
	require.Len(t, spread, 2, "hosts and zones")
	for _, c := range spread {
		matchLabels, _, _ := unstructured.NestedStringMap(c.(map[string]any), "labelSelector", "matchLabels")
		require.Equal(t, selector, matchLabels)
	}
	pdb := find(t, objs, "PodDisruptionBudget", namespace, "ph")
	pdbSelector, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
	require.Equal(t, selector, pdbSelector)
	service := find(t, objs, "Service", namespace, "ph-metrics")
	serviceSelector, _, _ := unstructured.NestedStringMap(service.Object, "spec", "selector")
	require.Equal(t, selector, serviceSelector)
	account, _, _ := unstructured.NestedString(deployment.Object, "spec", "template", "spec", "serviceAccountName")
	require.Equal(t, "platform-robot", account)

	annotated := chart(t, map[string]any{"serviceAccount": map[string]any{"annotations": map[string]any{"iam.gke.io/gcp-service-account": "ph@example.iam.gserviceaccount.com"}}})
	sa := find(t, annotated, "ServiceAccount", namespace, "podhealth-controller")
	require.Equal(t, map[string]string{"iam.gke.io/gcp-service-account": "ph@example.iam.gserviceaccount.com"}, sa.GetAnnotations())
}

// TestChartRefusesLeaderElectionTimingsTheControllerRefusesByName: each
// order of the three timings that client-go's leader election refuses
// fails the render with a message that names the values, the defaults
// included, and the border cases just inside render.
func TestChartRefusesLeaderElectionTimingsTheControllerRefusesByName(t *testing.T) {
	for _, tt := range []struct {
		values map[string]any
		want   string // "" renders
	}{
		{map[string]any{"leaseDuration": "10s"}, "leaseDuration (10s) must be longer than renewDeadline (10s, the default)"},
		{map[string]any{"leaseDuration": "1m", "renewDeadline": "1m"}, "leaseDuration (1m) must be longer than renewDeadline (1m)"},
		{map[string]any{"retryPeriod": "9s"}, "renewDeadline (10s, the default) must be longer than 1.2 times retryPeriod (9s)"},
		{map[string]any{"renewDeadline": "2.4s", "retryPeriod": "2s"}, "renewDeadline (2.4s) must be longer than 1.2 times retryPeriod (2s)"},
		{map[string]any{"leaseDuration": "1m30s", "renewDeadline": "90s"}, "leaseDuration (1m30s) must be longer than renewDeadline (90s)"},
		// 2400 ms is 1.2 retry periods of 2 s exactly, as client-go
		// computes it (in floats, 2400 × 0.001 s is a little more).
		{map[string]any{"renewDeadline": "2400ms", "retryPeriod": "2s", "leaseDuration": "3s"}, "renewDeadline (2400ms) must be longer than 1.2 times retryPeriod (2s)"},
		{map[string]any{"renewDeadline": "2400000001ns", "retryPeriod": "2s", "leaseDuration": "3s"}, ""},
		{map[string]any{"leaseDuration": "10001ms"}, ""},
		{map[string]any{"renewDeadline": "2401ms", "retryPeriod": "2s", "leaseDuration": "3s"}, ""},
		{map[string]any{"leaseDuration": "1h", "renewDeadline": "30m", "retryPeriod": "1m"}, ""},
	} {
		_, err := manifests.Chart(chartDir, namespace, map[string]any{"leaderElection": tt.values})
		if tt.want == "" {
			require.NoError(t, err, tt.values)
			continue
		}
		require.ErrorContains(t, err, tt.want, tt.values)
	}
}
