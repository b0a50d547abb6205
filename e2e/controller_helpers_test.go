package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/internal/release/manifests"
)

// controllerConfigDir is podhealth-controller's kustomize folder, from the
// e2e module.
var controllerConfigDir = filepath.Join("..", "cmd", "podhealth-controller", "config")

// controllerNamespace and controllerAccount are the manifests' namespace
// and service account.
const (
	controllerNamespace = "podhealth-system"
	controllerAccount   = "podhealth-controller"
)

// controllerManifests renders the quick start (cmd/podhealth-controller/quickstart: the
// namespace and the base) as kubectl apply -k does, with kustomize, in its
// order: applied so on a fresh control plane, it is the one-command
// install that the README gives.
func controllerManifests(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return kustomizeBuild(t, filesys.MakeFsOnDisk(), filepath.Join(controllerConfigDir, "..", "quickstart"))
}

// kustomizeBuild runs kustomize on dir of fs and returns the objects, in
// kustomize's order.
func kustomizeBuild(t *testing.T, fs filesys.FileSystem, dir string) []*unstructured.Unstructured {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
	if err != nil {
		t.Fatalf("kustomize build of %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs
}

// kustomizationObjects reads the objects of the resources of the
// kustomization in dir, in its order.
func kustomizationObjects(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, name := range k.Resources {
		objs = append(objs, fileObjects(t, filepath.Join(dir, name))...)
	}
	return objs
}

// fileObjects reads the objects of a YAML file of one or more documents.
func fileObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var objs []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj unstructured.Unstructured
		if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, &obj)
		}
	}
	return objs
}

