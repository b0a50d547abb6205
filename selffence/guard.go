package selffence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/podhealth/podhealth/internal/nilcheck"
)

// LostError is why a Guard stopped holding its Lease: a renewal that
// failed (Err), or that could not complete before the Lease expired.
type LostError struct {
	Lease string // namespace/name
	Err   error
}

func (e *LostError) Error() string {
	return fmt.Sprintf("selffence: lost Lease %s: %v", e.Lease, e.Err)
}

func (e *LostError) Unwrap() error { return e.Err }

// ErrPodEnded is why a Guard does not claim its Lease, or does not let
// the process write under a claim: its pod (Options.Identity in
// Options.Namespace) is being deleted, is gone, or is another pod of the
// same name (another UID than Options.PodUID). A fencer may prove that
// pod stopped from the Lease from then on, so no process of it may take
// the Lease up again. It holds for good: a deleted pod does not come back.
var ErrPodEnded = errors.New("the pod is being deleted, gone, or replaced")

// ErrExpired is the LostError's Err when the Lease expired on the
// process's clock before a renewal succeeded: the process was frozen, or
// the renewal was too slow.
var ErrExpired = errors.New("the Lease expired before a renewal succeeded")

// Guard holds a Lease for a single writer, and keeps the self-fencing
// protocol's obligations for it (see the package documentation). Run it
// once; MayWrite, Context and Held are safe for concurrent use with it and
// with each other.
type Guard struct {
	opts Options
	lock *resourcelock.LeaseLock
	pods corev1client.PodInterface // the pod's namespace
	name string                    // namespace/name, for messages
	log  *asyncLog

	held    chan struct{} // closed once the process may write
	writing context.Context
	stop    context.CancelCauseFunc
	changed chan struct{} // a renewal or the end of holding, for the watchdog

	mu        sync.Mutex
	ran       bool
	holding   bool      // from the claim until the end of holding
	ended     bool      // holding has ended: never again
	renewedAt time.Time // the start of the last successful renewal
	// writableFrom is when writing may begin: the claim's start plus the
	// wait for a holder this Guard could not see (a cleared or deleted
	// Lease), or the claim's start when the Guard saw the previous holder
	// stop.
	writableFrom time.Time
	// acquired is the record this process claimed the Lease with, whose
	// acquireTime and leaseTransitions every renewal keeps.
	acquired resourcelock.LeaderElectionRecord
}

// Client is what a Guard reads and writes through: its Lease, and its own
// pod, which it only reads. A clientset (kubernetes.Interface, and
// client-go's fake one) is one.
type Client interface {
	CoordinationV1() coordinationv1client.CoordinationV1Interface
	CoreV1() corev1client.CoreV1Interface
}

// New returns a Guard of the Lease that opts name, read and written
// through client, which also reads the process's pod. It refuses settings
// that cannot be kept.
func New(client Client, opts Options) (*Guard, error) {
	if nilcheck.IsNil(client) {
		return nil, errors.New("selffence: New: nil Client")
	}
	opts, err := opts.withDefaults(true)
	if err != nil {
		return nil, err
	}
	if opts.Exit == nil {
		opts.Exit = func() { os.Exit(1) }
	}
	g := &Guard{
		opts: opts,
		lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.Lease},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
		},
		pods:    client.CoreV1().Pods(opts.Namespace),
		name:    opts.Namespace + "/" + opts.Lease,
		log:     newAsyncLog(opts.Logger),
		held:    make(chan struct{}),
		changed: make(chan struct{}, 1),
	}
	g.writing, g.stop = context.WithCancelCause(context.Background())
	return g, nil
}

// MayWrite reports whether the process may write now: it holds the Lease,
// the wait after its claim is over, no renewal has failed, and less than
// the Lease's duration has passed since the start of its last successful
// renewal.
func (g *Guard) MayWrite() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.opts.Clock.Now()
	return g.holding && !g.ended && !now.Before(g.writableFrom) && now.Sub(g.renewedAt) < g.opts.Duration
}

// Context returns a context that ends when the process must stop writing
// (the moment MayWrite turns false after the Lease was held), with a
// *LostError as its cause, or the cause that ended Run. Before the Lease
// is held it has not ended, and MayWrite is false: wait for Held.
func (g *Guard) Context() context.Context { return g.writing }

