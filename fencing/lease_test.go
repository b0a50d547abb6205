package fencing_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/health/fencertest"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/fake"
)

var fenceStart = time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)

type podOption func(*corev1.Pod)

// evictedOn is a pod of ns that the taint-eviction controller is deleting
// on node.
func evictedOn(name, node string, opts ...podOption) *corev1.Pod {
	deleted := metav1.NewTime(fenceStart.Add(-time.Minute))
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), DeletionTimestamp: &deleted},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ownedByStatefulSet(p *corev1.Pod) {
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid"})
}

// unreachableNode is a node the node-lifecycle controller marked
// unreachable.
func unreachableNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}},
	}
}

func ptr[T any](v T) *T { return &v }

// leases is a LeaseGetter over a map that a test changes as it goes, or
// that answers err.
type leases struct {
	mu    sync.Mutex
	byKey map[string]*coordinationv1.Lease
	err   error
	gets  int // the reads sent
}

func newLeases(ls ...*coordinationv1.Lease) *leases {
	l := &leases{byKey: map[string]*coordinationv1.Lease{}}
	for _, x := range ls {
		l.put(x)
	}
	return l
}

func (l *leases) put(x *coordinationv1.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byKey[x.Namespace+"/"+x.Name] = x
}

func (l *leases) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gets++
	if l.err != nil {
		return nil, l.err
	}
	x, ok := l.byKey[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, name)
	}
	return x, nil
}

// lease is the Lease pg of ns, held by holder, renewed at renewed, for 15 s.
func lease(holder string, renewed time.Time, rv string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pg", ResourceVersion: rv},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr(holder),
			LeaseDurationSeconds: ptr(int32(15)),
			RenewTime:            ptr(metav1.NewMicroTime(renewed)),
		},
	}
}

// withAnnotation sets one annotation, keeping the others.
func withAnnotation(k, v string) podOption {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

// selfFencing makes a pod follow the protocol: Lease pg, a 10 s deadline.
func selfFencing(p *corev1.Pod) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[fencing.AnnotationLease] = "pg"
	p.Annotations[fencing.AnnotationDeadline] = "10s"
}

func newLeaseFencer(t testing.TB, l fencing.LeaseGetter) *fencing.LeaseFencer {
	t.Helper()
	f, err := fencing.NewLeaseFencer(l, fencing.LeaseOptions{})
	require.NoError(t, err)
	return f
}

// leaseWait is the wait of the test lease: 15 s, the 10 s deadline and
// the default margin.
const leaseWait = 15*time.Second + 10*time.Second + fencing.DefaultMargin

// The lease fencer passes the conformance suite: proof once the record
// is unrenewed for the whole wait since its first sighting, none before,
// none for the failure modes.
func TestLeaseFencerPassesTheConformanceSuite(t *testing.T) {
	pod := evictedOn("pg-1", "n1", selfFencing)
	renewed := fenceStart.Add(-time.Minute) // the node went down a minute ago
	at := func(now time.Time) health.FenceQuery {
		return health.FenceQuery{Pod: pod, NodeState: health.NodeUnreachable, Now: now}
	}
	f := newLeaseFencer(t, newLeases(lease("pg-1", renewed, "7")))
	require.NoError(t, fencertest.TestFencer(f,
		fencertest.Case{Name: "unrenewed for the wait since first seen", Query: at(fenceStart.Add(leaseWait)), Earlier: []time.Time{fenceStart}, Want: health.PodStopped},
		fencertest.Case{Name: "a millisecond short", Query: at(fenceStart.Add(leaseWait - time.Millisecond)), Earlier: []time.Time{fenceStart}, Want: health.NoProof},
		fencertest.Case{Name: "first sighting, renewed long ago", Query: at(fenceStart.Add(time.Hour)), Want: health.NoProof},
		fencertest.Case{Name: "a pod outside the protocol", Query: health.FenceQuery{Pod: evictedOn("web", "n1"), Now: fenceStart.Add(time.Hour)}, Earlier: []time.Time{fenceStart}, Want: health.NoProof},
	))
	taken, err := fencing.NewLeaseFencer(newLeases(takenBy("pg-2", renewed, 1, renewed, "8")), fencing.LeaseOptions{Seen: watchSaw{holders: []string{"pg-1"}}})
	require.NoError(t, err)
	require.NoError(t, fencertest.TestFencer(taken,
		fencertest.Case{Name: "taken over, seen for the wait", Query: at(fenceStart.Add(leaseWait)), Earlier: []time.Time{fenceStart}, Want: health.PodStopped},
		fencertest.Case{Name: "taken over, a millisecond short", Query: at(fenceStart.Add(leaseWait - time.Millisecond)), Earlier: []time.Time{fenceStart}, Want: health.NoProof},
		fencertest.Case{Name: "taken over, first sighting", Query: at(fenceStart.Add(time.Hour)), Want: health.NoProof},
	))
	other := newLeaseFencer(t, newLeases(lease("pg-2", renewed, "7")))
	require.NoError(t, fencertest.TestFencer(other,
		fencertest.Case{Name: "another holder", Query: at(fenceStart.Add(time.Hour)), Earlier: []time.Time{fenceStart}, Want: health.NoProof}))
}

