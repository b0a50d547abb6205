// Package testutil holds the fixtures that this module's tests share,
// captured from a real control plane (testdata/real-cluster at the root of
// the module); informertest starts informers over client-go's fake
// clientset. This package never imports client-go, so that package
// health's tests (and its fuzz targets' instrumented build) do not compile
// it. It is internal: only packages under github.com/podhealth/podhealth
// can import it (this module's, and the tests of nested modules such as
// cmd/kubectl-podhealth).
package testutil

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
)

// Fixture files of testdata/real-cluster. Every pod is in namespace
// default with the label app=registry.
const (
	PodAlive        = "pod-alive.json"         // bound to a Ready node: alive
	PodTaintEvicted = "pod-taint-evicted.json" // node lost, taint eviction deleting it: dead
	PodDrained      = "pod-drained.json"       // evicted through the Eviction API: terminating
	PodUserDeleted  = "pod-user-deleted.json"  // plain graceful delete: terminating

	NodeLost    = "node-lost.json"    // heartbeats stopped, unreachable taints
	NodeHealthy = "node-healthy.json" // Ready

	StatusUIDConflict         = "status-delete-uid-conflict.json"    // 409 of a DELETE whose UID precondition failed
	StatusGetAfterForceDelete = "status-get-after-force-delete.json" // 404 of a GET after a force delete
)

// FixtureDir returns the absolute path of testdata/real-cluster.
func FixtureDir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok, "cannot locate the testutil package's source")
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "real-cluster")
}

// LoadJSON decodes the fixture file into into.
func LoadJSON(t testing.TB, file string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(FixtureDir(t), file))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, into), "fixture %s", file)
}

// LoadPod decodes one pod fixture. Each call returns a new object.
func LoadPod(t testing.TB, file string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	LoadJSON(t, file, &pod)
	require.Equal(t, "Pod", pod.Kind, "fixture %s", file)
	return &pod
}

// LoadPods decodes the four pod fixtures: alive, taint-evicted, drained
// and user-deleted.
func LoadPods(t testing.TB) []*corev1.Pod {
	t.Helper()
	return []*corev1.Pod{LoadPod(t, PodAlive), LoadPod(t, PodTaintEvicted), LoadPod(t, PodDrained), LoadPod(t, PodUserDeleted)}
}

// LoadNode decodes one node fixture.
func LoadNode(t testing.TB, file string) *corev1.Node {
	t.Helper()
	var node corev1.Node
	LoadJSON(t, file, &node)
	require.Equal(t, "Node", node.Kind, "fixture %s", file)
	return &node
}

// LoadStatusError decodes one Status fixture into the error the typed
// client returns for it.
func LoadStatusError(t testing.TB, file string) *apierrors.StatusError {
	t.Helper()
	var status metav1.Status
	LoadJSON(t, file, &status)
	require.Equal(t, "Status", status.Kind, "fixture %s", file)
	return &apierrors.StatusError{ErrStatus: status}
}

// Objects returns deep copies of pods, ready for client-go's
// fake.NewClientset.
func Objects(pods ...*corev1.Pod) []k8sruntime.Object {
	out := make([]k8sruntime.Object, len(pods))
	for i, p := range pods {
		out[i] = p.DeepCopy()
	}
	return out
}
