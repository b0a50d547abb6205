//go:build go1.25

// The root module's go directive turns asynctimerchan on, which
// testing/synctest refuses.
//
//go:debug asynctimerchan=0

package sidecar_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/podhealth/podhealth/internal/sidecar"
	"github.com/podhealth/podhealth/selffence"
)

// Live answers true while the sidecar's Guard claims the Lease and waits,
// and while it lets the workload write; false, for good, from the moment
// writing ends after a yes (the first failed renewal), while the process
// still runs to its deadline.
func TestLiveIsTrueUntilWritingEndsAfterAYes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(pod)
		var failing atomic.Bool
		client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			if failing.Load() {
				return true, nil, apierrors.NewServiceUnavailable("partitioned")
			}
			return false, nil, nil
		})
		o := opts
		o.Duration, o.RenewInterval, o.Deadline, o.Margin = 10*time.Second, 3*time.Second, 5*time.Second, 3*time.Second
		served := make(chan *selffence.Guard, 1)
		stopped, released := make(chan struct{}), make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- sidecar.Run(ctx, client, o, sidecar.Hooks{
				Start: func() error { return nil },
				// The deadline's stop: this process is stopped, and the
				// call does not return before the test lets it.
				Stop:    func() { close(stopped); <-released },
				Serve:   func(g *selffence.Guard) (func(), error) { served <- g; return func() {}, nil },
				Stopped: stopped,
			})
		}()
		g := <-served
		synctest.Wait()
		require.False(t, g.MayWrite(), "claimed, in its wait")
		require.True(t, sidecar.Live(g), "a workload waiting for its first yes lives")

		<-g.Held()
		require.True(t, g.MayWrite())
		require.True(t, sidecar.Live(g), "a workload told yes lives while it may write")

		failing.Store(true)
		time.Sleep(o.RenewInterval)
		synctest.Wait()
		require.False(t, g.MayWrite(), "a renewal failed")
		require.False(t, sidecar.Live(g), "writing ended after a yes: the kubelet must stop the workload")
		select {
		case <-stopped:
			t.Fatal("stopped before the deadline: the probe's answer is what is under test here")
		default:
		}

		<-stopped
		require.False(t, sidecar.Live(g), "false for good")
		close(released)
		require.Error(t, <-done)
	})
}
