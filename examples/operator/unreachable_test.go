package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/replacements"
)

// alivePod is the fixture of a running pod of workload "registry", renamed,
// created at the given time on the given node.
func alivePod(t testing.TB, name, node string, created time.Time) *corev1.Pod {
	pod := fixture(t, "pod-alive.json", "registry")
	pod.Name, pod.UID, pod.Spec.NodeName = name, types.UID("uid-"+name), node
	pod.CreationTimestamp = metav1.NewTime(created)
	return pod
}

func withReady(pod *corev1.Pod) *corev1.Pod {
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	return pod
}

// unreachableConfig is the test config with --replace-unreachable.
func unreachableConfig() config {
	cfg := testConfig()
	cfg.ReplaceUnreachable = true
	return cfg
}

// newControllerWithNodes returns a controller over lister whose checkers
// read nodes from a synced informer over a clientset that holds nodes, as
// the real node cache (the lost node as a control plane left it, and a
// healthy one).
func newControllerWithNodes(t *testing.T, cfg config, client *fake.Clientset, pods []*corev1.Pod, recorder record.EventRecorder) *controller {
	t.Helper()
	c, _ := newControllerWithNodesAndPodIndex(t, cfg, client, pods, recorder)
	return c
}

// newControllerWithNodesAndPodIndex is newControllerWithNodes that also
// returns the pod lister's indexer, for a test that plays the cache
// catching up.
func newControllerWithNodesAndPodIndex(t *testing.T, cfg config, client *fake.Clientset, pods []*corev1.Pod, recorder record.EventRecorder) (*controller, cache.Indexer) {
	t.Helper()
	nodeClient := fake.NewClientset(testutil.LoadNode(t, "node-lost.json"), testutil.LoadNode(t, "node-healthy.json"))
	factory := informers.NewSharedInformerFactory(nodeClient, 0)
	nodes := factory.Core().V1().Nodes()
	nodes.Informer() // registers it before Start
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(factory.Shutdown) // after cancel: cleanups run last first
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced))
	lister, idx := staleLister(t, pods...)
	c, err := newController(cfg, client, lister, nodes, recorder, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(c.queue.ShutDown)
	return c, idx
}

func TestSyncReplacesThePodOfAnUnreachableNodeWithoutDeletingIt(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	stranded := alivePod(t, "stranded", "node-lost", now)
	stateful := alivePod(t, "db-0", "node-lost", now)
	stateful.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid"}}
	tests := []struct {
		name        string
		cfg         config
		pod         *corev1.Pod
		wantCreates int
	}{
		{"--replace-unreachable: a replacement at once", unreachableConfig(), stranded, 1},
		{"policy off: the pod counts as alive, nothing created", testConfig(), stranded, 0},
		{"--replace-unreachable, StatefulSet pod: no early replacement", unreachableConfig(), stateful, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newFakeClient(tt.pod)
			c := newControllerWithNodes(t, tt.cfg, client, []*corev1.Pod{tt.pod}, record.NewFakeRecorder(100))
			require.NoError(t, c.sync(context.Background(), "registry"))
			require.Len(t, podActions(client, "create"), tt.wantCreates)
			require.Empty(t, podActions(client, "delete"), "nothing is deleted on unreachable evidence")
		})
	}
}

// TestSyncWaitsUnreachableForAndChecksAgainThen: with --unreachable-for
// the first sync creates nothing and puts the workload back on the queue
// for when the wait ends; the sync then creates the replacement.
func TestSyncWaitsUnreachableForAndChecksAgainThen(t *testing.T) {
	pod := alivePod(t, "stranded", "node-lost", time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC))
	client := newFakeClient(pod)
	// The fixture node has been unreachable since 2026-11-29T16:40:16Z;
	// this controller starts two hours later and has not seen it yet.
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 29, 18, 40, 16, 0, time.UTC))
	cfg := unreachableConfig()
	cfg.UnreachableFor, cfg.Clock = 5*time.Minute, clk
	c := newControllerWithNodes(t, cfg, client, []*corev1.Pod{pod}, record.NewFakeRecorder(100))

	require.NoError(t, c.sync(context.Background(), "registry"))
	require.Empty(t, podActions(client, "create"), "seen unreachable for less than 5 minutes")
	require.Equal(t, 0, c.queue.Len())
	clk.Step(5*time.Minute - time.Second)
	require.Never(t, func() bool { return c.queue.Len() > 0 }, 100*time.Millisecond, 10*time.Millisecond, "not before the wait ends")
	clk.Step(time.Second)
	require.Eventually(t, func() bool { return c.queue.Len() == 1 }, 5*time.Second, 10*time.Millisecond, "checked again when the wait ends")

	require.NoError(t, c.sync(context.Background(), "registry"))
	require.Len(t, podActions(client, "create"), 1)
	require.Empty(t, podActions(client, "delete"))
}

