// Package informertest starts informers over client-go's fake clientset
// for this module's tests, and waits until they are usable. It is apart
// from testutil so that the tests that need no client-go do not build it.
package informertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
)

// WatchTimeout bounds the wait for an informer's first watch. It is not a
// measured duration: it only keeps a broken test from hanging.
const WatchTimeout = 5 * time.Second

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