// Each way the evidence can be missing, wrong or stale is no proof, with a
// detail that says why; a read that fails is an error.
func TestLeaseFencerFailsClosed(t *testing.T) {
	renewed := fenceStart.Add(-time.Minute)
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "pg", nil)
	for _, tt := range []struct {
		name    string
		pod     *corev1.Pod
		lease   *coordinationv1.Lease
		err     error
		detail  string
		wantErr error
	}{
		{"the lease missing", evictedOn("pg-1", "n1", selfFencing), nil, nil, "lease ns/pg not found: no evidence", nil},
		{"RBAC denied", evictedOn("pg-1", "n1", selfFencing), nil, denied, "", denied},
		{"another holder", evictedOn("pg-1", "n1", selfFencing), lease("pg-2", renewed, "1"), nil, `is held by "pg-2", not "pg-1"`, nil},
		{"no holder", evictedOn("pg-1", "n1", selfFencing), func() *coordinationv1.Lease { l := lease("", renewed, "1"); l.Spec.HolderIdentity = nil; return l }(), nil, "has no holder", nil},
		{"no duration", evictedOn("pg-1", "n1", selfFencing), func() *coordinationv1.Lease {
			l := lease("pg-1", renewed, "1")
			l.Spec.LeaseDurationSeconds = nil
			return l
		}(), nil, "no positive leaseDurationSeconds", nil},
		{"a zero duration", evictedOn("pg-1", "n1", selfFencing), func() *coordinationv1.Lease {
			l := lease("pg-1", renewed, "1")
			l.Spec.LeaseDurationSeconds = ptr(int32(0))
			return l
		}(), nil, "no positive leaseDurationSeconds", nil},
		{"no renew time", evictedOn("pg-1", "n1", selfFencing), func() *coordinationv1.Lease { l := lease("pg-1", renewed, "1"); l.Spec.RenewTime = nil; return l }(), nil, "neither a renewTime nor an acquireTime", nil},
		{"a deadline without a unit", evictedOn("pg-1", "n1", selfFencing, withAnnotation(fencing.AnnotationDeadline, "10")), lease("pg-1", renewed, "1"), nil, `podhealth.io/fence-deadline="10" is not a duration`, nil},
		{"a negative deadline", evictedOn("pg-1", "n1", selfFencing, withAnnotation(fencing.AnnotationDeadline, "-1s")), lease("pg-1", renewed, "1"), nil, "is not positive", nil},
		{"a deadline past the longest setting", evictedOn("pg-1", "n1", selfFencing, withAnnotation(fencing.AnnotationDeadline, "1000000h")), lease("pg-1", renewed, "1"), nil, `is longer than 596523h14m7s`, nil},
		{"a deadline out of range", evictedOn("pg-1", "n1", selfFencing, withAnnotation(fencing.AnnotationDeadline, "9999999999h")), lease("pg-1", renewed, "1"), nil, "is not a duration", nil},
		{"no deadline", evictedOn("pg-1", "n1", withAnnotation(fencing.AnnotationLease, "pg")), lease("pg-1", renewed, "1"), nil, "without podhealth.io/fence-deadline", nil},
		{"not a lease name", evictedOn("pg-1", "n1", selfFencing, withAnnotation(fencing.AnnotationLease, "PG/x")), lease("pg-1", renewed, "1"), nil, "is not a Lease name", nil},
		{"an empty holder", evictedOn("pg-1", "n1", selfFencing, withAnnotation(fencing.AnnotationHolder, "")), lease("", renewed, "1"), nil, "podhealth.io/fence-holder is empty", nil},
		// A process of the pod restarted while its node was cut off may
		// claim the Lease after this read: until the pod's deletion has
		// begun, no record proves it stopped, however long unrenewed.
		{"a pod whose deletion has not begun", evictedOn("pg-1", "n1", selfFencing, func(p *corev1.Pod) { p.DeletionTimestamp = nil }), lease("pg-1", renewed, "1"), nil,
			"the pod's deletion has not begun, so a process of it may still claim the Lease after this read", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newLeases()
			if tt.lease != nil {
				l.put(tt.lease)
			}
			l.err = tt.err
			f := newLeaseFencer(t, l)
			rec := fencertest.NewRecord()
			var fence health.Fence
			var err error
			for _, now := range []time.Time{fenceStart, fenceStart.Add(time.Hour)} {
				fence, err = f.Fence(context.Background(), health.FenceQuery{Pod: tt.pod, Now: now, Sightings: rec.At(now)})
			}
			require.Equal(t, health.NoProof, fence.Proves)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Contains(t, fence.Detail, tt.detail)
			require.Zero(t, fence.RetryAfter, "only an event can change this answer")
		})
	}
}

