package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
)

// Exit codes of kubectl-podhealth (cmd/kubectl-podhealth/README.md).
const (
	pluginNothingToDo  = 0
	pluginDeleted      = 2
	pluginHeldBack     = 3
	pluginDeadPodsLeft = 4
	pluginTimeout      = 2 * time.Minute
)

// pluginRun is one run of the kubectl-podhealth binary.
type pluginRun struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// runPlugin runs the kubectl-podhealth binary against cp with args, as an
// administrator would with the control plane's kubeconfig, and no stdin.
func runPlugin(ctx context.Context, t *testing.T, cp *harness.ControlPlane, args ...string) pluginRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, pluginTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.Plugin, append([]string{"--kubeconfig=" + cp.KubeconfigPath()}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := pluginRun{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("running kubectl-podhealth %v: %v\nstderr: %s", args, err, r.stderr)
	}
	return r
}

// pluginList is the part of kubectl-podhealth's -o json document that the
// scenarios read.
type pluginList struct {
	Kind        string `json:"kind"`
	ScannedPods int    `json:"scannedPods"`
	Items       []struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		UID       string `json:"uid"`
		Node      string `json:"node"`
		NodeState string `json:"nodeState"`
		Verdict   string `json:"verdict"`
		Rule      string `json:"rule"`
		Reason    string `json:"reason"`
		Action    string `json:"action"`
		HeldBack  string `json:"heldBack"`
		Result    string `json:"result"`
	} `json:"items"`
}

