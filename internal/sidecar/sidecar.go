package sidecar

import (
	"context"
	"errors"
	"fmt"

	"github.com/podhealth/podhealth/selffence"
)

// Hooks are what Run needs from outside the Guard.
type Hooks struct {
	// Start stops the pod's other processes, and removes whatever told a
	// predecessor's workload it may write (a may-write file). Run calls
	// it before it reads the Lease or answers anything: a sidecar that
	// starts may find the pod's workload still running under a
	// predecessor killed without warning (an OOM kill, a SIGKILL), and
	// nothing vouches for what it writes. Required.
	Start func() error
	// Stop stops the pod's processes, this one last, and does not
	// return: the Guard's Exit, called at the deadline. Required.
	Stop func()
	// Serve starts answering the workload whether it may write, from the
	// Guard, once Start has returned; the func it returns stops
	// answering. Nil means nothing answers.
	Serve func(*selffence.Guard) (func(), error)
	// Stopped is closed when this process has been stopped; Run, after
	// writing has stopped, waits for it, since the Guard stops the
	// process. Nil waits forever.
	Stopped <-chan struct{}
}

// Run is the sidecar: it builds the Guard from opts (its Exit is
// hooks.Stop), stops what a predecessor left running (hooks.Start),
// starts answering (hooks.Serve), and runs the Guard. If the Lease was
// never held, it returns the Guard's error: there is nothing to stop.
// Once it was held, writing has stopped when the Guard returns, and Run
// waits for the stop that the Guard makes at the deadline
// (hooks.Stopped), then returns the Guard's error.
func Run(ctx context.Context, client selffence.Client, opts selffence.Options, hooks Hooks) error {
	if hooks.Start == nil || hooks.Stop == nil {
		return errors.New("sidecar: Run: Hooks.Start and Hooks.Stop are required")
	}
	opts.Exit = hooks.Stop
	guard, err := selffence.New(client, opts)
	if err != nil {
		return err
	}
	if err := hooks.Start(); err != nil {
		return fmt.Errorf("stopping the pod's other processes before anything else: %w", err)
	}
	if hooks.Serve != nil {
		stop, err := hooks.Serve(guard)
		if err != nil {
			return err
		}
		defer stop()
	}
	err = guard.Run(ctx)
	select {
	case <-guard.Held():
		opts.Logger.Info("writing has stopped; the pod's processes will be stopped at the deadline", "reason", err)
		<-hooks.Stopped // the Guard stops the processes, this one last
		return err
	default:
		return err // never held: nothing to stop
	}
}

// Live is what the workload's liveness probe reads: true while g has not
// yet let the workload write, or lets it now; false for good once writing
// has ended after a yes. A workload that waits for its first yes is left
// alone, so its probe needs no startup probe before it: the kubelet keeps
// a startup probe's success in memory only, and after a restart of its
// own it holds every liveness probe until the startup probe passes again,
// which, behind a sidecar that no longer lets the pod write, it never
// does.
func Live(g *selffence.Guard) bool {
	select {
	case <-g.Held():
		return g.MayWrite()
	default:
		return true
	}
}
