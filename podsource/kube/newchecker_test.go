package kube_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil/informertest"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

// TestNewCheckerWiresAWorkloadInOneCall builds the Checker of the fixture
// workload with kube.NewChecker, 10 s before the taint-evicted pod's
// deletion deadline, and shows what each choice of node evidence does:
// read live without a node informer (the lost node is read once and is not
// Ready, so the pod goes at once), from a node informer (also a Breaker),
// or none at all (the pod waits for its deadline, and RetryAfter says
// when). The recorder gets the force delete's event.
func TestNewCheckerWiresAWorkloadInOneCall(t *testing.T) {
	lost := loadNode(t, "node-lost.json")
	healthy := loadNode(t, "node-healthy.json") // a Breaker with every node down would hold the pod back
	evicted := loadPod(t, podTaintEvicted)
	tests := []struct {
		name          string
		opts          func(t *testing.T, client *fake.Clientset) kube.CheckerOptions
		wantOutcome   health.Outcome
		wantNodeGets  int
		wantRetry     time.Duration
		wantEventSeen bool
	}{
		{
			name:        "no node informer: the node is read live",
			opts:        func(*testing.T, *fake.Clientset) kube.CheckerOptions { return kube.CheckerOptions{} },
			wantOutcome: health.ForceDeleted, wantNodeGets: 1, wantEventSeen: true,
		},
		{
			name: "a node informer: its cache, and a Breaker over it",
			opts: func(t *testing.T, client *fake.Clientset) kube.CheckerOptions {
				factory := informers.NewSharedInformerFactory(client, 0)
				nodes := factory.Core().V1().Nodes()
				opts := kube.CheckerOptions{Nodes: nodes}
				_ = nodes.Informer() // registered before the factory starts
				informertest.StartInformers(t, client, factory, "nodes")
				return opts
			},
			wantOutcome: health.ForceDeleted, wantEventSeen: true,
		},
		{
			name: "no node evidence: the pod waits for its deadline",
			opts: func(*testing.T, *fake.Clientset) kube.CheckerOptions {
				return kube.CheckerOptions{NoNodeEvidence: true}
			},
			wantOutcome: health.NoAction, wantRetry: 10 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(lost.DeepCopy(), healthy.DeepCopy(), evicted.DeepCopy())
			lister := startPodInformer(t, client, "default")
			recorder := record.NewFakeRecorder(10)
			opts := tt.opts(t, client)
			opts.Recorder = recorder
			opts.Health.Clock = clocktesting.NewFakePassiveClock(evicted.DeletionTimestamp.Add(-10 * time.Second))
			before := len(client.Actions())
			checker, err := kube.NewChecker(client, lister, "default", registry, opts)
			require.NoError(t, err)

			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, tt.wantOutcome, report.Pods[0].Outcome, "%+v held back: %s", report.Pods[0].Verdict, report.Pods[0].HeldBack)
			require.Equal(t, tt.wantRetry, report.RetryAfter)
			gets := 0
			for _, v := range verbs(client, before) {
				if v == "get nodes" {
					gets++
				}
			}
			require.Equal(t, tt.wantNodeGets, gets, "live node reads")
			if tt.wantOutcome == health.ForceDeleted {
				require.Len(t, deleteActions(client), 1)
			} else {
				require.Empty(t, deleteActions(client))
			}
			require.Equal(t, tt.wantEventSeen, len(recorder.Events) == 1, "events recorded")

			// Every request it sent is one that PolicyRules and
			// EvidencePolicyRules grant, as NewChecker's doc says.
			cluster, namespaced := kube.EvidencePolicyRules()
			allowed := append(append(granted(kube.PolicyRules(), false), granted(cluster, true)...), granted(namespaced, false)...)
			for _, a := range client.Actions()[before:] {
				want := permission{a.GetVerb(), a.GetResource().Resource, a.GetNamespace() == ""}.String()
				require.Contains(t, allowed, want, "a request the documented rules do not grant")
			}
		})
	}
}

