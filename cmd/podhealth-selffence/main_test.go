//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/podhealth/podhealth/selffence"
)

var metav1GetOptions = metav1.GetOptions{}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// The sidecar answers true on its endpoint and keeps its file while it
// holds the Lease, and its /live answers true from its start; the first
// failed renewal turns both endpoints to false,
// and the file is gone a goroutine's wake-up later (the test allows a
// second, for a busy machine); the pod's processes are stopped at the
// Lease's expiry plus the deadline less the stop.
func TestTheSidecarTellsTheWorkloadWhetherItMayWriteAndStopsThePodAtTheDeadline(t *testing.T) {
	client := fake.NewClientset(podPG1)
	var failing atomic.Bool
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, apierrors.NewServiceUnavailable("partitioned")
		}
		return false, nil, nil
	})
	addr := make(chan net.Addr, 1)
	stopped := make(chan time.Time, 1)
	file := filepath.Join(t.TempDir(), "may-write")
	s := sidecar{
		client:    func(string) (selffence.Client, error) { return client, nil },
		stop:      func() { stopped <- time.Now() },
		listening: func(a net.Addr) { addr <- a },
	}
	args := []string{"--lease", "pg-primary", "--listen", "127.0.0.1:0", "--file", file,
		"--duration", "1s", "--renew-interval", "200ms", "--deadline", "500ms", "--stop-takes", "100ms"}
	go run(context.Background(), args, env(podPG1Env), io.Discard, s) //nolint:errcheck // blocks once held
	base := "http://" + (<-addr).String()
	getPath := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	get := func() (int, string) { return getPath("/may-write") }
	// In the claim's wait (1.5 s and the margin, for a missing Lease):
	// not yet writing, and alive for the liveness probe.
	code, _ := get()
	require.Equal(t, http.StatusServiceUnavailable, code, "may write before the claim's wait ended")
	code, body := getPath("/live")
	require.Equal(t, http.StatusOK, code, "a workload waiting for its first yes is not alive")
	require.Equal(t, "true\n", body)
	code, _ = get()
	require.Equal(t, http.StatusServiceUnavailable, code, "the wait ended before /live was asked: nothing was shown of it")

	require.Eventually(t, func() bool { code, _ := get(); return code == http.StatusOK }, 5*time.Second, 10*time.Millisecond)
	_, body = get()
	require.Equal(t, "true\n", body)
	code, _ = getPath("/live")
	require.Equal(t, http.StatusOK, code, "a workload that may write is alive")
	require.Eventually(t, func() bool { _, err := os.Stat(file); return err == nil }, time.Second, time.Millisecond, "the file, once the Lease is held")
	lease, err := client.CoordinationV1().Leases("db").Get(context.Background(), "pg-primary", metav1GetOptions)
	require.NoError(t, err)
	require.Equal(t, "pg-1", *lease.Spec.HolderIdentity)
	renewed := lease.Spec.RenewTime.Time

	failing.Store(true)
	require.Eventually(t, func() bool { code, _ := get(); return code == http.StatusServiceUnavailable }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { _, err := os.Stat(file); return errors.Is(err, os.ErrNotExist) }, time.Second, time.Millisecond, "the file, once writing must stop")
	_, body = get()
	require.Equal(t, "false\n", body)
	code, body = getPath("/live")
	require.Equal(t, http.StatusServiceUnavailable, code, "writing ended after a yes: the kubelet's liveness probe must stop the workload")
	require.Equal(t, "false\n", body)

	at := <-stopped
	latest, _ := client.CoordinationV1().Leases("db").Get(context.Background(), "pg-primary", metav1GetOptions)
	if latest.Spec.RenewTime.After(renewed) {
		renewed = latest.Spec.RenewTime.Time
	}
	// The renewTime is the start of the last successful renewal, to the
	// microsecond: the stop is due 1 s + 500 ms - 100 ms after it.
	require.GreaterOrEqual(t, at.Sub(renewed), 1400*time.Millisecond-time.Millisecond)
	_, body = get()
	require.Equal(t, "false\n", body)
}