func decodePluginList(t *testing.T, r pluginRun) pluginList {
	t.Helper()
	var l pluginList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || l.Kind != "PodHealthList" {
		t.Fatalf("kubectl-podhealth -o json printed no PodHealthList (%v):\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return l
}

// writesSince returns the write requests (any verb but GET, LIST and WATCH)
// to pods, their subresources and events that after holds more than before,
// and every DELETE of any resource.
func writesSince(after, before requests) float64 {
	var n float64
	for k, v := range after {
		pods := k.Resource == "pods" || strings.HasPrefix(k.Resource, "pods/") || k.Resource == "events"
		if (pods && harness.IsWriteVerb(k.Verb)) || strings.EqualFold(k.Verb, "DELETE") {
			n += v - before[k]
		}
	}
	return n
}

// TestScenarioKubectlPlugin: after a node failure, `kubectl podhealth`
// lists the stateless pod as dead (rule and reason shown) and the
// StatefulSet pod on the same node as held back, sending no write; then
// `--force-delete --yes` removes the stateless pod with exactly one DELETE
// and keeps holding the StatefulSet pod back, until the node gets the
// out-of-service taint, after which it is listed for a force delete and
// removed with one DELETE too.
func TestScenarioKubectlPlugin(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, nodes := startCluster(ctx, t, "node-healthy", "node-lost")
	healthy, lost := nodes[0], nodes[1]
	c := cp.Client()

	sts := createStatefulSetOwner(ctx, t, c, ns)
	dbPod := harness.BoundPod(ns, "db-0", lost.Name(), 2)
	dbPod.Labels = map[string]string{"app": "db"}
	dbPod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr.To(true)}}
	db := cp.CreatePod(ctx, dbPod)
	web := cp.CreatePod(ctx, harness.BoundPod(ns, "web-0", lost.Name(), 2))
	cp.CreatePod(ctx, harness.BoundPod(ns, "alive", healthy.Name(), 2))

	failAndWaitEvicted(ctx, t, c, lost, web, db)

	// The read-only listing: the table, then the JSON document.
	before := readRequests(ctx, t, cp)
	table := runPlugin(ctx, t, cp, "-n", ns, "-o", "wide")
	listing := runPlugin(ctx, t, cp, "-n", ns, "-o", "json")
	// --force-delete without --yes and without an answer on stdin deletes
	// nothing either.
	declined := runPlugin(ctx, t, cp, "-n", ns, "--force-delete")
	after := readRequests(ctx, t, cp)
	if w := writesSince(after, before); w != 0 {
		t.Errorf("two read-only runs and a declined --force-delete sent %v writes, want 0", w)
	}
	if declined.code != pluginHeldBack || !strings.Contains(declined.stderr, "[y/N]") || !strings.Contains(declined.stderr, "nothing deleted") {
		t.Errorf("--force-delete with no answer: exit %d, stderr %q; want exit %d after the question, and nothing deleted", declined.code, declined.stderr, pluginHeldBack)
	}
	t.Logf("kubectl podhealth -o wide (exit %d, %v):\n%s", table.code, table.took.Round(time.Millisecond), table.stdout)
	for _, r := range []pluginRun{table, listing} {
		if r.code != pluginHeldBack {
			t.Errorf("exit code %d, want %d (a dead pod is held back)\nstderr: %s", r.code, pluginHeldBack, r.stderr)
		}
	}
	for _, want := range []string{"web-0", "TaintEvicted", "force delete", "DeletionByTaintManager", "db-0", "held back: StatefulSet db: needs fencing evidence"} {
		if !strings.Contains(table.stdout, want) {
			t.Errorf("the table does not show %q", want)
		}
	}
	l := decodePluginList(t, listing)
	if l.ScannedPods != 3 {
		t.Errorf("scanned %d pods, want 3", l.ScannedPods)
	}
	got := map[string]string{}
	for _, it := range l.Items {
		got[it.Name] = it.Verdict + " " + it.Rule + " " + it.Action
		if !strings.HasPrefix(it.NodeState, "NotReady since") || it.Node != lost.Name() {
			t.Errorf("pod %s on node %s in state %q, want %s NotReady since ...", it.Name, it.Node, it.NodeState, lost.Name())
		}
		if !strings.Contains(it.Reason, "DeletionByTaintManager") {
			t.Errorf("pod %s reason %q, want the taint manager's", it.Name, it.Reason)
		}
	}
	want := map[string]string{"web-0": "Dead TaintEvicted force delete", "db-0": "Dead TaintEvicted held back"}
	if !equalMaps(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}

	// --force-delete --yes: one DELETE, for the stateless pod.
	before = readRequests(ctx, t, cp)
	forced := runPlugin(ctx, t, cp, "-n", ns, "--force-delete", "--yes")
	after = readRequests(ctx, t, cp)
	t.Logf("kubectl podhealth --force-delete --yes (exit %d):\n%s", forced.code, forced.stdout)
	if forced.code != pluginHeldBack {
		t.Errorf("exit code %d, want %d (the StatefulSet pod is still held back)\nstderr: %s", forced.code, pluginHeldBack, forced.stderr)
	}
	if n := after.since(before, "DELETE", "pods", ""); n != 1 {
		t.Errorf("--force-delete sent %v pod DELETEs %s, want exactly 1", n, after.codesSince(before, "DELETE", "pods"))
	}
	if w := writesSince(after, before); w != 1 {
		t.Errorf("--force-delete sent %v writes, want only its DELETE", w)
	}
	lines := strings.Split(strings.TrimSpace(forced.stdout), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-2], "pod default/db-0: held back: needs fencing evidence") || lines[len(lines)-1] != "pod default/web-0: force-deleted" {
		t.Errorf("the output does not end with what it did per pod:\n%s", forced.stdout)
	}
	if _, err := c.CoreV1().Pods(ns).Get(ctx, web.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("web-0 after --force-delete: %v, want NotFound", err)
	}
	if p, err := c.CoreV1().Pods(ns).Get(ctx, db.Name, metav1.GetOptions{}); err != nil || p.UID != db.UID {
		t.Fatalf("db-0 after --force-delete: %v, want it still there", err)
	}

	// Fencing evidence: the node is out of service. The listing now lets
	// the StatefulSet pod go. PodGC removes terminating pods of
	// out-of-service nodes too, on its 20 s pass, so the plugin runs at
	// once.
	if err := cp.AddNodeTaint(ctx, lost.Name(), corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}); err != nil {
		t.Fatal(err)
	}
	fenced := decodePluginList(t, runPlugin(ctx, t, cp, "-n", ns, "-o", "json"))
	if len(fenced.Items) == 0 {
		if _, err := c.CoreV1().Pods(ns).Get(ctx, db.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			t.Logf("PodGC removed db-0 before the plugin listed it; nothing more to check")
			return
		}
	}
	if len(fenced.Items) != 1 || fenced.Items[0].Name != "db-0" || fenced.Items[0].Action != "force delete" || !strings.HasPrefix(fenced.Items[0].NodeState, "out-of-service") {
		t.Fatalf("after the out-of-service taint the listing is %+v, want db-0 to force delete on an out-of-service node", fenced.Items)
	}
	before = readRequests(ctx, t, cp)
	forced = runPlugin(ctx, t, cp, "-n", ns, "--force-delete", "--yes")
	after = readRequests(ctx, t, cp)
	t.Logf("kubectl podhealth --force-delete --yes after the taint (exit %d):\n%s", forced.code, forced.stdout)
	last := lastLine(forced.stdout)
	switch last {
	case "pod default/db-0: force-deleted":
		if forced.code != pluginDeleted {
			t.Errorf("exit code %d, want %d", forced.code, pluginDeleted)
		}
		if n := after.since(before, "DELETE", "pods", "200"); n != 1 {
			t.Errorf("%v pod DELETEs answered 200 %s, want 1", n, after.codesSince(before, "DELETE", "pods"))
		}
	case "pod default/db-0: already gone":
		t.Logf("PodGC removed db-0 between the listing and the delete")
	case "":
		// PodGC removed db-0 between the listing and this run's own list
		// (on a busy machine the runs are slow): nothing was left to do.
		if forced.code != pluginNothingToDo {
			t.Errorf("no output and exit code %d, want %d", forced.code, pluginNothingToDo)
		}
		t.Logf("PodGC removed db-0 before the force-delete run listed it")
	default:
		t.Errorf("the output ends with %q, want db-0 force-deleted", last)
	}
	if _, err := c.CoreV1().Pods(ns).Get(ctx, db.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("db-0 after the taint and --force-delete: %v, want NotFound", err)
	}
	if again := runPlugin(ctx, t, cp, "-n", ns); again.code != pluginNothingToDo {
		t.Errorf("a last listing exits %d, want %d (nothing to do)\n%s%s", again.code, pluginNothingToDo, again.stdout, again.stderr)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
