package selffence_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/selffence"
)

var leasesResource = coordinationv1.SchemeGroupVersion.WithResource("leases")

// leaseServer is a fake clientset whose Leases behave as the API server's
// do where the protocol leans on them: an update is refused with a
// Conflict unless it carries the stored resourceVersion, which every write
// changes. onUpdate, when set, runs inside each update before it is
// answered: it may step the clock, block, or return an error to answer
// with.
type leaseServer struct {
	*fake.Clientset
	mu       sync.Mutex
	rv       int
	updates  atomic.Int32 // updates asked for
	stored   atomic.Int32 // updates stored
	onUpdate atomic.Pointer[func(n int32) error]
	// onStored, when set, runs after each update is stored: an error it
	// returns is the answer, as when a write applies and its answer is
	// lost.
	onStored atomic.Pointer[func(n int32) error]
}

// setOnUpdate sets the hook that runs inside each update.
func (s *leaseServer) setOnUpdate(f func(n int32) error) { s.onUpdate.Store(&f) }

func newLeaseServer(t *testing.T, leases ...*coordinationv1.Lease) *leaseServer {
	s := &leaseServer{Clientset: fake.NewClientset(podNamed("pg-1"), podNamed("pg-2"))}
	for _, l := range leases {
		s.rv++
		l.ResourceVersion = strconv.Itoa(s.rv)
		require.NoError(t, s.Tracker().Add(l))
	}
	s.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.rv++
		l.ResourceVersion = strconv.Itoa(s.rv)
		if err := s.Tracker().Create(leasesResource, l, l.Namespace); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	s.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l, err := s.write(a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease))
		if f := s.onStored.Load(); err == nil && f != nil {
			if err := (*f)(s.stored.Load()); err != nil {
				return true, nil, err
			}
		}
		return true, l, err
	})
	// Prepended last, so run first: the hook, then the write.
	s.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n := s.updates.Add(1)
		if f := s.onUpdate.Load(); f != nil {
			if err := (*f)(n); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	return s
}

// write stores l if it carries the stored resourceVersion.
func (s *leaseServer) write(l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.Tracker().Get(leasesResource, l.Namespace, l.Name)
	if err != nil {
		return nil, err
	}
	if cur.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion {
		return nil, apierrors.NewConflict(leasesResource.GroupResource(), l.Name, errors.New("the object has been modified"))
	}
	l = l.DeepCopy()
	s.rv++
	l.ResourceVersion = strconv.Itoa(s.rv)
	if err := s.Tracker().Update(leasesResource, l, l.Namespace); err != nil {
		return nil, err
	}
	s.stored.Add(1)
	return l, nil
}

// podNamed is pod name of namespace db, as the API server serves it.
func podNamed(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, UID: uidOf(name)}}
}

// uidOf is the UID of podNamed(name).
func uidOf(name string) types.UID { return types.UID("uid-of-" + name) }

// leaseExists reports whether the Lease has been created.
func leaseExists(s *leaseServer) bool {
	_, err := s.Tracker().Get(leasesResource, "db", "pg-primary")
	return err == nil
}

func (s *leaseServer) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := s.CoordinationV1().Leases("db").Get(context.Background(), "pg-primary", metav1.GetOptions{})
	require.NoError(t, err)
	return l
}

// run starts a Guard for pod pg-1 with opts over s on clk, and returns it
// with the channel Run's result arrives on and a count of its Exits.
func run(t *testing.T, s *leaseServer, clk *fakeClock, opts selffence.Options) (*selffence.Guard, chan error, *atomic.Int32) {
	g, done, exits, _ := runCancel(t, s, clk, opts)
	return g, done, exits
}