// namespacedManifests renders, with kustomize, the namespaced mode as
// docs/controller.md's overlay writes it: the base and config/namespaced,
// the names prefixed with prefix (so that it can sit next to the base in
// one cluster), and one RoleBinding per namespace watched.
func namespacedManifests(t *testing.T, prefix string, watched []string) []*unstructured.Unstructured {
	t.Helper()
	fs := filesys.MakeFsInMemory()
	for _, dir := range []string{"", "namespaced"} {
		files, err := filepath.Glob(filepath.Join(controllerConfigDir, dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := fs.WriteFile(filepath.Join("/base", dir, filepath.Base(f)), data); err != nil {
				t.Fatal(err)
			}
		}
	}
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: " + prefix + "\nresources:\n- ../base\n- watched\ncomponents:\n- ../base/namespaced\n" +
		"patches:\n- target:\n    kind: Deployment\n    name: podhealth-controller\n  patch: |-\n    - op: add\n      path: /spec/template/spec/containers/0/args/-\n      value: --watch-namespaces=" + strings.Join(watched, ",") + "\n"
	watchedList := "resources:\n"
	for _, ns := range watched {
		watchedList += "- " + ns + ".yaml\n"
		binding := "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: podhealth-controller\n  namespace: " + ns + "\n" +
			"roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: podhealth-controller-namespace\n" +
			"subjects:\n- kind: ServiceAccount\n  name: podhealth-controller\n  namespace: " + controllerNamespace + "\n"
		if err := fs.WriteFile("/overlay/watched/"+ns+".yaml", []byte(binding)); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{"/overlay/kustomization.yaml": overlay, "/overlay/watched/kustomization.yaml": watchedList} {
		if err := fs.WriteFile(name, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	return kustomizeBuild(t, fs, "/overlay")
}

// chartDir is podhealth-controller's Helm chart, from the e2e module.
var chartDir = filepath.Join("..", "charts", "podhealth-controller")

// applyTheOtherInstalls applies, as server-side dry runs (the API server
// validates and admits each object and stores nothing), what else an
// admin installs podhealth-controller from: a release's install file
// (its image pinned by a digest), and the Helm chart at its defaults and
// in the namespaced mode for the namespaces watched, which must exist.
func applyTheOtherInstalls(ctx context.Context, t *testing.T, cp *harness.ControlPlane, watched ...string) {
	t.Helper()
	install, err := manifests.Install(controllerConfigDir, "registry.example/podhealth-controller:v0.0.0@sha256:"+strings.Repeat("0f", 32))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(install)
	if err != nil {
		t.Fatal(err)
	}
	applyObjects(ctx, t, cp, objs, true)
	watchedValues := make([]any, len(watched))
	for i, ns := range watched {
		watchedValues[i] = ns
	}
	for _, values := range []map[string]any{nil, {"watchNamespaces": watchedValues}} {
		objs, err := manifests.Chart(chartDir, controllerNamespace, values)
		if err != nil {
			t.Fatalf("the chart with values %v: %v", values, err)
		}
		applyObjects(ctx, t, cp, objs, true)
	}
}

// applyControllerManifests applies the manifests server-side: for real
// when dryRun is false, else with dryRun=All (the API server validates and
// admits each object, and stores nothing). The Deployment is applied as a
// dry run only: there is no kubelet to run its image.
func applyControllerManifests(ctx context.Context, t *testing.T, cp *harness.ControlPlane, dryRun bool) {
	t.Helper()
	applyObjects(ctx, t, cp, controllerManifests(t), dryRun)
}

// applyObjects applies objs server-side in their order, as
// applyControllerManifests does.
func applyObjects(ctx context.Context, t *testing.T, cp *harness.ControlPlane, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	config := cp.RESTConfig()
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, obj.GetName(), err)
		}
		dry := dryRun || gvk.Kind == "Deployment"
		opts := metav1.ApplyOptions{FieldManager: "podhealth-e2e", Force: true}
		if dry {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		var r dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if obj.GetNamespace() != "" {
			r = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := r.Apply(ctx, obj.GetName(), obj, opts); err != nil {
			t.Fatalf("server-side apply (dry run %v) of %s %s: %v", dry, gvk.Kind, obj.GetName(), err)
		}
	}
}

// controllerKubeconfig writes a kubeconfig that authenticates as the
// manifests' service account, with a token from the TokenRequest API, so
// that the controller runs with exactly the manifests' RBAC.
func controllerKubeconfig(ctx context.Context, t *testing.T, cp *harness.ControlPlane) string {
	t.Helper()
	return accountKubeconfig(ctx, t, cp, controllerAccount)
}

// accountTokenLifetime is how long the token of accountKubeconfig lasts:
// longer than the longest run (the 5,000-node scale test runs for about
// two hours). A Deployment's pod reads a projected token that its kubelet
// renews; the harness's processes read their kubeconfig's token, which
// nothing renews, and an hour's token failed that run's controller with
// Unauthorized an hour after it started.
const accountTokenLifetime = 12 * time.Hour

// accountKubeconfig is controllerKubeconfig for the service account of
// that name in the manifests' namespace.
func accountKubeconfig(ctx context.Context, t *testing.T, cp *harness.ControlPlane, account string) string {
	t.Helper()
	tr, err := cp.Client().CoreV1().ServiceAccounts(controllerNamespace).CreateToken(ctx, account,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(accountTokenLifetime / time.Second))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for %s/%s: %v", controllerNamespace, account, err)
	}
	if lasts := time.Until(tr.Status.ExpirationTimestamp.Time); lasts < accountTokenLifetime-time.Minute {
		t.Fatalf("the token for %s/%s lasts %v, want %v: the API server caps it", controllerNamespace, account, lasts.Round(time.Second), accountTokenLifetime)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.APIServerURL(), InsecureSkipTLSVerify: true}
	cfg.AuthInfos["controller"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "controller", Namespace: controllerNamespace}
	cfg.CurrentContext = "e2e"
	path := filepath.Join(t.TempDir(), account+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// controllerReplica is one running podhealth-controller.
type controllerReplica struct {
	op                   *harness.Operator
	metricsURL, probeURL string
	pprofURL             string // Go's /debug/pprof/
}

// startControllerReplica runs podhealth-controller as the service account,
// with leader election in the manifests' namespace and its metrics and
// probes on 127.0.0.1.
func startControllerReplica(t *testing.T, cp *harness.ControlPlane, name, kubeconfig string, extra ...string) controllerReplica {
	t.Helper()
	ports := make([]int, 3)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	// With --leader-elect=false among extra, the controller refuses the
	// leader-election flags, which would do nothing.
	leaderElection := []string{"--leader-elect=true", "--leader-election-namespace=" + controllerNamespace}
	if slices.Contains(extra, "--leader-elect=false") {
		leaderElection = nil
	}
	args := append([]string{"--kubeconfig=" + kubeconfig}, leaderElection...)
	args = append(args,
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]),
		// The tests read the metrics in plain HTTP; the secure endpoint,
		// the default, is checkSecureMetrics'.
		"--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]),
		"--pprof-bind-address=127.0.0.1:"+strconv.Itoa(ports[2]),
	)
	args = append(args, extra...)
	op := cp.StartController(t, bins, name, args...)
	return controllerReplica{op: op, metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]), probeURL: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		pprofURL: fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", ports[2])}
}

// get reads url; ok is false when nothing answers with 200.
func httpGet(ctx context.Context, url string) (string, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), resp.StatusCode == http.StatusOK
}

