package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/internal/testutil/informertest"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/replacements"
)

// fixture loads a pod captured from a real control plane and makes it a
// pod of workload w.
func fixture(t testing.TB, file, w string) *corev1.Pod {
	t.Helper()
	pod := testutil.LoadPod(t, file)
	pod.Labels = map[string]string{WorkloadLabel: w}
	return pod
}

func testConfig() config {
	return config{Namespace: "default", Workloads: []string{"registry"}, Image: "quay.io/example/registry:v2", TolerationSeconds: 30}
}

// newFakeClient returns a clientset holding pods that, like the API
// server, gives each created pod a name from its generateName and a UID.
func newFakeClient(pods ...*corev1.Pod) *fake.Clientset {
	objs := make([]runtime.Object, len(pods))
	for i, p := range pods {
		objs[i] = p.DeepCopy()
	}
	client := fake.NewClientset(objs...)
	var n atomic.Int64
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		create := action.(k8stesting.CreateAction)
		pod := create.GetObject().(*corev1.Pod).DeepCopy()
		if pod.Name == "" && pod.GenerateName != "" {
			i := n.Add(1)
			pod.Name = fmt.Sprintf("%sr%04d", pod.GenerateName, i)
			pod.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		}
		if err := client.Tracker().Create(create.GetResource(), pod, create.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, pod, nil
	})
	return client
}

// staleLister is a lister that sees only what the test puts in it: a cache
// that lags as much as the test wants.
func staleLister(t testing.TB, pods ...*corev1.Pod) (corelisters.PodLister, cache.Indexer) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		require.NoError(t, idx.Add(p.DeepCopy()))
	}
	return corelisters.NewPodLister(idx), idx
}

func newTestController(t testing.TB, cfg config, client *fake.Clientset, lister corelisters.PodLister, log logr.Logger) *controller {
	t.Helper()
	c, err := newController(cfg, client, lister, nil, record.NewFakeRecorder(100), log)
	require.NoError(t, err)
	t.Cleanup(c.queue.ShutDown)
	return c
}

func podActions(client *fake.Clientset, verb string) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "pods" && a.GetVerb() == verb {
			out = append(out, a)
		}
	}
	return out
}

func TestSyncForceDeletesTheDeadPodAndCreatesOneReplacement(t *testing.T) {
	dead := fixture(t, "pod-taint-evicted.json", "registry")
	client := newFakeClient(dead)
	lister, _ := staleLister(t, dead)
	c := newTestController(t, testConfig(), client, lister, logr.Discard())

	require.NoError(t, c.sync(context.Background(), "registry"))

	deletes := podActions(client, "delete")
	require.Len(t, deletes, 1)
	require.Equal(t, "taint-evicted", deletes[0].(k8stesting.DeleteActionImpl).GetName())
	require.Equal(t, ptr.To[int64](0), deletes[0].(k8stesting.DeleteActionImpl).GetDeleteOptions().GracePeriodSeconds)

	creates := podActions(client, "create")
	require.Len(t, creates, 1)
	got := creates[0].(k8stesting.CreateAction).GetObject().(*corev1.Pod)
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "registry-", Namespace: "default", Labels: map[string]string{WorkloadLabel: "registry"}},
		Spec: corev1.PodSpec{
			Containers:    []corev1.Container{{Name: "workload", Image: "quay.io/example/registry:v2"}},
			RestartPolicy: corev1.RestartPolicyAlways,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
			},
		},
	}
	require.Empty(t, cmp.Diff(want, got), "replacement pod (-want +got)")
}

// TestSyncWithLaggingCacheDoesNotCreateASecondReplacement: the lister
// still shows the dead pod and not the replacement, as an informer would
// a moment after the first sync; the next syncs create nothing more, and
// the expectation ends when the replacement is seen.
func TestSyncWithLaggingCacheDoesNotCreateASecondReplacement(t *testing.T) {
	dead := fixture(t, "pod-taint-evicted.json", "registry")
	client := newFakeClient(dead)
	lister, idx := staleLister(t, dead)
	c := newTestController(t, testConfig(), client, lister, logr.Discard())
	ctx := context.Background()

	for i := range 3 {
		require.NoError(t, c.sync(ctx, "registry"), "sync %d", i)
	}
	require.Len(t, podActions(client, "create"), 1, "creates over three syncs of a lagging cache")
	require.Len(t, podActions(client, "delete"), 1, "deletes over three syncs of a lagging cache")

	// The informer catches up: the dead pod goes, the replacement comes.
	created, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, created.Items, 1)
	require.NoError(t, idx.Delete(dead))
	require.NoError(t, idx.Add(&created.Items[0]))
	for _, h := range c.eventHandlers() {
		h.OnAdd(&created.Items[0], false)
	}
	require.NoError(t, c.sync(ctx, "registry"))
	require.Len(t, podActions(client, "create"), 1, "a replacement was created while one is alive")
	require.Zero(t, c.expect.Pending("registry", nil), "the replacement was still remembered after a check listed it")
}