// Held is closed once the Guard holds the Lease and the process may
// write: after the claim, and after the wait that follows a claim of a
// Lease whose last holder the Guard could not see.
func (g *Guard) Held() <-chan struct{} { return g.held }

// Run claims the Lease, then renews it every RenewInterval until ctx
// ends or a renewal fails; it returns ctx's error, or a *LostError. It
// runs once. From the claim on, whatever Run returns, the process is
// stopped (Options.Exit) at the expiry of the last successful renewal
// plus Deadline less StopTakes, unless it has exited before: a workload
// that must go on running without writing cannot use a Guard.
//
// Whom it waits for before the process may write:
//   - a Lease that names a holder (another one, or its own identity: a
//     previous process of the same pod) is claimed only once the Guard
//     has seen that record unchanged for the record's duration (or
//     Duration, if longer) plus Deadline plus Margin: by then the holder
//     has been stopped, whether or not it listened; the process may
//     write at once;
//   - a Lease that is missing, or names no holder, cannot tell "never
//     held" from "its holder's record was deleted or cleared under it"
//     (an admin forcing a failover, a Lease recreated): a holder may
//     still write until its next renewal fails, and be stopped only at
//     its deadline. The Guard claims it at once, so that no other Guard
//     takes it, and renews it, but the process may write only once that
//     same wait has passed since the claim started;
//   - a claim whose outcome is unknown (no answer, or a 5xx; a claim in
//     flight when ctx ends too) may have applied: the Guard holds from
//     the claim's start, writing not yet allowed, and reads the Lease;
//     its own record confirms the claim, and anything else ends holding,
//     the process stopped at the deadline as any holder's.
//
// And its pod: the Guard claims only while a read of its pod shows it
// there under Options.PodUID and not being deleted, and once the claim
// applied, the process may write only after another such read, sent
// after the claim's answer, shows the same. A pod whose deletion began
// may be proved stopped by the fencer from any read of the Lease from
// then on, and a claim that read did not see was applied after it: this
// read then shows the deletion. Before a claim, such a pod ends Run with
// ErrPodEnded, the Lease never held; after one, holding ends as for a
// lost Lease (the process never wrote, and is stopped at the deadline).
//
// Every holder of one Lease must use the same Duration and Deadline
// (Stamp them from one Options).
func (g *Guard) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.ran {
		g.mu.Unlock()
		return errors.New("selffence: Run called twice")
	}
	g.ran = true
	g.mu.Unlock()

	if err := g.claim(ctx); err != nil {
		g.end(err)
		return err
	}
	err := g.renew(ctx)
	g.end(err)
	return err
}

// claim waits until the Lease is claimed, or ctx ends. From the claim on,
// the watchdog runs: nothing that may block (a log, in particular) comes
// between the claim and the watchdog's start.
func (g *Guard) claim(ctx context.Context) error {
	var observed *resourcelock.LeaderElectionRecord // the record last read
	var observedAt time.Time                        // when it was first read
	for {
		err := g.readPod(ctx)
		if errors.Is(err, ErrPodEnded) {
			g.log.info("not claiming the Lease", "lease", g.name, "reason", err.Error())
			return err
		}
		var record resourcelock.LeaderElectionRecord
		var writableFrom time.Time
		ok := false
		if err == nil {
			record, writableFrom, ok, err = g.tryClaim(ctx, &observed, &observedAt)
		}
		if ok {
			g.hold(record, maxTime)
			return g.confirm(ctx, writableFrom, "claimed the Lease")
		}
		var unknown *unknownClaim
		if errors.As(err, &unknown) {
			return g.settle(ctx, unknown)
		}
		if err != nil {
			g.log.info("not claimed yet", "lease", g.name, "reason", err.Error())
		}
		if err := g.sleep(ctx, g.opts.RenewInterval); err != nil {
			return err
		}
	}
}

