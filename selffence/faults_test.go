//go:build go1.25

// Synctest needs the timer channels of Go 1.23 on; the go.mod floor of
// Go 1.22 would keep the older ones.
//go:debug asynctimerchan=0

package selffence_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/selffence"
)

// These tests run Guards in a synctest bubble: time is virtual, and moves
// only when every goroutine of the bubble waits, so that two Guards, the
// watchdogs and the renewals interleave as the real clock would drive
// them, with no test-side stepping.

// guardRun is one Guard of a test, with what it did.
type guardRun struct {
	g      *selffence.Guard
	done   chan error
	exitAt chan time.Time // when Exit was called
	cancel context.CancelFunc
}

// startGuard starts a Guard of identity over s with opts (the Lease
// db/pg-primary), its Exit recorded.
func startGuard(t *testing.T, s *leaseServer, identity string, opts selffence.Options) *guardRun {
	t.Helper()
	r := &guardRun{done: make(chan error, 1), exitAt: make(chan time.Time, 1)}
	opts.Namespace, opts.Lease, opts.Identity, opts.PodUID = "db", "pg-primary", identity, uidOf(identity)
	opts.Exit = func() { r.exitAt <- time.Now() }
	g, err := selffence.New(s, opts)
	require.NoError(t, err)
	r.g = g
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	t.Cleanup(cancel)
	go func() { r.done <- g.Run(ctx) }()
	return r
}

// stopAll ends the Guards' Runs, and waits out their watchdogs' stops,
// so that the bubble ends with no goroutine left waiting.
func stopAll(runs ...*guardRun) {
	for _, r := range runs {
		r.cancel()
	}
	time.Sleep(time.Minute)
}

// heldAt waits for Held, and returns when it came.
func (r *guardRun) heldAt() time.Time {
	<-r.g.Held()
	return time.Now()
}

// firstMayWrite polls MayWrite every 10 ms until it says true, up to
// limit, and returns when it did (zero: never).
func firstMayWrite(g *selffence.Guard, limit time.Duration) time.Time {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if g.MayWrite() {
			return time.Now()
		}
	}
	return time.Time{}
}

// A Lease whose holder is cleared under it (an admin forcing a failover,
// say): the holder writes on until its next renewal meets the Conflict,
// and is stopped only at its deadline. Another Guard cannot tell that from
// a Lease never held: it claims it at once, and writes only once the
// holder it could not see has been stopped. The same goes for a Lease
// deleted under its holder.
func TestAGuardWaitsOutAHolderItCouldNotSee(t *testing.T) {
	for name, remove := range map[string]func(*testing.T, *leaseServer){
		"the holder cleared": func(t *testing.T, s *leaseServer) {
			l := s.lease(t)
			l.Spec.HolderIdentity = ptr.To("")
			_, err := s.write(l)
			require.NoError(t, err)
		},
		"the Lease deleted": func(t *testing.T, s *leaseServer) {
			require.NoError(t, s.CoordinationV1().Leases("db").Delete(context.Background(), "pg-primary", metav1.DeleteOptions{}))
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newLeaseServer(t)
				a := startGuard(t, s, "pg-1", tenSeconds)
				a.heldAt()
				time.Sleep(time.Second) // between renewals: the last one 1 s ago
				lastRenewal := s.lease(t).Spec.RenewTime.Time
				remove(t, s)
				b := startGuard(t, s, "pg-2", tenSeconds)
				synctest.Wait()
				claimed := time.Now()
				require.Equal(t, "pg-2", *s.lease(t).Spec.HolderIdentity, "claimed at once")
				require.True(t, a.g.MayWrite(), "pg-1 writes on until its next renewal")

				bWrites := firstMayWrite(b.g, time.Minute)
				aStopped := <-a.exitAt
				var lost *selffence.LostError
				require.ErrorAs(t, <-a.done, &lost)
				require.WithinDuration(t, lastRenewal.Add(14*time.Second), aStopped, 0, "pg-1 stopped at its last renewal + 10 s + 5 s - 1 s")
				require.True(t, aStopped.Before(bWrites), "pg-1 stopped at %s, pg-2 wrote from %s", aStopped, bWrites)
				require.WithinDuration(t, claimed.Add(18*time.Second), bWrites, 0, "pg-2 writes 10 + 5 + 3 s after its claim")
				require.True(t, b.heldAt().Equal(bWrites))
				stopAll(a, b)
			})
		})
	}
}