// The wait is measured on the Checker's own clock: a clock far ahead does
// not shorten it, a clock behind the holder's lengthens it (and says so),
// a renewal after expiry starts it afresh, and a holder's explicit
// identity is honoured.
func TestLeaseFencerMeasuresOnTheCheckersClock(t *testing.T) {
	t.Run("a clock far ahead waits the whole wait from its first sighting", func(t *testing.T) {
		ahead := fenceStart.Add(1000 * time.Hour)
		f := newLeaseFencer(t, newLeases(lease("pg-1", fenceStart, "1")))
		rec := fencertest.NewRecord()
		ask := func(now time.Time) health.Fence {
			fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1", selfFencing), Now: now, Sightings: rec.At(now)})
			require.NoError(t, err)
			return fence
		}
		first := ask(ahead)
		require.Equal(t, health.NoProof, first.Proves)
		require.Equal(t, leaseWait, first.RetryAfter)
		require.Equal(t, health.NoProof, ask(ahead.Add(leaseWait-time.Second)).Proves)
		proof := ask(ahead.Add(leaseWait))
		require.Equal(t, health.PodStopped, proof.Proves)
		require.Equal(t, "lease ns/pg", proof.By)
		require.Equal(t, ahead.Add(leaseWait), proof.Since)
	})
	t.Run("a clock behind waits for the renewTime too", func(t *testing.T) {
		renewed := fenceStart.Add(time.Minute) // written by a clock a minute ahead
		f := newLeaseFencer(t, newLeases(lease("pg-1", renewed, "1")))
		rec := fencertest.NewRecord()
		now := fenceStart
		fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1", selfFencing), Now: now, Sightings: rec.At(now)})
		require.NoError(t, err)
		require.Equal(t, time.Minute+leaseWait, fence.RetryAfter)
		require.Contains(t, fence.Detail, "its renewTime is ahead of this clock by more than the margin")
		now = fenceStart.Add(leaseWait)
		fence, err = f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1", selfFencing), Now: now, Sightings: rec.At(now)})
		require.NoError(t, err)
		require.Equal(t, health.NoProof, fence.Proves)
		require.Equal(t, time.Minute, fence.RetryAfter)
	})
	t.Run("a renewal after expiry waits afresh", func(t *testing.T) {
		l := newLeases(lease("pg-1", fenceStart, "1"))
		f := newLeaseFencer(t, l)
		rec := fencertest.NewRecord()
		ask := func(now time.Time) health.Fence {
			fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1", selfFencing), Now: now, Sightings: rec.At(now)})
			require.NoError(t, err)
			return fence
		}
		ask(fenceStart)
		back := fenceStart.Add(leaseWait - time.Second)
		l.put(lease("pg-1", back, "2")) // the holder came back and renewed
		require.Equal(t, health.NoProof, ask(back).Proves)
		require.Equal(t, health.NoProof, ask(fenceStart.Add(leaseWait)).Proves, "the old record's wait no longer counts")
		require.Equal(t, health.PodStopped, ask(back.Add(leaseWait)).Proves)
	})
	t.Run("a write to the lease that keeps its renewTime waits afresh", func(t *testing.T) {
		l := newLeases(lease("pg-1", fenceStart, "1"))
		f := newLeaseFencer(t, l)
		rec := fencertest.NewRecord()
		ask := func(now time.Time) health.Proof {
			fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1", selfFencing), Now: now, Sightings: rec.At(now)})
			require.NoError(t, err)
			return fence.Proves
		}
		ask(fenceStart)
		l.put(lease("pg-1", fenceStart, "2"))
		require.Equal(t, health.NoProof, ask(fenceStart.Add(leaseWait)))
	})
	t.Run("the holder annotation names the identity", func(t *testing.T) {
		f := newLeaseFencer(t, newLeases(lease("pg-1.db.svc", fenceStart, "1")))
		rec := fencertest.NewRecord()
		pod := evictedOn("pg-1", "n1", selfFencing, withAnnotation(fencing.AnnotationHolder, "pg-1.db.svc"))
		for _, now := range []time.Time{fenceStart, fenceStart.Add(leaseWait)} {
			fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: pod, Now: now, Sightings: rec.At(now)})
			require.NoError(t, err)
			if now.Equal(fenceStart) {
				require.Equal(t, health.NoProof, fence.Proves)
			} else {
				require.Equal(t, health.PodStopped, fence.Proves)
			}
		}
	})
	t.Run("a margin of its own", func(t *testing.T) {
		f, err := fencing.NewLeaseFencer(newLeases(lease("pg-1", fenceStart, "1")), fencing.LeaseOptions{Margin: 30 * time.Second})
		require.NoError(t, err)
		rec := fencertest.NewRecord()
		fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1", selfFencing), Now: fenceStart, Sightings: rec.At(fenceStart)})
		require.NoError(t, err)
		require.Equal(t, 55*time.Second, fence.RetryAfter)
	})
}

