package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/health"
	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime"
)

// informerCache is controller-runtime's informer cache, with the
// controller's transform and Lease namespace, over client-go's fake
// clientset in place of an API server: its informers list and watch the
// clientset (which has no watch-list streaming, and says so to them), and
// its reader deep-copies what it returns as in production.
func informerCache(tb testing.TB, objs ...runtime.Object) (cache.Cache, kubernetes.Interface) {
	tb.Helper()
	clientset := kubefake.NewClientset(objs...)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Node"), meta.RESTScopeRoot)
	mapper.Add(coordinationv1.SchemeGroupVersion.WithKind("Lease"), meta.RESTScopeNamespace)
	// The cache maps a list by its own kind too.
	mapper.Add(corev1.SchemeGroupVersion.WithKind("NodeList"), meta.RESTScopeRoot)
	mapper.Add(coordinationv1.SchemeGroupVersion.WithKind("LeaseList"), meta.RESTScopeNamespace)
	listWatch := func(obj runtime.Object) toolscache.ListerWatcher {
		switch obj.(type) {
		case *corev1.Node:
			nodes := clientset.CoreV1().Nodes()
			return toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
				ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return nodes.List(ctx, o) },
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return nodes.Watch(ctx, o) },
			}, clientset)
		case *coordinationv1.Lease:
			leases := clientset.CoordinationV1().Leases(corev1.NamespaceNodeLease)
			return toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
				ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return leases.List(ctx, o) },
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return leases.Watch(ctx, o) },
			}, clientset)
		}
		tb.Fatalf("informerCache: no informer for %T", obj)
		return nil
	}
	c, err := cache.New(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{
		Scheme: scheme.Scheme,
		Mapper: mapper,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}:          {Transform: Transform},
			&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{corev1.NamespaceNodeLease: {}}, Transform: Transform},
		},
		NewInformer: func(_ toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
			return toolscache.NewSharedIndexInformer(listWatch(obj), obj, resync, indexers)
		},
	})
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	return c, clientset
}

// breakerOverInformers is the Breaker's view of the nodes as
// SetupWithManager wires it, over c: memoized when memoize is set.
func breakerOverInformers(tb testing.TB, c cache.Cache, clk clock.PassiveClock, memoize bool) heartbeatNodes {
	tb.Helper()
	ctx := context.Background()
	nodes, err := podhealthcr.NewNodes(c)
	require.NoError(tb, err)
	informer, err := c.GetInformer(ctx, &corev1.Node{})
	require.NoError(tb, err)
	h := heartbeatNodes{nodes: breakerNodesOf(informer, nodes), leases: c, clock: clk}
	require.IsType(tb, informerNodes{}, h.nodes, "controller-runtime's cache gives out its node informer's store")
	if memoize {
		// A view that only the handlers' reports end (and the Leases'
		// staleness), so that the test shows they arrive.
		h.memo = &viewMemo{clock: clk, maxAge: time.Hour}
		for obj, handler := range map[client.Object]toolscache.ResourceEventHandler{&corev1.Node{}: h.memo.nodeHandler(), &coordinationv1.Lease{}: h.memo.leaseHandler()} {
			informer, err := c.GetInformer(ctx, obj)
			require.NoError(tb, err)
			_, err = informer.AddEventHandler(handler)
			require.NoError(tb, err)
		}
	}
	require.True(tb, c.WaitForCacheSync(ctx))
	return h
}

// realNodes returns n nodes, and their Leases renewed at renewed, made
// from the fixture of a healthy node as a real control plane left it,
// with what a kubelet on a cloud machine adds to it and the cache keeps
// (Transform): its well-known labels, its four conditions and its
// addresses. Each has its own name, address and zone (of three).
func realNodes(tb testing.TB, n int, renewed time.Time) []runtime.Object {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "testdata", "real-cluster", "node-healthy.json"))
	require.NoError(tb, err)
	var fixture corev1.Node
	require.NoError(tb, json.Unmarshal(raw, &fixture))
	beat := fixture.Status.Conditions[0].LastHeartbeatTime
	for _, pressure := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		fixture.Status.Conditions = append(fixture.Status.Conditions, corev1.NodeCondition{
			Type: pressure, Status: corev1.ConditionFalse, LastHeartbeatTime: beat, LastTransitionTime: beat,
			Reason: "KubeletHas" + strings.TrimPrefix(string(pressure), "Has"), Message: "kubelet has no " + string(pressure),
		})
	}
	objs := make([]runtime.Object, 0, 2*n)
	for i := range n {
		node := fixture.DeepCopy()
		node.Name = fmt.Sprintf("worker-%05d", i)
		node.ResourceVersion = ""
		node.UID = types.UID(fmt.Sprintf("586eea81-c1a6-411a-99dd-%012d", i))
		node.Labels = map[string]string{
			"beta.kubernetes.io/arch":          "amd64",
			"beta.kubernetes.io/os":            "linux",
			"beta.kubernetes.io/instance-type": "m6i.2xlarge",
			corev1.LabelArchStable:             "amd64",
			corev1.LabelOSStable:               "linux",
			corev1.LabelHostname:               node.Name,
			corev1.LabelInstanceTypeStable:     "m6i.2xlarge",
			corev1.LabelTopologyRegion:         "eu-west-1",
			corev1.LabelTopologyZone:           fmt.Sprintf("eu-west-1%c", 'a'+i%3),
		}
		node.Spec.ProviderID = fmt.Sprintf("aws:///eu-west-1%c/i-%017x", 'a'+i%3, i)
		node.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
			{Type: corev1.NodeHostName, Address: node.Name},
			{Type: corev1.NodeInternalDNS, Address: node.Name + ".eu-west-1.compute.internal"},
		}
		objs = append(objs, node, nodeLease(node.Name, renewed, 40))
	}
	return objs
}