// podPG1 is the sidecar's pod, and podPG1Env what the downward API tells
// the sidecar of it.
var (
	podPG1    = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-1", UID: "uid-of-pg-1"}}
	podPG1Env = map[string]string{"POD_NAMESPACE": "db", "POD_NAME": "pg-1", "POD_UID": "uid-of-pg-1"}
)

func TestTheSidecarPrintsTheAnnotationsOfItsSettings(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--lease", "pg-primary", "--deadline", "30s", "--print-annotations"}, env(nil), &out, sidecar{})
	require.NoError(t, err)
	require.Equal(t, "podhealth.io/fence-deadline: \"30s\"\npodhealth.io/fence-lease: \"pg-primary\"\n", out.String())
}

func TestTheSidecarRefusesWhatItCannotKeep(t *testing.T) {
	client := func(string) (selffence.Client, error) { return fake.NewClientset(podPG1), nil }
	podEnv := env(podPG1Env)
	for name, tt := range map[string]struct {
		args []string
		env  func(string) string
		want string
	}{
		"no way to ask":           {[]string{"--lease", "l", "--listen", ""}, podEnv, "neither --listen nor --file"},
		"a renewal too slow":      {[]string{"--lease", "l", "--duration", "5s", "--renew-interval", "5s"}, podEnv, "renew interval 5s is not below"},
		"a deadline under a stop": {[]string{"--lease", "l", "--deadline", "1s"}, podEnv, "deadline 1s is not longer"},
		"no pod name":             {[]string{"--lease", "l"}, env(map[string]string{"POD_NAMESPACE": "db", "POD_UID": "uid-of-pg-1"}), "identity is empty"},
		"no pod UID":              {[]string{"--lease", "l"}, env(map[string]string{"POD_NAMESPACE": "db", "POD_NAME": "pg-1"}), "the pod's UID is empty"},
		"a pod UID to print":      {[]string{"--lease", "l", "--pod-uid", "uid-of-pg-1", "--print-annotations"}, env(nil), `--pod-uid "uid-of-pg-1" with --print-annotations`},
		"no Lease":                {nil, podEnv, "is not a Lease name"},
		"an argument":             {[]string{"--lease", "l", "extra"}, podEnv, "unexpected arguments"},
		"the longest deadline":    {[]string{"--lease", "l", "--deadline", "2562047h47m16s"}, podEnv, "longer than 596523h14m7s, the longest a Lease states"},
		"a duration past int32":   {[]string{"--lease", "l", "--duration", "4294967306s"}, podEnv, "longer than 596523h14m7s, the longest a Lease states"},
		"another identity":        {[]string{"--lease", "l", "--identity", "writer-a"}, podEnv, `--identity "writer-a" is not the pod's name "pg-1"`},
		"an identity to print":    {[]string{"--lease", "l", "--identity", "writer-a", "--print-annotations"}, env(nil), `--identity "writer-a" with --print-annotations`},
	} {
		t.Run(name, func(t *testing.T) {
			err := run(context.Background(), tt.args, tt.env, io.Discard, sidecar{client: client, stop: func() { t.Error("stopped") },
				start: func() error { t.Error("started"); return nil }})
			require.ErrorContains(t, err, tt.want)
		})
	}
	err := run(context.Background(), []string{"--lease", "l", "--print-annotations", "--deadline", "1s"}, podEnv, io.Discard, sidecar{})
	require.ErrorContains(t, err, "deadline 1s is not longer", "the annotations of settings that cannot be kept are not printed")
}

// Before the Lease is held, a SIGTERM ends the sidecar with nothing to
// stop.
func TestASidecarThatNeverHeldTheLeaseStopsNothing(t *testing.T) {
	client := fake.NewClientset(podPG1)
	client.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server is unreachable")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := run(ctx, []string{"--lease", "l", "--listen", "127.0.0.1:0"}, env(podPG1Env), io.Discard, sidecar{
		client: func(string) (selffence.Client, error) { return client, nil },
		stop:   func() { t.Error("stopped the pod without having held the Lease") },
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestTheSidecarPrintsItsVersion(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"--version"}, env(nil), &out, sidecar{}))
	require.Contains(t, out.String(), "podhealth-selffence ")
}
