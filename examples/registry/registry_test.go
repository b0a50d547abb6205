package registry_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/examples/registry"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/readme"
	"github.com/podhealth/podhealth/internal/testutil"
)

// catalog runs the image of the fixture pods; olderCatalog is the spec it
// had before.
var (
	catalog      = registry.CatalogSource{Name: "operatorhubio", Namespace: "default", Image: "quay.io/example/registry:v1"}
	olderCatalog = registry.CatalogSource{Name: "operatorhubio", Namespace: "default", Image: "quay.io/example/registry:v0"}
)

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// registryPod loads a fixture pod and makes it a registry pod of source:
// the catalog source label, source's spec hash and source's image. The
// fixture keeps its name, UID, node and status.
func registryPod(t *testing.T, file string, source registry.CatalogSource) *corev1.Pod {
	t.Helper()
	pod := testutil.LoadPod(t, file)
	pod.Labels = map[string]string{registry.CatalogSourceLabel: source.Name}
	pod.Annotations = map[string]string{registry.SpecHashAnnotation: source.SpecHash()}
	require.Len(t, pod.Spec.Containers, 1, "fixture %s", file)
	pod.Spec.Containers[0].Name = registry.ContainerName
	pod.Spec.Containers[0].Image = source.Image
	return pod
}

// readyNodeLost is the healthy node fixture under the name of the node the
// taint-evicted pod is bound to: a taint eviction off a Ready node.
func readyNodeLost(t *testing.T) *corev1.Node {
	t.Helper()
	node := testutil.LoadNode(t, testutil.NodeHealthy)
	node.Name = testutil.LoadNode(t, testutil.NodeLost).Name
	return node
}

// world is an operator's view of a cluster: a fake clientset that holds
// the pods and the nodes, and a pod cache that changes only when told to
// (catchUp).
type world struct {
	client  *fake.Clientset
	indexer cache.Indexer
	lister  corelisters.PodLister
	// factory is the operator's, built once over client.
	factory *registry.Factory
}

func newWorld(t *testing.T, pods []*corev1.Pod, nodes ...*corev1.Node) *world {
	t.Helper()
	objs := testutil.Objects(pods...)
	for _, n := range nodes {
		objs = append(objs, n)
	}
	w := &world{
		client:  fake.NewClientset(objs...),
		indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
	}
	w.lister = corelisters.NewPodLister(w.indexer)
	w.factory = w.newFactory(t)
	w.catchUp(t)
	return w
}

// newFactory builds a Factory over w, as the operator does once at setup.
func (w *world) newFactory(t *testing.T) *registry.Factory {
	t.Helper()
	f, err := registry.NewFactory(w.client, w.lister, logr.Discard())
	require.NoError(t, err)
	return f
}

// catchUp makes the cache show the clientset's pods, as an informer does
// once its watch has delivered every change.
func (w *world) catchUp(t *testing.T) {
	t.Helper()
	obj, err := w.client.Tracker().List(podsResource, corev1.SchemeGroupVersion.WithKind("Pod"), "")
	require.NoError(t, err)
	var items []any
	for i := range obj.(*corev1.PodList).Items {
		items = append(items, &obj.(*corev1.PodList).Items[i])
	}
	require.NoError(t, w.indexer.Replace(items, ""))
}

// reconciler builds a Reconciler for one call, as the operator does.
func (w *world) reconciler(t *testing.T) *registry.Reconciler {
	t.Helper()
	return w.factory.Reconciler()
}

func (w *world) deletes(from int) []k8stesting.DeleteActionImpl {
	var out []k8stesting.DeleteActionImpl
	for _, a := range w.client.Actions()[from:] {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok && a.GetResource() == podsResource {
			out = append(out, d)
		}
	}
	return out
}

func (w *world) creates(from int) []*corev1.Pod {
	var out []*corev1.Pod
	for _, a := range w.client.Actions()[from:] {
		if c, ok := a.(k8stesting.CreateActionImpl); ok && a.GetResource() == podsResource {
			out = append(out, c.GetObject().(*corev1.Pod))
		}
	}
	return out
}