func TestNewLeaseFencerRefusesWhatCannotWork(t *testing.T) {
	var typedNil *leases
	_, err := fencing.NewLeaseFencer(nil, fencing.LeaseOptions{})
	require.ErrorContains(t, err, "nil LeaseGetter")
	_, err = fencing.NewLeaseFencer(typedNil, fencing.LeaseOptions{})
	require.ErrorContains(t, err, "nil LeaseGetter")
	_, err = fencing.NewLeaseFencer(newLeases(), fencing.LeaseOptions{Margin: -time.Second})
	require.ErrorContains(t, err, "negative")
	var zero fencing.LeaseFencer
	_, err = zero.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1", selfFencing), Now: fenceStart})
	require.ErrorContains(t, err, "NewLeaseFencer")
}

// In a Checker, a self-fencing StatefulSet pod on a partitioned node is
// held until its Lease has been unrenewed for the wait, RetryAfter says
// when, and then it is force-deleted.
func TestACheckerFreesASelfFencedPodOnceItsLeaseIsExpiredForTheWait(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(fenceStart)
	pods := fake.New(fake.Options{}, evictedOn("pg-1", "n1", ownedByStatefulSet, selfFencing))
	nodes := fake.NewNodes(unreachableNode("n1"))
	checker, err := health.New(pods, pods, health.Options{Nodes: nodes, Clock: clk, Fencers: []health.Fencer{newLeaseFencer(t, newLeases(lease("pg-1", fenceStart.Add(-3*time.Second), "1")))}})
	require.NoError(t, err)

	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
	require.Contains(t, report.Pods[0].HeldBack.Detail, "owned by StatefulSet db; lease ns/pg held by pg-1 fences once unrenewed for 27s")
	require.Equal(t, leaseWait, report.RetryAfter)

	clk.SetTime(fenceStart.Add(report.RetryAfter))
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome)
	require.Len(t, pods.Deletes(), 1)
}

// seenAt is a LeaseSightings that saw one resourceVersion of Lease ns/pg
// at one time.
type seenAt struct {
	rv string
	at time.Time
}

func (s seenAt) LeaseSeen(namespace, name, rv string) (time.Time, bool) {
	if namespace == "ns" && name == "pg" && rv == s.rv {
		return s.at, true
	}
	return time.Time{}, false
}

func (seenAt) AcquisitionSeen(string, string, string, time.Time, int32) (time.Time, bool) {
	return time.Time{}, false
}

func (seenAt) HolderSeen(string, string, string) bool { return false }

// watchSaw is a LeaseSightings that saw holders hold Lease ns/pg, and one
// acquisition of it at a time.
type watchSaw struct {
	holders     []string
	acquisition string // holder/acquireTime(UnixNano)/transitions
	at          time.Time
}

func (w watchSaw) LeaseSeen(string, string, string) (time.Time, bool) { return time.Time{}, false }

func (w watchSaw) AcquisitionSeen(namespace, name, holder string, acquired time.Time, transitions int32) (time.Time, bool) {
	if namespace == "ns" && name == "pg" && w.acquisition == fmt.Sprintf("%s/%d/%d", holder, acquired.UnixNano(), transitions) {
		return w.at, true
	}
	return time.Time{}, false
}

func (w watchSaw) HolderSeen(namespace, name, holder string) bool {
	return namespace == "ns" && name == "pg" && slices.Contains(w.holders, holder)
}

// A watch that saw the record before any check asked starts the wait at
// its sighting; one that saw another version, or a time after the check's
// own, does not; the renewTime still bounds the wait.
func TestLeaseFencerStartsTheWaitAtTheWatchsSighting(t *testing.T) {
	renewed := fenceStart.Add(-time.Minute)
	for _, tt := range []struct {
		name string
		seen fencing.LeaseSightings
		want time.Duration // RetryAfter of the first question, at fenceStart
	}{
		{"seen when renewed", seenAt{rv: "7", at: renewed}, 0},
		{"seen 10 s ago", seenAt{rv: "7", at: fenceStart.Add(-10 * time.Second)}, leaseWait - 10*time.Second},
		{"another version seen", seenAt{rv: "6", at: renewed}, leaseWait},
		{"seen after this check", seenAt{rv: "7", at: fenceStart.Add(time.Second)}, leaseWait},
		{"no watch", nil, leaseWait},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := fencing.NewLeaseFencer(newLeases(lease("pg-1", renewed, "7")), fencing.LeaseOptions{Seen: tt.seen})
			require.NoError(t, err)
			fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1", selfFencing), Now: fenceStart, Sightings: fencertest.NewRecord().At(fenceStart)})
			require.NoError(t, err)
			if tt.want == 0 {
				require.Equal(t, health.PodStopped, fence.Proves)
				return
			}
			require.Equal(t, health.NoProof, fence.Proves)
			require.Equal(t, tt.want, fence.RetryAfter)
		})
	}
	t.Run("the renewTime still bounds it", func(t *testing.T) {
		recent := fenceStart.Add(-5 * time.Second)
		f, err := fencing.NewLeaseFencer(newLeases(lease("pg-1", recent, "8")), fencing.LeaseOptions{Seen: seenAt{rv: "8", at: fenceStart.Add(-time.Hour)}})
		require.NoError(t, err)
		fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1", selfFencing), Now: fenceStart, Sightings: fencertest.NewRecord().At(fenceStart)})
		require.NoError(t, err)
		require.Equal(t, leaseWait-5*time.Second, fence.RetryAfter)
	})
}

