package manifests_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/podhealth/podhealth/internal/release/manifests"
)

var (
	controllerOnce sync.Once
	controllerBin  string
	controllerErr  error
)

// controllerBinary builds podhealth-controller once, as the e2e harness
// builds it (so that the two share the build cache).
func controllerBinary(t *testing.T) string {
	t.Helper()
	controllerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "podhealth-controller-flags-")
		if err != nil {
			controllerErr = err
			return
		}
		controllerBin = filepath.Join(dir, "podhealth-controller")
		cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", controllerBin, ".")
		cmd.Dir = filepath.Join("..", "..", "..", "cmd", "podhealth-controller")
		if out, err := cmd.CombinedOutput(); err != nil {
			controllerErr = errors.New(string(out))
		}
	})
	require.NoError(t, controllerErr, "building podhealth-controller")
	return controllerBin
}

// flagCheckAccepts runs the controller's flag check on the arguments of
// the Deployment in objs, with $(SERVICE_ACCOUNT_NAME) expanded as the
// kubelet expands it: --version exits 0 once the flags pass, and 2 with
// the check's error when they do not.
func flagCheckAccepts(t *testing.T, objs []*unstructured.Unstructured) (bool, string) {
	t.Helper()
	var args []string
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		require.Len(t, containers, 1)
		for _, a := range containers[0].(map[string]any)["args"].([]any) {
			args = append(args, strings.ReplaceAll(a.(string), "$(SERVICE_ACCOUNT_NAME)", "podhealth-controller"))
		}
	}
	require.NotEmpty(t, args, "the chart renders the Deployment's arguments")
	out, err := exec.Command(controllerBinary(t), append(args, "--version")...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		require.Equal(t, 2, exit.ExitCode(), "the flag check exits 2: %s", out)
		return false, string(out)
	}
	require.NoError(t, err, "%s", out)
	return true, string(out)
}