// podRequests returns the verbs of the pod requests sent since from.
func (w *world) podRequests(from int) []string {
	var out []string
	for _, a := range w.client.Actions()[from:] {
		if a.GetResource() == podsResource {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

// requireForceDelete asserts that del is the force delete of pod: grace
// period 0 and a precondition on its UID, nothing else.
func requireForceDelete(t *testing.T, pod *corev1.Pod, del k8stesting.DeleteActionImpl) {
	t.Helper()
	require.Equal(t, pod.Namespace, del.GetNamespace())
	require.Equal(t, pod.Name, del.GetName())
	want := metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: ptr.To(pod.UID)},
	}
	require.Empty(t, cmp.Diff(want, del.GetDeleteOptions()), "DeleteOptions (-want +got)")
}

func TestRegistryServerIsCheckedAndEnsured(t *testing.T) {
	alive := func(t *testing.T) *corev1.Pod { return registryPod(t, testutil.PodAlive, catalog) }
	evicted := func(t *testing.T) *corev1.Pod { return registryPod(t, testutil.PodTaintEvicted, catalog) }
	lost := func(t *testing.T) *corev1.Node { return testutil.LoadNode(t, testutil.NodeLost) }
	healthyNode := func(t *testing.T) *corev1.Node { return testutil.LoadNode(t, testutil.NodeHealthy) }

	for _, tc := range []struct {
		name  string
		pods  func(t *testing.T) []*corev1.Pod
		nodes func(t *testing.T) []*corev1.Node
		// healthy is CheckRegistryServer's first answer.
		healthy bool
		// forceDeleted are the pods force-deleted, once each, by the
		// check and the ensure that follows it.
		forceDeleted []string
		// created is whether the ensure creates a pod.
		created bool
	}{{
		name:    "no pod: unhealthy, and a pod is created",
		pods:    func(*testing.T) []*corev1.Pod { return nil },
		healthy: false, created: true,
	}, {
		name:    "a current pod: healthy, nothing created",
		pods:    func(t *testing.T) []*corev1.Pod { return []*corev1.Pod{alive(t)} },
		nodes:   func(t *testing.T) []*corev1.Node { return []*corev1.Node{healthyNode(t)} },
		healthy: true, created: false,
	}, {
		name: "a pod of the older image and spec hash does not count: a pod is created",
		pods: func(t *testing.T) []*corev1.Pod {
			return []*corev1.Pod{registryPod(t, testutil.PodAlive, olderCatalog)}
		},
		nodes:   func(t *testing.T) []*corev1.Node { return []*corev1.Node{healthyNode(t)} },
		healthy: false, created: true,
	}, {
		name: "a pod of the current image with an older spec hash does not count: a pod is created",
		pods: func(t *testing.T) []*corev1.Pod {
			p := alive(t)
			p.Annotations[registry.SpecHashAnnotation] = olderCatalog.SpecHash()
			return []*corev1.Pod{p}
		},
		nodes:   func(t *testing.T) []*corev1.Node { return []*corev1.Node{healthyNode(t)} },
		healthy: false, created: true,
	}, {
		name: "a pod of the current spec hash running another image does not count: a pod is created",
		pods: func(t *testing.T) []*corev1.Pod {
			p := alive(t)
			p.Spec.Containers[0].Image = olderCatalog.Image
			return []*corev1.Pod{p}
		},
		nodes:   func(t *testing.T) []*corev1.Node { return []*corev1.Node{healthyNode(t)} },
		healthy: false, created: true,
	}, {
		name:         "a taint-evicted pod on a node that is not Ready: force-deleted and replaced",
		pods:         func(t *testing.T) []*corev1.Pod { return []*corev1.Pod{evicted(t)} },
		nodes:        func(t *testing.T) []*corev1.Node { return []*corev1.Node{lost(t)} },
		healthy:      false,
		forceDeleted: []string{"taint-evicted"}, created: true,
	}, {
		name:    "a taint-evicted pod on a Ready node is left to its kubelet, and replaced",
		pods:    func(t *testing.T) []*corev1.Pod { return []*corev1.Pod{evicted(t)} },
		nodes:   func(t *testing.T) []*corev1.Node { return []*corev1.Node{readyNodeLost(t)} },
		healthy: false, created: true,
	}, {
		name:         "a current pod and a dead one: the dead one force-deleted, nothing created",
		pods:         func(t *testing.T) []*corev1.Pod { return []*corev1.Pod{alive(t), evicted(t)} },
		nodes:        func(t *testing.T) []*corev1.Node { return []*corev1.Node{lost(t), healthyNode(t)} },
		healthy:      true,
		forceDeleted: []string{"taint-evicted"}, created: false,
	}, {
		name: "a stale dead pod is not judged, and not deleted: a pod is created",
		pods: func(t *testing.T) []*corev1.Pod {
			return []*corev1.Pod{registryPod(t, testutil.PodTaintEvicted, olderCatalog)}
		},
		nodes:   func(t *testing.T) []*corev1.Node { return []*corev1.Node{lost(t)} },
		healthy: false, created: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pods := tc.pods(t)
			var nodes []*corev1.Node
			if tc.nodes != nil {
				nodes = tc.nodes(t)
			}
			w := newWorld(t, pods, nodes...)
			ctx := context.Background()

			healthy, err := w.reconciler(t).CheckRegistryServer(ctx, catalog)
			require.NoError(t, err)
			require.Equal(t, tc.healthy, healthy, "CheckRegistryServer")

			// A new Reconciler, the cache not caught up yet.
			require.NoError(t, w.reconciler(t).EnsureRegistryServer(ctx, catalog))

			deletes := w.deletes(0)
			require.Len(t, deletes, len(tc.forceDeleted), "DELETEs sent by the check and the ensure")
			for i, name := range tc.forceDeleted {
				var pod *corev1.Pod
				for _, p := range pods {
					if p.Name == name {
						pod = p
					}
				}
				require.NotNil(t, pod, "no pod %s in the case", name)
				requireForceDelete(t, pod, deletes[i])
			}

			created := w.creates(0)
			if !tc.created {
				require.Empty(t, created, "pods created")
			} else {
				require.Len(t, created, 1, "pods created")
				want := catalog.Pod()
				require.Empty(t, cmp.Diff(want, created[0]), "created pod (-want +got)")
				require.True(t, catalog.Current(created[0]))
			}

			// Once the cache has caught up, the registry is healthy and a
			// new ensure sends nothing: also when the pod it created has
			// no name, as in every fake-clientset test.
			w.catchUp(t)
			from := len(w.client.Actions())
			healthy, err = w.reconciler(t).CheckRegistryServer(ctx, catalog)
			require.NoError(t, err)
			require.True(t, healthy, "CheckRegistryServer once the cache caught up")
			require.NoError(t, w.reconciler(t).EnsureRegistryServer(ctx, catalog))
			require.Empty(t, w.podRequests(from), "pod requests sent once the cache caught up")
		})
	}
}