// Settings past the longest a Lease states are refused, so that no sum of
// them wraps around: a duration of 2^32 + 10 s would be written as 10 s
// while the Guard counted 136 years, and a deadline near the longest
// Duration made the wait negative.
func TestSettingsTooWideForTheLeaseAreRefused(t *testing.T) {
	valid := selffence.Options{Namespace: "db", Lease: "pg-primary", Identity: "pg-1", PodUID: uidOf("pg-1")}
	for name, change := range map[string]func(*selffence.Options){
		"a duration past int32 seconds": func(o *selffence.Options) { o.Duration = (1<<32 + 10) * time.Second },
		"the longest deadline":          func(o *selffence.Options) { o.Deadline = 2562047*time.Hour + 47*time.Minute + 16*time.Second },
		"the longest margin":            func(o *selffence.Options) { o.Margin = 1<<63 - 1 },
		"a stop of 100 years":           func(o *selffence.Options) { o.StopTakes, o.Deadline = 100*365*24*time.Hour, 101*365*24*time.Hour },
	} {
		t.Run(name, func(t *testing.T) {
			o := valid
			change(&o)
			_, err := selffence.New(newLeaseServer(t), o)
			require.ErrorContains(t, err, "the longest a Lease states")
			o.Identity, o.PodUID = "", ""
			require.ErrorContains(t, o.Stamp(&corev1.PodTemplateSpec{}), "the longest a Lease states", "Stamp refuses it alike")
		})
	}
}

// A record that states the longest duration a Lease can (math.MaxInt32
// seconds) makes the wait saturate, never wrap: the Guard does not take a
// Lease renewed a moment ago.
func TestAGuardNeverTakesALeaseEarlyWhateverItsRecordStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := metav1.NewMicroTime(time.Now())
		s := newLeaseServer(t, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-primary"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pg-0"), LeaseDurationSeconds: ptr.To[int32](1<<31 - 1),
				AcquireTime: &now, RenewTime: &now},
		})
		opts := tenSeconds
		opts.Deadline = 2562047*time.Hour/8 - time.Second // long, and within the bound
		opts.Margin = 2562047 * time.Hour / 8
		b := startGuard(t, s, "pg-2", opts)
		time.Sleep(time.Hour)
		require.False(t, b.g.MayWrite())
		require.Equal(t, "pg-0", *s.lease(t).Spec.HolderIdentity, "an hour on, the holder's record still stands")
		stopAll(b)
	})
}

// blockingSink is a logr sink whose writes block until released: a full
// pipe to a log shim that stopped reading.
type blockingSink struct {
	release chan struct{}
	lines   atomic.Int32
}

func (s *blockingSink) Init(logr.RuntimeInfo)          {}
func (s *blockingSink) Enabled(int) bool               { return true }
func (s *blockingSink) Info(int, string, ...any)       { <-s.release; s.lines.Add(1) }
func (s *blockingSink) Error(error, string, ...any)    { <-s.release; s.lines.Add(1) }
func (s *blockingSink) WithValues(...any) logr.LogSink { return s }
func (s *blockingSink) WithName(string) logr.LogSink   { return s }

