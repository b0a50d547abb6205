package controllerruntime_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/podsource"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
)

// orphan returns a running pod (no deletionTimestamp) bound to node.
func orphan(t *testing.T, node string) *corev1.Pod {
	p := relabel(loadPod(t, testutil.PodAlive), "orphan", "00000000-0000-0000-0000-0000000000c1", map[string]string{"app": "registry"})
	p.Spec.NodeName = node
	return p
}

func TestCheckersWireSourceDeleterNodeEvidenceAndEvents(t *testing.T) {
	alive := loadPod(t, testutil.PodAlive)
	evicted := loadPod(t, testutil.PodTaintEvicted) // on node-lost, which is not Ready
	lost, healthy := loadNode(t, testutil.NodeLost), loadNode(t, testutil.NodeHealthy)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "registry", UID: "cm-uid"}}
	tests := []struct {
		name        string
		cache, live []client.Object
		pods        []*corev1.Pod
		opts        crh.CheckersOptions
		check       crh.CheckOptions
		wantHealthy bool
		wantGone    []string
		wantKept    []string
		wantEvents  []string // reasons
	}{
		{
			name:  "taint-evicted pod on a node that is not Ready: force-deleted at once, event on the owner",
			cache: []client.Object{lost, healthy}, live: []client.Object{lost, healthy},
			pods: []*corev1.Pod{alive, evicted}, check: crh.CheckOptions{EventObject: owner},
			wantHealthy: true, wantGone: []string{evicted.Name}, wantKept: []string{alive.Name},
			wantEvents: []string{podsource.ReasonForceDeleted},
		},
		{
			name:  "running pod whose node the cache and the live reader both miss: gone (NodeGone)",
			cache: []client.Object{healthy}, live: []client.Object{healthy},
			pods:        []*corev1.Pod{alive, orphan(t, "node-deleted")},
			wantHealthy: true, wantGone: []string{"orphan"}, wantKept: []string{alive.Name},
			wantEvents: []string{podsource.ReasonForceDeleted},
		},
		{
			name:  "node missing only from a lagging cache: the live read keeps the pod",
			cache: []client.Object{healthy}, live: []client.Object{healthy, lost},
			pods:        []*corev1.Pod{orphan(t, "node-lost")},
			wantHealthy: true, wantKept: []string{"orphan"},
		},
		{
			name:  "no node evidence: a node missing everywhere proves nothing",
			cache: []client.Object{healthy}, live: []client.Object{healthy},
			pods: []*corev1.Pod{orphan(t, "node-deleted")}, opts: crh.CheckersOptions{NoNodeEvidence: true},
			wantHealthy: true, wantKept: []string{"orphan"},
		},
		{
			name:  "dry run: nothing deleted, the would-delete event recorded",
			cache: []client.Object{lost}, live: []client.Object{lost},
			pods: []*corev1.Pod{evicted}, opts: crh.CheckersOptions{Health: health.Options{DryRun: true}},
			wantHealthy: false, wantKept: []string{evicted.Name},
			wantEvents: []string{podsource.ReasonWouldForceDelete},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cache := apiServer(t, append(objects(tc.pods...), tc.cache...)...)
			live := apiServer(t, tc.live...)
			rec := &recordingRecorder{}
			mgr := &manager{cache: cache, live: live}
			opts := tc.opts
			opts.EventRecorder = rec
			checkers, err := crh.NewCheckers(mgr, opts)
			require.NoError(t, err)
			checker, err := checkers.For("default", registry, tc.check)
			require.NoError(t, err)
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, tc.wantHealthy, report.Healthy)
			for _, name := range tc.wantGone {
				_, err := getPod(cache)(context.Background(), "default", name)
				require.True(t, apierrors.IsNotFound(err), "%s: %v", name, err)
			}
			for _, name := range tc.wantKept {
				_, err := getPod(cache)(context.Background(), "default", name)
				require.NoError(t, err, name)
			}
			var reasons []string
			for _, e := range rec.recorded() {
				reasons = append(reasons, e.Reason)
				if tc.check.EventObject != nil {
					require.Same(t, tc.check.EventObject, e.Regarding)
					ref, ok := e.Related.(*corev1.ObjectReference)
					require.True(t, ok, "related is %T, want the pod's reference", e.Related)
					require.Equal(t, "Pod", ref.Kind)
				}
			}
			require.Empty(t, cmp.Diff(tc.wantEvents, reasons))
		})
	}
}