func TestNewCheckerRefusesWhatItsPartsRefuse(t *testing.T) {
	client := fake.NewClientset()
	lister := startPodInformer(t, client, "default")
	var nilClient *fake.Clientset
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"nil client", func() error {
			_, err := kube.NewChecker(nil, lister, "default", registry, kube.CheckerOptions{})
			return err
		}, "nil kubernetes.Interface"},
		{"typed nil client", func() error {
			_, err := kube.NewChecker(nilClient, lister, "default", registry, kube.CheckerOptions{})
			return err
		}, "nil kubernetes.Interface"},
		{"nil lister", func() error {
			_, err := kube.NewChecker(client, nil, "default", registry, kube.CheckerOptions{})
			return err
		}, "nil PodLister"},
		{"selector of every pod", func() error {
			_, err := kube.NewChecker(client, lister, "default", labels.Everything(), kube.CheckerOptions{})
			return err
		}, "selects every pod"},
		{"no namespace", func() error {
			_, err := kube.NewChecker(client, lister, "", registry, kube.CheckerOptions{})
			return err
		}, "empty namespace"},
		{"a zero budget", func() error {
			_, err := kube.NewChecker(client, lister, "default", registry, kube.CheckerOptions{Health: health.Options{Budget: &health.DeleteBudget{}}})
			return err
		}, "NewDeleteBudget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorContains(t, tt.call(), tt.want)
		})
	}
}

// TestNewCheckerKeepNarrowsThePodsToTheCurrentSpec is OLM's gRPC path in
// one call: of two live pods that match the selector, only the one of the
// current spec counts, so with it gone the workload is unhealthy and the
// operator creates a replacement; the pod of the old spec is never judged,
// let alone deleted.
func TestNewCheckerKeepNarrowsThePodsToTheCurrentSpec(t *testing.T) {
	current := loadPod(t, podAlive)
	current.Annotations = map[string]string{"spec-hash": "v2"}
	old := current.DeepCopy()
	old.Name, old.UID, old.Annotations = "old", "uid-old", map[string]string{"spec-hash": "v1"}
	client := fake.NewClientset(old)
	lister := startPodInformer(t, client, "default")
	var judged []string
	opts := kube.CheckerOptions{
		Keep: func(p *corev1.Pod) bool { return p.Annotations["spec-hash"] == "v2" },
		Health: health.Options{Observer: observerFunc(func(r health.PodReport) {
			judged = append(judged, r.Pod.Name)
		})},
	}
	checker, err := kube.NewChecker(client, lister, "default", registry, opts)
	require.NoError(t, err)
	healthy, err := checker.Check(context.Background())
	require.NoError(t, err)
	require.False(t, healthy, "the pod of the old spec does not count")
	require.Empty(t, judged)
	require.Empty(t, deleteActions(client))

	_, err = client.CoreV1().Pods("default").Create(context.Background(), current, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		healthy, err := checker.Check(context.Background())
		return err == nil && healthy
	}, eventually, tick)
	require.Contains(t, judged, current.Name)
	require.NotContains(t, judged, "old")
}

// TestNewCheckerWithARecorderAndAnObserverFeedsBoth: an Observer of its
// own (metrics) and a Recorder (events) both hear the force delete; before,
// the Recorder was dropped silently when an Observer was set.
func TestNewCheckerWithARecorderAndAnObserverFeedsBoth(t *testing.T) {
	client := fake.NewClientset(loadNode(t, "node-lost.json"), loadNode(t, "node-healthy.json"), loadPod(t, podTaintEvicted))
	lister := startPodInformer(t, client, "default")
	recorder := record.NewFakeRecorder(10)
	var observed []health.Outcome
	checker, err := kube.NewChecker(client, lister, "default", registry, kube.CheckerOptions{
		Recorder: recorder,
		Health: health.Options{Observer: observerFunc(func(r health.PodReport) {
			observed = append(observed, r.Outcome)
		})},
	})
	require.NoError(t, err)
	_, err = checker.Check(context.Background())
	require.NoError(t, err)
	require.Equal(t, []health.Outcome{health.ForceDeleted}, observed, "the Observer heard it")
	require.Len(t, recorder.Events, 1, "the Recorder recorded it")
	require.Contains(t, <-recorder.Events, podsource.ReasonForceDeleted)
}

