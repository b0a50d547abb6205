package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
	"github.com/podhealth/podhealth/podsource/fake"
)

// manager is a podhealthcr.Manager over one fakeapi client, which answers
// as an API server: the cache and the live reader are the same.
type manager struct{ c client.Client }

func (m manager) GetClient() client.Client    { return m.c }
func (m manager) GetAPIReader() client.Reader { return m.c }

// TestReconcileReplacesAPodThatDiedWithItsNode: the app's only pod was
// taint-evicted from a node that is not Ready; one reconcile force-deletes
// it and creates one replacement, and a second reconcile, before the cache
// would list the replacement, creates no other.
func TestReconcileReplacesAPodThatDiedWithItsNode(t *testing.T) {
	app := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "app-uid", Labels: map[string]string{"podhealth.example/app": "true"}},
		Data:       map[string]string{"image": "registry.example/web:1"},
	}
	// The app's pod, running on node-a; then node-a fails and the
	// taint-eviction controller evicts the pod, as on a real cluster.
	now := time.Now()
	running := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-x7k2p", UID: "pod-uid", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	c, err := fakeapi.NewClient(app, running, fake.ReadyNode("node-a", now.Add(-time.Hour)))
	require.NoError(t, err)
	require.NoError(t, fakeapi.FailNode(context.Background(), c, "node-a", now))
	require.NoError(t, fakeapi.EvictPod(context.Background(), c, client.ObjectKeyFromObject(running), now))
	dead := running
	checkers, err := podhealthcr.NewCheckers(manager{c}, podhealthcr.CheckersOptions{}) // as run does
	require.NoError(t, err)
	r := &Reconciler{Manager: manager{c}, Checkers: checkers}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}}

	_, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	var pods corev1.PodList
	require.NoError(t, c.List(context.Background(), &pods, client.InNamespace("default")))
	require.Len(t, pods.Items, 1, "the dead pod is gone and one replacement exists")
	replacement := pods.Items[0]
	require.NotEqual(t, dead.UID, replacement.UID)
	require.Equal(t, "registry.example/web:1", replacement.Spec.Containers[0].Image)
	require.Equal(t, "web", replacement.Labels["app"])
	require.True(t, metav1.IsControlledBy(&replacement, app), "owned by the app, so Owns(&corev1.Pod{}) reconciles it")

	// The replacement has no node and no status yet: it is alive, so a
	// second reconcile creates nothing.
	_, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	require.NoError(t, c.List(context.Background(), &pods, client.InNamespace("default")))
	require.Len(t, pods.Items, 1)
}
