package main

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/yaml"

	"github.com/podhealth/podhealth/cmd/podhealth-controller/internal/controller"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

func readManifest(t *testing.T, name string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("config", name))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, into), name)
}

func TestRolesInConfigAreWhatTheCodeSends(t *testing.T) {
	var cluster rbacv1.ClusterRole
	readManifest(t, "cluster_role.yaml", &cluster)
	require.Empty(t, cmp.Diff(controller.ClusterRules(), cluster.Rules))
	var leader rbacv1.Role
	readManifest(t, "leader_election_role.yaml", &leader)
	require.Empty(t, cmp.Diff(controller.LeaderElectionRules(), leader.Rules))
	var reader rbacv1.ClusterRole
	readManifest(t, "metrics_reader_role.yaml", &reader)
	require.Empty(t, cmp.Diff(controller.MetricsReaderRules(), reader.Rules))
	var leases rbacv1.ClusterRole
	readManifest(t, "node_lease_role.yaml", &leases)
	require.Empty(t, cmp.Diff(controller.NodeLeaseRules(), leases.Rules))
	require.Equal(t, "ClusterRole", leases.Kind, "a grant that a namespace overlay cannot move out of kube-node-lease")
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	readManifest(t, "kustomization.yaml", &k)
	files, err := filepath.Glob(filepath.Join("config", "*.yaml"))
	require.NoError(t, err)
	var want []string
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" {
			want = append(want, base)
		}
	}
	got := append([]string(nil), k.Resources...)
	sort.Strings(got)
	require.Equal(t, want, got)
}

func TestDeploymentRunsNonRootWithProbesAndRequests(t *testing.T) {
	var d appsv1.Deployment
	readManifest(t, "deployment.yaml", &d)
	require.Equal(t, int32(2), *d.Spec.Replicas, "two replicas, one leader")
	pod := d.Spec.Template.Spec
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	require.False(t, c.Resources.Requests.Cpu().IsZero())
	require.False(t, c.Resources.Requests.Memory().IsZero())
	// Every flag the manifest passes exists and parses, as the kubelet
	// passes it.
	args := expandedArgs(t, pod)
	cfg, err := parseFlags(flag.NewFlagSet("test", flag.ContinueOnError), args)
	require.NoError(t, err, strings.Join(args, " "))
	require.Equal(t, "podhealth-controller", cfg.LeaderElection.ID, "the ServiceAccount's name")
}

// expandedArgs are the first container's args as the kubelet passes them:
// each $(VAR) replaced by the container's env, every variable of which
// must be the pod's spec.serviceAccountName (the one fieldRef the
// manifests use).
func expandedArgs(t *testing.T, pod corev1.PodSpec) []string {
	t.Helper()
	c := pod.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		require.NotNil(t, e.ValueFrom, e.Name)
		require.Equal(t, "spec.serviceAccountName", e.ValueFrom.FieldRef.FieldPath, e.Name)
		env[e.Name] = pod.ServiceAccountName
	}
	var out []string
	for _, a := range c.Args {
		out = append(out, regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(a, func(ref string) string {
			v, ok := env[ref[2:len(ref)-1]]
			require.True(t, ok, "%s names %s, which the container's env lacks", a, ref)
			return v
		}))
	}
	return out
}