// TestCheckersFeedTheCallersObserverAndTheRecorderBoth: an Observer of
// the caller's (metrics) and an EventRecorder both hear the force delete;
// before, the recorder was dropped silently when an Observer was set.
func TestCheckersFeedTheCallersObserverAndTheRecorderBoth(t *testing.T) {
	rec := &recordingRecorder{}
	evicted := loadPod(t, testutil.PodTaintEvicted)
	c := apiServer(t, evicted)
	mgr := &manager{cache: c, live: c}
	observed := 0
	mine := observerFunc(func(context.Context, health.PodReport) { observed++ })
	checker, err := oneChecker(mgr, "default", registry, crh.CheckersOptions{Health: health.Options{Observer: mine}, EventRecorder: rec})
	require.NoError(t, err)
	_, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, observed, "the caller's Observer heard the check")
	require.Len(t, rec.recorded(), 1, "and the recorder recorded the force delete")
	require.Equal(t, podsource.ReasonForceDeleted, rec.recorded()[0].Reason)

	// Without a recorder, no events and no error: the events API differs
	// between controller-runtime releases, so it is the caller's choice.
	checker, err = oneChecker(mgr, "default", registry, crh.CheckersOptions{ClaimEvidence: true})
	require.NoError(t, err)
	_, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
}

type observerFunc func(context.Context, health.PodReport)

func (f observerFunc) Observe(ctx context.Context, r health.PodReport) { f(ctx, r) }

func TestDeadPodPredicatePassesAPodThatBecomesDeadByTheCheckersRules(t *testing.T) {
	lost, healthy := loadNode(t, testutil.NodeLost), loadNode(t, testutil.NodeHealthy)
	c := apiServer(t, lost, healthy)
	checker, err := oneChecker(&manager{cache: c, live: c}, "default", registry, crh.CheckersOptions{EventRecorder: &recordingRecorder{}})
	require.NoError(t, err)
	dead, err := crh.DeadPodPredicate(checker)
	require.NoError(t, err)

	evicted := loadPod(t, testutil.PodTaintEvicted)
	// The same pod a moment before: running on the node, not yet evicted.
	before := evicted.DeepCopy()
	before.DeletionTimestamp, before.DeletionGracePeriodSeconds, before.Status.Conditions = nil, nil, nil
	alive := loadPod(t, testutil.PodAlive)
	drained := loadPod(t, testutil.PodDrained)
	node := loadNode(t, testutil.NodeLost)

	require.True(t, dead.Create(event.CreateEvent{Object: evicted}), "create of a dead pod")
	require.False(t, dead.Create(event.CreateEvent{Object: alive}), "create of a live pod")
	require.False(t, dead.Create(event.CreateEvent{Object: drained}), "create of a drained (terminating) pod")
	require.False(t, dead.Create(event.CreateEvent{Object: node}), "create of a node")
	require.True(t, dead.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: evicted}), "update that makes the pod dead")
	require.False(t, dead.Update(event.UpdateEvent{ObjectOld: evicted, ObjectNew: evicted.DeepCopy()}), "update between two dead states")
	require.False(t, dead.Update(event.UpdateEvent{ObjectOld: evicted, ObjectNew: before}), "update from dead to alive")
	require.False(t, dead.Update(event.UpdateEvent{ObjectOld: alive, ObjectNew: drained}), "update to terminating")
	require.False(t, dead.Delete(event.DeleteEvent{Object: evicted}), "delete")
	require.False(t, dead.Generic(event.GenericEvent{Object: evicted}), "generic")

	// Its idea of dead is the Checker's: with a rule that calls every pod alive, nothing passes.
	allAlive := health.Rule{Name: "AllAlive", Classify: func(*corev1.Pod) (health.Verdict, bool) {
		return health.Verdict{State: health.Alive, Rule: "AllAlive"}, true
	}}
	none, err := health.New(nopSource{}, nopDeleter{}, health.Options{Rules: health.Rules{allAlive}})
	require.NoError(t, err)
	never, err := crh.DeadPodPredicate(none)
	require.NoError(t, err)
	require.False(t, never.Create(event.CreateEvent{Object: evicted}))
}