// The fake clientset does not fill in generateName: the pod Ensure creates
// is stored without a name (and without a UID). It is judged like any pod,
// alive, so the registry stays healthy; podhealth would only refuse to
// force-delete it.
func TestNamelessRegistryPodOfTheFakeClientsetStaysHealthy(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	require.NoError(t, w.reconciler(t).EnsureRegistryServer(ctx, catalog))
	w.catchUp(t)

	pods, err := w.lister.Pods(catalog.Namespace).List(catalog.Selector())
	require.NoError(t, err)
	require.Len(t, pods, 1)
	require.Empty(t, pods[0].Name, "the fake clientset named the pod: this test no longer shows a nameless pod")
	require.Empty(t, pods[0].UID)

	for i := range 3 {
		healthy, err := w.reconciler(t).CheckRegistryServer(ctx, catalog)
		require.NoError(t, err, "check %d", i)
		require.True(t, healthy, "check %d", i)
	}
	require.Len(t, w.creates(0), 1, "pods created")
}

// A dead registry pod that the fake clientset stored without a name or a
// UID (it ignores generateName) cannot be force-deleted safely, so it is
// held back, and the check fails with health.ErrUnidentifiedPod: no API
// server serves such a pod, so the test's fake is wrong, and a silent hold
// would hide it. Ensure then creates nothing and deletes nothing.
func TestNamelessDeadRegistryPodOfTheFakeClientsetFailsTheCheck(t *testing.T) {
	dead := registryPod(t, testutil.PodTaintEvicted, catalog)
	dead.Name, dead.UID = "", ""
	w := newWorld(t, []*corev1.Pod{dead}, testutil.LoadNode(t, testutil.NodeLost))
	nameLikeTheAPIServer(w.client) // a replacement would get a name, the seeded pod keeps none
	ctx := context.Background()

	healthy, err := w.reconciler(t).CheckRegistryServer(ctx, catalog)
	require.ErrorIs(t, err, health.ErrUnidentifiedPod, "the caller sees why nothing was deleted")
	require.False(t, healthy)

	require.ErrorIs(t, w.reconciler(t).EnsureRegistryServer(ctx, catalog), health.ErrUnidentifiedPod)
	require.Empty(t, w.creates(0), "a failed check creates nothing")
	require.Empty(t, w.deletes(0), "nothing is deleted without a UID precondition")
}