// A Logger that blocks delays nothing: the Guard holds and renews, and
// when a renewal fails it stops the process at the deadline, with every
// log line still waiting.
func TestABlockedLoggerDelaysNeitherTheRenewalsNorTheStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		sink := &blockingSink{release: release}
		s := newLeaseServer(t)
		opts := tenSeconds
		opts.Logger = logr.New(sink)
		a := startGuard(t, s, "pg-1", opts)
		heldAt := a.heldAt()
		time.Sleep(10 * time.Second)
		require.True(t, a.g.MayWrite())
		require.Greater(t, s.stored.Load(), int32(8), "renewed every 3 s, through the wait and after")
		var failing atomic.Bool
		failing.Store(true)
		s.setOnUpdate(func(int32) error {
			if failing.Load() {
				return apierrors.NewServiceUnavailable("partitioned")
			}
			return nil
		})
		lastRenewal := s.lease(t).Spec.RenewTime.Time
		stopped := <-a.exitAt
		require.WithinDuration(t, lastRenewal.Add(14*time.Second), stopped, 0, "stopped at the deadline, the log blocked")
		require.Zero(t, sink.lines.Load(), "no line was written: every one waited on the sink")
		require.True(t, stopped.After(heldAt))
		stopAll(a)
	})
}

// onceClock is the bubble's clock, whose next Now, once armed, first runs
// a function: a preemption between two steps of the Guard.
type onceClock struct {
	clock.RealClock
	mu    sync.Mutex
	armed func()
}

func (c *onceClock) Now() time.Time {
	now := time.Now()
	c.mu.Lock()
	f := c.armed
	c.armed = nil
	c.mu.Unlock()
	if f != nil {
		f()
	}
	return now
}

func (c *onceClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *onceClock) arm(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = f
}

// When the watchdog's expiry fires between a renewal's answer and its
// bookkeeping (a preemption that the real clock allows), writing has
// ended: the renewal revives nothing, and no renewal follows it, so that
// the Lease is not kept from a successor by a process that no longer
// writes.
func TestNoRenewalFollowsTheEndOfWriting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseServer(t)
		clk := &onceClock{}
		opts := tenSeconds
		opts.Clock = clk
		a := startGuard(t, s, "pg-1", opts)
		a.heldAt()
		var once sync.Once
		s.setOnUpdate(func(int32) error {
			once.Do(func() { // the next renewal: answered in time, then preempted past the expiry
				clk.arm(func() { <-a.g.Context().Done() }) // until the watchdog's expiry
			})
			return nil
		})
		select {
		case err := <-a.done:
			require.ErrorIs(t, err, selffence.ErrExpired)
		case <-time.After(time.Minute):
			t.Fatalf("Run still renews a minute after writing ended (%d renewals)", s.updates.Load())
		}
		sent := s.updates.Load()
		time.Sleep(30 * time.Second)
		require.Equal(t, sent, s.updates.Load(), "no renewal after writing ended")
		require.False(t, a.g.MayWrite())
		<-a.exitAt
		stopAll(a)
	})
}