// A pod that states the Lease protocol has declared one writer: even a
// ReplicaSet pod on a ReadWriteMany claim, or one that says writers=many,
// is held for fencing evidence, and freed only once its Lease proves it
// stopped. Before, it looked stateless and went at once, its Lease
// never read.
func TestAPodThatStatesTheLeaseProtocolIsHeldUntilItsLeaseProvesItStopped(t *testing.T) {
	rwx := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-uid", Controller: ptr(true)}}
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}}}
	}
	claims := fake.NewClaims(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}})
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{"a ReplicaSet pod on a ReadWriteMany claim", evictedOn("pg-1", "n1", rwx, selfFencing)},
		{"a pod that also says writers=many", evictedOn("pg-1", "n1", rwx, selfFencing, withAnnotation(health.AnnotationWriters, "many"))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(fenceStart)
			pods := fake.New(fake.Options{}, tt.pod)
			reads := newLeases(lease("pg-1", fenceStart.Add(-3*time.Second), "1"))
			checker, err := health.New(pods, pods, health.Options{Nodes: fake.NewNodes(unreachableNode("n1")), Claims: claims, Clock: clk,
				Fencers: []health.Fencer{newLeaseFencer(t, reads)}})
			require.NoError(t, err)
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, health.HeldBack, report.Pods[0].Outcome, "freed before its Lease was read")
			require.Contains(t, report.Pods[0].HeldBack.Detail, "states the Lease protocol (podhealth.io/fence-lease): one writer; lease ns/pg held by pg-1 fences once unrenewed for 27s")
			require.Empty(t, pods.Deletes())

			clk.SetTime(fenceStart.Add(report.RetryAfter))
			report, err = checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome, "its Lease proves it stopped")
		})
	}
}

// A pod that its Lease freed says so: its report carries the fencer's
// proof (the fencer, what it proves, by which Lease, since when, on what
// evidence), and its event and its log line name it, so that an admin does
// not read the delete as one of a NotReady node alone.
func TestAFencedDeleteNamesItsProofInTheReportTheEventAndTheLog(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(fenceStart)
	pods := fake.New(fake.Options{}, evictedOn("pg-1", "n1", ownedByStatefulSet, selfFencing))
	var lines []string
	logger := funcr.NewJSON(func(obj string) { lines = append(lines, obj) }, funcr.Options{})
	checker, err := health.New(pods, pods, health.Options{Nodes: fake.NewNodes(unreachableNode("n1")), Clock: clk, Logger: logger,
		Fencers: []health.Fencer{newLeaseFencer(t, newLeases(lease("pg-1", fenceStart.Add(-3*time.Second), "1")))}})
	require.NoError(t, err)
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Nil(t, report.Pods[0].FencedBy, "held: no proof yet")
	clk.SetTime(fenceStart.Add(report.RetryAfter))
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)

	got := report.Pods[0]
	require.Equal(t, health.ForceDeleted, got.Outcome)
	require.NotNil(t, got.FencedBy)
	require.Equal(t, "lease", got.FencedBy.Fencer)
	require.Equal(t, health.PodStopped, got.FencedBy.Proves)
	require.Equal(t, "lease ns/pg", got.FencedBy.By)
	require.Equal(t, fenceStart.Add(leaseWait), got.FencedBy.Since, "since its first sighting plus the wait")
	require.Contains(t, got.FencedBy.Detail, "held by pg-1 unrenewed for")

	event, ok := podsource.EventFor(got)
	require.True(t, ok)
	require.Contains(t, event.Message, "; fenced: fencer lease: lease ns/pg proves PodStopped since 2026-12-03T08:00:27Z: lease ns/pg held by pg-1 unrenewed for 27s")
	require.True(t, strings.HasSuffix(event.Message, "; outcome ForceDeleted"), event.Message)

	var deleted string
	for _, l := range lines {
		if strings.Contains(l, `"force-deleted pod"`) {
			deleted = l
		}
	}
	for _, kv := range []string{`"fencer":"lease"`, `"fencedBy":"lease ns/pg"`, `"proves":"PodStopped"`, `"fencedSince":"2026-12-03T08:00:27Z"`} {
		require.Contains(t, deleted, kv, "the force delete's log line")
	}
}

