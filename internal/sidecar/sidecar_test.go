package sidecar_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

var opts = selffence.Options{Namespace: "db", Lease: "pg-primary", Identity: "pg-0", PodUID: "uid-of-pg-0"}

// pod is the sidecar's pod, as the API server serves it.
var pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-0", UID: "uid-of-pg-0"}}

// The start stops what a predecessor left before its pod or the Lease is
// read or anything answers; a start that fails ends Run with nothing
// read.
func TestRunStopsWhatAPredecessorLeftBeforeItReadsOrAnswers(t *testing.T) {
	var o order
	client := fake.NewClientset(pod)
	client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		o.add("lease " + a.GetVerb())
		return true, nil, errors.New("the API server is away")
	})
	client.PrependReactor("*", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		o.add("pod " + a.GetVerb())
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- sidecar.Run(ctx, client, opts, sidecar.Hooks{
			Start: func() error { o.add("start"); return nil },
			Stop:  func() { o.add("stop") },
			Serve: func(*selffence.Guard) (func(), error) {
				o.add("serve")
				return func() { o.add("serving ends") }, nil
			},
		})
	}()
	require.Eventually(t, func() bool { return len(o.get()) >= 4 }, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "never held: Run returns")
	got := o.get()
	require.Equal(t, []string{"start", "serve", "pod get", "lease get"}, got[:4])
	require.Equal(t, "serving ends", got[len(got)-1])
	require.NotContains(t, got, "stop", "never held: nothing to stop")

	o = order{}
	err := sidecar.Run(context.Background(), client, opts, sidecar.Hooks{
		Start: func() error { return errors.New("no right to signal") },
		Stop:  func() {},
	})
	require.ErrorContains(t, err, "before anything else: no right to signal")
	require.Empty(t, o.get(), "nothing read")
}

func TestRunRefusesMissingHooksAndOptionsTheGuardRefuses(t *testing.T) {
	client := fake.NewClientset(pod)
	err := sidecar.Run(context.Background(), client, opts, sidecar.Hooks{Stop: func() {}})
	require.ErrorContains(t, err, "Start and Hooks.Stop are required")
	err = sidecar.Run(context.Background(), client, opts, sidecar.Hooks{Start: func() error { return nil }})
	require.ErrorContains(t, err, "Start and Hooks.Stop are required")
	bad := opts
	bad.Lease = ""
	started := false
	err = sidecar.Run(context.Background(), client, bad, sidecar.Hooks{Start: func() error { started = true; return nil }, Stop: func() {}})
	require.ErrorContains(t, err, "not a Lease name")
	require.False(t, started)
}