// TestSyncReplacesAReplacementThatWasListedAndThenWentAway: once a check
// lists the replacement, the tracker forgets it, so that when that pod goes
// away too the next sync replaces it at once instead of waiting for the
// tracker's TTL.
func TestSyncReplacesAReplacementThatWasListedAndThenWentAway(t *testing.T) {
	client := newFakeClient()
	lister, idx := staleLister(t)
	c := newTestController(t, testConfig(), client, lister, logr.Discard())
	ctx := context.Background()

	require.NoError(t, c.sync(ctx, "registry"))
	require.Len(t, podActions(client, "create"), 1)
	created, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, created.Items, 1)
	replacement := created.Items[0].DeepCopy()
	replacement.Status.Phase = corev1.PodRunning
	require.NoError(t, idx.Add(replacement))
	require.NoError(t, c.sync(ctx, "registry")) // healthy: the tracker sees it listed
	require.Len(t, podActions(client, "create"), 1, "created while the replacement is alive")

	require.NoError(t, idx.Delete(replacement)) // it went away as well
	require.NoError(t, c.sync(ctx, "registry"))
	require.Len(t, podActions(client, "create"), 2, "the replacement that went away was not replaced at once")
}

func TestSyncCreatesAgainWhenTheReplacementNeverShowsUp(t *testing.T) {
	client := newFakeClient()
	lister, _ := staleLister(t)
	c := newTestController(t, testConfig(), client, lister, logr.Discard())
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC))
	c.expect = replacements.New(replacements.Options{Clock: clk, TTL: time.Minute})
	ctx := context.Background()

	require.NoError(t, c.sync(ctx, "registry"))
	clk.SetTime(clk.Now().Add(59 * time.Second))
	require.NoError(t, c.sync(ctx, "registry"))
	require.Len(t, podActions(client, "create"), 1, "created again before the expectation timed out")
	clk.SetTime(clk.Now().Add(time.Second))
	require.NoError(t, c.sync(ctx, "registry"))
	require.Len(t, podActions(client, "create"), 2, "still waiting after the expectation timed out")
}

func TestSyncHoldsBackOverTheBudgetAndChecksAgainWhenItAllows(t *testing.T) {
	dead := fixture(t, "pod-taint-evicted.json", "registry")
	dead2 := fixture(t, "pod-taint-evicted.json", "registry")
	dead2.Name, dead2.UID = "taint-evicted-2", "3c0c8989-7032-484b-9396-d2330489e1d0"
	client := newFakeClient(dead, dead2)
	lister, _ := staleLister(t, dead, dead2)
	cfg := testConfig()
	cfg.MaxForceDeletesPerMinute = 1
	fakeClock := testingclock.NewFakeClock(time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC))
	cfg.Clock = fakeClock
	rec := record.NewFakeRecorder(10)
	c, err := newController(cfg, client, lister, nil, rec, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(c.queue.ShutDown)

	require.NoError(t, c.sync(context.Background(), "registry"))
	require.Len(t, podActions(client, "delete"), 1, "DELETEs sent with a budget of one")
	require.Len(t, podActions(client, "create"), 1, "no pod is alive, so a replacement is due")
	var reasons []string
	for len(rec.Events) > 0 {
		e := <-rec.Events
		reasons = append(reasons, strings.Fields(e)[1])
	}
	require.ElementsMatch(t, []string{podsource.ReasonForceDeleted, podsource.ReasonHeldBack, ReasonCreatedReplacement}, reasons)

	require.Zero(t, c.queue.Len(), "requeued before the budget allows another delete")
	fakeClock.Step(time.Minute)
	require.Eventually(t, func() bool { return c.queue.Len() == 1 }, 5*time.Second, 10*time.Millisecond,
		"not requeued when the budget allowed another delete")
}