// httpGetAny reads url whatever its status; "" when nothing answers.
func httpGetAny(ctx context.Context, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// prometheusOperatorCRDs creates the ServiceMonitor and PrometheusRule
// kinds, so that the API server stores and validates objects of them; their
// schema is left open (the operator's own CRDs would check the fields, which
// internal/release/monitoring decodes strictly instead).
func prometheusOperatorCRDs(ctx context.Context, t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		plural := strings.ToLower(kind) + "s"
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": plural + ".monitoring.coreos.com"},
			"spec": map[string]any{
				"group": "monitoring.coreos.com", "scope": "Namespaced",
				"names": map[string]any{"kind": kind, "plural": plural, "singular": strings.ToLower(kind), "listKind": kind + "List"},
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}}
		if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the %s CRD: %v", kind, err)
		}
	}
	if err := pollUntil(ctx, func() bool {
		for _, kind := range []string{"servicemonitors", "prometheusrules"} {
			crd, err := crds.Get(ctx, kind+".monitoring.coreos.com", metav1.GetOptions{})
			if err != nil {
				return false
			}
			conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			established := false
			for _, c := range conditions {
				c := c.(map[string]any)
				established = established || c["type"] == "Established" && c["status"] == "True"
			}
			if !established {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("the Prometheus Operator CRDs are not established: %v", err)
	}
}

// installProductionChart installs the chart with
// charts/podhealth-controller/ci/production-values.yaml (a private registry
// and its pull secret, tolerations and a node selector, zone spread,
// monitoring labels) into namespace, for real (the Deployment as a dry run:
// no kubelet runs its image), and once more as a server-side dry run with
// a parent chart's global values, which must render the same objects. The
// API server must admit every object, keep the values that reach the pods,
// and fill the ServiceMonitor's token Secret.
func installProductionChart(ctx context.Context, t *testing.T, cp *harness.ControlPlane, namespace string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "ci", "production-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	prometheusOperatorCRDs(ctx, t, cp)
	objs, err := manifests.ChartAs(chartDir, "platform-podhealth", namespace, values)
	if err != nil {
		t.Fatalf("the chart with the production values: %v", err)
	}
	applyObjects(ctx, t, cp, objs, false)

	withGlobal := map[string]any{"global": map[string]any{"imageRegistry": "mirror.example", "imagePullSecrets": []any{"parent-secret"}, "storageClass": "fast"}}
	for k, v := range values {
		withGlobal[k] = v
	}
	objsWithGlobal, err := manifests.ChartAs(chartDir, "platform-podhealth", namespace, withGlobal)
	if err != nil {
		t.Fatalf("the chart with the production values and a parent's global values: %v", err)
	}
	if len(objsWithGlobal) != len(objs) {
		t.Fatalf("a parent's global values changed the objects: %d, then %d", len(objs), len(objsWithGlobal))
	}
	for i := range objs {
		if !reflect.DeepEqual(objs[i].Object, objsWithGlobal[i].Object) {
			t.Errorf("a parent's global values changed %s %s", objs[i].GetKind(), objs[i].GetName())
		}
	}
	applyObjects(ctx, t, cp, objsWithGlobal, true)

	c := cp.Client()
	sm, err := dynamicGet(ctx, cp, schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}, namespace, "podhealth")
	if err != nil {
		t.Fatalf("the ServiceMonitor: %v", err)
	}
	if sm.GetLabels()["release"] != "kube-prometheus-stack" {
		t.Errorf("the ServiceMonitor's labels: %v", sm.GetLabels())
	}
	if err := pollUntil(ctx, func() bool {
		s, err := c.CoreV1().Secrets(namespace).Get(ctx, "podhealth-metrics-scraper-token", metav1.GetOptions{})
		return err == nil && len(s.Data[corev1.ServiceAccountTokenKey]) > 0
	}); err != nil {
		t.Errorf("the token controller did not fill the ServiceMonitor's Secret in %s: %v", namespace, err)
	}
	if _, err := c.CoreV1().ResourceQuotas(namespace).Get(ctx, "podhealth-critical-pods", metav1.GetOptions{}); err != nil {
		t.Errorf("the priority quota: %v", err)
	}
}

// dynamicGet reads one object of resource.
func dynamicGet(ctx context.Context, cp *harness.ControlPlane, resource schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		return nil, err
	}
	return dyn.Resource(resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// metricsMatching returns the samples of family, in the scrape text,
// whose labels include want.
func metricsMatching(t *testing.T, text, family string, want map[string]string) []*dto.Metric {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader([]byte(text)))
	if err != nil {
		t.Fatalf("parsing metrics: %v", err)
	}
	var out []*dto.Metric
metrics:
	for _, m := range families[family].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue metrics
			}
		}
		out = append(out, m)
	}
	return out
}

