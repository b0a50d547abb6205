package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/podhealth/podhealth/cmd/podhealth-controller/internal/controller"
	"github.com/podhealth/podhealth/health"
)

// render builds, as `kubectl apply -k` would, a kustomization that an
// admin writes next to a copy of config/ (as base/), and returns its
// objects.
func render(t *testing.T, overlay string) resmap.ResMap {
	t.Helper()
	return renderFiles(t, map[string]string{"kustomization.yaml": overlay})
}

// renderFiles is render for an overlay of several files, by their paths
// in the overlay's folder.
func renderFiles(t *testing.T, overlay map[string]string) resmap.ResMap {
	t.Helper()
	fs := filesys.MakeFsInMemory()
	for _, dir := range []string{"", "monitoring", "namespaced", "out-of-service", "fence-lease", "fence-network"} {
		files, err := filepath.Glob(filepath.Join("config", dir, "*.*"))
		require.NoError(t, err)
		for _, f := range files {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			require.NoError(t, fs.WriteFile(filepath.Join("/base", dir, filepath.Base(f)), data))
		}
	}
	for name, data := range overlay {
		require.NoError(t, fs.WriteFile(filepath.Join("/overlay", name), []byte(data)))
	}
	objs, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/overlay")
	require.NoError(t, err)
	return objs
}

// TestManifestsSurviveTheOverlaysAdminsWrite renders the base with the
// overlay admins write most (another namespace, a name prefix and their own
// image) and checks what would break the controller or an admin's cluster:
// the controller can still read the node Leases, every binding still names
// the controller's (renamed, moved) ServiceAccount, and no Namespace object
// is renamed, so that `kubectl delete -k` deletes no namespace. Before,
// such an overlay moved the Role in kube-node-lease away (the Breaker then
// stayed open for ever) and renamed the base's Namespace to the admin's.
func TestManifestsSurviveTheOverlaysAdminsWrite(t *testing.T) {
	objs := render(t, `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: platform-ops
namePrefix: ops-
resources:
- ../base
images:
- name: podhealth-controller
  newName: registry.example/podhealth-controller
  newTag: v9.9.9
`)
	var account, image string
	var leaseReaders []string
	for _, r := range objs.Resources() {
		kind := r.GetKind()
		require.NotEqual(t, "Namespace", kind, "the base holds no Namespace for an overlay to rename")
		switch kind {
		case "ServiceAccount":
			account = r.GetNamespace() + "/" + r.GetName()
		case "Deployment":
			data, err := r.AsYAML()
			require.NoError(t, err)
			for _, line := range strings.Split(string(data), "\n") {
				if strings.Contains(line, "image:") {
					image = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "image:"))
				}
			}
		}
	}
	require.Equal(t, "platform-ops/ops-podhealth-controller", account)
	require.Equal(t, "registry.example/podhealth-controller:v9.9.9", image)
	// The Lease follows the prefix: its ID is the ServiceAccount's name,
	// which the kubelet expands from the pod's own spec.
	require.Equal(t, "ops-podhealth-controller", leaseID(t, objs))

	for _, r := range objs.Resources() {
		kind := r.GetKind()
		if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
			continue
		}
		m, err := r.Map()
		require.NoError(t, err)
		subjects, _ := m["subjects"].([]any)
		require.Len(t, subjects, 1, "%s %s", kind, r.GetName())
		s := subjects[0].(map[string]any)
		require.Equal(t, account, s["namespace"].(string)+"/"+s["name"].(string), "%s %s names the controller's ServiceAccount", kind, r.GetName())
		roleRef := m["roleRef"].(map[string]any)
		if roleRef["name"] == "ops-podhealth-controller-node-leases" {
			leaseReaders = append(leaseReaders, kind+" "+r.GetName())
			require.Equal(t, "ClusterRoleBinding", kind, "a grant that no namespace overlay moves away from kube-node-lease")
		}
	}
	require.Equal(t, []string{"ClusterRoleBinding ops-podhealth-controller-node-leases"}, leaseReaders)
}