type nopSource struct{}

func (nopSource) ListPods(context.Context) ([]*corev1.Pod, error) { return nil, nil }

type nopDeleter struct{}

func (nopDeleter) ForceDelete(context.Context, *corev1.Pod) error { return nil }

func TestNodesAndClaimsReadTheirReaderAndCheckTheContextFirst(t *testing.T) {
	lost := loadNode(t, testutil.NodeLost)
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data", UID: types.UID("claim-uid")},
		Spec:       corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
	}
	var n calls
	c := counted(apiServer(t, lost, claim), &n)
	nodes, err := crh.NewNodes(c)
	require.NoError(t, err)
	claims, err := crh.NewClaims(c)
	require.NoError(t, err)
	ctx := context.Background()

	got, err := nodes.GetNode(ctx, lost.Name)
	require.NoError(t, err)
	require.Equal(t, lost.UID, got.UID)
	_, err = nodes.GetNode(ctx, "missing")
	require.True(t, apierrors.IsNotFound(err), "a missing node must be NotFound: %v", err)
	list, err := nodes.ListNodes(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	gotClaim, err := claims.GetClaim(ctx, "default", "data")
	require.NoError(t, err)
	require.Equal(t, claim.Spec.AccessModes, gotClaim.Spec.AccessModes)
	_, err = claims.GetClaim(ctx, "default", "missing")
	require.True(t, apierrors.IsNotFound(err), "%v", err)

	before := n.get("get") + n.get("list")
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = nodes.GetNode(done, lost.Name)
	require.ErrorIs(t, err, context.Canceled)
	_, err = nodes.ListNodes(done)
	require.ErrorIs(t, err, context.Canceled)
	_, err = claims.GetClaim(done, "default", "data")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, before, n.get("get")+n.get("list"), "a done context still reached the reader")
}

// TestReadsWaitForAnUnsyncedCacheOnlySoLong: the cache waits for an
// informer to sync for as long as a read's context lasts, and a reconcile's
// context has no deadline; every read of the package gets one.
func TestReadsWaitForAnUnsyncedCacheOnlySoLong(t *testing.T) {
	var deadlines []time.Duration
	record := func(ctx context.Context) {
		d, ok := ctx.Deadline()
		require.True(t, ok, "a read without a deadline")
		deadlines = append(deadlines, time.Until(d))
	}
	c := interceptor.NewClient(apiServer(t, loadNode(t, testutil.NodeLost)), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			record(ctx)
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			record(ctx)
			return c.List(ctx, list, opts...)
		},
	})
	nodes, err := crh.NewNodes(c)
	require.NoError(t, err)
	claims, err := crh.NewClaims(c)
	require.NoError(t, err)
	src, err := crh.NewPodSource(c, "default", registry)
	require.NoError(t, err)
	ctx := context.Background()
	_, _ = nodes.GetNode(ctx, "node-lost")
	_, _ = nodes.ListNodes(ctx)
	_, _ = claims.GetClaim(ctx, "default", "data")
	_, _ = src.ListPods(ctx)
	require.Len(t, deadlines, 4)
	for _, d := range deadlines {
		require.Greater(t, d, time.Duration(0))
		require.LessOrEqual(t, d, 10*time.Second)
	}
}

// controller-runtime's manager and cluster satisfy Manager.
var (
	_ crh.Manager = ctrlmanager.Manager(nil)
	_ crh.Manager = ctrlcluster.Cluster(nil)
)