func TestFlagsDefaultToTheSafeSettingsAndRefuseBadOnes(t *testing.T) {
	cfg, err := parseFlags(flag.NewFlagSet("test", flag.ContinueOnError), nil)
	require.NoError(t, err)
	require.Equal(t, Config{
		Namespaces: controller.EnabledLabel + "=true", MaxDeletes: 20, DeleteWindow: time.Minute,
		BreakerShare: 0.3, BreakerMin: 3, BreakerRecheck: time.Minute, MemoryCapacity: 16384, LeaderElect: true, MetricsAddr: ":8443", MetricsSecure: true, ProbeAddr: ":8081", PprofAddr: "0", MaxConcurrentWork: 4, KubeAPIQPS: 50, KubeAPIBurst: 100,
		LeaderElection: LeaderElection{ID: "podhealth-controller", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
	}, cfg)
	for _, args := range [][]string{
		{"--max-force-deletes=-1"},
		{"--force-delete-window=0s"},
		{"--breaker-unhealthy-share=0"},
		{"--breaker-unhealthy-share=1.5"},
		{"--breaker-unhealthy-share=NaN"}, // compares false with everything: once accepted
		{"--breaker-unhealthy-share=+Inf"},
		{"--breaker-recheck-interval=0s"},
		{"--breaker-recheck-interval=-1m"},
		{"--memory-capacity=0"},
		{"--kube-api-qps=0"},
		{"--kube-api-qps=NaN"},
		{"--kube-api-burst=0"},
		{"--breaker-min-unhealthy=0"},
		{"--workers=0"},
		{"--shutdown-taint=" + health.TaintCloudShutdown},
		{"--shutdown-taint=" + health.TaintCloudShutdown + "=soon"},
		{"--apply-out-of-service"},
		{"--apply-out-of-service", "--shutdown-taint=" + health.TaintCloudShutdown + "=2s", "--watch-namespaces=shop"},
		{"--network-fence-driver="},
		{"--network-fence-driver=rbd.csi.ceph.com", "--network-fence-driver=rbd.csi.ceph.com"},
		{"--network-fence-class= "},
		{"--leader-election-id="},
		{"--leader-election-id=Podhealth_Controller"},
		{"--leader-election-lease-duration=10s"},                                       // not longer than the renew deadline
		{"--leader-election-renew-deadline=2400ms"},                                    // not longer than 1.2 retry periods
		{"--leader-election-retry-period=0s"},                                          // client-go would spin
		{"--leader-election-retry-period=-1s", "--leader-election-renew-deadline=-2s"}, // negative, in order
		{"--leader-elect=false", "--leader-election-id=acme"},                          // would do nothing
		{"--leader-elect=false", "--leader-election-namespace=ops"},                    // would do nothing
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		_, err := parseFlags(fs, args)
		require.Error(t, err, args)
	}
}

// --shutdown-taint is repeated for several taints, each KEY=AFTER, and
// the library refuses at start what could not be evidence.
func TestShutdownTaintFlagsBuildTheLibrarysOption(t *testing.T) {
	cfg, err := parseFlags(flag.NewFlagSet("test", flag.ContinueOnError), []string{
		"--shutdown-taint=" + health.TaintCloudShutdown + "=2s", "--shutdown-taint=fencing.example.com/off=1m", "--apply-out-of-service",
	})
	require.NoError(t, err)
	require.True(t, cfg.ApplyOutOfService)
	require.Equal(t, []health.ShutdownTaint{{Key: health.TaintCloudShutdown, After: 2 * time.Second}, {Key: "fencing.example.com/off", After: time.Minute}}, cfg.ShutdownTaints)
}

// Every --shutdown-taint that the library would refuse at start is
// refused by the flag check, before any request to the API server, and
// the error names the flag and the value, not Options.ShutdownTaints[0].
func TestShutdownTaintFlagRefusesWhatTheLibraryWould(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--shutdown-taint=" + corev1.TaintNodeUnreachable + "=2s"}, "Kubernetes' own taint"},
		{[]string{"--shutdown-taint=" + corev1.TaintNodeOutOfService + "=2s"}, "Kubernetes' own taint"},
		{[]string{"--shutdown-taint=" + health.TaintCloudShutdown + "=0s"}, "not positive"},
		{[]string{"--shutdown-taint=" + health.TaintCloudShutdown + "=-1m"}, "not positive"},
		{[]string{"--shutdown-taint==2s"}, "KEY is empty"},
		{[]string{"--shutdown-taint=not a key=2s"}, "is not a taint key"},
		{[]string{"--shutdown-taint=" + health.TaintCloudShutdown + "=2s", "--shutdown-taint=" + health.TaintCloudShutdown + "=1m"}, "named twice"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("podhealth-controller", flag.ContinueOnError)
			fs.SetOutput(new(strings.Builder))
			_, err := parseFlags(fs, tt.args)
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, "-shutdown-taint", "the error names the flag")
			require.NotContains(t, err.Error(), "Options.")
		})
	}
}

func TestAnEmptyNamespaceSelectorIsRefused(t *testing.T) {
	err := run(Config{Namespaces: ""})
	require.ErrorContains(t, err, "namespace-selector")
	// By the flag check too, before anything starts (and --version exits).
	for _, bad := range []string{"", "a in (", "Has Space=x"} {
		_, err := parseFlags(flag.NewFlagSet("test", flag.ContinueOnError), []string{"--namespace-selector=" + bad, "--version"})
		require.ErrorContains(t, err, "--namespace-selector", bad)
	}
}

