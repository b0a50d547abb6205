package controllerruntime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/health/fencertest"
	"github.com/podhealth/podhealth/internal/testutil"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
)

// A LeaseFencer over the adapter's LiveLeases passes the conformance
// suite, reads a missing Lease as no evidence and a Forbidden as an error.
func TestLiveLeasesOverTheAPIReader(t *testing.T) {
	renewed := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	c := apiServer(t, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-primary"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pg-1"), LeaseDurationSeconds: ptr.To[int32](10),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
	})
	deleted := metav1.NewTime(renewed) // evicted: the fencer proves nothing before the deletion began
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-1", UID: "u1", DeletionTimestamp: &deleted, Annotations: map[string]string{
		fencing.AnnotationLease: "pg-primary", fencing.AnnotationDeadline: "5s"}}}
	live, err := crh.NewLiveLeases(c)
	require.NoError(t, err)
	f, err := fencing.NewLeaseFencer(live, fencing.LeaseOptions{})
	require.NoError(t, err)
	wait := 10*time.Second + 5*time.Second + fencing.DefaultMargin
	q := health.FenceQuery{Pod: pod, NodeState: health.NodeUnreachable, Now: renewed.Add(time.Minute + wait)}
	require.NoError(t, fencertest.TestFencer(f,
		fencertest.Case{Name: "expired for the wait", Query: q, Earlier: []time.Time{renewed.Add(time.Minute)}, Want: health.PodStopped}))

	missing := pod.DeepCopy()
	missing.Annotations[fencing.AnnotationLease] = "gone"
	fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: missing, Now: renewed, Sightings: fencertest.NewRecord().At(renewed)})
	require.NoError(t, err)
	require.Contains(t, fence.Detail, "not found")

	forbidden := apierrors.NewForbidden(coordinationv1.Resource("leases"), "pg-primary", errors.New("RBAC"))
	denied, err := crh.NewLiveLeases(interceptor.NewClient(c, interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return forbidden
	}}))
	require.NoError(t, err)
	f, err = fencing.NewLeaseFencer(denied, fencing.LeaseOptions{})
	require.NoError(t, err)
	_, err = f.Fence(context.Background(), health.FenceQuery{Pod: pod, Now: renewed, Sightings: fencertest.NewRecord().At(renewed)})
	require.True(t, apierrors.IsForbidden(err), "%v", err)

	_, err = crh.NewLiveLeases(nil)
	require.ErrorContains(t, err, "nil client.Reader")
}

// leaseCache is a manager's cache of which only the Lease informer is
// used: the test delivers Leases to its handler as a watch would.
type leaseCache struct {
	cache.Cache
	informer *leaseInformer
}

func (c *leaseCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	if _, ok := obj.(*coordinationv1.Lease); !ok {
		return nil, errors.New("only Leases here")
	}
	return c.informer, nil
}

type leaseInformer struct {
	cache.Informer
	handlers []toolscache.ResourceEventHandler
}

func (i *leaseInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	i.handlers = append(i.handlers, h)
	return nil, nil
}

// cachedManager is a manager with a cache, as a ctrl.Manager is.
type cachedManager struct {
	*manager
	cache *leaseCache
}

func (m *cachedManager) GetCache() cache.Cache { return m.cache }