type observerFunc func(health.PodReport)

func (f observerFunc) Observe(_ context.Context, r health.PodReport) { f(r) }

// TestNewCheckerPerReconcileRecordsAHoldOnce builds a Checker per
// reconcile from one Checkers over one unchanged hold (a StatefulSet pod
// on a lost node, without fencing evidence): the hold gets one event, not
// one per reconcile, and the next once podsource.DefaultHeldRepeat has
// passed on Health.Clock.
func TestCheckersPerReconcileRecordAHoldOnce(t *testing.T) {
	pod := loadPod(t, podTaintEvicted)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid", Controller: ptr.To(true)}}
	client := fake.NewClientset(loadNode(t, "node-lost.json"), loadNode(t, "node-healthy.json"), pod)
	lister := startPodInformer(t, client, "default")
	recorder := record.NewFakeRecorder(10)
	clk := clocktesting.NewFakePassiveClock(pod.DeletionTimestamp.Add(time.Minute))
	checkers, err := kube.NewCheckers(client, kube.CheckersOptions{Recorder: recorder, Health: health.Options{Clock: clk}})
	require.NoError(t, err)
	reconcile := func() {
		t.Helper()
		checker, err := checkers.For(lister, "default", registry, kube.CheckOptions{})
		require.NoError(t, err)
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
	}
	for range 3 {
		reconcile()
	}
	require.Len(t, recorder.Events, 1, "one event for one hold over three reconciles")
	clk.SetTime(clk.Now().Add(podsource.DefaultHeldRepeat))
	reconcile()
	require.Len(t, recorder.Events, 2, "recorded again once the repeat passed on Health.Clock")
}

// TestCheckersFenceLeaseWiresTheLeasePath: CheckersOptions.FenceLease adds
// the Lease fencer over client; with a Lease informer in Leases, the watch
// starts when the Checkers is built, before any checker exists, and the
// wait runs from its delivery of the holder's last renewal, on
// Health.Clock: a StatefulSet pod whose Lease was delivered 30 s before
// the first checker was even built goes at that check (duration 15 s,
// deadline 10 s, margin 2 s), where without the informer it waits the
// whole wait from the check. Leases without FenceLease is refused, and so
// is a LeaseProtocol.
func TestCheckersFenceLeaseWiresTheLeasePath(t *testing.T) {
	pod := loadPod(t, podTaintEvicted)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "pg", UID: "sts", Controller: ptr.To(true)}}
	pod.Annotations = map[string]string{fencing.AnnotationLease: "pg", fencing.AnnotationDeadline: "10s"}
	delivered := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "pg", ResourceVersion: "7"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(pod.Name), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: ptr.To(metav1.NewMicroTime(delivered))}}
	for _, tt := range []struct {
		name    string
		watch   bool
		outcome health.Outcome
	}{
		{"with a Lease informer: the wait ran from its delivery", true, health.ForceDeleted},
		{"without one: the wait runs from the first check", false, health.HeldBack},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(loadNode(t, "node-lost.json"), loadNode(t, "node-healthy.json"), pod, lease)
			lister := startPodInformer(t, client, pod.Namespace)
			clk := clocktesting.NewFakePassiveClock(delivered)
			opts := kube.CheckersOptions{FenceLease: true, Health: health.Options{Clock: clk}}
			arrived := make(chan struct{})
			var factory informers.SharedInformerFactory
			if tt.watch {
				factory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(pod.Namespace))
				opts.Leases = notifying{factory.Coordination().V1().Leases().Informer(), arrived}
			}
			checkers, err := kube.NewCheckers(client, opts) // at the operator's setup
			require.NoError(t, err)
			if tt.watch {
				informertest.StartInformers(t, client, factory, "leases")
				select { // the watch delivered the Lease while the clock read its renewal's time
				case <-arrived:
				case <-time.After(informertest.WatchTimeout):
					t.Fatal("the Lease informer never delivered the Lease")
				}
			}
			clk.SetTime(delivered.Add(30 * time.Second))
			checker, err := checkers.For(lister, pod.Namespace, registry, kube.CheckOptions{}) // the first reconcile after the eviction
			require.NoError(t, err)
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, tt.outcome, report.Pods[0].Outcome, "held: %s", report.Pods[0].HeldBack)
		})
	}
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	_, err := kube.NewCheckers(client, kube.CheckersOptions{Leases: factory.Coordination().V1().Leases().Informer()})
	require.ErrorContains(t, err, "Leases without FenceLease would do nothing")
	protocol := func(*corev1.Pod) (fencing.LeaseProtocol, bool) {
		return fencing.LeaseProtocol{Lease: "pg", Deadline: 10 * time.Second}, true
	}
	_, err = kube.NewChecker(client, startPodInformer(t, client, "default"), "default", registry, kube.CheckerOptions{LeaseProtocol: protocol})
	require.ErrorContains(t, err, "LeaseProtocol without CheckersOptions.FenceLease would do nothing")

	// The protocol stated in process, nothing on the pod: held for the
	// wait from the first check, then freed.
	bare := pod.DeepCopy()
	bare.Annotations = nil
	client = fake.NewClientset(loadNode(t, "node-lost.json"), loadNode(t, "node-healthy.json"), bare, lease)
	clk := clocktesting.NewFakePassiveClock(delivered.Add(time.Minute))
	checkers, err := kube.NewCheckers(client, kube.CheckersOptions{FenceLease: true, Health: health.Options{Clock: clk}})
	require.NoError(t, err)
	lister := startPodInformer(t, client, bare.Namespace)
	var outcomes []health.Outcome
	for _, at := range []time.Duration{0, 27 * time.Second} {
		clk.SetTime(delivered.Add(time.Minute + at))
		checker, err := checkers.For(lister, bare.Namespace, registry, kube.CheckOptions{LeaseProtocol: protocol})
		require.NoError(t, err)
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		outcomes = append(outcomes, report.Pods[0].Outcome)
	}
	require.Equal(t, []health.Outcome{health.HeldBack, health.ForceDeleted}, outcomes)
}

