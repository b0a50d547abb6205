package sidecar_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/podhealth/podhealth/internal/sidecar"
	"github.com/podhealth/podhealth/selffence"
)

// order records what happened, in order.
type order struct {
	mu     sync.Mutex
	events []string
}

func (o *order) add(e string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

func (o *order) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.events...)
}

var opts = selffence.Options{Namespace: "db", Lease: "pg-primary", Identity: "pg-0"}

// The start stops what a predecessor left before the Lease is read or
// anything answers; a start that fails ends Run with nothing read.
func TestRunStopsWhatAPredecessorLeftBeforeItReadsOrAnswers(t *testing.T) {
	var o order
	client := fake.NewClientset()
	client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		o.add("lease " + a.GetVerb())
		return true, nil, errors.New("the API server is away")
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- sidecar.Run(ctx, client.CoordinationV1(), opts, sidecar.Hooks{
			Start: func() error { o.add("start"); return nil },
			Stop:  func() { o.add("stop") },
			Serve: func(*selffence.Guard) (func(), error) {
				o.add("serve")
				return func() { o.add("serving ends") }, nil
			},
		})
	}()
	require.Eventually(t, func() bool { return len(o.get()) >= 3 }, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "never held: Run returns")
	got := o.get()
	require.Equal(t, []string{"start", "serve", "lease get"}, got[:3])
	require.Equal(t, "serving ends", got[len(got)-1])
	require.NotContains(t, got, "stop", "never held: nothing to stop")

	o = order{}
	err := sidecar.Run(context.Background(), client.CoordinationV1(), opts, sidecar.Hooks{
		Start: func() error { return errors.New("no right to signal") },
		Stop:  func() {},
	})
	require.ErrorContains(t, err, "before anything else: no right to signal")
	require.Empty(t, o.get(), "nothing read")
}

func TestRunRefusesMissingHooksAndOptionsTheGuardRefuses(t *testing.T) {
	client := fake.NewClientset()
	err := sidecar.Run(context.Background(), client.CoordinationV1(), opts, sidecar.Hooks{Stop: func() {}})
	require.ErrorContains(t, err, "Start and Hooks.Stop are required")
	err = sidecar.Run(context.Background(), client.CoordinationV1(), opts, sidecar.Hooks{Start: func() error { return nil }})
	require.ErrorContains(t, err, "Start and Hooks.Stop are required")
	bad := opts
	bad.Lease = ""
	started := false
	err = sidecar.Run(context.Background(), client.CoordinationV1(), bad, sidecar.Hooks{Start: func() error { started = true; return nil }, Stop: func() {}})
	require.ErrorContains(t, err, "not a Lease name")
	require.False(t, started)
}