// runCancel is run, with the cancel of Run's context.
func runCancel(t *testing.T, s *leaseServer, clk *fakeClock, opts selffence.Options) (*selffence.Guard, chan error, *atomic.Int32, context.CancelFunc) {
	t.Helper()
	exits := new(atomic.Int32)
	opts.Namespace, opts.Lease, opts.Identity, opts.PodUID = "db", "pg-primary", "pg-1", uidOf("pg-1")
	opts.Clock, opts.Exit = clk, func() { exits.Add(1) }
	g, err := selffence.New(s, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	return g, done, exits, cancel
}

// tenSeconds is a Lease of 10 s renewed every 3 s, with a 5 s deadline
// and a stop that takes 1 s: the process stops 14 s after the start of
// its last successful renewal. A margin of 3 s makes the wait before
// writing under a Lease whose holder it could not see (10 + 5 + 3 s) six
// renew intervals.
var tenSeconds = selffence.Options{Duration: 10 * time.Second, RenewInterval: 3 * time.Second, Deadline: 5 * time.Second, Margin: 3 * time.Second}

// runHeld is run, then steps the clock a renewal at a time through the
// wait after the claim of the missing Lease (18 s), until the Guard may
// write; it then zeroes the server's counts of updates, so that a test
// counts the renewals after that moment, the next one 3 s later.
func runHeld(t *testing.T, s *leaseServer, clk *fakeClock, opts selffence.Options) (*selffence.Guard, chan error, *atomic.Int32, context.CancelFunc) {
	t.Helper()
	g, done, exits, cancel := runCancel(t, s, clk, opts)
	stepUntilHeld(t, s, clk, g)
	s.updates.Store(0)
	s.stored.Store(0)
	return g, done, exits, cancel
}

// stepUntilHeld steps clk by 3 s at a time, each step once the renewal's
// and the watchdog's timers wait, until g may write.
func stepUntilHeld(t *testing.T, s *leaseServer, clk *fakeClock, g *selffence.Guard) {
	t.Helper()
	for i := 0; ; i++ {
		awaitWaiters(t, clk, 2) // asleep: after any announcement
		select {
		case <-g.Held():
			return
		default:
		}
		require.Less(t, i, 20, "never held")
		before := s.stored.Load()
		clk.Step(3 * time.Second)
		require.Eventually(t, func() bool { return s.stored.Load() > before }, 5*time.Second, time.Millisecond, "a renewal during the wait")
	}
}

// A missing Lease may never have been held, or may have been deleted
// under a holder that still writes until its next renewal fails: the
// Guard claims it at once (no other Guard takes it then) and renews it,
// but writes only once the holder it could not see would have been
// stopped, 10 + 5 + 3 s after the claim.
func TestAGuardClaimsAMissingLeaseAndWritesOnlyOnceAnUnseenHolderWouldHaveStopped(t *testing.T) {
	s, clk := newLeaseServer(t), newFakeClock()
	g, _, exits := run(t, s, clk, tenSeconds)
	require.Eventually(t, func() bool { return leaseExists(s) }, 5*time.Second, time.Millisecond, "claimed at once")
	claimed := clk.Now()
	for range 5 { // renewals at 3 to 15 s: claimed, not writing
		awaitWaiters(t, clk, 2)
		require.False(t, g.MayWrite(), "%s after the claim", clk.Now().Sub(claimed))
		clk.Step(3 * time.Second)
	}
	awaitWaiters(t, clk, 2)
	clk.Step(3*time.Second - time.Millisecond)
	awaitWaiters(t, clk, 2)
	require.False(t, g.MayWrite(), "17.999 s after the claim")
	select {
	case <-g.Held():
		t.Fatal("Held before the wait ended")
	default:
	}
	clk.Step(time.Millisecond)
	<-g.Held()
	require.True(t, g.MayWrite(), "18 s after the claim")
	require.Equal(t, int32(6), s.stored.Load(), "renewed all along")
	require.Zero(t, exits.Load())
}

func TestAGuardCreatesAMissingLeaseAndWritesWhileItRenews(t *testing.T) {
	s, clk := newLeaseServer(t), newFakeClock()
	g, _, exits, _ := runHeld(t, s, clk, tenSeconds)
	require.True(t, g.MayWrite())
	l := s.lease(t)
	require.Equal(t, "pg-1", *l.Spec.HolderIdentity)
	require.Equal(t, int32(10), *l.Spec.LeaseDurationSeconds)
	acquired := l.Spec.AcquireTime.Time

	for range 10 { // 30 s of renewals
		awaitWaiters(t, clk, 2) // the renewal's timer and the watchdog's
		before := s.stored.Load()
		clk.Step(3 * time.Second)
		require.Eventually(t, func() bool { return s.stored.Load() == before+1 }, 5*time.Second, time.Millisecond)
		require.True(t, g.MayWrite())
	}
	l = s.lease(t)
	require.True(t, l.Spec.AcquireTime.Time.Equal(acquired), "a renewal keeps the acquireTime")
	require.True(t, l.Spec.RenewTime.Time.Equal(clk.Now()))
	require.NoError(t, g.Context().Err())
	require.Zero(t, exits.Load())
}

// A renewal that starts at 3 s and takes 4 s counts from its start: the
// process may write until 13 s, not 17 s. A second renewal that hangs
// past the expiry ends writing at 13 s, and its success, landing later,
// does not revive it; the process is stopped at 13 + 5 - 1 = 17 s.
func TestAGuardCountsTheLeaseFromTheStartOfItsLastRenewal(t *testing.T) {
	s, clk := newLeaseServer(t), newFakeClock()
	release := make(chan struct{})
	g, done, exits, _ := runHeld(t, s, clk, tenSeconds)
	s.setOnUpdate(func(n int32) error {
		switch n {
		case 1:
			clk.Step(4 * time.Second) // a slow request
		case 2:
			<-release // a request that hangs
		}
		return nil
	})
	start := clk.Now()
	awaitWaiters(t, clk, 2)
	clk.Step(3 * time.Second) // the first renewal, at 3 s, answered at 7 s
	require.Eventually(t, func() bool { return s.updates.Load() == 2 }, 5*time.Second, time.Millisecond, "the second renewal starts at once, 3 s after the first")
	require.Equal(t, 7*time.Second, clk.Now().Sub(start))

	awaitWaiters(t, clk, 1) // the watchdog alone: the renewal hangs
	clk.Step(6*time.Second - time.Millisecond)
	require.True(t, g.MayWrite(), "12.999 s: less than 10 s since the renewal that started at 3 s")
	clk.Step(time.Millisecond)
	require.False(t, g.MayWrite(), "13 s: 10 s since the start of the last successful renewal")
	<-g.Context().Done()
	var lost *selffence.LostError
	require.ErrorAs(t, context.Cause(g.Context()), &lost)
	require.ErrorIs(t, lost, selffence.ErrExpired)

	close(release) // the hung renewal succeeds, too late
	err := <-done
	require.ErrorAs(t, err, &lost)
	require.ErrorIs(t, err, selffence.ErrExpired)
	require.False(t, g.MayWrite())

	awaitWaiters(t, clk, 1) // the watchdog's stop
	clk.Step(4*time.Second - time.Millisecond)
	require.Never(t, func() bool { return exits.Load() > 0 }, 50*time.Millisecond, time.Millisecond, "16.999 s: not yet stopped")
	clk.Step(time.Millisecond)
	require.Eventually(t, func() bool { return exits.Load() == 1 }, 5*time.Second, time.Millisecond, "17 s: 13 s + 5 s deadline - 1 s the stop takes")
}

// One failed renewal ends writing at once, though the Lease has 7 s left
// and the next renewal would succeed: the Guard does not try again, and
// the process is stopped 14 s after the last successful renewal.
func TestAGuardStopsOnTheFirstFailedRenewal(t *testing.T) {
	s, clk := newLeaseServer(t), newFakeClock()
	g, done, exits, _ := runHeld(t, s, clk, tenSeconds)
	s.setOnUpdate(func(n int32) error {
		if n == 2 {
			return apierrors.NewServiceUnavailable("etcd leader changed")
		}
		return nil
	})
	awaitWaiters(t, clk, 2)
	clk.Step(3 * time.Second) // renewed at 3 s
	awaitWaiters(t, clk, 2)
	clk.Step(3 * time.Second) // fails at 6 s
	err := <-done
	var lost *selffence.LostError
	require.ErrorAs(t, err, &lost)
	require.True(t, apierrors.IsServiceUnavailable(err), "the renewal's error unwraps: %v", err)
	require.False(t, g.MayWrite(), "6 s: the Lease has 7 s left, and writing has stopped")
	require.Error(t, g.Context().Err())

	awaitWaiters(t, clk, 1)
	clk.Step(20 * time.Second)
	require.Eventually(t, func() bool { return exits.Load() == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, int32(2), s.updates.Load(), "no renewal after the failed one")
}

// Another holder took the Lease over (a write the Guard did not make): its
// next renewal, a conditional write on the resourceVersion it last read,
// meets a Conflict, and writing stops.
func TestAGuardWhoseLeaseWasTakenOverStops(t *testing.T) {
	s, clk := newLeaseServer(t), newFakeClock()
	g, done, _, _ := runHeld(t, s, clk, tenSeconds)
	taken := s.lease(t)
	taken.Spec.HolderIdentity = ptr.To("pg-2")
	_, err := s.write(taken)
	require.NoError(t, err)

	awaitWaiters(t, clk, 2)
	clk.Step(3 * time.Second)
	err = <-done
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.False(t, g.MayWrite())
	require.Equal(t, "pg-2", *s.lease(t).Spec.HolderIdentity, "the Guard wrote nothing over the new holder")
}

// A Lease held by another, or by the pod's own name (a previous process
// of the same pod may still be writing), is taken only after its record
// has been seen unchanged for its duration, the deadline and the margin
// (10 + 5 + 3 s), when its holder has stopped whether or not it
// listened; a renewal seen meanwhile starts the wait again. The process
// then writes at once.
func TestAGuardTakesAHeldLeaseOnlyOnceItsHolderHasStopped(t *testing.T) {
	for _, holder := range []string{"pg-0", "pg-1"} {
		t.Run("held by "+holder, func(t *testing.T) {
			clk := newFakeClock()
			held := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-primary"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](10),
					// Long ago by its own clock: the Guard does not trust it.
					RenewTime: ptr.To(metav1.NewMicroTime(clk.Now().Add(-time.Hour))), LeaseTransitions: ptr.To[int32](4)},
			}
			s := newLeaseServer(t, held)
			g, _, _ := run(t, s, clk, tenSeconds)

			awaitWaiters(t, clk, 1) // seen at 0 s
			clk.Step(3 * time.Second)
			awaitWaiters(t, clk, 1)
			renewed := s.lease(t) // the holder renews at 3 s: seen at 6 s
			renewed.Spec.RenewTime = ptr.To(metav1.NewMicroTime(clk.Now()))
			_, err := s.write(renewed)
			require.NoError(t, err)
			for range 6 { // 6, 9, 12, 15, 18 and 21 s
				clk.Step(3 * time.Second)
				awaitWaiters(t, clk, 1)
				require.False(t, g.MayWrite(), "%s", clk.Now())
			}
			clk.Step(3 * time.Second) // 24 s: 18 s since the renewal was seen at 6 s
			<-g.Held()
			require.True(t, g.MayWrite())
			l := s.lease(t)
			require.Equal(t, "pg-1", *l.Spec.HolderIdentity)
			require.Equal(t, int32(5), *l.Spec.LeaseTransitions, "a takeover is a transition")
		})
	}
}