// TestVersionFlagPrintsTheBuild: --version asks for the build's version,
// commit and Go version (internal/version), and nothing else runs.
func TestVersionFlagPrintsTheBuild(t *testing.T) {
	cfg, err := parseFlags(flag.NewFlagSet("test", flag.ContinueOnError), []string{"--version"})
	require.NoError(t, err)
	require.True(t, cfg.Version)
	out, err := exec.Command("go", "run", ".", "--version").Output()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(out), "podhealth-controller "), "%s", out)
}

// TestMemoryShedIsCountedForPrometheus: podhealth_memory_shed_total reads
// the Memory that every group shares, so an admin sees when it is too
// small for the cluster.
func TestMemoryShedIsCountedForPrometheus(t *testing.T) {
	memory := health.NewMemory(health.MemoryOptions{Capacity: 1})
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(memoryShed(memory)))
	for _, uid := range []types.UID{"a", "b", "c"} {
		src := fake.New(fake.Options{}, fake.TaintEvicted(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: string(uid), UID: uid}, Spec: corev1.PodSpec{NodeName: "lost"}}, time.Now().Add(-time.Hour)))
		checker, err := health.New(src, src, health.Options{Memory: memory})
		require.NoError(t, err)
		_, err = checker.Check(context.Background())
		require.NoError(t, err)
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1)
	require.Equal(t, "podhealth_memory_shed_total", families[0].GetName())
	require.Equal(t, 2.0, families[0].Metric[0].GetCounter().GetValue(), "three force deletes in a Memory of one")
}

// TestEveryFlagTheChartPassesExists: the chart's Deployment passes only
// flags the controller has, so that a renamed flag cannot leave a chart
// whose controller exits at start.
func TestEveryFlagTheChartPassesExists(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "charts", "podhealth-controller", "templates", "deployment.yaml"))
	require.NoError(t, err)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	_, err = parseFlags(fs, nil)
	require.NoError(t, err)
	// "- --name" as it is, and the flags the chart's "flag" helper writes
	// from (dict ... "name" "max-force-deletes" ...).
	flags := regexp.MustCompile(`(?m)^\s*- --([a-z][a-z-]*)|"name" "([a-z][a-z-]*)"`).FindAllStringSubmatch(string(data), -1)
	require.Greater(t, len(flags), 10)
	for _, f := range flags {
		name := f[1] + f[2]
		require.NotNil(t, fs.Lookup(name), "the chart passes --%s, which podhealth-controller does not have", name)
	}
}

// With --fence-lease the cache holds the Leases of every namespace acted
// in (for the Lease fencer's LeaseWatch) as well as the node Leases;
// without it, the node Leases alone.
func TestTheLeaseCacheCoversTheNamespacesActedInWithFenceLease(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"no --fence-lease", Config{}, []string{corev1.NamespaceNodeLease}},
		{"cluster-wide", Config{FenceLease: true}, []string{cache.AllNamespaces}},
		{"namespaced", Config{FenceLease: true, WatchNamespaces: []string{"db", "shop"}}, []string{"db", corev1.NamespaceNodeLease, "shop"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for ns := range leaseNamespaces(tt.cfg) {
				got = append(got, ns)
			}
			sort.Strings(got)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestLeaderElectionFlagsReachTheLeaseAtTheBordersClientGoAllows: timings
// just inside what client-go's leader election takes are accepted as given,
// and the ID names the Lease.
func TestLeaderElectionFlagsReachTheLeaseAtTheBordersClientGoAllows(t *testing.T) {
	cfg, err := parseFlags(flag.NewFlagSet("test", flag.ContinueOnError), []string{
		"--leader-election-id=acme-podhealth-controller", "--leader-election-lease-duration=2401ms",
		"--leader-election-renew-deadline=2400001us", "--leader-election-retry-period=2s"})
	require.NoError(t, err)
	require.Equal(t, LeaderElection{ID: "acme-podhealth-controller", LeaseDuration: 2401 * time.Millisecond, RenewDeadline: 2400001 * time.Microsecond, RetryPeriod: 2 * time.Second}, cfg.LeaderElection)
	_, err = parseFlags(flag.NewFlagSet("test", flag.ContinueOnError), []string{"--leader-election-lease-duration=10s"})
	require.ErrorContains(t, err, "--leader-election-lease-duration (10s) must be longer than --leader-election-renew-deadline (10s)")
}
