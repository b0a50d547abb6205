package main

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestTheStopEndsTheProcessWhateverTheCachesDo(t *testing.T) {
	for _, tt := range []struct {
		name   string
		synced bool
		start  func(ctx context.Context) error
		want   error
		bound  time.Duration
	}{
		{
			name:  "caches never synced: stop at once",
			start: func(ctx context.Context) error { select {} },
			want:  errStoppedUnsynced,
			bound: time.Hour,
		},
		{
			name:   "synced, and the manager stops cleanly: its answer",
			synced: true,
			start:  func(ctx context.Context) error { <-ctx.Done(); return nil },
			want:   nil,
			bound:  time.Hour,
		},
		{
			name:   "synced, and the manager fails to stop: an error after the bound",
			synced: true,
			start:  func(ctx context.Context) error { select {} },
			want:   errors.New("the manager had not stopped 10ms after the signal; exiting"),
			bound:  10 * time.Millisecond,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- runUntilStopped(ctx, tt.start, func() bool { return tt.synced }, tt.bound) }()
			cancel()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("runUntilStopped did not return a minute after the stop")
			}
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			if errors.Is(tt.want, errStoppedUnsynced) {
				require.ErrorIs(t, err, errStoppedUnsynced)
				return
			}
			require.EqualError(t, err, tt.want.Error())
		})
	}
}

func TestRunUntilStoppedReturnsTheManagersErrorBeforeAnyStop(t *testing.T) {
	err := runUntilStopped(context.Background(), func(context.Context) error { return errors.New("no kubeconfig") }, func() bool { return false }, time.Hour)
	require.EqualError(t, err, "no kubeconfig")
}

func TestCachesStartedIsSyncedOnlyOnceTheManagerStartsIt(t *testing.T) {
	c := &cachesStarted{}
	require.False(t, c.NeedLeaderElection(), "a standby's caches sync too")
	require.False(t, c.Synced())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Start(ctx) }()
	require.Eventually(t, c.Synced, 10*time.Second, time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

func TestTheReadinessReasonNamesTheLastListOrWatchError(t *testing.T) {
	now := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	w := &watchErrors{now: func() time.Time { return now }}
	require.EqualError(t, w.notSynced(), "caches not synced")

	reflector := toolscache.NewReflectorWithOptions(&toolscache.ListWatch{}, nil, toolscache.NewStore(toolscache.MetaNamespaceKeyFunc),
		toolscache.ReflectorOptions{TypeDescription: "*v1.Pod"})
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`User "system:serviceaccount:podhealth-system:podhealth-controller" cannot list resource "pods" in API group "" in the namespace "shop"`))
	w.handler(context.Background(), reflector, forbidden)
	now = now.Add(42 * time.Second)
	err := w.notSynced()
	require.ErrorIs(t, err, forbidden)
	require.Contains(t, err.Error(), `caches not synced; the last list or watch error, 42s ago: *v1.Pod: pods is forbidden`)
	require.Contains(t, err.Error(), `in the namespace "shop"`)

	// A watch that ends as watches do is no reason.
	w.handler(context.Background(), reflector, io.EOF)
	w.handler(context.Background(), reflector, apierrors.NewResourceExpired("too old resource version"))
	require.ErrorIs(t, w.notSynced(), forbidden)
}