// TestTheSchemaAcceptsExactlyWhatTheFlagCheckAccepts feeds values, each
// accepted or refused by one of the two, through both: the chart (its
// schema and its template checks) and the controller's own flag check on
// the arguments the chart would render for it. Where the chart refuses a
// value, the flags are built by hand from it, as an admin passing them
// with extraArgs would. No value may pass one and fail the other: a value
// the chart takes and the controller refuses is a Deployment that
// crash-loops; the reverse is a setting an admin cannot make.
func TestTheSchemaAcceptsExactlyWhatTheFlagCheckAccepts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds podhealth-controller")
	}
	durations := []string{"1m", "1m30s", "1m1h", "999999h9999999m", "999999.999999999999h", "0.000000000001h", "0.0000000000001h", "1µs", ".5s", "2.5s", "500ms", "1.5ns", "999999h", "2562047h", "0s", "0m0s", "0", "-1s", "0.5ns", "9999999999h", "2562048h", "soon", "1d", " 1s", ""}
	type candidate struct {
		name   string
		values map[string]any
		flags  []string // the same setting as flags, for a value the chart refuses
	}
	var candidates []candidate
	add := func(name string, values map[string]any, flags ...string) {
		candidates = append(candidates, candidate{name, values, flags})
	}
	for _, d := range durations {
		add("budget.window="+d, map[string]any{"budget": map[string]any{"window": d}}, "--force-delete-window="+d)
		add("breaker.recheckInterval="+d, map[string]any{"breaker": map[string]any{"recheckInterval": d}}, "--breaker-recheck-interval="+d)
		add("shutdownTaints[0].after="+d, map[string]any{"shutdownTaints": []any{map[string]any{"key": "example.com/off", "after": d}}}, "--shutdown-taint=example.com/off="+d)
		add("leaderElection.retryPeriod="+d, map[string]any{"leaderElection": map[string]any{"retryPeriod": d}}, "--leader-election-retry-period="+d)
	}
	for _, n := range []any{-1, 0, 1, 20, 1.5} {
		s := fmt.Sprint(n)
		add("budget.maxForceDeletes="+s, map[string]any{"budget": map[string]any{"maxForceDeletes": n}}, "--max-force-deletes="+s)
		add("breaker.minUnhealthy="+s, map[string]any{"breaker": map[string]any{"minUnhealthy": n}}, "--breaker-min-unhealthy="+s)
		add("memoryCapacity="+s, map[string]any{"memoryCapacity": n}, "--memory-capacity="+s)
	}
	for _, f := range []any{-0.1, 0, 0.3, 1, 1.01} {
		s := fmt.Sprint(f)
		add("breaker.unhealthyShare="+s, map[string]any{"breaker": map[string]any{"unhealthyShare": f}}, "--breaker-unhealthy-share="+s)
	}
	for _, sel := range []string{"team=a", "env in (prod,stage)", "!legacy", "a=b,c!=d", "", "a==", "team=a,", "Has Space=x", "a=(b)", "in=a", "a in (x, in)", "app.kubernetes.io/name=web", "a.b.c.d/e=f", "env notin (dev, test)"} {
		add("namespaceSelector="+sel, map[string]any{"namespaceSelector": sel}, "--namespace-selector="+sel)
	}
	for _, ns := range [][]any{{"shop"}, {"shop", "tools"}, {"Shop"}, {"shop", "shop"}, {"shop", ""}, {strings.Repeat("a", 63)}, {strings.Repeat("a", 64)}, {"shop_1"}} {
		var names []string
		for _, n := range ns {
			names = append(names, n.(string))
		}
		add("watchNamespaces="+strings.Join(names, ","), map[string]any{"watchNamespaces": ns}, "--watch-namespaces="+strings.Join(names, ","))
	}
	for _, key := range []string{"example.com/off", "node.cloudprovider.kubernetes.io/shutdown", "node.kubernetes.io/unreachable", "", "off", "example.com/" + strings.Repeat("n", 63), "example.com/" + strings.Repeat("n", 64), strings.Repeat("d", 254) + "/off", "-bad/off"} {
		add("shutdownTaints[0].key="+key, map[string]any{"shutdownTaints": []any{map[string]any{"key": key, "after": "2s"}}}, "--shutdown-taint="+key+"=2s")
	}
	add("a shutdown taint named twice", map[string]any{"shutdownTaints": []any{map[string]any{"key": "example.com/off", "after": "2s"}, map[string]any{"key": "example.com/off", "after": "3s"}}},
		"--shutdown-taint=example.com/off=2s", "--shutdown-taint=example.com/off=3s")
	for _, le := range [][3]string{{"15s", "10s", "2s"}, {"10s", "10s", "2s"}, {"15s", "2s", "2s"}, {"15s", "2400ms", "2s"}, {"15s", "2401ms", "2s"}, {"1h", "59m", "1m"}} {
		add("leaderElection="+strings.Join(le[:], "/"), map[string]any{"leaderElection": map[string]any{"leaseDuration": le[0], "renewDeadline": le[1], "retryPeriod": le[2]}},
			"--leader-election-lease-duration="+le[0], "--leader-election-renew-deadline="+le[1], "--leader-election-retry-period="+le[2])
	}
	for _, names := range [][]any{{"rbd.csi.ceph.com"}, {""}, {"a", "a"}, {" "}} {
		var flags []string
		for _, n := range names {
			flags = append(flags, "--network-fence-driver="+n.(string))
		}
		add("fencing.networkFence.drivers="+fmt.Sprint(names), map[string]any{"fencing": map[string]any{"networkFence": map[string]any{"drivers": names}}}, flags...)
	}
	add("outOfService without a shutdown taint", map[string]any{"outOfService": map[string]any{"enabled": true}}, "--apply-out-of-service")
	add("outOfService, namespaced", map[string]any{"outOfService": map[string]any{"enabled": true}, "shutdownTaints": []any{map[string]any{"key": "example.com/off", "after": "2s"}}, "watchNamespaces": []any{"shop"}},
		"--apply-out-of-service", "--shutdown-taint=example.com/off=2s", "--watch-namespaces=shop")
	add("watchNamespaces with a namespaceSelector", map[string]any{"watchNamespaces": []any{"shop"}, "namespaceSelector": "team=a"}, "--watch-namespaces=shop", "--namespace-selector=team=a")

	defaults, err := manifests.Chart(chartDir, namespace, nil)
	require.NoError(t, err)
	accepted, refused := 0, 0
	for _, c := range candidates {
		t.Run(c.name, func(t *testing.T) {
			objs, chartErr := manifests.Chart(chartDir, namespace, c.values)
			var flagsOK bool
			var out string
			if chartErr == nil {
				flagsOK, out = flagCheckAccepts(t, objs)
				require.True(t, flagsOK, "the chart takes %v, and the controller refuses what it renders:\n%s", c.values, out)
				accepted++
				return
			}
			// The chart refused it: the same setting, as flags beside the
			// defaults' arguments, must be refused by the controller too.
			withFlags := withExtraArgs(t, defaults, c.flags)
			flagsOK, _ = flagCheckAccepts(t, withFlags)
			require.False(t, flagsOK, "the chart refuses %v (%v), and the controller takes %q", c.values, chartErr, c.flags)
			refused++
		})
	}
	// Both kinds are tried, in numbers: neither half of the equivalence
	// holds vacuously.
	require.Greater(t, accepted, 30)
	require.Greater(t, refused, 30)
}

// withExtraArgs is objs with flags appended to the Deployment's arguments.
func withExtraArgs(t *testing.T, objs []*unstructured.Unstructured, flags []string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			o = o.DeepCopy()
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			args := c["args"].([]any)
			for _, f := range flags {
				args = append(args, f)
			}
			c["args"] = args
			require.NoError(t, unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"))
		}
		out = append(out, o)
	}
	return out
}