// leaseID is the leader-election Lease's name that the rendered
// Deployment's pods run with.
func leaseID(t *testing.T, objs resmap.ResMap) string {
	t.Helper()
	for _, r := range objs.Resources() {
		if r.GetKind() != "Deployment" {
			continue
		}
		data, err := r.AsYAML()
		require.NoError(t, err)
		var d appsv1.Deployment
		require.NoError(t, yaml.Unmarshal(data, &d))
		for _, a := range expandedArgs(t, d.Spec.Template.Spec) {
			if id, ok := strings.CutPrefix(a, "--leader-election-id="); ok {
				return id
			}
		}
		t.Fatal("the Deployment passes no --leader-election-id")
	}
	t.Fatal("no Deployment rendered")
	return ""
}

// TestTwoOverlaysInOneNamespaceElectALeaderEach: the base and a prefixed
// overlay of it in one namespace name two Leases; before, every
// installation locked the Lease podhealth-controller.
func TestTwoOverlaysInOneNamespaceElectALeaderEach(t *testing.T) {
	plain := render(t, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../base\n")
	prefixed := render(t, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: canary-\nresources:\n- ../base\n")
	require.Equal(t, "podhealth-controller", leaseID(t, plain))
	require.Equal(t, "canary-podhealth-controller", leaseID(t, prefixed))
}

// TestTheMonitoringComponentFollowsTheOverlay: the monitoring component
// (config/monitoring) lands in the overlay's namespace, its ServiceMonitor
// still selects the metrics Service by labels a name prefix leaves alone,
// and the dashboard's ConfigMap carries the label Grafana's sidecar loads.
func TestTheMonitoringComponentFollowsTheOverlay(t *testing.T) {
	objs := render(t, `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: platform-ops
namePrefix: ops-
resources:
- ../base
components:
- ../base/monitoring
`)
	dashboard, err := os.ReadFile(filepath.Join("config", "monitoring", "dashboard.json"))
	require.NoError(t, err)
	found := map[string]bool{}
	var serviceLabels, selector map[string]any
	var credentials string
	var scraper rbacv1.ClusterRoleBinding
	for _, r := range objs.Resources() {
		m, err := r.Map()
		require.NoError(t, err)
		switch r.GetKind() {
		case "ServiceMonitor", "PrometheusRule", "ConfigMap":
			require.Equal(t, "platform-ops", r.GetNamespace(), r.GetKind())
			found[r.GetKind()+" "+r.GetName()] = true
		case "Service":
			serviceLabels = m["metadata"].(map[string]any)["labels"].(map[string]any)
		}
		switch r.GetKind() {
		case "ServiceMonitor":
			selector = m["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
			endpoint := m["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
			credentials = endpoint["authorization"].(map[string]any)["credentials"].(map[string]any)["name"].(string)
		case "Secret":
			// The token Secret follows the prefix, and so does the account
			// it is of, which kustomize follows through name_references.yaml.
			require.Equal(t, "ops-podhealth-controller-metrics-scraper-token", r.GetName())
			require.Equal(t, "platform-ops", r.GetNamespace())
			require.Equal(t, "ops-podhealth-controller-metrics-scraper", r.GetAnnotations()[corev1.ServiceAccountNameKey])
		case "ClusterRoleBinding":
			if strings.HasSuffix(r.GetName(), "-metrics-scraper") {
				data, err := r.AsYAML()
				require.NoError(t, err)
				require.NoError(t, yaml.Unmarshal(data, &scraper))
			}
		case "ConfigMap":
			require.Equal(t, "1", r.GetLabels()["grafana_dashboard"])
			require.Equal(t, string(dashboard), m["data"].(map[string]any)["dashboard.json"])
		}
	}
	require.Equal(t, map[string]bool{
		"ServiceMonitor ops-podhealth-controller":      true,
		"PrometheusRule ops-podhealth-controller":      true,
		"ConfigMap ops-podhealth-controller-dashboard": true,
	}, found)
	require.Equal(t, "ops-podhealth-controller-metrics-scraper-token", credentials, "the ServiceMonitor names the prefixed Secret")
	require.Equal(t, "ops-podhealth-controller-metrics-reader", scraper.RoleRef.Name)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ops-podhealth-controller-metrics-scraper", Namespace: "platform-ops"}}, scraper.Subjects)
	require.NotEmpty(t, selector)
	for k, v := range selector {
		require.Equal(t, v, serviceLabels[k], "the ServiceMonitor selects the metrics Service by %s", k)
	}
}

// namespacedOverlay is docs/controller.md's overlay of the namespaced mode,
// for the namespaces shop and tools.
var namespacedOverlay = map[string]string{
	"kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: ops-
resources:
- ../base
- watched
components:
- ../base/namespaced
patches:
- target:
    kind: Deployment
    name: podhealth-controller
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --watch-namespaces=shop,tools
`,
	"watched/kustomization.yaml": "resources:\n- shop.yaml\n- tools.yaml\n",
	"watched/shop.yaml":          roleBinding("shop"),
	"watched/tools.yaml":         roleBinding("tools"),
}

func roleBinding(namespace string) string {
	return `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: podhealth-controller
  namespace: ` + namespace + `
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: podhealth-controller-namespace
subjects:
- kind: ServiceAccount
  name: podhealth-controller
  namespace: podhealth-system
`
}

// TestTheNamespacedOverlayGrantsPodRightsInTheWatchedNamespacesOnly
// renders the namespaced mode as docs/controller.md writes it: no
// ClusterRole left grants a right on pods, each watched namespace has a
// RoleBinding of the controller's (prefixed) ServiceAccount to the
// namespace ClusterRole, and the Deployment names the same namespaces in
// --watch-namespaces, which parses.
func TestTheNamespacedOverlayGrantsPodRightsInTheWatchedNamespacesOnly(t *testing.T) {
	objs := renderFiles(t, namespacedOverlay)
	var bound []string
	var args []string
	for _, r := range objs.Resources() {
		m, err := r.Map()
		require.NoError(t, err)
		switch r.GetKind() {
		case "ClusterRole":
			data, err := r.AsYAML()
			require.NoError(t, err)
			var role rbacv1.ClusterRole
			require.NoError(t, yaml.UnmarshalStrict(data, &role))
			if role.Name == "ops-podhealth-controller-namespace" {
				require.Empty(t, cmp.Diff(controller.NamespaceRules(), role.Rules))
				continue
			}
			for _, rule := range role.Rules {
				require.NotContains(t, rule.Resources, "pods", "ClusterRole %s", role.Name)
				require.NotContains(t, rule.Resources, "namespaces", "ClusterRole %s", role.Name)
			}
			if role.Name == "ops-podhealth-controller-nodes" {
				require.Empty(t, cmp.Diff(controller.NamespacedModeClusterRules(), role.Rules))
			}
		case "ClusterRoleBinding":
			require.NotEqual(t, "ops-podhealth-controller", r.GetName(), "the cluster-wide grant is gone")
		case "RoleBinding":
			roleRef := m["roleRef"].(map[string]any)
			if roleRef["name"] == "ops-podhealth-controller-namespace" {
				subject := m["subjects"].([]any)[0].(map[string]any)
				require.Equal(t, "podhealth-system/ops-podhealth-controller", subject["namespace"].(string)+"/"+subject["name"].(string))
				bound = append(bound, r.GetNamespace())
			}
		case "Deployment":
			data, err := r.AsYAML()
			require.NoError(t, err)
			var d appsv1.Deployment
			require.NoError(t, yaml.Unmarshal(data, &d))
			args = expandedArgs(t, d.Spec.Template.Spec)
		}
	}
	require.ElementsMatch(t, []string{"shop", "tools"}, bound)
	cfg, err := parseFlags(flag.NewFlagSet("test", flag.ContinueOnError), args)
	require.NoError(t, err)
	require.Equal(t, []string{"shop", "tools"}, cfg.WatchNamespaces)
}

// TestTheNamespaceComesApartFromTheBase: config/namespace creates
// podhealth-system, the namespace the base's objects name, on its own.
func TestTheNamespaceComesApartFromTheBase(t *testing.T) {
	fs := filesys.MakeFsOnDisk()
	objs, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, filepath.Join("config", "namespace"))
	require.NoError(t, err)
	require.Len(t, objs.Resources(), 1)
	require.Equal(t, "Namespace", objs.Resources()[0].GetKind())
	base := render(t, "resources:\n- ../base\n")
	for _, r := range base.Resources() {
		if ns := r.GetNamespace(); ns != "" {
			require.Equal(t, objs.Resources()[0].GetName(), ns, "%s %s", r.GetKind(), r.GetName())
		}
	}
}

// TestTheQuickStartIsOneCommandThatCreatesTheNamespaceFirst: kubectl apply
// -k applies objects in kustomize's order, so the quick start's Namespace
// must come first, and then exactly the base's objects, in it.
func TestTheQuickStartIsOneCommandThatCreatesTheNamespaceFirst(t *testing.T) {
	fs := filesys.MakeFsOnDisk()
	quick, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "quickstart")
	require.NoError(t, err)
	resources := quick.Resources()
	require.NotEmpty(t, resources)
	require.Equal(t, "Namespace", resources[0].GetKind(), "the Namespace is applied first")
	require.Equal(t, "podhealth-system", resources[0].GetName())
	base := render(t, "resources:\n- ../base\n")
	var want, got []string
	for _, r := range base.Resources() {
		want = append(want, r.CurId().String())
	}
	for _, r := range resources[1:] {
		if ns := r.GetNamespace(); ns != "" {
			require.Equal(t, resources[0].GetName(), ns, "%s lives in the quick start's namespace", r.CurId())
		}
		got = append(got, r.CurId().String())
	}
	require.ElementsMatch(t, want, got, "the quick start is the namespace and the base")
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), "kubectl apply -k cmd/podhealth-controller/quickstart", "the README's quick start is this one command")
}

// TestTheDocumentedInstallNeedsOnlyKubectlAndLeavesTheCheckoutClean: the
// install of docs/controller.md writes its overlay outside the checkout,
// and kubectl's own kustomize builds it (no kustomize binary, no edit of a
// tracked file) into the quick start with the image pinned by digest.
func TestTheDocumentedInstallNeedsOnlyKubectlAndLeavesTheCheckoutClean(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "controller.md"))
	require.NoError(t, err)
	doc := string(data)
	const open = "cat > ../podhealth-install/kustomization.yaml <<EOF\n"
	start := strings.Index(doc, open)
	require.NotEqual(t, -1, start, "docs/controller.md writes the install overlay with %q", open)
	block, _, ok := strings.Cut(doc[start+len(open):], "\nEOF\n")
	require.True(t, ok)
	install, _, _ := strings.Cut(doc[strings.LastIndex(doc[:start], "```sh"):], "\n```\n")
	for _, line := range strings.Split(install, "\n") {
		require.False(t, strings.HasPrefix(strings.TrimSpace(line), "kustomize "), "the install needs a kustomize binary: %s", line)
		require.NotContains(t, line, "-out \"$PWD", "the image layout is written into the checkout: %s", line)
		require.NotContains(t, line, "edit set image", "the install edits a tracked file: %s", line)
	}
	require.Contains(t, install, "kubectl apply -k ../podhealth-install")

	// The checkout and the overlay side by side, as the docs make them:
	// the checkout is a link to this one, named as the shell would name
	// it.
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	parent := t.TempDir()
	require.NoError(t, os.Symlink(root, filepath.Join(parent, "checkout")))
	digest := "sha256:" + strings.Repeat("ab", 32)
	kustomization := strings.NewReplacer(`$(basename "$PWD")`, "checkout", "REGISTRY", "registry.example", "sha256:...", digest).Replace(block)
	dir := filepath.Join(parent, "podhealth-install")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644))
	objs, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "%s", kustomization)
	resources := objs.Resources()
	require.Equal(t, "Namespace", resources[0].GetKind())
	var images []string
	for _, r := range resources {
		if r.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		data, err := r.AsYAML()
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(data, &d))
		for _, c := range d.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
	}
	require.Equal(t, []string{"registry.example/podhealth-controller@" + digest}, images)
}

// TestTheHelmInstallLabelsItsNamespaceAsConfigNamespaceDoes: helm install
// --create-namespace sets no label, so the docs give the Pod Security label
// of config/namespace, the one it sets, as the next command.
func TestTheHelmInstallLabelsItsNamespaceAsConfigNamespaceDoes(t *testing.T) {
	var ns corev1.Namespace
	readManifest(t, filepath.Join("namespace", "namespace.yaml"), &ns)
	level := ns.Labels["pod-security.kubernetes.io/enforce"]
	require.Equal(t, "restricted", level)
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "controller.md"))
	require.NoError(t, err)
	doc := string(data)
	create := strings.Index(doc, "--create-namespace \\\n")
	require.NotEqual(t, -1, create, "docs/controller.md installs the chart with --create-namespace")
	block, _, _ := strings.Cut(doc[create:], "```")
	require.Contains(t, block, "kubectl label namespace "+ns.Name+" pod-security.kubernetes.io/enforce="+level)
}

// TestEveryObjectCarriesTheRecommendedLabelsAndTheControllerStaysUp: each
// object carries Kubernetes' recommended app.kubernetes.io labels; the
// Deployment runs at the priority of cluster add-ons, since it is needed
// most when capacity is lost; and a PodDisruptionBudget keeps one of its
// two replicas through a drain.
func TestEveryObjectCarriesTheRecommendedLabelsAndTheControllerStaysUp(t *testing.T) {
	objs := render(t, "resources:\n- ../base\ncomponents:\n- ../base/monitoring\n")
	var pdb, deployment map[string]any
	for _, r := range objs.Resources() {
		labels := r.GetLabels()
		for _, key := range []string{"app.kubernetes.io/name", "app.kubernetes.io/component", "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by"} {
			require.NotEmpty(t, labels[key], "%s %s has no %s", r.GetKind(), r.GetName(), key)
		}
		m, err := r.Map()
		require.NoError(t, err)
		switch r.GetKind() {
		case "PodDisruptionBudget":
			pdb = m
		case "Deployment":
			deployment = m
		}
	}
	require.NotNil(t, deployment)
	require.NotNil(t, pdb, "no PodDisruptionBudget")
	template := deployment["spec"].(map[string]any)["template"].(map[string]any)
	require.Equal(t, "system-cluster-critical", template["spec"].(map[string]any)["priorityClassName"])
	spec := pdb["spec"].(map[string]any)
	require.EqualValues(t, 1, spec["maxUnavailable"])
	require.Equal(t, template["metadata"].(map[string]any)["labels"], spec["selector"].(map[string]any)["matchLabels"], "the budget selects the Deployment's pods")
}

// TestTheOutOfServiceComponentGrantsNodePatchAndTheFlagsTogether renders
// the component as docs/controller.md writes it, under an admin's overlay:
// node patch is granted (to the renamed, moved ServiceAccount) exactly by
// the component's ClusterRole, which is controller.OutOfServiceRules, and
// the Deployment's args then parse, with --apply-out-of-service and the
// cloud's shutdown taint. Without the component, no role grants node patch.
func TestTheOutOfServiceComponentGrantsNodePatchAndTheFlagsTogether(t *testing.T) {
	base := render(t, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../base\n")
	for _, r := range base.Resources() {
		if r.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		data, err := r.AsYAML()
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(data, &role))
		for _, rule := range role.Rules {
			require.False(t, slices.Contains(rule.Resources, "nodes") && slices.Contains(rule.Verbs, "patch"), "the base grants node patch in %s", role.Name)
		}
	}

	objs := render(t, `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: platform-ops
namePrefix: ops-
resources:
- ../base
components:
- ../base/out-of-service
`)
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	var deployment appsv1.Deployment
	for _, r := range objs.Resources() {
		data, err := r.AsYAML()
		require.NoError(t, err)
		switch {
		case r.GetKind() == "ClusterRole" && r.GetName() == "ops-podhealth-controller-out-of-service":
			require.NoError(t, yaml.Unmarshal(data, &role))
		case r.GetKind() == "ClusterRoleBinding" && r.GetName() == "ops-podhealth-controller-out-of-service":
			require.NoError(t, yaml.Unmarshal(data, &binding))
		case r.GetKind() == "Deployment":
			require.NoError(t, yaml.Unmarshal(data, &deployment))
		}
	}
	require.Empty(t, cmp.Diff(controller.OutOfServiceRules(), role.Rules))
	require.Equal(t, role.Name, binding.RoleRef.Name)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ops-podhealth-controller", Namespace: "platform-ops"}}, binding.Subjects)
	args := expandedArgs(t, deployment.Spec.Template.Spec)
	require.Contains(t, args, "--apply-out-of-service")
	cfg, err := parseFlags(flag.NewFlagSet("podhealth-controller", flag.ContinueOnError), args)
	require.NoError(t, err)
	require.True(t, cfg.ApplyOutOfService)
	require.Equal(t, []health.ShutdownTaint{{Key: health.TaintCloudShutdown, After: 2 * time.Second}}, cfg.ShutdownTaints)
}

// TestTheFencingComponentsGrantTheirReadsAndTheFlagsTogether renders each
// fencing component under an admin's overlay: its ClusterRole is exactly
// the rules the fencer needs, bound to the renamed, moved ServiceAccount,
// and the Deployment's args then parse, with the fencer's flag. Without
// the components, no fencer is built and no role grants these reads.
func TestTheFencingComponentsGrantTheirReadsAndTheFlagsTogether(t *testing.T) {
	base := render(t, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../base\n")
	for _, r := range base.Resources() {
		require.NotContains(t, r.GetName(), "fence", "the base holds no fencing role")
		if r.GetKind() == "Deployment" {
			var d appsv1.Deployment
			data, err := r.AsYAML()
			require.NoError(t, err)
			require.NoError(t, yaml.Unmarshal(data, &d))
			cfg, err := parseFlags(flag.NewFlagSet("podhealth-controller", flag.ContinueOnError), expandedArgs(t, d.Spec.Template.Spec))
			require.NoError(t, err)
			fencers, err := fencers(cfg, fakeReader{}, nil)
			require.NoError(t, err)
			require.Empty(t, fencers, "no fencer by default")
		}
	}
	for _, tt := range []struct {
		component string
		rules     []rbacv1.PolicyRule
		check     func(t *testing.T, cfg Config)
	}{
		{"fence-lease", controller.FenceLeaseRules(), func(t *testing.T, cfg Config) { require.True(t, cfg.FenceLease) }},
		{"fence-network", controller.NetworkFenceRules(), func(t *testing.T, cfg Config) {
			require.Equal(t, []string{"rbd.csi.ceph.com"}, cfg.NetworkFenceDrivers)
		}},
	} {
		t.Run(tt.component, func(t *testing.T) {
			objs := render(t, `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: platform-ops
namePrefix: ops-
resources:
- ../base
components:
- ../base/`+tt.component+`
`)
			var role rbacv1.ClusterRole
			var binding rbacv1.ClusterRoleBinding
			var deployment appsv1.Deployment
			for _, r := range objs.Resources() {
				data, err := r.AsYAML()
				require.NoError(t, err)
				switch {
				case r.GetKind() == "ClusterRole" && r.GetName() == "ops-podhealth-controller-"+tt.component:
					require.NoError(t, yaml.Unmarshal(data, &role))
				case r.GetKind() == "ClusterRoleBinding" && r.GetName() == "ops-podhealth-controller-"+tt.component:
					require.NoError(t, yaml.Unmarshal(data, &binding))
				case r.GetKind() == "Deployment":
					require.NoError(t, yaml.Unmarshal(data, &deployment))
				}
			}
			require.Empty(t, cmp.Diff(tt.rules, role.Rules))
			require.Equal(t, role.Name, binding.RoleRef.Name)
			require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ops-podhealth-controller", Namespace: "platform-ops"}}, binding.Subjects)
			cfg, err := parseFlags(flag.NewFlagSet("podhealth-controller", flag.ContinueOnError), expandedArgs(t, deployment.Spec.Template.Spec))
			require.NoError(t, err)
			tt.check(t, cfg)
			fencers, err := fencers(cfg, fakeReader{}, nil)
			require.NoError(t, err)
			require.Len(t, fencers, 1)
		})
	}
}

// fakeReader is a client.Reader that the fencers are built over and
// never read.
type fakeReader struct{ client.Reader }