// lagging returns a world whose cache lists a current pod and a
// taint-evicted pod on a lost node, and never catches up.
func lagging(t *testing.T) *world {
	return newWorld(t,
		[]*corev1.Pod{registryPod(t, testutil.PodAlive, catalog), registryPod(t, testutil.PodTaintEvicted, catalog)},
		testutil.LoadNode(t, testutil.NodeLost), testutil.LoadNode(t, testutil.NodeHealthy))
}

// The Reconcilers are given no Memory: the checkers that kube.NewChecker
// builds over one clientset share one.
func TestReconcilersBuiltPerCallSendOneDeleteAcrossALaggingCache(t *testing.T) {
	w := lagging(t)
	for i := range 3 {
		require.NoError(t, w.reconciler(t).EnsureRegistryServer(context.Background(), catalog), "call %d", i)
	}
	deletes := w.deletes(0)
	require.Len(t, deletes, 1, "DELETEs sent over three calls")
	requireForceDelete(t, registryPod(t, testutil.PodTaintEvicted, catalog), deletes[0])
	require.Empty(t, w.creates(0), "pods created")
}

func TestEnsureRegistryServerCreatesNothingWhenAForceDeleteFails(t *testing.T) {
	w := newWorld(t, []*corev1.Pod{registryPod(t, testutil.PodTaintEvicted, catalog)}, testutil.LoadNode(t, testutil.NodeLost))
	w.client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(podsResource.GroupResource(), "taint-evicted", nil)
	})

	err := w.reconciler(t).EnsureRegistryServer(context.Background(), catalog)
	require.Error(t, err)
	require.True(t, apierrors.IsForbidden(err), "the API error is not reachable: %v", err)
	require.Len(t, w.deletes(0), 1)
	require.Empty(t, w.creates(0), "pods created after a failed check")
}

func TestNewFactoryRefusesANilClientsetOrLister(t *testing.T) {
	lister := corelisters.NewPodLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	_, err := registry.NewFactory(nil, lister, logr.Discard())
	require.ErrorContains(t, err, "nil clientset")
	_, err = registry.NewFactory(fake.NewClientset(), nil, logr.Discard())
	require.ErrorContains(t, err, "nil PodLister")
}