// TestFenceLeaseWiresTheLeasePathInOneOption: CheckersOptions.FenceLease adds the
// Lease fencer, reading Leases live through the API reader, and starts the
// wait when the manager's Lease informer delivered the holder's last
// renewal, on Health.Clock: a database instance whose Lease was delivered
// 30 s before the first check after its eviction goes at that check
// (duration 15 s, deadline 10 s, margin 2 s), where a manager without a
// cache waits the whole wait from the check. The watch is registered when
// the Checkers is built, before any checker exists, and the checkers it
// hands out share it.
func TestFenceLeaseWiresTheLeasePathInOneOption(t *testing.T) {
	delivered := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	instance := loadPod(t, testutil.PodTaintEvicted).DeepCopy()
	instance.Name, instance.UID, instance.Labels = "pg-1", "uid-pg-1", map[string]string{"app": "pg"}
	instance.Annotations = map[string]string{fencing.AnnotationLease: "pg", fencing.AnnotationDeadline: "10s"}
	instance.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "pg", UID: "sts", Controller: ptr.To(true)}}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: instance.Namespace, Name: "pg"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pg-1"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: ptr.To(metav1.NewMicroTime(delivered))}}
	selector := labels.SelectorFromSet(labels.Set{"app": "pg"})
	for _, tt := range []struct {
		name    string
		cached  bool
		outcome health.Outcome
	}{
		{"with the manager's cache: the wait ran from the delivery", true, health.ForceDeleted},
		{"without a cache: the wait runs from the first check", false, health.HeldBack},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := apiServer(t, instance, lease, loadNode(t, testutil.NodeLost), loadNode(t, testutil.NodeHealthy))
			clk := clocktesting.NewFakePassiveClock(delivered)
			var mgr crh.Manager = &manager{cache: c, live: c}
			informer := &leaseInformer{}
			if tt.cached {
				mgr = &cachedManager{manager: &manager{cache: c, live: c}, cache: &leaseCache{informer: informer}}
			}
			checkers, err := crh.NewCheckers(mgr, crh.CheckersOptions{FenceLease: true, Health: health.Options{Clock: clk}}) // at setup
			require.NoError(t, err)
			var stored coordinationv1.Lease
			require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(lease), &stored))
			for _, h := range informer.handlers {
				h.OnAdd(&stored, false) // the watch delivers the holder's last renewal
			}
			clk.SetTime(delivered.Add(30 * time.Second)) // the first check after the eviction
			checker, err := checkers.For(instance.Namespace, selector, crh.CheckOptions{})
			require.NoError(t, err)
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, tt.outcome, report.Pods[0].Outcome, "held: %s", report.Pods[0].HeldBack)
			if tt.cached {
				_, err := checkers.For(instance.Namespace, selector, crh.CheckOptions{})
				require.NoError(t, err)
				require.Len(t, informer.handlers, 1, "one watch for every checker of the Checkers")
				require.Equal(t, "lease", report.Pods[0].FencedBy.Fencer)
			} else {
				require.Contains(t, report.Pods[0].HeldBack.Detail, "fences once unrenewed for 27s")
			}
		})
	}
	// A Lease fencer of the caller's own next to the option is one too
	// many: refused, by name.
	c := apiServer(t)
	live, err := crh.NewLiveLeases(c)
	require.NoError(t, err)
	own, err := fencing.NewLeaseFencer(live, fencing.LeaseOptions{})
	require.NoError(t, err)
	withOwn, err := crh.NewCheckers(&manager{cache: c, live: c}, crh.CheckersOptions{FenceLease: true, Health: health.Options{Fencers: []health.Fencer{own}}})
	require.NoError(t, err)
	_, err = withOwn.For("default", selector, crh.CheckOptions{})
	require.ErrorContains(t, err, `"lease"`)
	without, err := crh.NewCheckers(&manager{cache: c, live: c}, crh.CheckersOptions{})
	require.NoError(t, err)
	_, err = without.For("default", selector, crh.CheckOptions{LeaseProtocol: func(*corev1.Pod) (fencing.LeaseProtocol, bool) {
		return fencing.LeaseProtocol{}, false
	}})
	require.ErrorContains(t, err, "LeaseProtocol without CheckersOptions.FenceLease would do nothing")
}

// The Lease fencing's marker and LeasePolicyRules are the same rule.
func TestLeaseFencingMarkerAndRuleAreTheSame(t *testing.T) {
	require.Empty(t, cmp.Diff(crh.LeasePolicyRules(), markerRules(t, "leases.go")))
}

// Each Checkers registers one watch on the manager's Lease informer, when
// it is built, whatever the Manager (one that cannot be compared too),
// and none per checker it hands out: a handler per reconcile would pile
// up on the informer and outlive every checker.
func TestFenceLeaseRegistersOneWatchPerCheckersAndNonePerChecker(t *testing.T) {
	c := apiServer(t)
	selector := labels.SelectorFromSet(labels.Set{"app": "pg"})
	informer := &leaseInformer{}
	mgr := uncomparableCached{uncomparable: uncomparable{cache: c, live: c, tags: map[string]string{}}, cache: &leaseCache{informer: informer}}
	checkers, err := crh.NewCheckers(mgr, crh.CheckersOptions{FenceLease: true})
	require.NoError(t, err)
	require.Len(t, informer.handlers, 1, "the watch, registered at setup")
	for range 3 {
		_, err := checkers.For("default", selector, crh.CheckOptions{})
		require.NoError(t, err)
	}
	require.Len(t, informer.handlers, 1, "none more per checker")
}

// uncomparableCached is a Manager held by value that cannot be compared,
// with a cache.
type uncomparableCached struct {
	uncomparable
	cache *leaseCache
}

func (m uncomparableCached) GetCache() cache.Cache { return m.cache }
