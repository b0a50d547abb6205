package kube_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// Fixture pods, captured from a real control plane (see
// testdata/real-cluster at the root of the module).
const (
	podAlive        = "pod-alive.json"         // bound to a Ready node: Alive
	podTaintEvicted = "pod-taint-evicted.json" // node lost, taint-eviction deleting it: Dead
	podDrained      = "pod-drained.json"       // evicted through the Eviction API: Terminating
	podUserDeleted  = "pod-user-deleted.json"  // plain graceful delete: Terminating
)

// loadPod decodes one pod fixture from testdata.
func loadPod(t testing.TB, file string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	loadJSON(t, file, &pod)
	require.Equal(t, "Pod", pod.Kind, "fixture %s", file)
	return &pod
}

// loadStatusError decodes one Status fixture into the error the typed
// client returns for it.
func loadStatusError(t testing.TB, file string) *apierrors.StatusError {
	t.Helper()
	var status metav1.Status
	loadJSON(t, file, &status)
	require.Equal(t, "Status", status.Kind, "fixture %s", file)
	return &apierrors.StatusError{ErrStatus: status}
}

func loadJSON(t testing.TB, file string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "real-cluster", file))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, into), "fixture %s", file)
}

// allFixturePods returns the four fixture pods, all in namespace default
// with label app=registry.
func allFixturePods(t testing.TB) []*corev1.Pod {
	t.Helper()
	return []*corev1.Pod{loadPod(t, podAlive), loadPod(t, podTaintEvicted), loadPod(t, podDrained), loadPod(t, podUserDeleted)}
}

func objects(pods ...*corev1.Pod) []runtime.Object {
	out := make([]runtime.Object, len(pods))
	for i, p := range pods {
		out[i] = p.DeepCopy()
	}
	return out
}

// startPodInformer starts a shared informer factory over client (for all
// namespaces when namespace is empty), waits for its pod cache to sync,
// and stops it when the test ends.
func startPodInformer(t testing.TB, client *fake.Clientset, namespace string) corelisters.PodLister {
	t.Helper()
	var opts []informers.SharedInformerOption
	if namespace != "" {
		opts = append(opts, informers.WithNamespace(namespace))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
	lister := factory.Core().V1().Pods().Lister()
	watching := watchStarted(client)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		require.True(t, ok, "cache of %v did not sync", typ)
	}
	select {
	case <-watching:
	case <-time.After(eventually):
		t.Fatal("the informer never started its pod watch")
	}
	return lister
}

// watchStarted returns a channel closed once client serves its first pod
// watch. The fake clientset's watches cannot resume from a
// resourceVersion: a change made after an informer synced but before its
// watch started would be lost, so tests wait for the watch before
// changing anything.
func watchStarted(client *fake.Clientset) <-chan struct{} {
	started := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w := action.(k8stesting.WatchActionImpl)
		wi, err := client.Tracker().Watch(w.GetResource(), w.GetNamespace(), w.ListOptions)
		once.Do(func() { close(started) })
		return true, wi, err
	})
	return started
}

// deleteActions returns the DELETE actions recorded by client.
func deleteActions(client *fake.Clientset) []k8stesting.DeleteActionImpl {
	var out []k8stesting.DeleteActionImpl
	for _, a := range client.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok {
			out = append(out, d)
		}
	}
	return out
}

// verbs lists "verb resource" of every action client recorded after the
// first skip ones.
func verbs(client *fake.Clientset, skip int) []string {
	var out []string
	for _, a := range client.Actions()[skip:] {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

// podVerbs is verbs restricted to requests about pods (events are
// written asynchronously by a broadcaster, and read back by tests).
func podVerbs(client *fake.Clientset, skip int) []string {
	var out []string
	for _, a := range client.Actions()[skip:] {
		if a.GetResource().Resource == "pods" {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

// podIndexer returns an empty store indexed by namespace, as an informer's.
func podIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

const eventually = 5 * time.Second
const tick = 10 * time.Millisecond