// Reconcilers built per call by one Factory, sharing its Tracker, create
// one registry pod while the informer does not list it yet, and none once
// it does; a new spec gets its own pod at once. Without the shared Tracker
// (a Factory per call) the same calls create one pod each.
func TestReconcilersBuiltPerCallCreateOnePodAcrossALaggingCache(t *testing.T) {
	for _, tt := range []struct {
		name        string
		shared      bool
		wantCreates int
	}{
		{"one Factory's Tracker shared by every Reconciler", true, 1},
		{"a Factory per call", false, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, nil) // no registry pod, and the cache will not show the new one
			nameLikeTheAPIServer(w.client)
			for i := range 3 {
				r := w.reconciler(t)
				if !tt.shared {
					r = w.newFactory(t).Reconciler()
				}
				require.NoError(t, r.EnsureRegistryServer(context.Background(), catalog), "call %d", i)
			}
			require.Len(t, w.creates(0), tt.wantCreates, "pods created over three calls before the cache caught up")
			if !tt.shared {
				return
			}

			w.catchUp(t) // the informer lists the new pod: it is alive
			before := len(w.client.Actions())
			require.NoError(t, w.reconciler(t).EnsureRegistryServer(context.Background(), catalog))
			require.Empty(t, w.creates(before), "a pod was created while the cache lists a live one")

			newer := catalog
			newer.Image = "quay.io/example/registry:v2"
			require.NoError(t, w.reconciler(t).EnsureRegistryServer(context.Background(), newer))
			created := w.creates(before)
			require.Len(t, created, 1, "a new spec waits for no pod of the older one")
			require.Equal(t, newer.SpecHash(), created[0].Annotations[registry.SpecHashAnnotation])
		})
	}
}

// nameLikeTheAPIServer makes client's creates of pods fill in the name
// from generateName and a UID, as the API server does and the fake
// clientset does not.
func nameLikeTheAPIServer(client *fake.Clientset) {
	var n int
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		pod := action.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		n++
		if pod.Name == "" {
			pod.Name = pod.GenerateName + fmt.Sprintf("%05d", n)
		}
		pod.UID = types.UID(fmt.Sprintf("created-%d", n))
		return false, nil, nil // the default reactor stores it
	})
}

func TestInvalidCatalogSourceIsRefusedWithoutARequest(t *testing.T) {
	w := newWorld(t, nil)
	for _, source := range []registry.CatalogSource{
		{Name: "", Namespace: "default", Image: "img"},
		{Name: "Not_A_Name", Namespace: "default", Image: "img"},
		{Name: "ok", Namespace: "", Image: "img"},
		{Name: "ok", Namespace: "default", Image: ""},
	} {
		_, err := w.reconciler(t).CheckRegistryServer(context.Background(), source)
		require.ErrorContains(t, err, "invalid catalog source", "%+v", source)
		require.ErrorContains(t, w.reconciler(t).EnsureRegistryServer(context.Background(), source), "invalid catalog source", "%+v", source)
	}
	require.Empty(t, w.podRequests(0))
}

// Without a node cache, the Reconciler reads a dead pod's node live
// through its clientset, as the Factory's Checkers wire it: the
// taint-evicted pod of a lost node is force-deleted on the first check,
// long before its deletionTimestamp.
func TestWithoutANodeCacheALostNodesPodGoesAtOnceOnALiveRead(t *testing.T) {
	evicted := registryPod(t, testutil.PodTaintEvicted, catalog)
	// A deadline an hour off: only node evidence makes the pod dead now.
	evicted.DeletionTimestamp = &metav1.Time{Time: time.Now().Add(time.Hour)}
	w := newWorld(t, []*corev1.Pod{evicted}, testutil.LoadNode(t, testutil.NodeLost))

	healthy, err := w.reconciler(t).CheckRegistryServer(context.Background(), catalog)
	require.NoError(t, err)
	require.False(t, healthy)
	deletes := w.deletes(0)
	require.Len(t, deletes, 1, "the live read of the lost node let the pod go")
	requireForceDelete(t, evicted, deletes[0])
	var nodeGets int
	for _, a := range w.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "nodes" {
			nodeGets++
		}
	}
	require.Equal(t, 1, nodeGets, "one GET of the node")
}

// OLM's shape fits in 25 lines, as readme.GlueLines counts them by the
// rule of docs/operators.md: every line that podhealth adds to registry.go
// or changes in it, its setup included.
func TestOLMsShapeIsAtMost25Lines(t *testing.T) {
	n, err := readme.GlueLines(os.DirFS("."), "registry.go")
	require.NoError(t, err)
	t.Logf("OLM's shape: %d lines", n)
	require.LessOrEqual(t, n, 25)
}