func TestSyncDeletesSurplusLivePodsGracefully(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		cfg         config
		pods        []*corev1.Pod
		wantDeleted []string
	}{
		{"node came back: the old pod goes, the newest stays", unreachableConfig(),
			[]*corev1.Pod{alivePod(t, "old", "node-healthy", t0), alivePod(t, "new", "node-healthy", t0.Add(time.Minute))}, []string{"old"}},
		{"a Ready pod is kept before a newer one that is not", unreachableConfig(),
			[]*corev1.Pod{withReady(alivePod(t, "old", "node-healthy", t0)), alivePod(t, "new", "node-healthy", t0.Add(time.Minute))}, []string{"new"}},
		{"three live pods: the two older go", unreachableConfig(),
			[]*corev1.Pod{alivePod(t, "a", "node-healthy", t0), alivePod(t, "b", "node-healthy", t0.Add(time.Second)), alivePod(t, "c", "node-healthy", t0.Add(2*time.Second))}, []string{"b", "a"}},
		{"one live pod and one still unreachable: nothing to delete", unreachableConfig(),
			[]*corev1.Pod{alivePod(t, "old", "node-lost", t0), alivePod(t, "new", "node-healthy", t0.Add(time.Minute))}, nil},
		{"policy off: surplus pods are left alone", testConfig(),
			[]*corev1.Pod{alivePod(t, "old", "node-healthy", t0), alivePod(t, "new", "node-healthy", t0.Add(time.Minute))}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newFakeClient(tt.pods...)
			rec := record.NewFakeRecorder(100)
			c := newControllerWithNodes(t, tt.cfg, client, tt.pods, rec)
			require.NoError(t, c.sync(context.Background(), "registry"))
			var deleted []string
			for _, a := range podActions(client, "delete") {
				d := a.(k8stesting.DeleteActionImpl)
				deleted = append(deleted, d.GetName())
				opts := d.GetDeleteOptions()
				require.Nil(t, opts.GracePeriodSeconds, "graceful: the pod's own grace period")
				require.NotNil(t, opts.Preconditions)
				require.Equal(t, types.UID("uid-"+d.GetName()), *opts.Preconditions.UID)
			}
			require.Equal(t, tt.wantDeleted, deleted)
			require.Empty(t, podActions(client, "create"))
			require.Len(t, rec.Events, len(tt.wantDeleted))
			for range tt.wantDeleted {
				require.Contains(t, <-rec.Events, ReasonDeletedSurplus)
			}
		})
	}
}

func TestSurplusDeleteOfAPodAlreadyGoneIsNoError(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	pods := []*corev1.Pod{alivePod(t, "old", "node-healthy", t0), alivePod(t, "new", "node-healthy", t0.Add(time.Minute))}
	for _, tt := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"NotFound", apierrors.NewNotFound(corev1.Resource("pods"), "old"), false},
		{"Conflict: the name belongs to a newer pod", apierrors.NewConflict(corev1.Resource("pods"), "old", errors.New("uid precondition")), false},
		{"server error: retried", apierrors.NewInternalError(errors.New("etcd")), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := newFakeClient(pods...)
			client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tt.err })
			c := newControllerWithNodes(t, unreachableConfig(), client, pods, record.NewFakeRecorder(100))
			err := c.sync(context.Background(), "registry")
			if tt.wantErr {
				require.ErrorIs(t, err, tt.err)
			} else {
				require.NoError(t, err)
			}
		})
	}
}

func TestSurplusInDryRunDeletesNothing(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	pods := []*corev1.Pod{alivePod(t, "old", "node-healthy", t0), alivePod(t, "new", "node-healthy", t0.Add(time.Minute))}
	client := newFakeClient(pods...)
	cfg := unreachableConfig()
	cfg.DryRun = true
	c := newControllerWithNodes(t, cfg, client, pods, record.NewFakeRecorder(100))
	require.NoError(t, c.sync(context.Background(), "registry"))
	require.Empty(t, podActions(client, "delete"))
}

func TestReplaceUnreachableNeedsNodeEvidence(t *testing.T) {
	lister, _ := staleLister(t)
	_, err := newController(unreachableConfig(), newFakeClient(), lister, nil, record.NewFakeRecorder(1), logr.Discard())
	require.ErrorContains(t, err, "needs node evidence")
}