// takenBy is the Lease as a new holder left it when it took it over at
// acquired (its leaseTransitions-th transition), renewed at renewed.
func takenBy(holder string, acquired time.Time, transitions int32, renewed time.Time, rv string) *coordinationv1.Lease {
	l := lease(holder, renewed, rv)
	l.Spec.AcquireTime = ptr(metav1.NewMicroTime(acquired))
	l.Spec.LeaseTransitions = ptr(transitions)
	return l
}

// A takeover is evidence: a Lease now held by another holder proves the old
// one stopped once the takeover has been seen for the duration plus the
// deadline plus the margin. The new holder's renewals do not restart the
// wait; the Lease taken back by the pod is judged as its own again; taken
// over once more, the new acquisition waits afresh; a fresh Memory waits
// the whole wait from its first sighting (the watch having seen the old
// holder); and a record without an acquireTime, whose acquisitions cannot
// be told apart, proves nothing.
func TestATakeoverOfTheLeaseProvesTheOldHolderStopped(t *testing.T) {
	ask := func(f *fencing.LeaseFencer, rec *fencertest.Record, now time.Time) health.Fence {
		t.Helper()
		fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1", selfFencing), Now: now, Sightings: rec.At(now)})
		require.NoError(t, err)
		return fence
	}
	t.Run("the holder changing: proof once the takeover is seen for the wait", func(t *testing.T) {
		l := newLeases(lease("pg-1", fenceStart, "1"))
		f, rec := newLeaseFencer(t, l), fencertest.NewRecord()
		ask(f, rec, fenceStart)
		took := fenceStart.Add(20 * time.Second)
		l.put(takenBy("pg-2", took, 1, took, "2"))
		first := ask(f, rec, took)
		require.Equal(t, health.NoProof, first.Proves)
		require.Equal(t, leaseWait, first.RetryAfter)
		require.Contains(t, first.Detail, `is held by "pg-2", not "pg-1": taken over, so pg-1 has stopped by the takeover's first sighting`)
		l.put(takenBy("pg-2", took, 1, took.Add(10*time.Second), "3")) // the new holder renews
		require.Equal(t, health.NoProof, ask(f, rec, took.Add(leaseWait-time.Millisecond)).Proves)
		proof := ask(f, rec, took.Add(leaseWait))
		require.Equal(t, health.PodStopped, proof.Proves, "the new holder's renewals do not restart the wait")
		require.Equal(t, took.Add(leaseWait), proof.Since)
		require.Equal(t, "lease ns/pg", proof.By)
	})
	t.Run("the holder changing back: the pod's own record again", func(t *testing.T) {
		l := newLeases(takenBy("pg-2", fenceStart, 1, fenceStart, "2"))
		f, rec := newLeaseFencer(t, l), fencertest.NewRecord()
		ask(f, rec, fenceStart)
		back := fenceStart.Add(leaseWait - time.Second)
		l.put(takenBy("pg-1", back, 2, back, "3")) // pg-1 took it back, and holds it
		require.Equal(t, health.NoProof, ask(f, rec, back).Proves)
		require.Equal(t, health.NoProof, ask(f, rec, fenceStart.Add(leaseWait)).Proves, "the takeover's wait no longer counts")
		require.Equal(t, health.PodStopped, ask(f, rec, back.Add(leaseWait)).Proves, "its own record unrenewed for the wait")
	})
	t.Run("taken over again: the new acquisition waits afresh", func(t *testing.T) {
		l := newLeases(lease("pg-1", fenceStart.Add(-time.Second), "1"))
		f, rec := newLeaseFencer(t, l), fencertest.NewRecord()
		ask(f, rec, fenceStart.Add(-time.Second)) // pg-1 seen holding it
		l.put(takenBy("pg-2", fenceStart, 1, fenceStart, "2"))
		ask(f, rec, fenceStart)
		again := fenceStart.Add(leaseWait - time.Second)
		l.put(takenBy("pg-2", again, 3, again, "5")) // pg-1 held it in between, unseen
		require.Equal(t, health.NoProof, ask(f, rec, again).Proves)
		require.Equal(t, health.NoProof, ask(f, rec, fenceStart.Add(leaseWait)).Proves, "the earlier acquisition's wait no longer counts")
		require.Equal(t, health.PodStopped, ask(f, rec, again.Add(leaseWait)).Proves)
	})
	t.Run("a takeover first seen by a fresh Memory waits the whole wait", func(t *testing.T) {
		l := newLeases(takenBy("pg-2", fenceStart.Add(-time.Hour), 1, fenceStart, "2"))
		f, err := fencing.NewLeaseFencer(l, fencing.LeaseOptions{Seen: watchSaw{holders: []string{"pg-1", "pg-2"}}})
		require.NoError(t, err)
		late := fenceStart.Add(time.Hour)
		fresh := fencertest.NewRecord()
		first := ask(f, fresh, late)
		require.Equal(t, health.NoProof, first.Proves, "an old acquireTime shortens nothing")
		require.Equal(t, leaseWait, first.RetryAfter)
		require.Equal(t, health.PodStopped, ask(f, fresh, late.Add(leaseWait)).Proves)
	})
	t.Run("no acquireTime: no evidence", func(t *testing.T) {
		f, rec := newLeaseFencer(t, newLeases(lease("pg-2", fenceStart, "2"))), fencertest.NewRecord()
		ask(f, rec, fenceStart)
		fence := ask(f, rec, fenceStart.Add(time.Hour))
		require.Equal(t, health.NoProof, fence.Proves)
		require.Contains(t, fence.Detail, "has no acquireTime")
		require.Zero(t, fence.RetryAfter)
	})
}