func TestSyncLeavesAHealthyWorkloadAlone(t *testing.T) {
	pods := []*corev1.Pod{
		fixture(t, "pod-alive.json", "registry"),
		fixture(t, "pod-drained.json", "registry"),
		fixture(t, "pod-user-deleted.json", "registry"),
	}
	client := newFakeClient(pods...)
	lister, _ := staleLister(t, pods...)
	c := newTestController(t, testConfig(), client, lister, logr.Discard())

	require.NoError(t, c.sync(context.Background(), "registry"))
	require.Empty(t, client.Actions(), "a healthy workload with only gracefully terminating pods besides must cost no request")
}

func TestSyncOnlyTouchesItsOwnWorkload(t *testing.T) {
	other := fixture(t, "pod-taint-evicted.json", "mirror")
	alive := fixture(t, "pod-alive.json", "registry")
	cfg := testConfig()
	cfg.Workloads = []string{"registry", "mirror"}
	client := newFakeClient(other, alive)
	lister, _ := staleLister(t, other, alive)
	c := newTestController(t, cfg, client, lister, logr.Discard())

	require.NoError(t, c.sync(context.Background(), "registry"))
	require.Empty(t, client.Actions(), "syncing registry acted on mirror's pods")
	require.NoError(t, c.sync(context.Background(), "unknown"))
	require.Empty(t, client.Actions())
}

func TestSyncDryRunChangesNothing(t *testing.T) {
	dead := fixture(t, "pod-taint-evicted.json", "registry")
	cfg := testConfig()
	cfg.DryRun = true
	client := newFakeClient(dead)
	lister, _ := staleLister(t, dead)
	var lines []string
	c := newTestController(t, cfg, client, lister, funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{}))

	require.NoError(t, c.sync(context.Background(), "registry"))
	require.Empty(t, client.Actions())
	require.Len(t, lines, 2, "log lines: %q", lines)
	require.Contains(t, lines[0], `"msg"="would force-delete pod"`)
	require.Contains(t, lines[1], `"msg"="would create replacement pod (dry run)"`)
}

func TestSyncLogsForceDeleteAndReplacement(t *testing.T) {
	dead := fixture(t, "pod-taint-evicted.json", "registry")
	client := newFakeClient(dead)
	lister, _ := staleLister(t, dead)
	var lines []string
	c := newTestController(t, testConfig(), client, lister, funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{}))

	require.NoError(t, c.sync(context.Background(), "registry"))
	require.Len(t, lines, 2, "log lines: %q", lines)
	require.Contains(t, lines[0], `"msg"="force-deleted pod"`)
	require.Contains(t, lines[0], `"workload"="registry"`)
	require.Contains(t, lines[0], `"pod"="default/taint-evicted"`)
	require.Contains(t, lines[1], `"msg"="created replacement pod"`)
	require.Contains(t, lines[1], `"name"="registry-r0001"`)
}

func TestProcessNextRequeuesWithBackoffOnError(t *testing.T) {
	dead := fixture(t, "pod-taint-evicted.json", "registry")
	client := newFakeClient(dead)
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
	})
	lister, _ := staleLister(t, dead)
	c := newTestController(t, testConfig(), client, lister, logr.Discard())

	c.queue.Add("registry")
	require.True(t, c.processNext(context.Background()))
	require.Equal(t, 1, c.queue.NumRequeues("registry"), "the failed sync was not requeued with backoff")
	require.Empty(t, podActions(client, "create"), "a replacement was created although a dead pod could not be deleted")
}

func TestEventHandlersEnqueueOnlyManagedWorkloads(t *testing.T) {
	client := newFakeClient()
	lister, _ := staleLister(t)
	cfg := testConfig()
	c := newTestController(t, cfg, client, lister, logr.Discard())
	elsewhere := fixture(t, "pod-alive.json", "registry")
	elsewhere.Namespace = "kube-system"
	unlabelled := fixture(t, "pod-alive.json", "registry")
	unlabelled.Labels = nil

	tests := []struct {
		name string
		fire func(h cache.ResourceEventHandler)
		want int
	}{
		{"add of a managed pod", func(h cache.ResourceEventHandler) { h.OnAdd(fixture(t, "pod-alive.json", "registry"), true) }, 1},
		{"update to dead", func(h cache.ResourceEventHandler) {
			h.OnUpdate(fixture(t, "pod-alive.json", "registry"), fixture(t, "pod-taint-evicted.json", "registry"))
		}, 1},
		{"delete tombstone", func(h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/alive", Obj: fixture(t, "pod-alive.json", "registry")})
		}, 1},
		{"pod of an unmanaged workload", func(h cache.ResourceEventHandler) { h.OnAdd(fixture(t, "pod-alive.json", "other"), true) }, 0},
		{"pod of another namespace", func(h cache.ResourceEventHandler) { h.OnAdd(elsewhere, true) }, 0},
		{"pod without the label", func(h cache.ResourceEventHandler) { h.OnAdd(unlabelled, true) }, 0},
		{"not a pod", func(h cache.ResourceEventHandler) { h.OnDelete(&corev1.Node{}) }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Zero(t, c.queue.Len())
			for _, h := range c.eventHandlers() {
				require.NotPanics(t, func() { tt.fire(h) })
			}
			require.Equal(t, tt.want, c.queue.Len())
			for c.queue.Len() > 0 {
				w, _ := c.queue.Get()
				require.Equal(t, "registry", w)
				c.queue.Done(w)
			}
		})
	}
}

