package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podhealth/podhealth/e2e/harness"
)

const (
	scanPods      = 10000 // pods the figure scans
	scanPageSize  = 500   // kubectl-podhealth's LIST limit
	scanRuns      = 3     // scans timed
	scanCreators  = 32    // goroutines creating the pods
	scanNamespace = "scan"
	scanSection   = "kubectl-podhealth scan"
)

// TestFiguresKubectlScan measures a read-only `kubectl podhealth` scan of
// 10,000 pods on the real control plane: its wall time (the whole process,
// start-up included) and the LIST requests it sends, from the API server's
// apiserver_request_total. It asserts that the scan is paginated (one pod
// LIST per 500 pods, one node LIST) and sends no write. It logs the figures,
// and writes them as a section of FIGURES.md only when
// PODHEALTH_WRITE_FIGURES=1 is set and the test passed.
func TestFiguresKubectlScan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	loadStart := figLoadAverage()
	cp, nodes := startCluster(ctx, t, "node-a", "node-b")
	c := cp.Client()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scanNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := cp.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling while creating
	creator, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	created := timed(func() { createScanPods(ctx, t, creator, nodes) })
	t.Logf("created %d pods in %v", scanPods, created.Round(100*time.Millisecond))

	var walls []time.Duration
	var podLists, nodeLists, writes float64
	for range scanRuns {
		before := readRequests(ctx, t, cp)
		r := runPlugin(ctx, t, cp, "-n", scanNamespace)
		after := readRequests(ctx, t, cp)
		if r.code != pluginNothingToDo {
			t.Fatalf("scan exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, pluginNothingToDo, r.stdout, r.stderr)
		}
		if want := fmt.Sprintf("(%d pods scanned)", scanPods); !strings.Contains(r.stderr, want) {
			t.Fatalf("scan stderr %q does not say %s", r.stderr, want)
		}
		walls = append(walls, r.took)
		podLists += after.since(before, "LIST", "pods", "")
		nodeLists += after.since(before, "LIST", "nodes", "")
		writes += writesSince(after, before)
	}
	// On a terminal the scan shows its progress on stderr: one more run,
	// under script(1), which gives it a pseudo-terminal.
	if tty := runPluginOnTerminal(ctx, t, cp, "-n", scanNamespace); !strings.Contains(tty, "scanning pods: 500 ") || !strings.Contains(tty, "\r\x1b[K") {
		t.Errorf("a scan on a terminal showed no progress, or did not clear it:\n%q", tty)
	} else {
		t.Logf("on a terminal: %q", lastProgress(tty))
	}

	const wantPodLists = scanRuns * scanPods / scanPageSize
	if podLists != wantPodLists {
		t.Errorf("%d scans sent %v pod LISTs, want %d (one per %d pods)", scanRuns, podLists, wantPodLists, scanPageSize)
	}
	if nodeLists != scanRuns {
		t.Errorf("%d scans sent %v node LISTs, want one each", scanRuns, nodeLists)
	}
	if writes != 0 {
		t.Errorf("%d read-only scans sent %v writes, want 0", scanRuns, writes)
	}
	sorted := slices.Clone(walls)
	slices.Sort(sorted)
	version, err := harness.KubernetesVersion()
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, w := range walls {
		runs = append(runs, figSec(w))
	}
	body := fmt.Sprintf("## `kubectl podhealth` on %d pods\n\n"+
		"Measured by `TestFiguresKubectlScan` (`cd e2e && %s=1 go test -count=1 -run TestFiguresKubectlScan -v .`) on %s: "+
		"kube-apiserver %s on 127.0.0.1, %d CPUs, %s/%s, %s; 1-minute load average %s at the start and %s at the end. "+
		"%d pods bound to 2 Ready nodes in one namespace (created in %s by %d concurrent clients), none dead; "+
		"`kubectl-podhealth -n %s` (read only, the default page of %d) run %d times. Wall time is the whole process, from start to exit; "+
		"request counts come from the API server's `apiserver_request_total`.\n\n"+
		"| figure | value |\n|---|---|\n"+
		"| wall time of one scan | median %s (runs: %s) |\n"+
		"| LIST requests per scan: pods / nodes | %.0f / %.0f |\n"+
		"| write requests of the %d scans | %.0f |\n",
		scanPods, figWriteEnv, time.Now().UTC().Format("2006-01-02"), version, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(),
		loadStart, figLoadAverage(), scanPods, figSec(created), scanCreators, scanNamespace, scanPageSize, scanRuns,
		figSec(sorted[len(sorted)/2]), strings.Join(runs, ", "), podLists/scanRuns, nodeLists/scanRuns, scanRuns, writes)
	t.Log("\n" + body)
	if os.Getenv(figWriteEnv) != "1" {
		t.Logf("%s left as it is; set %s=1 to rewrite its section", figFiguresFile, figWriteEnv)
		return
	}
	if t.Failed() {
		return
	}
	if err := figWriteSection(figFiguresFile, scanSection, body); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote the %q section of %s", scanSection, figFiguresFile)
}

// createScanPods creates scanPods pods in scanNamespace, spread over nodes,
// from scanCreators goroutines.
func createScanPods(ctx context.Context, t *testing.T, c kubernetes.Interface, nodes []*harness.Node) {
	t.Helper()
	next := make(chan int)
	errs := make(chan error, scanCreators)
	var wg sync.WaitGroup
	for range scanCreators {
		wg.Go(func() {
			for i := range next {
				pod := harness.BoundPod(scanNamespace, fmt.Sprintf("scan-%05d", i), nodes[i%len(nodes)].Name(), 300)
				if _, err := c.CoreV1().Pods(scanNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("creating pod %s: %w", pod.Name, err)
					return
				}
			}
		})
	}
	var err error
feed:
	for i := range scanPods {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// runPluginOnTerminal runs the plugin under script(1), on a
// pseudo-terminal, and returns what the terminal received.
func runPluginOnTerminal(ctx context.Context, t *testing.T, cp *harness.ControlPlane, args ...string) string {
	t.Helper()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Errorf("script(1) (util-linux) gives the plugin a terminal: %v", err)
		return ""
	}
	line := "'" + bins.Plugin + "' '--kubeconfig=" + cp.KubeconfigPath() + "'"
	for _, a := range args {
		line += " '" + a + "'"
	}
	ctx, cancel := context.WithTimeout(ctx, pluginTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, script, "-qefc", line, os.DevNull).CombinedOutput()
	if err != nil {
		t.Errorf("kubectl-podhealth on a terminal: %v\n%s", err, out)
	}
	return string(out)
}

// lastProgress returns the last progress line the terminal received.
func lastProgress(tty string) string {
	i := strings.LastIndex(tty, "scanning pods:")
	if i < 0 {
		return ""
	}
	line, _, _ := strings.Cut(tty[i:], "\r")
	return line
}