// tryClaim makes one attempt, returning the record it wrote, whose
// renewTime is the start of the write on the process's clock, and when
// the process may write.
func (g *Guard) tryClaim(ctx context.Context, observed **resourcelock.LeaderElectionRecord, observedAt *time.Time) (resourcelock.LeaderElectionRecord, time.Time, bool, error) {
	var none resourcelock.LeaderElectionRecord
	rctx, cancel := context.WithTimeout(ctx, g.opts.RenewInterval)
	defer cancel()
	record, _, err := g.lock.Get(rctx)
	// First seen when the answer arrived, not when it was asked for: the
	// record may have been written while the read was in flight.
	now := g.opts.Clock.Now()
	switch {
	case apierrors.IsNotFound(err):
		// Missing: never held, or deleted under a holder that may still
		// write. Claimed now; written only after the wait.
		start := g.opts.Clock.Now()
		mine := g.record(start, 0)
		if err := g.lock.Create(rctx, mine); err != nil {
			return none, time.Time{}, false, claimFailed("creating the Lease", mine, start.Add(g.wait(0)), err)
		}
		return mine, start.Add(g.wait(0)), true, nil
	case err != nil:
		return none, time.Time{}, false, fmt.Errorf("reading the Lease: %w", err)
	}
	if *observed == nil || !sameRecord(**observed, *record) {
		*observed, *observedAt = record, now
	}
	start := g.opts.Clock.Now()
	writableFrom := start
	if record.HolderIdentity != "" {
		// The holder writes until its Lease expires, and its processes
		// are stopped by the deadline after that, whether or not they
		// listened (a workload behind the sidecar may not ask): only then
		// may this one write.
		wait := g.wait(record.LeaseDurationSeconds)
		if seen := g.opts.Clock.Since(*observedAt); seen < wait {
			return none, time.Time{}, false, fmt.Errorf("held by %q, its record seen unchanged for %s of %s", record.HolderIdentity, seen.Round(time.Millisecond), wait)
		}
	} else {
		// No holder: never held, or cleared under a holder that may
		// still write until its next renewal fails. Claimed now; written
		// only after the wait.
		writableFrom = start.Add(g.wait(record.LeaseDurationSeconds))
	}
	mine := g.record(start, record.LeaderTransitions+1)
	if err := g.lock.Update(rctx, mine); err != nil {
		return none, time.Time{}, false, claimFailed("claiming the Lease", mine, writableFrom, err)
	}
	return mine, writableFrom, true, nil
}

// unknownClaim is a claim whose write may have applied: its answer was
// lost (a timeout, a broken connection) or was an error that an API
// server may return after applying (a 5xx).
type unknownClaim struct {
	mine         resourcelock.LeaderElectionRecord // the record it wrote
	writableFrom time.Time                         // had it been answered
	err          error
}

func (e *unknownClaim) Error() string {
	return fmt.Sprintf("the claim's outcome is unknown: %v", e.err)
}

func (e *unknownClaim) Unwrap() error { return e.err }

// claimFailed is the error of a claim's write: an *unknownClaim unless
// the API server refused it, which it does before applying anything.
func claimFailed(what string, mine resourcelock.LeaderElectionRecord, writableFrom time.Time, err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		// A 4xx is a refusal (409 a conflict or a Lease that exists, 429
		// a request the server shed, 403, 422); but for 408 it is
		// answered before anything applies.
		if code := status.Status().Code; code >= 400 && code < 500 && code != 408 {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return &unknownClaim{mine: mine, writableFrom: writableFrom, err: fmt.Errorf("%s: %w", what, err)}
}

// settle answers for a claim whose write may have applied. Applied, the
// Lease names this process from the claim's start: the fencer counts its
// wait from that record, so the process must keep the holder's
// obligations as if it had been answered, the stop at the deadline among
// them, or a pod the fencer then proves stopped would go on to claim the
// Lease and write. So it holds from the claim's start at once, with the
// watchdog running and writing not yet allowed, then reads the Lease:
// its own record confirms the claim, and it goes on as any holder does;
// anything else (another record, none, a read that fails) cannot tell a
// claim that never applied from one still in flight or overwritten, and
// ends holding, so that the watchdog stops the process at the deadline.
func (g *Guard) settle(ctx context.Context, unknown *unknownClaim) error {
	g.hold(unknown.mine, maxTime)
	rctx, cancel := context.WithTimeout(ctx, g.opts.RenewInterval)
	record, _, err := g.lock.Get(rctx)
	cancel()
	if err == nil && sameRecord(*record, unknown.mine) {
		return g.confirm(ctx, unknown.writableFrom, "claimed the Lease (its answer was lost; a read shows the claim)")
	}
	if err == nil {
		err = errors.New("the Lease does not show it")
	}
	return g.lost(fmt.Errorf("%w; settling it: %w", unknown, err))
}

// confirm lets the process write from writableFrom under the claim it
// holds, once a read of its pod sent now, after the claim applied, shows
// the pod there, under its UID, and not being deleted. A fencer proves
// the pod stopped only from a read of the Lease made after the pod's
// deletion began: a claim that read did not show was applied after it,
// and this read shows the deletion. Anything else (a pod deleted or
// replaced, a read that fails) ends holding, the process stopped at the
// deadline, never having written.
func (g *Guard) confirm(ctx context.Context, writableFrom time.Time, claimed string) error {
	if err := g.readPod(ctx); err != nil {
		return g.lost(fmt.Errorf("the Lease is claimed, but the pod may not write under it: %w", err))
	}
	g.mu.Lock()
	g.writableFrom = writableFrom
	g.mu.Unlock()
	g.log.info(claimed, "lease", g.name, "holder", g.opts.Identity, "writableFrom", writableFrom)
	return nil
}

// readPod reads the process's pod, within RenewInterval: nil when it is
// there under Options.PodUID and not being deleted, an error wrapping
// ErrPodEnded when it is not, and any other error when the read failed.
func (g *Guard) readPod(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, g.opts.RenewInterval)
	defer cancel()
	pod, err := g.pods.Get(rctx, g.opts.Identity, metav1.GetOptions{})
	name := g.opts.Namespace + "/" + g.opts.Identity
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("pod %s is gone: %w", name, ErrPodEnded)
	case err != nil:
		return fmt.Errorf("reading pod %s: %w", name, err)
	case pod.UID != g.opts.PodUID:
		return fmt.Errorf("pod %s has UID %s, not this process's %s: %w", name, pod.UID, g.opts.PodUID, ErrPodEnded)
	case pod.DeletionTimestamp != nil:
		return fmt.Errorf("pod %s is being deleted: %w", name, ErrPodEnded)
	}
	return nil
}