// An operator states each pod's protocol in process (LeaseOptions.Protocol),
// from its own resource: nothing on the pod. Its protocol is measured as
// the annotations' would be, a pod it disowns is not asked about (its
// Lease never read), one it states badly is no evidence, its word wins
// over annotations, and a panic in it holds the pod and fails the check.
func TestAProtocolStatedInProcessNeedsNoAnnotation(t *testing.T) {
	protocol := func(pod *corev1.Pod) (fencing.LeaseProtocol, bool) {
		switch pod.Name {
		case "pg-1":
			return fencing.LeaseProtocol{Lease: "pg", Deadline: 10 * time.Second}, true
		case "bad":
			return fencing.LeaseProtocol{Lease: "pg", Deadline: 0}, true
		case "boom":
			panic("the operator's resource is not cached")
		}
		return fencing.LeaseProtocol{}, false
	}
	reads := newLeases(lease("pg-1", fenceStart.Add(-3*time.Second), "1"))
	f, err := fencing.NewLeaseFencer(reads, fencing.LeaseOptions{Protocol: protocol})
	require.NoError(t, err)
	require.NoError(t, fencertest.TestFencer(f,
		fencertest.Case{Name: "stated in process, unrenewed for the wait", Query: health.FenceQuery{Pod: evictedOn("pg-1", "n1"), Now: fenceStart.Add(leaseWait)}, Earlier: []time.Time{fenceStart}, Want: health.PodStopped},
		fencertest.Case{Name: "a millisecond short", Query: health.FenceQuery{Pod: evictedOn("pg-1", "n1"), Now: fenceStart.Add(leaseWait - time.Millisecond)}, Earlier: []time.Time{fenceStart}, Want: health.NoProof},
		fencertest.Case{Name: "disowned, annotations and all", Query: health.FenceQuery{Pod: evictedOn("web", "n1", selfFencing), Now: fenceStart.Add(time.Hour)}, Earlier: []time.Time{fenceStart}, Want: health.NoProof},
		fencertest.Case{Name: "a deadline that is not positive", Query: health.FenceQuery{Pod: evictedOn("bad", "n1"), Now: fenceStart.Add(time.Hour)}, Earlier: []time.Time{fenceStart}, Want: health.NoProof},
	))
	rec := fencertest.NewRecord()
	fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("bad", "n1"), Now: fenceStart, Sightings: rec.At(fenceStart)})
	require.NoError(t, err)
	require.Contains(t, fence.Detail, "LeaseOptions.Protocol's Deadline 0s is not positive")

	reads.gets = 0
	_, err = f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("web", "n1", selfFencing), Now: fenceStart, Sightings: rec.At(fenceStart)})
	require.NoError(t, err)
	require.Zero(t, reads.gets, "the annotations of a pod the operator disowns are not read")

	pods := fake.New(fake.Options{}, evictedOn("boom", "n1", ownedByStatefulSet))
	checker, err := health.New(pods, pods, health.Options{Nodes: fake.NewNodes(unreachableNode("n1")), Fencers: []health.Fencer{f}})
	require.NoError(t, err)
	report, err := checker.CheckReport(context.Background())
	require.ErrorIs(t, err, health.ErrFenceUnavailable)
	require.ErrorContains(t, err, "LeaseOptions.Protocol panicked about pod ns/boom")
	require.Equal(t, health.HeldBack, report.Pods[0].Outcome, "fail closed")
	require.Empty(t, pods.Deletes())
}