// notifying is a Lease informer that closes added once the handler it was
// given has handled its first add.
type notifying struct {
	kube.LeaseEvents
	added chan struct{}
}

func (n notifying) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	var once sync.Once
	return n.LeaseEvents.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.OnAdd(obj, false); once.Do(func() { close(n.added) }) },
		UpdateFunc: h.OnUpdate,
		DeleteFunc: h.OnDelete,
	})
}

// Checkers handed out per reconcile by one Checkers share its Memory: the
// second reconcile, over a cache that still lists the pod the first one
// force-deleted, sends no second DELETE. Another Checkers, even over the
// same client, shares nothing with it; and NewChecker's one-off checkers
// keep state of their own.
// laggingFixtures returns a lister and a clientset of the fixture pods;
// the lister is never told of a delete: a lagging cache.
func laggingFixtures(t *testing.T) (corelisters.PodLister, *fake.Clientset) {
	pods := allFixturePods(t)
	indexer := podIndexer()
	for _, p := range pods {
		require.NoError(t, indexer.Add(p))
	}
	return corelisters.NewPodLister(indexer), fake.NewClientset(objects(pods...)...)
}

func TestTwoCheckersFromOneCheckersShareOneMemory(t *testing.T) {
	lister, client := laggingFixtures(t)
	checkers, err := kube.NewCheckers(client, kube.CheckersOptions{})
	require.NoError(t, err)
	for i := range 3 {
		checker, err := checkers.For(lister, "default", registry, kube.CheckOptions{})
		require.NoError(t, err)
		healthy, err := checker.Check(context.Background())
		require.NoError(t, err, "reconcile %d", i)
		require.True(t, healthy, "reconcile %d", i)
	}
	require.Len(t, deleteActions(client), 1, "DELETEs sent by three reconciles over a stale cache")

	other, err := kube.NewCheckers(client, kube.CheckersOptions{})
	require.NoError(t, err)
	checker, err := other.For(lister, "default", registry, kube.CheckOptions{})
	require.NoError(t, err)
	_, err = checker.Check(context.Background())
	require.NoError(t, err)
	require.Len(t, deleteActions(client), 2, "another Checkers shares nothing with this one")

	oneOff, err := kube.NewChecker(client, lister, "default", registry, kube.CheckerOptions{})
	require.NoError(t, err)
	_, err = oneOff.Check(context.Background())
	require.NoError(t, err)
	require.Len(t, deleteActions(client), 3, "a one-off checker keeps state of its own")
}

