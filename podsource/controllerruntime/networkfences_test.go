package controllerruntime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
)

// A NetworkFenceFencer over the adapter's LiveNetworkFences reads the
// unstructured objects the reader lists: proof while the fence holds, and
// none once it is withdrawn.
func TestLiveNetworkFencesOverTheAPIReader(t *testing.T) {
	fence := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
		"metadata": map[string]any{"name": "n1-rbd"},
		"spec":     map[string]any{"driver": "rbd.csi.ceph.com", "fenceState": "Fenced", "cidrs": []any{"10.0.0.5/32"}},
		"status":   map[string]any{"result": "Succeeded", "message": "fencing operation successful"},
	}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(fence).Build()
	live, err := crh.NewLiveNetworkFences(c)
	require.NoError(t, err)
	f, err := fencing.NewNetworkFenceFencer(live, fencing.NetworkFenceOptions{Drivers: []string{"rbd.csi.ceph.com"}})
	require.NoError(t, err)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}}
	q := health.FenceQuery{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-0", UID: "u"}}, Node: node}
	got, err := f.Fence(context.Background(), q)
	require.NoError(t, err)
	require.Equal(t, health.NodeStopped, got.Proves)

	require.NoError(t, unstructured.SetNestedField(fence.Object, "Unfenced", "spec", "fenceState"))
	require.NoError(t, c.Update(context.Background(), fence))
	got, err = f.Fence(context.Background(), q)
	require.NoError(t, err)
	require.Equal(t, health.NoProof, got.Proves, "a withdrawn fence")

	_, err = crh.NewLiveNetworkFences(nil)
	require.ErrorContains(t, err, "nil client.Reader")
}
