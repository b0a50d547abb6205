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

// An operator that builds its Checker in every reconcile, as the docs
// allow, over a node cache that never syncs: the reads of the first
// reconcile pay the timeout, and the next reconciles pay none, because
// the checkers of one manager share their node readers: they read through
// one background probe at a time, each lasting the timeout.
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
	mgr := &manager{cache: stalled, live: stalled}
	memory := &health.Memory{}
	var afterFirst time.Time
	for i := range 5 {
		checker, err := crh.NewChecker(mgr, "default", registry, crh.Options{Health: health.Options{Memory: memory}})
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

// Checkers built per reconcile over one manager record one event for a
// hold that lasts, through either kind of recorder, and NewChecker refuses
// both recorders at once.
func TestCheckersBuiltPerReconcileRecordAHoldOnce(t *testing.T) {
	lost := loadNode(t, testutil.NodeLost)
	t.Run("events.k8s.io recorder", func(t *testing.T) {
		c := apiServer(t, append(objects(heldStatefulPod(t)), lost)...)
		mgr := &manager{cache: c, live: c}
		rec := &recordingRecorder{}
		for range 5 {
			checker, err := crh.NewChecker(mgr, "default", registry, crh.Options{EventRecorder: rec})
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
		mgr := &manager{cache: c, live: c}
		rec := record.NewFakeRecorder(10)
		for range 5 {
			checker, err := crh.NewChecker(mgr, "default", registry, crh.Options{CoreEventRecorder: rec})
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
		_, err := crh.NewChecker(&manager{cache: c, live: c}, "default", registry, crh.Options{EventRecorder: &recordingRecorder{}, CoreEventRecorder: record.NewFakeRecorder(1)})
		require.ErrorContains(t, err, "both EventRecorder and CoreEventRecorder")
	})
}

// byValue is a Manager held by value, as a struct that wraps the clients
// of a real manager would be.
type byValue struct{ cache, live client.Client }

func (m byValue) GetClient() client.Client    { return m.cache }
func (m byValue) GetAPIReader() client.Reader { return m.live }

// A Manager held by value is one manager too: its checkers, built per
// check, record one event for a hold that lasts, and the next once
// podsource.DefaultHeldRepeat has passed on Health.Clock, as with a
// pointer. Before, each checker of a struct Manager got a record of its
// own, and each check an event; and the repeat ran on the real clock.
func TestAManagerHeldByValueSharesItsStateAndRepeatsOnHealthsClock(t *testing.T) {
	// The clients a real manager hands out are pointers.
	c := &struct{ client.Client }{apiServer(t, append(objects(heldStatefulPod(t)), loadNode(t, testutil.NodeLost))...)}
	rec := &recordingRecorder{}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC))
	check := func() {
		t.Helper()
		checker, err := crh.NewChecker(byValue{cache: c, live: c}, "default", registry, crh.Options{EventRecorder: rec, Health: health.Options{Clock: clk}})
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
}

// A Manager that cannot be compared (it holds a client by value with
// funcs in it, as an interceptor client is) is told apart by the Memory
// its checkers share: one event for a hold over three checks. Never a
// panic; without a shared Memory each checker keeps its state to itself.
func TestAManagerThatCannotBeComparedIsToldApartByItsMemory(t *testing.T) {
	c := apiServer(t, append(objects(heldStatefulPod(t)), loadNode(t, testutil.NodeLost))...)
	mgr := uncomparable{cache: interceptor.NewClient(c, interceptor.Funcs{}), live: c, tags: map[string]string{}}
	rec, memory := &recordingRecorder{}, &health.Memory{}
	for range 3 {
		checker, err := crh.NewChecker(mgr, "default", registry, crh.Options{EventRecorder: rec, Health: health.Options{Memory: memory}})
		require.NoError(t, err)
		_, err = checker.CheckReport(context.Background())
		require.NoError(t, err)
	}
	require.Len(t, rec.recorded(), 1, "one event for one hold over three checks")
	_, err := crh.NewChecker(mgr, "default", registry, crh.Options{})
	require.NoError(t, err, "without a Memory: state of its own")
}

// uncomparable is a Manager held by value with a map in it.
type uncomparable struct {
	cache client.Client
	live  client.Reader
	tags  map[string]string
}

func (m uncomparable) GetClient() client.Client    { return m.cache }
func (m uncomparable) GetAPIReader() client.Reader { return m.live }

// Checkers built per reconcile without a Memory share the manager's: the
// second reconcile, over a cache that still lists the pod the first one
// force-deleted, sends no second DELETE. Another manager's checkers
// remember nothing of it, nor do those of a Manager that cannot be
// compared.
func TestCheckersBuiltPerReconcileWithoutAMemoryDeleteOnce(t *testing.T) {
	stale := func(deletes *atomic.Int32) client.Client {
		// The DELETE is accepted, and the cache goes on listing the pod.
		c := apiServer(t, loadPod(t, testutil.PodTaintEvicted), loadPod(t, testutil.PodAlive))
		return interceptor.NewClient(c, interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			deletes.Add(1)
			return nil
		}})
	}
	reconcile := func(mgr crh.Manager) {
		checker, err := crh.NewChecker(mgr, "default", registry, crh.Options{NoNodeEvidence: true})
		require.NoError(t, err)
		healthy, err := checker.Check(context.Background())
		require.NoError(t, err)
		require.True(t, healthy)
	}

	var deletes atomic.Int32
	c := stale(&deletes)
	mgr := &manager{cache: c, live: c}
	for range 3 {
		reconcile(mgr)
	}
	require.Equal(t, int32(1), deletes.Load(), "DELETEs sent by three reconciles over a stale cache")
	reconcile(&manager{cache: c, live: c})
	require.Equal(t, int32(2), deletes.Load(), "another manager's checkers share nothing with these")

	var own atomic.Int32
	byValue := uncomparable{cache: stale(&own), tags: map[string]string{}}
	byValue.live = byValue.cache
	reconcile(byValue)
	reconcile(byValue)
	require.Equal(t, int32(2), own.Load(), "a Manager that cannot be compared: each checker remembers alone")
}
