package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime"
)

// cachedAsTransformed makes m's cache answer every pod, node and Lease as
// Transform leaves it on its way into the controller's cache; the API
// reader still answers whole objects, as the API server does.
func cachedAsTransformed(m fakeManager) fakeManager {
	m.live = m.GetAPIReader()
	strip := func(obj client.Object) {
		stripped, _ := Transform(obj)
		switch o := obj.(type) {
		case *corev1.Pod:
			*o = *stripped.(*corev1.Pod)
		case *corev1.Node:
			*o = *stripped.(*corev1.Node)
		case *coordinationv1.Lease:
			*o = *stripped.(*coordinationv1.Lease)
		}
	}
	m.client = interceptor.NewClient(m.client.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			strip(obj)
			return nil
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			switch l := list.(type) {
			case *corev1.PodList:
				for i := range l.Items {
					strip(&l.Items[i])
				}
			case *corev1.NodeList:
				for i := range l.Items {
					strip(&l.Items[i])
				}
			case *coordinationv1.LeaseList:
				for i := range l.Items {
					strip(&l.Items[i])
				}
			}
			return nil
		},
	})
	return m
}

func withAddress(n *corev1.Node, ip string) *corev1.Node {
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}, {Type: corev1.NodeInternalIP, Address: ip}}
	return n
}

// TestEveryShippedRuleAndFencerJudgesTheCachedObjectsAsTheWholeOnes runs
// podhealth-controller with every fencer it ships (--fence-lease,
// --network-fence-driver, --shutdown-taint) and the default rules, once
// over whole objects and once over the objects as its cache's transforms
// leave them: each fencer must free the same pods from both, so that no
// field a rule or a fencer reads is dropped on the way into the cache.
func TestEveryShippedRuleAndFencerJudgesTheCachedObjectsAsTheWholeOnes(t *testing.T) {
	start := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	renewed := metav1.NewMicroTime(start.Add(-time.Hour))
	pg := evicted("shop", "pg-1", "lost-b", "StatefulSet", "pg")
	pg.Annotations = map[string]string{fencing.AnnotationLease: "pg", fencing.AnnotationDeadline: "10s", "unrelated.example/keep": "no"}
	objects := func() []client.Object {
		return []client.Object{
			namespace("shop", true),
			withAddress(node("lost-a", corev1.ConditionUnknown, unreachable), "10.0.0.1"),
			withAddress(node("lost-b", corev1.ConditionUnknown, unreachable), "10.0.0.2"),
			withAddress(node("off", corev1.ConditionUnknown, unreachable, cloudShutdownTaint), "10.0.0.3"),
			withAddress(node("up", corev1.ConditionTrue), "10.0.0.4"),
			&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
				"metadata": map[string]any{"name": "lost-a-rbd"},
				"spec":     map[string]any{"driver": "rbd.csi.ceph.com", "fenceState": "Fenced", "cidrs": []any{"10.0.0.1/32"}},
				"status":   map[string]any{"result": "Succeeded", "message": "fencing operation successful"},
			}},
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "pg"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo("pg-1"), LeaseDurationSeconds: ptrTo[int32](15), RenewTime: &renewed}},
			evicted("shop", "db-0", "lost-a", "StatefulSet", "db"),
			pg.DeepCopy(),
			evicted("shop", "mq-0", "off", "StatefulSet", "mq"),
			evicted("shop", "kv-0", "lost-b", "StatefulSet", "kv"), // no fencer vouches for it
			alive("shop", "web-1", "up", "ReplicaSet", "web"),
		}
	}
	freed := func(t *testing.T, m fakeManager) []string {
		clk := clocktesting.NewFakePassiveClock(start)
		leases, err := podhealthcr.NewLiveLeases(m.GetAPIReader())
		require.NoError(t, err)
		byLease, err := fencing.NewLeaseFencer(leases, fencing.LeaseOptions{})
		require.NoError(t, err)
		fences, err := podhealthcr.NewLiveNetworkFences(m.GetAPIReader())
		require.NoError(t, err)
		byNetwork, err := fencing.NewNetworkFenceFencer(fences, fencing.NetworkFenceOptions{Drivers: []string{"rbd.csi.ceph.com"}})
		require.NoError(t, err)
		r, err := New(m, Options{Clock: clk, ShutdownTaints: cloudShutdown30s, Fencers: []health.Fencer{byLease, byNetwork}})
		require.NoError(t, err)
		var pods corev1.PodList
		require.NoError(t, m.GetAPIReader().List(context.Background(), &pods))
		for range 2 { // the Lease and the shutdown taint each need a wait
			for i := range pods.Items {
				reconcileAll(t, r, &pods.Items[i])
			}
			clk.SetTime(clk.Now().Add(time.Minute))
		}
		var gone []string
		for i := range pods.Items {
			if !exists(t, m, &pods.Items[i]) {
				gone = append(gone, pods.Items[i].Name)
			}
		}
		slices.Sort(gone)
		return gone
	}
	whole := freed(t, newFakeManager(t, objects()...))
	require.Equal(t, []string{"db-0", "mq-0", "pg-1"}, whole, "each fencer frees its pod from whole objects")
	require.Equal(t, whole, freed(t, cachedAsTransformed(newFakeManager(t, objects()...))), "the cached objects free the same pods")
}

// A node's addresses, which the NetworkFence fencer reads, stay in the
// cache; its images, the largest part of a node, do not.
func TestTransformKeepsANodesAddresses(t *testing.T) {
	n := withAddress(node("n1", corev1.ConditionTrue), "10.0.0.1")
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.example/app:1"}, SizeBytes: 1 << 20}}
	o, err := Transform(n)
	require.NoError(t, err)
	require.Equal(t, n.Status.Addresses, o.(*corev1.Node).Status.Addresses)
	require.Empty(t, o.(*corev1.Node).Status.Images)
}
