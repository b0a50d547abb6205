package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
)

// The stop's bounds, both under a pod's default grace period (30 s), after
// which the kubelet kills the process: the manager gives its runnables
// gracefulShutdown to stop (in-flight reconciles, giving up the Lease), and
// the process exits stopBound after the signal whatever they do.
const (
	gracefulShutdown = 20 * time.Second
	stopBound        = 25 * time.Second
)

// errStoppedUnsynced is runUntilStopped's answer to a stop that came before
// the caches synced: nothing had been acted on, so there was nothing to wait
// for.
var errStoppedUnsynced = errors.New("stopped before the caches synced: nothing had been acted on")

// cachesStarted is a runnable that the manager starts, as it starts every
// runnable that needs no leader, only once all its caches have synced.
type cachesStarted struct{ started atomic.Bool }

func (c *cachesStarted) Start(ctx context.Context) error {
	c.started.Store(true)
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: a standby's caches sync too.
func (c *cachesStarted) NeedLeaderElection() bool { return false }

func (c *cachesStarted) Synced() bool { return c.started.Load() }

// runUntilStopped runs start(ctx) and returns what it returns, and once ctx
// is done it returns within bound whatever start does. Before synced() it
// does not wait for start at all: controller-runtime's manager does not
// return from Start while a cache has not synced (a namespace it may not
// read), however long ago ctx was cancelled, and it has acted on nothing
// before its caches sync.
func runUntilStopped(ctx context.Context, start func(context.Context) error, synced func() bool, bound time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	if !synced() {
		select {
		case err := <-done:
			return err
		default:
			return errStoppedUnsynced
		}
	}
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return fmt.Errorf("the manager had not stopped %s after the signal; exiting", bound)
	}
}

// watchErrors keeps the latest error of the caches' lists and watches, for
// the readiness check to say why the caches have not synced. Safe for
// concurrent use.
type watchErrors struct {
	mu   sync.Mutex
	now  func() time.Time
	last error
	at   time.Time
}

// handler is a cache.Options.DefaultWatchErrorHandler: it logs as client-go
// does, and records the error.
func (w *watchErrors) handler(ctx context.Context, r *toolscache.Reflector, err error) {
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
	if errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return // a watch that ended as watches do
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = fmt.Errorf("%s: %w", r.TypeDescription(), err)
	w.at = w.now()
}

// notSynced is the readiness check's error while the caches have not synced.
func (w *watchErrors) notSynced() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		return errors.New("caches not synced")
	}
	return fmt.Errorf("caches not synced; the last list or watch error, %s ago: %w", w.now().Sub(w.at).Round(time.Second), w.last)
}