// A claim whose answer does not come back, or comes back as an error an
// API server may give after applying (a 5xx), may have applied: the Lease
// may name the claimer from the claim's start, and the fencer counts its
// wait from that record. So the Guard holds from the claim's start, with
// writing not yet allowed, and reads the Lease: its own record confirms
// the claim, and anything else ends holding, with the process stopped at
// the claim's start plus the duration plus the deadline (less the time a
// stop takes), as any holder's. A refusal (a 409) applies nothing: the
// Guard claims again.
func TestAClaimOfUnknownOutcomeKeepsTheHoldersObligations(t *testing.T) {
	lost := context.DeadlineExceeded
	unavailable := apierrors.NewServiceUnavailable("etcd is slow")
	conflict := apierrors.NewConflict(leasesResource.GroupResource(), "pg-primary", errors.New("raced"))
	for _, tc := range []struct {
		name      string
		beforeIt  error         // the claim's answer, the write not applied
		afterIt   error         // the claim's answer, the write applied
		holds     bool          // the claimer goes on to write
		writesBy  time.Duration // after the claim, if it holds
		stopAfter time.Duration // after the claim, if not
	}{
		{name: "applied, its answer lost: the read shows the claim", afterIt: lost, holds: true, writesBy: 100 * time.Millisecond},
		{name: "applied, answered with a 503: the read shows the claim", afterIt: unavailable, holds: true, writesBy: 100 * time.Millisecond},
		{name: "lost before it applied: stopped at the deadline", beforeIt: lost, stopAfter: 14 * time.Second},
		{name: "a 503 before it applied: stopped at the deadline", beforeIt: unavailable, stopAfter: 14 * time.Second},
		{name: "refused with a 409: claimed again at the next attempt", beforeIt: conflict, holds: true, writesBy: 3*time.Second + 100*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				long := metav1.NewMicroTime(time.Now().Add(-time.Hour))
				s := newLeaseServer(t, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-primary"},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pg-1"), LeaseDurationSeconds: ptr.To[int32](10),
						AcquireTime: &long, RenewTime: &long},
				})
				// Only the first update, the claim, fails.
				s.setOnUpdate(func(n int32) error {
					if n == 1 {
						return tc.beforeIt
					}
					return nil
				})
				s.onStored.Store(ptr.To(func(n int32) error {
					if n == 1 {
						return tc.afterIt
					}
					return nil
				}))
				b := startGuard(t, s, "pg-2", tenSeconds)
				defer stopAll(b)
				// The record is seen unchanged for 10 + 5 + 3 s, from 0 s,
				// then claimed at the next attempt, 18 s.
				time.Sleep(17 * time.Second)
				synctest.Wait()
				require.EqualValues(t, 0, s.updates.Load(), "no claim before the wait is over")
				for s.updates.Load() == 0 {
					time.Sleep(10 * time.Millisecond)
				}
				claimed := time.Now()
				if tc.holds {
					writes := firstMayWrite(b.g, time.Minute)
					require.False(t, writes.IsZero(), "the claim was confirmed, or made again")
					require.WithinDuration(t, claimed, writes, tc.writesBy, "writes %s after the claim", writes.Sub(claimed))
					time.Sleep(time.Minute)
					require.True(t, b.g.MayWrite(), "a minute on, it renews")
					require.Equal(t, "pg-2", *s.lease(t).Spec.HolderIdentity)
					require.Empty(t, b.exitAt, "not stopped")
					return
				}
				require.True(t, firstMayWrite(b.g, time.Minute).IsZero(), "never allowed to write")
				stopped := <-b.exitAt
				require.WithinDuration(t, claimed.Add(tc.stopAfter), stopped, 10*time.Millisecond, "stopped at the claim's start + 10 s + 5 s - 1 s")
				var lostErr *selffence.LostError
				require.ErrorAs(t, <-b.done, &lostErr)
				require.ErrorIs(t, lostErr, tc.beforeIt)
				require.Equal(t, "pg-1", *s.lease(t).Spec.HolderIdentity, "the claim never applied")
			})
		})
	}
}

var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

