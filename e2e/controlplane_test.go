package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podhealth/podhealth/e2e/harness"
)

// bins are the control-plane binaries, built once for all tests in TestMain.
var bins harness.Binaries

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	b, err := harness.BuildBinaries(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building the control plane:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "control-plane binaries built in %v\n", b.BuildTime.Round(time.Millisecond))
	bins = b
	code := m.Run()
	if err := bins.Remove(); err != nil {
		fmt.Fprintln(os.Stderr, "removing the control-plane binaries:", err)
	}
	os.Exit(code)
}

// TestAPIServerStopAndRestart stops the API server alone and brings it back
// on the same address with its state intact; node heartbeats resume.
func TestAPIServerStopAndRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := harness.Start(t, bins, harness.Options{})
	c := cp.Client()
	url := cp.APIServerURL()

	node := cp.AddNode(ctx, "node-a")
	if _, err := harness.WaitForNode(ctx, c, node.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
		t.Fatal(err)
	}
	pod := cp.CreatePod(ctx, harness.BoundPod(metav1.NamespaceDefault, "kept", node.Name(), 2))

	// The kubeconfig file reaches the same API server as the harness client.
	fromFile, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	fileClient, err := kubernetes.NewForConfig(fromFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fileClient.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil || got.UID != pod.UID {
		t.Fatalf("GET through the kubeconfig file: pod %v, error %v; want UID %s", got, err, pod.UID)
	}

	cp.StopAPIServer()
	stoppedAt := time.Now()
	getCtx, getCancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = c.CoreV1().Pods(pod.Namespace).Get(getCtx, pod.Name, metav1.GetOptions{})
	getCancel()
	if err == nil {
		t.Fatal("GET succeeded while the API server was stopped")
	}
	t.Logf("while stopped: %v", err)
	// Heartbeats fail while the API server is away.
	if err := pollUntil(ctx, func() bool { return node.Err() != nil }); err != nil {
		t.Fatalf("node heartbeat did not notice the API server was gone: %v", err)
	}

	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cp.APIServerURL(); got != url || cp.RESTConfig().Host != url {
		t.Fatalf("API server moved from %s to %s (config %s)", url, got, cp.RESTConfig().Host)
	}
	got, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("GET after restart: %v", err)
	}
	if got.UID != pod.UID {
		t.Fatalf("pod UID after restart %s, want %s", got.UID, pod.UID)
	}

	// The heartbeat resumes against the restarted server.
	if err := pollUntil(ctx, func() bool { return node.Err() == nil && node.LastHeartbeat().After(stoppedAt) }); err != nil {
		t.Fatalf("node heartbeat did not resume: last error %v", node.Err())
	}
	// Metrics start afresh with the new process, and count this GET.
	gets, err := cp.RequestCount(ctx, "GET", "pods")
	if err != nil {
		t.Fatal(err)
	}
	if gets < 1 {
		t.Errorf("apiserver counted %v pod GETs since restart, want at least 1", gets)
	}
	if creates, err := cp.RequestCount(ctx, "POST", "pods"); err != nil || creates != 0 {
		t.Errorf("apiserver counted %v pod creations since restart (err %v), want 0", creates, err)
	}
}

func pollUntil(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.New("condition not met before the deadline")
		case <-time.After(harness.PollInterval):
		}
	}
	return nil
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