// Run ended by its context before the Lease was held leaves nothing to
// stop; after it was held, the process is still stopped at the deadline.
func TestAGuardStopsTheProcessAtTheDeadlineWhateverEndedRun(t *testing.T) {
	s, clk := newLeaseServer(t), newFakeClock()
	g, done, exits, cancelG := runHeld(t, s, clk, tenSeconds)
	g2, err := selffence.New(s, selffence.Options{Namespace: "db", Lease: "pg-primary", Identity: "pg-2", PodUID: uidOf("pg-2"), Clock: clk,
		Exit: func() { t.Error("a Guard that never held stopped the process") }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- g2.Run(ctx) }()
	awaitWaiters(t, clk, 3) // pg-1's two, and pg-2's retry
	cancel()
	require.ErrorIs(t, <-done2, context.Canceled)
	require.False(t, g2.MayWrite())
	require.ErrorContains(t, g2.Run(context.Background()), "twice")

	// pg-1's workload ends Run; it is stopped 14 s after its last renewal.
	require.True(t, g.MayWrite())
	cancelG()
	require.ErrorIs(t, <-done, context.Canceled)
	require.False(t, g.MayWrite())
	require.ErrorIs(t, context.Cause(g.Context()), context.Canceled)
	awaitWaiters(t, clk, 1)
	clk.Step(14*time.Second - time.Millisecond)
	require.Never(t, func() bool { return exits.Load() > 0 }, 50*time.Millisecond, time.Millisecond)
	clk.Step(time.Millisecond)
	require.Eventually(t, func() bool { return exits.Load() == 1 }, 5*time.Second, time.Millisecond)
}