// A process left running after its pod was deleted (restarted by a
// kubelet cut off from the API server, which then went down) must never
// write under the Lease: the fencer proves the pod stopped from a read of
// the Lease made once the pod's deletion began. So the Guard claims only
// while a read of its pod shows it there, under its UID, and not being
// deleted; and once a claim applied, it lets the process write only after
// another such read, sent after the claim's answer. A pod that ends
// before the claim ends Run with ErrPodEnded, the Lease untouched and
// nothing stopped; one that ends while the claim is in flight, or a pod
// that cannot be read after it, ends holding: never allowed to write, the
// process stopped at the claim's start + 10 s + 5 s - 1 s. A pod that
// cannot be read before the claim only delays it.
func TestAProcessWhosePodEndedNeverWritesUnderTheLease(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("etcd is slow")
	evict := func(t *testing.T, s *leaseServer) {
		pod := podNamed("pg-2")
		pod.DeletionTimestamp = ptr.To(metav1.Now())
		require.NoError(t, s.Tracker().Update(podsResource, pod, "db"))
	}
	remove := func(t *testing.T, s *leaseServer) { require.NoError(t, s.Tracker().Delete(podsResource, "db", "pg-2")) }
	replace := func(t *testing.T, s *leaseServer) {
		remove(t, s)
		pod := podNamed("pg-2")
		pod.UID = "uid-of-the-next-pg-2"
		require.NoError(t, s.Tracker().Add(pod))
	}
	for _, tc := range []struct {
		name         string
		before       func(*testing.T, *leaseServer) // before the Guard starts
		inFlight     func(*testing.T, *leaseServer) // once the claim is stored, before its answer
		readsFailFor time.Duration                  // reads of the pod fail from the start for this long
		readsFail    bool                           // reads of the pod fail once the claim is stored
		claims       bool                           // the claim is written
		holds        bool                           // the claimer goes on to write
		wantErr      error
	}{
		{name: "evicted before the claim: never claimed", before: evict, wantErr: selffence.ErrPodEnded},
		{name: "gone before the claim: never claimed", before: remove, wantErr: selffence.ErrPodEnded},
		{name: "replaced before the claim: never claimed", before: replace, wantErr: selffence.ErrPodEnded},
		{name: "evicted while the claim was in flight: stopped at the deadline", inFlight: evict, claims: true, wantErr: selffence.ErrPodEnded},
		{name: "replaced while the claim was in flight: stopped at the deadline", inFlight: replace, claims: true, wantErr: selffence.ErrPodEnded},
		{name: "unreadable after the claim: stopped at the deadline", readsFail: true, claims: true, wantErr: unavailable},
		{name: "unreadable for a minute before the claim: claimed later", readsFailFor: time.Minute, claims: true, holds: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				long := metav1.NewMicroTime(start.Add(-time.Hour))
				s := newLeaseServer(t, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-primary"},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pg-1"), LeaseDurationSeconds: ptr.To[int32](10),
						AcquireTime: &long, RenewTime: &long},
				})
				if tc.before != nil {
					tc.before(t, s)
				}
				var readsFail atomic.Bool
				s.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					if readsFail.Load() || time.Since(start) < tc.readsFailFor {
						return true, nil, unavailable
					}
					return false, nil, nil
				})
				var claimed time.Time
				s.onStored.Store(ptr.To(func(n int32) error {
					if n == 1 {
						claimed = time.Now()
						if tc.inFlight != nil {
							tc.inFlight(t, s)
						}
						readsFail.Store(tc.readsFail)
					}
					return nil
				}))
				b := startGuard(t, s, "pg-2", tenSeconds)
				defer stopAll(b)
				writes := firstMayWrite(b.g, 3*time.Minute)
				if !tc.claims {
					require.ErrorIs(t, <-b.done, tc.wantErr)
					require.EqualValues(t, 0, s.updates.Load(), "no claim")
					require.True(t, writes.IsZero(), "never allowed to write")
					require.Empty(t, b.exitAt, "never held: nothing to stop")
					return
				}
				require.False(t, claimed.IsZero(), "claimed")
				require.Equal(t, "pg-2", *s.lease(t).Spec.HolderIdentity, "the claim applied")
				if tc.holds {
					require.False(t, claimed.Before(start.Add(tc.readsFailFor)), "claimed at %s, once its pod could be read", claimed.Sub(start))
					require.WithinDuration(t, claimed, writes, 100*time.Millisecond, "writes %s after the claim", writes.Sub(claimed))
					require.Empty(t, b.exitAt, "not stopped")
					return
				}
				require.True(t, writes.IsZero(), "never allowed to write")
				stopped := <-b.exitAt
				require.WithinDuration(t, claimed.Add(14*time.Second), stopped, 10*time.Millisecond, "stopped at the claim's start + 10 s + 5 s - 1 s")
				var lostErr *selffence.LostError
				require.ErrorAs(t, <-b.done, &lostErr)
				require.ErrorIs(t, lostErr, tc.wantErr)
				select {
				case <-b.g.Held():
					t.Fatal("Held closed")
				default:
				}
			})
		})
	}
}