// maxTime is later than any clock reads: writing not yet allowed.
var maxTime = time.Unix(1<<62, 0)

// hold starts holding the Lease with record, from its renewTime, writing
// allowed from writableFrom, and starts the watchdog: nothing comes
// between the two.
func (g *Guard) hold(record resourcelock.LeaderElectionRecord, writableFrom time.Time) {
	g.mu.Lock()
	g.holding, g.renewedAt, g.writableFrom, g.acquired = true, record.RenewTime.Time, writableFrom, record
	g.mu.Unlock()
	go g.watchdog()
}

// wait is how long a holder of a Lease whose record states
// recordSeconds may write and then take to stop: the longer of that
// duration and Duration, plus Deadline plus Margin. It saturates: a
// record's duration is at most math.MaxInt32 seconds, and Options refuse
// longer settings, so it never wraps around to a short wait.
func (g *Guard) wait(recordSeconds int) time.Duration {
	d := g.opts.Duration
	if recorded := durationOfSeconds(recordSeconds); recorded > d {
		d = recorded
	}
	return addSaturating(addSaturating(d, g.opts.Deadline), g.opts.Margin)
}

// renew renews the Lease every RenewInterval, from the start of the last
// successful renewal, until ctx ends, a renewal fails, or writing has
// ended (the watchdog saw the Lease expire): a process that no longer
// writes must not keep the Lease from its successor.
func (g *Guard) renew(ctx context.Context) error {
	for {
		g.mu.Lock()
		ended := g.ended
		next := g.renewedAt.Add(g.opts.RenewInterval)
		expiry := g.renewedAt.Add(g.opts.Duration)
		announce := !g.announced() && g.writableFrom.Before(next)
		wake := next
		if announce {
			wake = g.writableFrom
		}
		g.mu.Unlock()
		if ended {
			return g.lost(ErrExpired)
		}
		if err := g.sleep(ctx, wake.Sub(g.opts.Clock.Now())); err != nil {
			return err
		}
		if announce {
			g.announce()
			continue
		}
		start := g.opts.Clock.Now()
		if !start.Before(expiry) {
			return g.lost(ErrExpired)
		}
		rctx, cancel := context.WithTimeout(ctx, expiry.Sub(start))
		record := g.record(start, g.acquired.LeaderTransitions)
		record.AcquireTime = g.acquired.AcquireTime
		err := g.lock.Update(rctx, record)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return g.lost(err)
		case !g.opts.Clock.Now().Before(expiry):
			// Writes stopped at the expiry: a renewal that lands later
			// does not revive them.
			return g.lost(ErrExpired)
		}
		g.mu.Lock()
		if g.ended {
			// The watchdog ended writing while the renewal was in flight
			// (its expiry passed between the checks above): the renewal
			// revives nothing, and no more are sent.
			g.mu.Unlock()
			return g.lost(ErrExpired)
		}
		g.renewedAt = start
		g.mu.Unlock()
		g.signal()
	}
}

