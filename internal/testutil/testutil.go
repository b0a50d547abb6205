// Package testutil holds the helpers that this module's tests share: the
// fixtures captured from a real control plane (testdata/real-cluster at the
// root of the module) and informers started over client-go's fake
// clientset. It is internal: only packages under github.com/podhealth/podhealth
// can import it (this module's, and the tests of nested modules such as
// cmd/kubectl-podhealth).
package testutil

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
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

// WatchTimeout bounds the wait for an informer's first watch. It is not a
// measured duration: it only keeps a broken test from hanging.
const WatchTimeout = 5 * time.Second

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

// Objects returns deep copies of pods, ready for fake.NewClientset.
func Objects(pods ...*corev1.Pod) []k8sruntime.Object {
	out := make([]k8sruntime.Object, len(pods))
	for i, p := range pods {
		out[i] = p.DeepCopy()
	}
	return out
}

// WatchStarted returns a channel closed once client serves its first watch
// of resource (for example "pods"). The fake clientset's watches cannot
// resume from a resourceVersion: a change made after an informer synced
// but before its watch started would be lost, so tests wait for the watch
// before changing anything.
func WatchStarted(client *fake.Clientset, resource string) <-chan struct{} {
	started := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor(resource, func(action k8stesting.Action) (bool, watch.Interface, error) {
		w := action.(k8stesting.WatchActionImpl)
		wi, err := client.Tracker().Watch(w.GetResource(), w.GetNamespace(), w.ListOptions)
		once.Do(func() { close(started) })
		return true, wi, err
	})
	return started
}

// StartInformers starts factory, which must be built over client, and
// returns once the cache of every informer requested from it has synced
// and the watch of each of watched (resources such as "pods") has started.
// The factory is stopped when the test ends. Add event handlers before
// calling it.
func StartInformers(t testing.TB, client *fake.Clientset, factory informers.SharedInformerFactory, watched ...string) {
	t.Helper()
	started := make([]<-chan struct{}, len(watched))
	for i, resource := range watched {
		started[i] = WatchStarted(client, resource)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		require.True(t, ok, "cache of %v did not sync", typ)
	}
	for i, ch := range started {
		select {
		case <-ch:
		case <-time.After(WatchTimeout):
			t.Fatalf("the informer never started its %s watch", watched[i])
		}
	}
}

// StartPodInformer starts a pod informer over client (for all namespaces
// when namespace is empty), waits for its cache to sync and its watch to
// start, and returns its lister. The informer stops when the test ends.
func StartPodInformer(t testing.TB, client *fake.Clientset, namespace string) corelisters.PodLister {
	t.Helper()
	var opts []informers.SharedInformerOption
	if namespace != "" {
		opts = append(opts, informers.WithNamespace(namespace))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
	lister := factory.Core().V1().Pods().Lister()
	StartInformers(t, client, factory, "pods")
	return lister
}
