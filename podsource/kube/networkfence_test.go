package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/health/fencertest"
	"github.com/podhealth/podhealth/podsource/kube"
)

// A NetworkFenceFencer over LiveNetworkFences lists the live objects on
// each question, passes the conformance suite, and fails on a Forbidden
// with the API error reachable.
func TestLiveNetworkFencesListTheLiveFences(t *testing.T) {
	fence := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
		"metadata": map[string]any{"name": "n1-rbd"},
		"spec":     map[string]any{"driver": "rbd.csi.ceph.com", "fenceState": "Fenced", "cidrs": []any{"10.0.0.5/32"}},
		"status":   map[string]any{"result": "Succeeded", "message": "fencing operation successful"},
	}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{fencing.NetworkFenceResource: "NetworkFenceList"}, fence)
	live, err := kube.NewLiveNetworkFences(client)
	require.NoError(t, err)
	f, err := fencing.NewNetworkFenceFencer(live, fencing.NetworkFenceOptions{Drivers: []string{"rbd.csi.ceph.com"}})
	require.NoError(t, err)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}}
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	q := health.FenceQuery{Pod: selfFencingPod(), NodeState: health.NodeUnreachable, Node: node, Now: now}
	require.NoError(t, fencertest.TestFencer(f, fencertest.Case{Name: "fenced", Query: q, Want: health.NodeStopped}))

	client.ClearActions()
	for range 2 {
		_, err := f.Fence(context.Background(), q)
		require.NoError(t, err)
	}
	lists := 0
	for _, a := range client.Actions() {
		if a.Matches("list", "networkfences") {
			lists++
		}
	}
	require.Equal(t, 2, lists, "one live LIST per question")

	forbidden := apierrors.NewForbidden(fencing.NetworkFenceResource.GroupResource(), "", errors.New("RBAC"))
	client.PrependReactor("list", "networkfences", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, forbidden })
	_, err = f.Fence(context.Background(), q)
	require.True(t, apierrors.IsForbidden(err), "%v", err)
}

func TestNewLiveNetworkFencesRefusesNil(t *testing.T) {
	_, err := kube.NewLiveNetworkFences(nil)
	require.ErrorContains(t, err, "nil dynamic.Interface")
}

func TestNetworkFencePolicyRulesGrantListOnNetworkFences(t *testing.T) {
	rules := kube.NetworkFencePolicyRules()
	require.Equal(t, []string{"csiaddons.openshift.io"}, rules[0].APIGroups)
	require.Equal(t, []string{"networkfences"}, rules[0].Resources)
	require.Equal(t, []string{"list"}, rules[0].Verbs)
}