// announced reports whether Held is closed.
func (g *Guard) announced() bool {
	select {
	case <-g.held:
		return true
	default:
		return false
	}
}

// announce closes Held once the wait after the claim is over, if writing
// has not ended meanwhile.
func (g *Guard) announce() {
	g.mu.Lock()
	ok := g.holding && !g.ended && !g.opts.Clock.Now().Before(g.writableFrom) && !g.announced()
	if ok {
		close(g.held)
	}
	g.mu.Unlock()
	if ok {
		g.log.info("may write", "lease", g.name, "holder", g.opts.Identity)
	}
}

// record is this process's record of the Lease, written at start.
func (g *Guard) record(start time.Time, transitions int) resourcelock.LeaderElectionRecord {
	at := metav1.NewTime(start)
	return resourcelock.LeaderElectionRecord{
		HolderIdentity:       g.opts.Identity,
		LeaseDurationSeconds: int(g.opts.Duration / time.Second),
		AcquireTime:          at,
		RenewTime:            at,
		LeaderTransitions:    transitions,
	}
}

// lost ends holding for err.
func (g *Guard) lost(err error) error {
	lost := &LostError{Lease: g.name, Err: err}
	g.log.info("stopped holding the Lease", "lease", g.name, "reason", err.Error())
	return lost
}

// end ends holding, for good: writing stops with cause.
func (g *Guard) end(cause error) {
	g.mu.Lock()
	g.ended = true
	g.mu.Unlock()
	g.stop(cause)
	g.signal()
}

func (g *Guard) signal() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// watchdog ends writing when the Lease expires unrenewed, and stops the
// process at the expiry plus Deadline less StopTakes once holding has
// ended, whether or not the workload listened. Between a deadline and
// Exit there is nothing that can block: its log line is queued, not
// written.
func (g *Guard) watchdog() {
	for {
		g.mu.Lock()
		ended, renewedAt := g.ended, g.renewedAt
		g.mu.Unlock()
		expiry := renewedAt.Add(g.opts.Duration)
		if ended {
			g.waitUntil(expiry.Add(g.opts.Deadline - g.opts.StopTakes))
			g.log.info("stopping the process: the Lease's deadline", "lease", g.name)
			g.opts.Exit()
			return
		}
		if !g.waitForChange(expiry) {
			continue
		}
		g.mu.Lock()
		expired := !g.ended && g.renewedAt.Equal(renewedAt)
		if expired {
			g.ended = true
		}
		g.mu.Unlock()
		if expired {
			g.stop(&LostError{Lease: g.name, Err: ErrExpired})
		}
	}
}

// waitForChange waits for a renewal or the end of holding (false), or
// until expiry (true).
func (g *Guard) waitForChange(expiry time.Time) bool {
	d := expiry.Sub(g.opts.Clock.Now())
	if d <= 0 {
		return true
	}
	t := g.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-g.changed:
		return false
	case <-t.C():
		return true
	}
}

// waitUntil sleeps on the Guard's clock until at.
func (g *Guard) waitUntil(at time.Time) {
	if d := at.Sub(g.opts.Clock.Now()); d > 0 {
		<-g.opts.Clock.After(d)
	}
}

// sleep sleeps on the Guard's clock for d, or until ctx ends.
func (g *Guard) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := g.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// sameRecord reports whether two records are one: two reads of the
// Lease, or a read and the record written. Times compare to the
// microsecond a Lease stores, since a record written keeps the clock's
// nanoseconds.
func sameRecord(a, b resourcelock.LeaderElectionRecord) bool {
	micro := func(t metav1.Time) time.Time { return t.Time.Truncate(time.Microsecond) }
	return a.HolderIdentity == b.HolderIdentity && a.LeaseDurationSeconds == b.LeaseDurationSeconds &&
		micro(a.AcquireTime).Equal(micro(b.AcquireTime)) && micro(a.RenewTime).Equal(micro(b.RenewTime)) && a.LeaderTransitions == b.LeaderTransitions
}
