package kube_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

// wire builds a Checker the way a controller does: lister source, scoped
// deleter and event observer, all over client.
func wire(t testing.TB, client *fake.Clientset, lister corelisters.PodLister, opts health.Options) *health.Checker {
	t.Helper()
	src, err := kube.NewListerSource(lister, "default", registry)
	require.NoError(t, err)
	del, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: registry})
	require.NoError(t, err)
	obs, err := kube.NewEventObserver(newBroadcastRecorder(t, client), kube.EventObserverOptions{})
	require.NoError(t, err)
	opts.Observer = obs
	c, err := health.New(src, del, opts)
	require.NoError(t, err)
	return c
}

func TestCheckerOverInformerDeletesTheTaintEvictedPodOnceAndStaysHealthy(t *testing.T) {
	client := fake.NewClientset(objects(allFixturePods(t)...)...)
	client.PrependReactor("delete", "pods", uidPrecondition(t, client))
	lister := startPodInformer(t, client, "default")
	checker := wire(t, client, lister, health.Options{})
	ctx := context.Background()

	cachedBefore := map[string]*corev1.Pod{}
	for _, name := range []string{"alive", "drained", "user-deleted"} {
		p, err := lister.Pods("default").Get(name)
		require.NoError(t, err)
		cachedBefore[name] = p.DeepCopy()
	}

	start := len(client.Actions())
	report, err := checker.CheckReport(ctx)
	require.NoError(t, err)
	require.True(t, report.Healthy, "an alive pod exists")
	outcomes := map[string]health.Outcome{}
	for _, p := range report.Pods {
		outcomes[p.Pod.Name] = p.Outcome
	}
	require.Equal(t, map[string]health.Outcome{
		"alive": health.NoAction, "taint-evicted": health.ForceDeleted, "drained": health.NoAction, "user-deleted": health.NoAction,
	}, outcomes)
	require.Equal(t, []string{"delete pods"}, podVerbs(client, start), "pod requests sent by the first check")
	require.Equal(t, "taint-evicted", deleteActions(client)[0].GetName())

	// The cache catches up; the next check sends nothing at all.
	require.Eventually(t, func() bool {
		_, err := lister.Pods("default").Get("taint-evicted")
		return apierrors.IsNotFound(err)
	}, eventually, tick)
	start = len(client.Actions())
	healthy, err := checker.Check(ctx)
	require.NoError(t, err)
	require.True(t, healthy)
	require.Empty(t, podVerbs(client, start), "pod requests sent by a check with nothing to delete")

	ev := waitForEvents(t, client, "default", 1)[0]
	require.Equal(t, podsource.ReasonForceDeleted, ev.Reason)
	require.Equal(t, "taint-evicted", ev.InvolvedObject.Name)

	for name, before := range cachedBefore {
		p, err := lister.Pods("default").Get(name)
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(before, p), "cached pod %s changed", name)
	}
}

// TestCheckerOverLaggingListerDoesNotDeleteTwice uses a lister that is
// never told about the delete, as a lagging informer: the Memory keeps
// the second check from sending another DELETE.
func TestCheckerOverLaggingListerDoesNotDeleteTwice(t *testing.T) {
	pods := allFixturePods(t)
	client := fake.NewClientset(objects(pods...)...)
	indexer := podIndexer()
	for _, p := range pods {
		require.NoError(t, indexer.Add(p))
	}
	checker := wire(t, client, corelisters.NewPodLister(indexer), health.Options{})

	for i := range 3 {
		healthy, err := checker.Check(context.Background())
		require.NoError(t, err, "check %d", i)
		require.True(t, healthy, "check %d", i)
	}
	require.Len(t, deleteActions(client), 1, "DELETEs sent over three checks of a stale cache")
}

func TestCheckerOverInformerWithOnlyADeadPodAsksForAReplacement(t *testing.T) {
	client := fake.NewClientset(objects(loadPod(t, podTaintEvicted), loadPod(t, podDrained))...)
	lister := startPodInformer(t, client, "default")
	checker := wire(t, client, lister, health.Options{})

	healthy, err := checker.Check(context.Background())
	require.NoError(t, err)
	require.False(t, healthy, "no pod is alive")
	require.Len(t, deleteActions(client), 1)
}

func TestCheckerDryRunOverInformerRecordsWouldForceDeleteAndSendsNothing(t *testing.T) {
	client := fake.NewClientset(objects(allFixturePods(t)...)...)
	lister := startPodInformer(t, client, "default")
	checker := wire(t, client, lister, health.Options{DryRun: true})

	start := len(client.Actions())
	healthy, err := checker.Check(context.Background())
	require.NoError(t, err)
	require.True(t, healthy)
	ev := waitForEvents(t, client, "default", 1)[0]
	require.Equal(t, podsource.ReasonWouldForceDelete, ev.Reason)
	require.Empty(t, podVerbs(client, start), "pod requests sent by a dry run")
}