// TestRunOverInformerReplacesTheDeadPodAndStopsCleanly runs the whole
// controller over an informer, as main does, until its context ends.
func TestRunOverInformerReplacesTheDeadPodAndStopsCleanly(t *testing.T) {
	dead := fixture(t, "pod-taint-evicted.json", "registry")
	client := newFakeClient(dead)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c *controller
	pods := startInformer(t, client, func(lister corelisters.PodLister) *controller {
		c = newTestController(t, testConfig(), client, lister, logr.Discard())
		return c
	})

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.run(ctx, 2, time.Hour)
	}()

	require.Eventually(t, func() bool {
		list, err := pods.Lister().Pods("default").List(workloadSelector("registry"))
		require.NoError(t, err)
		return len(list) == 1 && list[0].Name == "registry-r0001"
	}, 5*time.Second, 10*time.Millisecond, "the cache never showed only the replacement")
	// With the replacement cached, a sync finds the workload healthy.
	require.NoError(t, c.sync(ctx, "registry"))
	require.Len(t, podActions(client, "create"), 1)
	require.Len(t, podActions(client, "delete"), 1)

	cancel()
	wg.Wait() // run returns once the queue is shut down and the workers are done
	require.True(t, c.queue.ShuttingDown())
}

// startInformer starts a pod informer over client as main does, with the
// handlers of the controller that build makes over its lister, and returns
// once the cache synced and the watch started (informertest.StartInformers).
func startInformer(t testing.TB, client *fake.Clientset, build func(corelisters.PodLister) *controller) coreinformers.PodInformer {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("default"),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = WorkloadLabel }))
	pods := factory.Core().V1().Pods()
	c := build(pods.Lister())
	for _, h := range c.eventHandlers() {
		_, err := pods.Informer().AddEventHandler(h)
		require.NoError(t, err)
	}
	informertest.StartInformers(t, client, factory, "pods")
	return pods
}

func TestParseNodeSelector(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "disk=ssd", want: map[string]string{"disk": "ssd"}},
		{in: "disk=ssd, zone = a ,", want: map[string]string{"disk": "ssd", "zone": "a"}},
		{in: "kubernetes.io/os=", want: map[string]string{"kubernetes.io/os": ""}},
		{in: "disk", wantErr: true},
		{in: "=ssd", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseNodeSelector(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Empty(t, cmp.Diff(tt.want, got))
		})
	}
}

func TestConfigValidateRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*config)
		wantErr string
	}{
		{"no workload", func(c *config) { c.Workloads = nil }, "no workload"},
		{"bad workload name", func(c *config) { c.Workloads = []string{"Registry"} }, `workload "Registry"`},
		{"duplicate workload", func(c *config) { c.Workloads = []string{"a", "a"} }, "given twice"},
		{"no image", func(c *config) { c.Image = "" }, "no image"},
		{"bad namespace", func(c *config) { c.Namespace = "" }, "namespace"},
		{"negative toleration", func(c *config) { c.TolerationSeconds = -1 }, "negative toleration"},
		{"negative delete limit", func(c *config) { c.MaxForceDeletesPerMinute = -1 }, "negative force delete limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			tt.change(&cfg)
			require.ErrorContains(t, cfg.validate(), tt.wantErr)
		})
	}
	require.NoError(t, testConfig().validate())
	dry := testConfig()
	dry.Image, dry.DryRun = "", true
	require.NoError(t, dry.validate(), "a dry run needs no image")
}

// catchingUpLister is a lister whose cache catches up right after a list:
// once armed, the first List adds pod to the cache after answering.
type catchingUpLister struct {
	corelisters.PodLister
	idx   cache.Indexer
	mu    sync.Mutex
	armed *corev1.Pod
}

