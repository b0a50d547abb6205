package kube_test

import (
	"time"

	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/internal/testutil/informertest"
)

// Fixture pods, captured from a real control plane (see
// testdata/real-cluster at the root of the module).
const (
	podAlive        = testutil.PodAlive        // bound to a Ready node: Alive
	podTaintEvicted = testutil.PodTaintEvicted // node lost, taint-eviction deleting it: Dead
	podDrained      = testutil.PodDrained      // evicted through the Eviction API: Terminating
	podUserDeleted  = testutil.PodUserDeleted  // plain graceful delete: Terminating
)

var (
	loadPod          = testutil.LoadPod
	loadStatusError  = testutil.LoadStatusError
	loadNode         = testutil.LoadNode
	allFixturePods   = testutil.LoadPods
	objects          = testutil.Objects
	startPodInformer = informertest.StartPodInformer
)

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
