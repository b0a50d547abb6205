package fakeapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/health"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
	"github.com/podhealth/podhealth/podsource/fake"
)

type manager struct{ c client.Client }

func (m manager) GetClient() client.Client    { return m.c }
func (m manager) GetAPIReader() client.Reader { return m.c }

// TestFailNodeAndEvictPodLeaveWhatACheckerRecoversFrom: on a client seeded
// with a Ready node and a running pod, FailNode and EvictPod leave the
// node unreachable and the pod Terminating with the taint manager's
// condition, both written through the status subresource; a Checker built
// by the adapter then force-deletes the pod.
func TestFailNodeAndEvictPodLeaveWhatACheckerRecoversFrom(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	web := pod("web-0", "node-a")
	web.Labels = map[string]string{"app": "web"}
	c, err := fakeapi.NewClient(fake.ReadyNode("node-a", now.Add(-time.Hour)), web)
	require.NoError(t, err)

	require.NoError(t, fakeapi.FailNode(ctx, c, "node-a", now))
	var node corev1.Node
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "node-a"}, &node))
	require.Equal(t, health.NodeUnreachable, health.NodeStateOf(&node), "conditions and taints both written")

	require.NoError(t, fakeapi.EvictPod(ctx, c, client.ObjectKeyFromObject(web), now))
	evicted, err := get(t, c, "web-0")
	require.NoError(t, err)
	require.NotNil(t, evicted.DeletionTimestamp, "Terminating: no kubelet confirms the delete")
	require.Len(t, evicted.Status.Conditions, 1)
	require.Equal(t, "DeletionByTaintManager", evicted.Status.Conditions[0].Reason)

	checkers, err := crh.NewCheckers(manager{c}, crh.CheckersOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checker, err := checkers.For("default", labels.SelectorFromSet(labels.Set{"app": "web"}), crh.CheckOptions{})
	require.NoError(t, err)
	report, err := checker.CheckReport(ctx)
	require.NoError(t, err)
	require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome, "%+v", report.Pods[0].Verdict)
	_, err = get(t, c, "web-0")
	require.True(t, client.IgnoreNotFound(err) == nil && err != nil, "the pod is gone: %v", err)
}

// TestAPlainUpdateDropsAStatusChange pins what the package documents: the
// client keeps a Pod's and a Node's status apart, as the API server does,
// so a test that writes status with Update loses it silently; Status().Update
// keeps it.
func TestAPlainUpdateDropsAStatusChange(t *testing.T) {
	ctx := context.Background()
	c, err := fakeapi.NewClient(pod("web-0", "node-a"))
	require.NoError(t, err)
	p, err := get(t, c, "web-0")
	require.NoError(t, err)
	p.Status.Phase = corev1.PodFailed
	require.NoError(t, c.Update(ctx, p))
	p, err = get(t, c, "web-0")
	require.NoError(t, err)
	require.Empty(t, p.Status.Phase, "Update dropped the status change")

	p.Status.Phase = corev1.PodFailed
	require.NoError(t, c.Status().Update(ctx, p))
	p, err = get(t, c, "web-0")
	require.NoError(t, err)
	require.Equal(t, corev1.PodFailed, p.Status.Phase)
}

func TestEvictPodRefusesAPodOnNoNode(t *testing.T) {
	c, err := fakeapi.NewClient(pod("pending", ""))
	require.NoError(t, err)
	require.ErrorContains(t, fakeapi.EvictPod(context.Background(), c, client.ObjectKey{Namespace: "default", Name: "pending"}, time.Now()), "not bound to a node")
}