// TestNodeEventsEnqueueWhenTheUnreachableTaintChanges: the node-lifecycle
// controller sets Ready=Unknown first and the NoExecute taint a moment
// later; the pods become Unreachable only with the taint, so its arrival
// and its removal are events of their own.
func TestNodeEventsEnqueueWhenTheUnreachableTaintChanges(t *testing.T) {
	pod := alivePod(t, "p", "node-lost", time.Now())
	lister, _ := staleLister(t, pod)
	c := newTestController(t, testConfig(), newFakeClient(), lister, logr.Discard())
	lost := testutil.LoadNode(t, "node-lost.json")
	untainted := lost.DeepCopy()
	untainted.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}}
	for _, tt := range []struct {
		name     string
		old, new *corev1.Node
		want     int
	}{
		{"NoExecute taint added", untainted, lost, 1},
		{"NoExecute taint removed", lost, untainted, 1},
		{"nothing changed", lost, lost.DeepCopy(), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c.nodeEventHandler().OnUpdate(tt.old, tt.new)
			require.Equal(t, tt.want, c.queue.Len())
			for c.queue.Len() > 0 {
				w, _ := c.queue.Get()
				c.queue.Done(w)
			}
		})
	}
}

func TestKeepFirstOrder(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	older, newer := alivePod(t, "a", "n", t0), alivePod(t, "b", "n", t0.Add(time.Second))
	sameTime := alivePod(t, "c", "n", t0)
	require.True(t, keepFirst(newer, older), "newest first")
	require.False(t, keepFirst(older, newer))
	require.True(t, keepFirst(withReady(older.DeepCopy()), newer), "Ready before newer")
	require.True(t, keepFirst(sameTime, older), "same time: by name, so the order is total")
	require.False(t, keepFirst(older, sameTime))
}

// TestSurplusPodIsDeletedOnceWhileTheCacheLags: a graceful delete only sets
// the pod's deletionTimestamp, and a check may run before the cache shows
// it. That check must not delete the pod again; once the cache shows it
// terminating the record ends, and if the cache never does, the pod is
// deleted again after replacements.DefaultTTL, not before.
func TestSurplusPodIsDeletedOnceWhileTheCacheLags(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	pods := []*corev1.Pod{alivePod(t, "old", "node-healthy", t0), alivePod(t, "new", "node-healthy", t0.Add(time.Minute))}
	ctx := context.Background()

	t.Run("cache lags: one delete, again only after the TTL", func(t *testing.T) {
		client := newFakeClient(pods...)
		clk := testingclock.NewFakeClock(t0.Add(time.Hour))
		cfg := unreachableConfig()
		cfg.Clock = clk
		c := newControllerWithNodes(t, cfg, client, pods, record.NewFakeRecorder(100))
		require.NoError(t, c.sync(ctx, "registry"))
		require.NoError(t, c.sync(ctx, "registry"), "the lister still lists old alive")
		require.Len(t, podActions(client, "delete"), 1, "deleted again while the cache lags")

		clk.Step(replacements.DefaultTTL - time.Second)
		require.NoError(t, c.sync(ctx, "registry"))
		require.Len(t, podActions(client, "delete"), 1, "deleted again before the TTL")
		require.Zero(t, c.queue.Len(), "checked again before the record ends")

		clk.Step(time.Second)
		require.Eventually(t, func() bool { return c.queue.Len() == 1 }, 5*time.Second, 10*time.Millisecond, "no check was scheduled for the end of the record")
		require.NoError(t, c.sync(ctx, "registry"))
		require.Len(t, podActions(client, "delete"), 2, "not deleted again once the record expired")
	})

	t.Run("cache shows the pod terminating: the record ends", func(t *testing.T) {
		client := newFakeClient(pods...)
		cfg := unreachableConfig()
		cfg.Clock = testingclock.NewFakeClock(t0.Add(time.Hour))
		c, idx := newControllerWithNodesAndPodIndex(t, cfg, client, pods, record.NewFakeRecorder(100))
		require.NoError(t, c.sync(ctx, "registry"))
		require.Len(t, podActions(client, "delete"), 1)

		terminating := pods[0].DeepCopy()
		terminating.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Hour)}
		require.NoError(t, idx.Update(terminating))
		require.NoError(t, c.sync(ctx, "registry"))
		require.Empty(t, c.surplus.pending("registry", pods), "still remembered after the cache showed it terminating")
		require.Len(t, podActions(client, "delete"), 1, "a terminating pod is not surplus")
	})
}