// A takeover proves only that the holder it replaced has stopped. A pod
// that states the protocol but was never seen holding the Lease (a
// replica that writes its own volume, annotated by mistake; a pod first
// asked about after the takeover, by a fresh process) gets no proof,
// however long the new holder has held it. Seen holding it, by the watch
// or by an earlier check (whichever pod that check asked about), it is
// proven stopped after the wait.
func TestATakeoverFreesOnlyAPodSeenHoldingTheLease(t *testing.T) {
	primary := takenBy("pg-1", fenceStart, 1, fenceStart, "2") // the live primary holds it
	replica := evictedOn("pg-2", "n1", selfFencing)
	ask := func(f *fencing.LeaseFencer, rec *fencertest.Record, pod *corev1.Pod, now time.Time) health.Fence {
		t.Helper()
		fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: pod, Now: now, Sightings: rec.At(now)})
		require.NoError(t, err)
		return fence
	}
	t.Run("a replica that never held it", func(t *testing.T) {
		f, rec := newLeaseFencer(t, newLeases(primary)), fencertest.NewRecord()
		for _, now := range []time.Time{fenceStart, fenceStart.Add(leaseWait), fenceStart.Add(31 * time.Minute)} {
			fence := ask(f, rec, replica, now)
			require.Equal(t, health.NoProof, fence.Proves, "at %s", now)
			require.Contains(t, fence.Detail, `"pg-2" was never seen holding it`)
			require.Zero(t, fence.RetryAfter, "only an event can change this answer")
		}
	})
	t.Run("the old primary, seen holding it by an earlier check", func(t *testing.T) {
		l := newLeases(lease("pg-2", fenceStart.Add(-time.Minute), "1"))
		f, rec := newLeaseFencer(t, l), fencertest.NewRecord()
		require.Equal(t, health.NoProof, ask(f, rec, replica, fenceStart.Add(-time.Minute)).Proves)
		l.put(primary)
		require.Equal(t, health.NoProof, ask(f, rec, replica, fenceStart).Proves)
		require.Equal(t, health.PodStopped, ask(f, rec, replica, fenceStart.Add(leaseWait)).Proves)
	})
	t.Run("the old primary, seen holding it by an earlier check that asked about another pod", func(t *testing.T) {
		// Without a watch, the operator's only sighting of the old
		// primary may come from the check of another pod (its standby,
		// evicted first): the read saw pg-2 hold the Lease all the same.
		l := newLeases(lease("pg-2", fenceStart.Add(-time.Minute), "1"))
		f, rec := newLeaseFencer(t, l), fencertest.NewRecord()
		standby := evictedOn("pg-3", "n2", selfFencing)
		require.Equal(t, health.NoProof, ask(f, rec, standby, fenceStart.Add(-time.Minute)).Proves)
		l.put(primary)
		require.Equal(t, health.NoProof, ask(f, rec, replica, fenceStart).Proves)
		require.Equal(t, health.PodStopped, ask(f, rec, replica, fenceStart.Add(leaseWait)).Proves)
		require.Equal(t, health.NoProof, ask(f, rec, standby, fenceStart.Add(leaseWait)).Proves, "pg-3 was never seen holding it")
	})
	t.Run("the old primary, seen holding it by the watch", func(t *testing.T) {
		f, err := fencing.NewLeaseFencer(newLeases(primary), fencing.LeaseOptions{Seen: watchSaw{holders: []string{"pg-2"}}})
		require.NoError(t, err)
		rec := fencertest.NewRecord()
		require.Equal(t, health.NoProof, ask(f, rec, replica, fenceStart).Proves)
		require.Equal(t, health.PodStopped, ask(f, rec, replica, fenceStart.Add(leaseWait)).Proves)
	})
}

// A takeover that the watch saw before any check asked starts the wait at
// the watch's sighting, as an unrenewed record's does: a takeover seen 5
// minutes before the first check proves the old holder stopped at once.
// The watch's time for another acquisition, or after the check's own,
// counts for nothing.
func TestATakeoversWaitStartsAtTheWatchsSighting(t *testing.T) {
	taken := takenBy("pg-2", fenceStart.Add(-5*time.Minute), 3, fenceStart, "9")
	acq := func(holder string, transitions int32) string {
		return fmt.Sprintf("%s/%d/%d", holder, fenceStart.Add(-5*time.Minute).UnixNano(), transitions)
	}
	for _, tt := range []struct {
		name string
		saw  watchSaw
		want time.Duration // RetryAfter at fenceStart; 0: proof
	}{
		{"seen 5 minutes before the first check", watchSaw{holders: []string{"pg-1"}, acquisition: acq("pg-2", 3), at: fenceStart.Add(-5 * time.Minute)}, 0},
		{"seen 10 s before", watchSaw{holders: []string{"pg-1"}, acquisition: acq("pg-2", 3), at: fenceStart.Add(-10 * time.Second)}, leaseWait - 10*time.Second},
		{"another acquisition seen", watchSaw{holders: []string{"pg-1"}, acquisition: acq("pg-2", 2), at: fenceStart.Add(-5 * time.Minute)}, leaseWait},
		{"seen after the check", watchSaw{holders: []string{"pg-1"}, acquisition: acq("pg-2", 3), at: fenceStart.Add(time.Second)}, leaseWait},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := fencing.NewLeaseFencer(newLeases(taken), fencing.LeaseOptions{Seen: tt.saw})
			require.NoError(t, err)
			fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1", selfFencing), Now: fenceStart, Sightings: fencertest.NewRecord().At(fenceStart)})
			require.NoError(t, err)
			if tt.want == 0 {
				require.Equal(t, health.PodStopped, fence.Proves, fence.Detail)
				require.Equal(t, fenceStart.Add(-5*time.Minute).Add(leaseWait), fence.Since)
				return
			}
			require.Equal(t, health.NoProof, fence.Proves)
			require.Equal(t, tt.want, fence.RetryAfter)
		})
	}
}