func (l *catchingUpLister) Pods(namespace string) corelisters.PodNamespaceLister {
	return catchingUpNamespaceLister{l.PodLister.Pods(namespace), l}
}

type catchingUpNamespaceLister struct {
	corelisters.PodNamespaceLister
	l *catchingUpLister
}

func (n catchingUpNamespaceLister) List(selector labels.Selector) ([]*corev1.Pod, error) {
	pods, err := n.PodNamespaceLister.List(selector)
	n.l.mu.Lock()
	defer n.l.mu.Unlock()
	if n.l.armed != nil {
		_ = n.l.idx.Add(n.l.armed)
		n.l.armed = nil
	}
	return pods, err
}

// TestSyncDoesNotCreateASecondReplacementWhenTheCacheCatchesUpMidSync: the
// replacement reaches the cache between the check's list and the rest of
// the sync. The sync must not take the check's stale "no live pod" for a
// reason to create another one.
func TestSyncDoesNotCreateASecondReplacementWhenTheCacheCatchesUpMidSync(t *testing.T) {
	dead := fixture(t, "pod-taint-evicted.json", "registry")
	client := newFakeClient(dead)
	inner, idx := staleLister(t, dead)
	lister := &catchingUpLister{PodLister: inner, idx: idx}
	c := newTestController(t, testConfig(), client, lister, logr.Discard())
	ctx := context.Background()

	require.NoError(t, c.sync(ctx, "registry"))
	require.Len(t, podActions(client, "create"), 1)
	require.NoError(t, idx.Delete(dead)) // the force delete reached the cache
	created, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, created.Items, 1)
	lister.mu.Lock()
	lister.armed = &created.Items[0]
	lister.mu.Unlock()

	for range 3 {
		require.NoError(t, c.sync(ctx, "registry"))
	}
	require.Len(t, podActions(client, "create"), 1, "a second replacement was created")
}

func TestNodeEventsEnqueueTheWorkloadsWithAPodOnTheNode(t *testing.T) {
	onNode := fixture(t, "pod-alive.json", "registry")
	elsewhere := fixture(t, "pod-alive.json", "mirror")
	elsewhere.Name, elsewhere.UID, elsewhere.Spec.NodeName = "mirror-0", "5e1f3a52-0b7e-4a43-a1f4-0e7c1f0b6a11", "node-other"
	cfg := testConfig()
	cfg.Workloads = []string{"registry", "mirror"}
	lister, _ := staleLister(t, onNode, elsewhere)
	c := newTestController(t, cfg, newFakeClient(), lister, logr.Discard())
	node := testutil.LoadNode(t, "node-healthy.json")
	node.Name = onNode.Spec.NodeName
	notReady := node.DeepCopy()
	for i := range notReady.Status.Conditions {
		if notReady.Status.Conditions[i].Type == corev1.NodeReady {
			notReady.Status.Conditions[i].Status = corev1.ConditionUnknown
		}
	}
	beat := node.DeepCopy()
	beat.ResourceVersion += "1"

	tests := []struct {
		name string
		fire func(h cache.ResourceEventHandler)
		want []string
	}{
		{"node deleted", func(h cache.ResourceEventHandler) { h.OnDelete(node) }, []string{"registry"}},
		{"tombstone of a deleted node", func(h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: node.Name, Obj: node})
		}, []string{"registry"}},
		{"node stops being Ready", func(h cache.ResourceEventHandler) { h.OnUpdate(node, notReady) }, []string{"registry"}},
		{"node Ready again", func(h cache.ResourceEventHandler) { h.OnUpdate(notReady, node) }, []string{"registry"}},
		{"heartbeat", func(h cache.ResourceEventHandler) { h.OnUpdate(node, beat) }, nil},
		{"node added", func(h cache.ResourceEventHandler) { h.OnAdd(node, false) }, nil},
		{"node without pods deleted", func(h cache.ResourceEventHandler) {
			other := node.DeepCopy()
			other.Name = "node-empty"
			h.OnDelete(other)
		}, nil},
		{"not a node", func(h cache.ResourceEventHandler) { h.OnDelete(onNode) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Zero(t, c.queue.Len())
			require.NotPanics(t, func() { tt.fire(c.nodeEventHandler()) })
			var got []string
			for c.queue.Len() > 0 {
				w, _ := c.queue.Get()
				got = append(got, w)
				c.queue.Done(w)
			}
			require.Equal(t, tt.want, got)
		})
	}
}
