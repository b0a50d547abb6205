package controllerruntime_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/podsource"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
)

// heldStatefulPod is a taint-evicted StatefulSet pod on a node that is
// not Ready and not out of service: held for fencing.
func heldStatefulPod(t *testing.T) *corev1.Pod {
	pod := loadPod(t, testutil.PodTaintEvicted)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "registry", UID: "sts", Controller: ptr.To(true)}}
	return pod
}

// An operator that asks its Checkers for a checker in every reconcile,
// over a node cache that never syncs: the reads of the first reconcile
// pay the timeout, and the next reconciles pay none, because the checkers
// of one Checkers share their node readers: they read through one
// background probe at a time, each lasting the timeout.
func TestCheckersBuiltPerReconcileShareOneStallGuard(t *testing.T) {
	const timeout = time.Second
	old := crh.SetReadTimeout(timeout)
	t.Cleanup(func() { crh.SetReadTimeout(old) })
	var nodeReads, inFlight, mostInFlight atomic.Int32
	stalled := interceptor.NewClient(apiServer(t, objects(heldStatefulPod(t))...), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Node); ok {
				nodeReads.Add(1)
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for m := mostInFlight.Load(); n > m && !mostInFlight.CompareAndSwap(m, n); m = mostInFlight.Load() {
				}
				<-ctx.Done() // the node informer never syncs
				return ctx.Err()
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	checkers, err := crh.NewCheckers(&manager{cache: stalled, live: stalled}, crh.CheckersOptions{})
	require.NoError(t, err)
	var afterFirst time.Time
	for i := range 5 {
		checker, err := checkers.For("default", registry, crh.CheckOptions{})
		require.NoError(t, err)
		started := time.Now()
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		require.ErrorIs(t, report.NodeEvidence, health.ErrNodesUnavailable, "reconcile %d", i)
		if i == 0 {
			afterFirst = time.Now()
			continue
		}
		require.Less(t, time.Since(started), timeout, "reconcile %d waited on the stalled cache", i)
	}
	require.Equal(t, int32(1), mostInFlight.Load(), "one node read at a time: the first reconcile's, then one probe at a time")
	// Each probe lasts the timeout and the next starts after it: over the
	// later reconciles, one probe and one more per timeout they took.
	probes := int(nodeReads.Load()) - 1
	require.LessOrEqual(t, probes, 1+int(time.Since(afterFirst)/timeout), "node reads over five reconciles: one timed out, then the probes")
}

// Checkers handed out per reconcile by one Checkers record one event for a
// hold that lasts, through either kind of recorder, and NewCheckers
// refuses both recorders at once, and For an event object without one.
func TestCheckersBuiltPerReconcileRecordAHoldOnce(t *testing.T) {
	lost := loadNode(t, testutil.NodeLost)
	t.Run("events.k8s.io recorder", func(t *testing.T) {
		c := apiServer(t, append(objects(heldStatefulPod(t)), lost)...)
		rec := &recordingRecorder{}
		checkers, err := crh.NewCheckers(&manager{cache: c, live: c}, crh.CheckersOptions{EventRecorder: rec})
		require.NoError(t, err)
		for range 5 {
			checker, err := checkers.For("default", registry, crh.CheckOptions{})
			require.NoError(t, err)
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
		}
		require.Len(t, rec.recorded(), 1)
		require.Equal(t, podsource.ReasonHeldBack, rec.recorded()[0].Reason)
	})
	t.Run("core/v1 recorder", func(t *testing.T) {
		c := apiServer(t, append(objects(heldStatefulPod(t)), lost)...)
		rec := record.NewFakeRecorder(10)
		checkers, err := crh.NewCheckers(&manager{cache: c, live: c}, crh.CheckersOptions{CoreEventRecorder: rec})
		require.NoError(t, err)
		for range 5 {
			checker, err := checkers.For("default", registry, crh.CheckOptions{})
			require.NoError(t, err)
			_, err = checker.CheckReport(context.Background())
			require.NoError(t, err)
		}
		close(rec.Events)
		var got []string
		for e := range rec.Events {
			got = append(got, e)
		}
		require.Len(t, got, 1)
		require.True(t, strings.HasPrefix(got[0], "Warning "+podsource.ReasonHeldBack+" "), got[0])
	})
	t.Run("both", func(t *testing.T) {
		c := apiServer(t)
		_, err := crh.NewCheckers(&manager{cache: c, live: c}, crh.CheckersOptions{EventRecorder: &recordingRecorder{}, CoreEventRecorder: record.NewFakeRecorder(1)})
		require.ErrorContains(t, err, "both EventRecorder and CoreEventRecorder")
		checkers, err := crh.NewCheckers(&manager{cache: c, live: c}, crh.CheckersOptions{})
		require.NoError(t, err)
		_, err = checkers.For("default", registry, crh.CheckOptions{EventObject: &corev1.ConfigMap{}})
		require.ErrorContains(t, err, "EventObject without an event recorder")
	})
}

// byValue is a Manager held by value, as a struct that wraps the clients
// of a real manager would be.
type byValue struct{ cache, live client.Client }

func (m byValue) GetClient() client.Client    { return m.cache }
func (m byValue) GetAPIReader() client.Reader { return m.live }

// uncomparable is a Manager held by value with a map in it.
type uncomparable struct {
	cache client.Client
	live  client.Reader
	tags  map[string]string
}

func (m uncomparable) GetClient() client.Client    { return m.cache }
func (m uncomparable) GetAPIReader() client.Reader { return m.live }

// The state is the Checkers', whatever the Manager: a Manager held by
// value, or one that cannot be compared (it holds a map), shares its
// checkers' state through the Checkers the operator holds, with one event
// for a hold over four checks and the next once podsource.DefaultHeldRepeat
// has passed on Health.Clock. Before, sharing depended on finding the
// Manager again by its identity.
func TestTheCheckersOwnTheirStateWhateverTheManager(t *testing.T) {
	for name, mgr := range map[string]func(client.Client) crh.Manager{
		"held by value": func(c client.Client) crh.Manager { return byValue{cache: c, live: c} },
		"that cannot be compared": func(c client.Client) crh.Manager {
			return uncomparable{cache: interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{}), live: c, tags: map[string]string{}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := apiServer(t, append(objects(heldStatefulPod(t)), loadNode(t, testutil.NodeLost))...)
			rec := &recordingRecorder{}
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC))
			checkers, err := crh.NewCheckers(mgr(c), crh.CheckersOptions{EventRecorder: rec, Health: health.Options{Clock: clk}})
			require.NoError(t, err)
			check := func() {
				t.Helper()
				checker, err := checkers.For("default", registry, crh.CheckOptions{})
				require.NoError(t, err)
				report, err := checker.CheckReport(context.Background())
				require.NoError(t, err)
				require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
			}
			for range 4 {
				check()
			}
			require.Len(t, rec.recorded(), 1, "one event for one hold over four checks")
			clk.SetTime(clk.Now().Add(podsource.DefaultHeldRepeat))
			check()
			require.Len(t, rec.recorded(), 2, "recorded again once the repeat passed on Health.Clock")
		})
	}
}