// TestTheMemoizedViewFollowsTheInformers: over controller-runtime's
// informer cache, the memoized view sees a node go not Ready, and a Lease
// go stale and come back, as soon as the cache has them, and serves the
// checks between them from one listing.
func TestTheMemoizedViewFollowsTheInformers(t *testing.T) {
	now := time.Now()
	c, clientset := informerCache(t, realNodes(t, 6, now)...)
	clk := clock.RealClock{}
	memoized := breakerOverInformers(t, c, clk, true)
	fresh := breakerOverInformers(t, c, clk, false)
	ctx := context.Background()
	breaker := func(h heartbeatNodes) string {
		return health.Breaker{Nodes: h, UnhealthyShare: 0.3, MinUnhealthy: 1}.Open(ctx)
	}
	require.Empty(t, breaker(memoized))
	first, err := memoized.ListNodes(ctx)
	require.NoError(t, err)
	again, err := memoized.ListNodes(ctx)
	require.NoError(t, err)
	require.Same(t, &first[0], &again[0], "a second check within the view's life reads the same listing")

	// Two of six nodes go not Ready: the Breaker (30 %) opens once the
	// cache has them, on the memoized view as on a fresh one.
	setReady := func(status corev1.ConditionStatus, names ...string) {
		for _, name := range names {
			n, err := clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			for i := range n.Status.Conditions {
				if n.Status.Conditions[i].Type == corev1.NodeReady {
					n.Status.Conditions[i].Status = status
				}
			}
			_, err = clientset.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	}
	setReady(corev1.ConditionUnknown, "worker-00001", "worker-00002")
	require.Eventually(t, func() bool { return breaker(fresh) != "" }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return breaker(memoized) == breaker(fresh) }, time.Second, time.Millisecond, "the memoized view follows the cache")

	// Both come back, and a third node's Lease, renewed 21 s ago, is
	// stale: the Breaker counts it, in its zone.
	setReady(corev1.ConditionTrue, "worker-00001", "worker-00002")
	leases := clientset.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	lease, err := leases.Get(ctx, "worker-00003", metav1.GetOptions{})
	require.NoError(t, err)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-21 * time.Second)}
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	require.NoError(t, err)
	stateOf := func(h heartbeatNodes, name string) health.NodeState {
		nodes, err := h.ListNodes(ctx)
		require.NoError(t, err)
		for _, n := range nodes {
			if n.Name == name {
				return health.NodeStateOf(n)
			}
		}
		return health.NodeUnknown
	}
	require.Eventually(t, func() bool {
		return stateOf(memoized, "worker-00003") == health.NodeNotReady && stateOf(memoized, "worker-00001") == health.NodeReady
	}, 10*time.Second, time.Millisecond, "the stale Lease and the recovered nodes")
	require.Equal(t, `breaker open: 1 of 2 nodes in zone "eu-west-1a" are not Ready`, breaker(memoized))

	// The Lease renewed: the node counts as Ready again.
	lease, err = leases.Get(ctx, "worker-00003", metav1.GetOptions{})
	require.NoError(t, err)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return stateOf(memoized, "worker-00003") == health.NodeReady }, 10*time.Second, time.Millisecond)
	require.Empty(t, breaker(memoized))
}

// BenchmarkBreakerView measures one check's reading of the Breaker's view
// of the nodes, as a burst of checks reads it (the groups held back by a
// Breaker that closes, or brought back by a node that recovers): from
// controller-runtime's informer cache of nodes as a real control plane
// holds them (the fixture's, stripped by Transform) and their Leases,
// listed afresh for each check, or memoized while nothing changes.
func BenchmarkBreakerView(b *testing.B) {
	for _, nodes := range []int{1_000, 2_500, 5_000} {
		c, _ := informerCache(b, realNodes(b, nodes, time.Now())...)
		for _, memoize := range []bool{false, true} {
			h := breakerOverInformers(b, c, clock.RealClock{}, memoize)
			breaker := health.Breaker{Nodes: h}
			b.Run(fmt.Sprintf("nodes=%d/memoized=%v", nodes, memoize), func(b *testing.B) {
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if why := breaker.Open(ctx); why != "" {
						b.Fatal(why)
					}
				}
			})
		}
	}
}
