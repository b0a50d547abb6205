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
	"k8s.io/client-go/tools/leaderelection/resourcelock"
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
	name string // namespace/name, for messages

	held    chan struct{} // closed once the Lease is held
	writing context.Context
	stop    context.CancelCauseFunc
	changed chan struct{} // a renewal or the end of holding, for the watchdog

	mu        sync.Mutex
	ran       bool
	holding   bool      // from the acquisition until the end of holding
	ended     bool      // holding has ended: never again
	renewedAt time.Time // the start of the last successful renewal
	// acquired is the record this process acquired the Lease with, whose
	// acquireTime and leaseTransitions every renewal keeps.
	acquired resourcelock.LeaderElectionRecord
}

// New returns a Guard of the Lease that opts name, read and written
// through leases (a clientset's CoordinationV1()). It refuses settings
// that cannot be kept.
func New(leases coordinationv1client.LeasesGetter, opts Options) (*Guard, error) {
	if leases == nil {
		return nil, errors.New("selffence: New: nil LeasesGetter")
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
			Client:     leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
		},
		name:    opts.Namespace + "/" + opts.Lease,
		held:    make(chan struct{}),
		changed: make(chan struct{}, 1),
	}
	g.writing, g.stop = context.WithCancelCause(context.Background())
	return g, nil
}

// MayWrite reports whether the process may write now: it holds the Lease,
// no renewal has failed, and less than the Lease's duration has passed
// since the start of its last successful renewal.
func (g *Guard) MayWrite() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holding && !g.ended && g.opts.Clock.Since(g.renewedAt) < g.opts.Duration
}

// Context returns a context that ends when the process must stop writing
// (the moment MayWrite turns false after the Lease was held), with a
// *LostError as its cause, or the cause that ended Run. Before the Lease
// is held it has not ended, and MayWrite is false: wait for Held.
func (g *Guard) Context() context.Context { return g.writing }

// Held is closed once the Guard holds the Lease.
func (g *Guard) Held() <-chan struct{} { return g.held }

// Run acquires the Lease, then renews it every RenewInterval until ctx
// ends or a renewal fails; it returns ctx's error, or a *LostError. It
// runs once. From the acquisition on, whatever Run returns, the process
// is stopped (Options.Exit) at the expiry of the last successful renewal
// plus Deadline less StopTakes, unless it has exited before: a workload
// that must go on running without writing cannot use a Guard.
//
// It acquires a Lease that is missing, or whose record it has seen
// unchanged for the record's duration (or Duration, if longer) plus
// Deadline plus Margin, whoever holds it, its own identity too: by then
// the previous holder, a process of the same pod included, has stopped,
// whether or not it listened. Every holder of one Lease must use the same
// Deadline (Stamp them from one Options).
func (g *Guard) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.ran {
		g.mu.Unlock()
		return errors.New("selffence: Run called twice")
	}
	g.ran = true
	g.mu.Unlock()

	if err := g.acquire(ctx); err != nil {
		g.end(err)
		return err
	}
	go g.watchdog()
	err := g.renew(ctx)
	g.end(err)
	return err
}

// acquire waits until the Lease is held, or ctx ends.
func (g *Guard) acquire(ctx context.Context) error {
	var observed *resourcelock.LeaderElectionRecord // the record last read
	var observedAt time.Time                        // when it was first read
	for {
		record, ok, err := g.tryAcquire(ctx, &observed, &observedAt)
		if ok {
			g.mu.Lock()
			g.holding, g.renewedAt, g.acquired = true, record.RenewTime.Time, record
			g.mu.Unlock()
			close(g.held)
			g.opts.Logger.Info("acquired the Lease", "lease", g.name, "holder", g.opts.Identity)
			return nil
		}
		if err != nil {
			g.opts.Logger.Info("not acquired yet", "lease", g.name, "reason", err.Error())
		}
		if err := g.sleep(ctx, g.opts.RenewInterval); err != nil {
			return err
		}
	}
}

// tryAcquire makes one attempt, returning the record it wrote, whose
// renewTime is the start of the write on the process's clock.
func (g *Guard) tryAcquire(ctx context.Context, observed **resourcelock.LeaderElectionRecord, observedAt *time.Time) (resourcelock.LeaderElectionRecord, bool, error) {
	var none resourcelock.LeaderElectionRecord
	rctx, cancel := context.WithTimeout(ctx, g.opts.RenewInterval)
	defer cancel()
	record, _, err := g.lock.Get(rctx)
	// First seen when the answer arrived, not when it was asked for: the
	// record may have been written while the read was in flight.
	now := g.opts.Clock.Now()
	switch {
	case apierrors.IsNotFound(err):
		mine := g.record(g.opts.Clock.Now(), 0)
		if err := g.lock.Create(rctx, mine); err != nil {
			return none, false, fmt.Errorf("creating the Lease: %w", err)
		}
		return mine, true, nil
	case err != nil:
		return none, false, fmt.Errorf("reading the Lease: %w", err)
	}
	if *observed == nil || !sameRecord(**observed, *record) {
		*observed, *observedAt = record, now
	}
	if record.HolderIdentity != "" {
		// The holder writes until its Lease expires, and its processes
		// are stopped by the deadline after that, whether or not they
		// listened (a workload behind the sidecar may not ask): only then
		// may this one write.
		wait := max(time.Duration(record.LeaseDurationSeconds)*time.Second, g.opts.Duration) + g.opts.Deadline + g.opts.Margin
		if seen := g.opts.Clock.Since(*observedAt); seen < wait {
			return none, false, fmt.Errorf("held by %q, its record seen unchanged for %s of %s", record.HolderIdentity, seen.Round(time.Millisecond), wait)
		}
	}
	mine := g.record(g.opts.Clock.Now(), record.LeaderTransitions+1)
	if err := g.lock.Update(rctx, mine); err != nil {
		return none, false, fmt.Errorf("taking the Lease over: %w", err)
	}
	return mine, true, nil
}

// renew renews the Lease every RenewInterval, from the start of the last
// successful renewal, until ctx ends or a renewal fails.
func (g *Guard) renew(ctx context.Context) error {
	for {
		g.mu.Lock()
		next := g.renewedAt.Add(g.opts.RenewInterval)
		expiry := g.renewedAt.Add(g.opts.Duration)
		g.mu.Unlock()
		if err := g.sleep(ctx, next.Sub(g.opts.Clock.Now())); err != nil {
			return err
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
		g.renewedAt = start
		g.mu.Unlock()
		g.signal()
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
	g.opts.Logger.Info("stopped writing: a renewal failed", "lease", g.name, "reason", err.Error())
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
// ended, whether or not the workload listened.
func (g *Guard) watchdog() {
	for {
		g.mu.Lock()
		ended, renewedAt := g.ended, g.renewedAt
		g.mu.Unlock()
		expiry := renewedAt.Add(g.opts.Duration)
		if ended {
			g.waitUntil(expiry.Add(g.opts.Deadline - g.opts.StopTakes))
			g.opts.Logger.Info("stopping the process: the Lease's deadline", "lease", g.name)
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

// sameRecord reports whether two reads of the Lease show one record.
func sameRecord(a, b resourcelock.LeaderElectionRecord) bool {
	return a.HolderIdentity == b.HolderIdentity && a.LeaseDurationSeconds == b.LeaseDurationSeconds &&
		a.AcquireTime.Equal(&b.AcquireTime) && a.RenewTime.Equal(&b.RenewTime) && a.LeaderTransitions == b.LeaderTransitions
}