// metricValue sums the samples of family whose labels include want.
func metricValue(t *testing.T, text, family string, want map[string]string) float64 {
	t.Helper()
	total := 0.0
	for _, m := range metricsMatching(t, text, family, want) {
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		}
	}
	return total
}

// startBinder binds the unscheduled pods of namespaces to the node that
// target names for each, as a scheduler would, until ctx ends.
func startBinder(ctx context.Context, cp *harness.ControlPlane, target func(*corev1.Pod) string, namespaces ...string) {
	go everyTick(ctx, 100*time.Millisecond, func() {
		for _, namespace := range namespaces {
			pods, err := cp.Client().CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
					_ = cp.BindPod(ctx, namespace, p.Name, target(&p))
				}
			}
		}
	})
}

// everyTick calls f every interval, the first time after one interval,
// until ctx ends.
func everyTick(ctx context.Context, interval time.Duration, f func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f()
	}
}

// catalogOperator is an operator without podhealth, shaped as OLM's catalog
// operator: it creates its workload's pod (owned by a ConfigMap) only when
// it lists none, in any state, as an operator does that waits for its pod
// to be gone before it creates another.
type catalogOperator struct {
	c         kubernetes.Interface
	namespace string
	owner     *corev1.ConfigMap

	mu      sync.Mutex
	created []types.UID
}

func startCatalogOperator(ctx context.Context, t *testing.T, c kubernetes.Interface, namespace, name string) *catalogOperator {
	t.Helper()
	owner, err := c.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := &catalogOperator{c: c, namespace: namespace, owner: owner}
	go o.run(ctx)
	return o
}

func (o *catalogOperator) run(ctx context.Context) {
	everyTick(ctx, 100*time.Millisecond, func() {
		pods, err := o.c.CoreV1().Pods(o.namespace).List(ctx, metav1.ListOptions{LabelSelector: "catalog=" + o.owner.Name})
		if err != nil || len(pods.Items) > 0 {
			return
		}
		pod := harness.BoundPod(o.namespace, "", "", 2)
		pod.GenerateName, pod.Name = o.owner.Name+"-", ""
		pod.Labels = map[string]string{"catalog": o.owner.Name}
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: o.owner.Name, UID: o.owner.UID, Controller: ptr.To(true)}}
		created, err := o.c.CoreV1().Pods(o.namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err == nil {
			o.mu.Lock()
			o.created = append(o.created, created.UID)
			o.mu.Unlock()
		}
	})
}

// pods returns the UIDs of the pods it created, in order.
func (o *catalogOperator) pods() []types.UID {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]types.UID(nil), o.created...)
}

// logLinesWith counts the lines of an operator's log that contain every one
// of substrs.
func logLinesWith(op *harness.Operator, substrs ...string) int {
	n := 0
	for _, line := range strings.Split(op.Log(), "\n") {
		all := true
		for _, s := range substrs {
			if !strings.Contains(line, s) {
				all = false
			}
		}
		if all && line != "" {
			n++
		}
	}
	return n
}