// A thousand operators' clients, each with its Checkers, each keep their
// own state: past any bound of a registry (before, 64 clients), every
// Checkers still remembers what its checkers force-deleted, and a pod a
// lagging cache lists again gets no second DELETE.
func TestAThousandClientsEachKeepTheirOwnState(t *testing.T) {
	pods := allFixturePods(t)
	indexer := podIndexer()
	for _, p := range pods {
		require.NoError(t, indexer.Add(p))
	}
	lister := corelisters.NewPodLister(indexer)
	const clients = 1000
	all := make([]*fake.Clientset, clients)
	checkers := make([]*kube.Checkers, clients)
	for i := range clients {
		all[i] = fake.NewClientset(objects(pods...)...)
		var err error
		checkers[i], err = kube.NewCheckers(all[i], kube.CheckersOptions{NoNodeEvidence: true, Health: health.Options{Fencing: health.FenceNever}})
		require.NoError(t, err)
	}
	for round := range 2 { // each client checked in turn, twice
		for i := range clients {
			checker, err := checkers[i].For(lister, "default", registry, kube.CheckOptions{})
			require.NoError(t, err)
			_, err = checker.Check(context.Background())
			require.NoError(t, err, "client %d, round %d", i, round)
		}
	}
	for i := range clients {
		require.Len(t, deleteActions(all[i]), 1, "client %d", i)
	}
}

// failingPods is a PodLister whose namespaced lists fail.
type failingPods struct{ corelisters.PodLister }

func (f failingPods) Pods(string) corelisters.PodNamespaceLister { return failingNamespace{} }

type failingNamespace struct{ corelisters.PodNamespaceLister }

func (failingNamespace) List(labels.Selector) ([]*corev1.Pod, error) {
	return nil, errors.New("the cache is gone")
}

// Checkers.Check is For and CheckReport in one call over the Checkers'
// state: three reconciles over a cache that never sees the delete send one
// DELETE; a refused input is For's error; a failed check is wrapped with
// the namespace and the selector and still unwraps to health.ListError.
func TestCheckersCheckIsForAndItsReportInOneCall(t *testing.T) {
	lister, client := laggingFixtures(t)
	checkers, err := kube.NewCheckers(client, kube.CheckersOptions{})
	require.NoError(t, err)
	for i := range 3 {
		report, err := checkers.Check(context.Background(), lister, "default", registry, kube.CheckOptions{})
		require.NoError(t, err, "reconcile %d", i)
		require.True(t, report.Healthy, "reconcile %d", i)
		require.NotEmpty(t, report.Pods, "reconcile %d: the report of the check", i)
	}
	require.Len(t, deleteActions(client), 1, "DELETEs sent by three reconciles over a stale cache")

	_, err = checkers.Check(context.Background(), lister, "", registry, kube.CheckOptions{})
	require.ErrorContains(t, err, "namespace", "For refuses an empty namespace")

	_, err = checkers.Check(context.Background(), failingPods{lister}, "default", registry, kube.CheckOptions{})
	var listErr *health.ListError
	require.ErrorAs(t, err, &listErr)
	require.ErrorContains(t, err, `namespace "default" that match "`+registry.String()+`"`)
	require.ErrorContains(t, err, "the cache is gone")

	var none *kube.Checkers
	_, err = none.Check(context.Background(), lister, "default", registry, kube.CheckOptions{})
	require.ErrorContains(t, err, "not made by NewCheckers", "a nil Checkers is an error, not a panic")
}