// Checkers handed out per reconcile by one Checkers share its Memory: the
// second reconcile, over a cache that still lists the pod the first one
// force-deleted, sends no second DELETE. Another Checkers over the same
// manager shares nothing with it.
func TestTwoCheckersFromOneCheckersShareOneMemory(t *testing.T) {
	var deletes atomic.Int32
	// The DELETE is accepted, and the cache goes on listing the pod.
	c := interceptor.NewClient(apiServer(t, loadPod(t, testutil.PodTaintEvicted), loadPod(t, testutil.PodAlive)), interceptor.Funcs{
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			deletes.Add(1)
			return nil
		}})
	mgr := &manager{cache: c, live: c}
	reconcile := func(checkers *crh.Checkers) {
		t.Helper()
		checker, err := checkers.For("default", registry, crh.CheckOptions{})
		require.NoError(t, err)
		healthy, err := checker.Check(context.Background())
		require.NoError(t, err)
		require.True(t, healthy)
	}
	checkers, err := crh.NewCheckers(mgr, crh.CheckersOptions{NoNodeEvidence: true})
	require.NoError(t, err)
	for range 3 {
		reconcile(checkers)
	}
	require.Equal(t, int32(1), deletes.Load(), "DELETEs sent by three reconciles over a stale cache")
	other, err := crh.NewCheckers(mgr, crh.CheckersOptions{NoNodeEvidence: true})
	require.NoError(t, err)
	reconcile(other)
	require.Equal(t, int32(2), deletes.Load(), "another Checkers shares nothing with this one")
}

// A thousand managers, each with its Checkers, each keep their own state:
// past any bound of a registry (before, 64 managers), every Checkers still
// remembers what its checkers force-deleted.
func TestAThousandManagersEachKeepTheirOwnState(t *testing.T) {
	const managers = 1000
	counts := make([]atomic.Int32, managers)
	all := make([]*crh.Checkers, managers)
	base := apiServer(t, loadPod(t, testutil.PodTaintEvicted), loadPod(t, testutil.PodAlive))
	for i := range managers {
		c := interceptor.NewClient(base, interceptor.Funcs{
			Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
				counts[i].Add(1)
				return nil
			}})
		var err error
		all[i], err = crh.NewCheckers(&manager{cache: c, live: c}, crh.CheckersOptions{NoNodeEvidence: true})
		require.NoError(t, err)
	}
	for round := range 2 {
		for i := range managers {
			checker, err := all[i].For("default", registry, crh.CheckOptions{})
			require.NoError(t, err)
			_, err = checker.Check(context.Background())
			require.NoError(t, err, "manager %d, round %d", i, round)
		}
	}
	for i := range managers {
		require.Equal(t, int32(1), counts[i].Load(), "manager %d", i)
	}
}
