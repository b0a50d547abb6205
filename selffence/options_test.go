package selffence_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/health/fencertest"
	"github.com/podhealth/podhealth/podsource/kube"
	"github.com/podhealth/podhealth/selffence"
)

func TestSettingsThatCannotBeKeptAreRefused(t *testing.T) {
	valid := selffence.Options{Namespace: "db", Lease: "pg-primary", Identity: "pg-1", PodUID: "uid-of-pg-1"}
	for _, tt := range []struct {
		name   string
		change func(*selffence.Options)
		want   string
	}{
		{"a renew interval equal to the duration", func(o *selffence.Options) { o.Duration, o.RenewInterval = 15*time.Second, 15*time.Second }, "the renew interval 15s is not below the duration 15s"},
		{"a renew interval above the duration", func(o *selffence.Options) { o.Duration, o.RenewInterval = 5*time.Second, 6*time.Second }, "the renew interval 6s is not below"},
		{"a negative renew interval", func(o *selffence.Options) { o.RenewInterval = -time.Second }, "the renew interval -1s is not below"},
		{"a deadline no longer than the stop takes", func(o *selffence.Options) { o.Deadline, o.StopTakes = 2*time.Second, 2*time.Second }, "the deadline 2s is not longer than the time a stop takes"},
		{"a deadline shorter than the default stop", func(o *selffence.Options) { o.Deadline = 500 * time.Millisecond }, "the deadline 500ms is not longer"},
		{"a negative deadline", func(o *selffence.Options) { o.Deadline = -time.Second }, "the deadline -1s is not longer"},
		{"a duration under a second", func(o *selffence.Options) { o.Duration = 900 * time.Millisecond }, "under a second"},
		{"a duration in part seconds", func(o *selffence.Options) { o.Duration = 1500 * time.Millisecond }, "not whole seconds"},
		{"a negative stop", func(o *selffence.Options) { o.StopTakes = -time.Second }, "the time a stop takes -1s is negative"},
		{"a negative margin", func(o *selffence.Options) { o.Margin = -time.Second }, "the margin -1s is negative"},
		{"no Lease", func(o *selffence.Options) { o.Lease = "" }, `the Lease "" is not a Lease name`},
		{"a Lease name that is not one", func(o *selffence.Options) { o.Lease = "PG primary" }, "is not a Lease name"},
		{"no namespace", func(o *selffence.Options) { o.Namespace = "" }, `the namespace "" is not a namespace`},
		{"no identity", func(o *selffence.Options) { o.Identity = "" }, "the identity is empty"},
		{"no pod UID", func(o *selffence.Options) { o.PodUID = "" }, "the pod's UID is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.change(&o)
			_, err := selffence.New(fake.NewClientset(), o)
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err := selffence.New(nil, valid)
	require.ErrorContains(t, err, "nil Client")
	_, err = selffence.New(fake.NewClientset(), valid)
	require.NoError(t, err, "the defaults can be kept")
}

func TestStampStatesTheSettingsOrNothing(t *testing.T) {
	var tmpl corev1.PodTemplateSpec
	tmpl.Annotations = map[string]string{"keep": "me"}
	require.NoError(t, selffence.Options{Lease: "pg-primary", Deadline: 90 * time.Second}.Stamp(&tmpl))
	require.Empty(t, cmp.Diff(map[string]string{"keep": "me", fencing.AnnotationLease: "pg-primary", fencing.AnnotationDeadline: "1m30s"}, tmpl.Annotations))

	var defaults corev1.PodTemplateSpec
	require.NoError(t, selffence.Options{Lease: "pg-primary"}.Stamp(&defaults), "no namespace nor identity needed")
	require.Equal(t, "10s", defaults.Annotations[fencing.AnnotationDeadline])

	var refused corev1.PodTemplateSpec
	err := selffence.Options{Lease: "pg-primary", Duration: 5 * time.Second, RenewInterval: 5 * time.Second}.Stamp(&refused)
	require.ErrorContains(t, err, "renew interval")
	require.Nil(t, refused.Annotations, "a refused stamp writes nothing")
	require.Error(t, selffence.Options{Lease: "pg-primary"}.Stamp(nil))
}

// A template states the protocol for every one of its pods, each the
// holder under its own name: an Identity would be a holder that the
// fencer, expecting the pod's name, reads as another holder's takeover of
// the pod's own renewals. Stamp refuses it, and writes nothing.
func TestStampRefusesAnIdentityThatIsNotEachPodsName(t *testing.T) {
	var tmpl corev1.PodTemplateSpec
	err := selffence.Options{Lease: "pg-primary", Identity: "writer-a"}.Stamp(&tmpl)
	require.ErrorContains(t, err, `the identity "writer-a" is set`)
	require.Nil(t, tmpl.Annotations)
	err = selffence.Options{Lease: "pg-primary", PodUID: "uid-of-pg-1"}.Stamp(&tmpl)
	require.ErrorContains(t, err, `the pod's UID "uid-of-pg-1" is set`, "one pod's UID is no template's")
	require.Nil(t, tmpl.Annotations)
}

// The deadline a stamped pod states is the one its Guard enforces: the
// Guard stops the process before the Lease fencer, reading that pod and
// that Lease, proves it stopped, however late the fencer first looks.
func TestAStampedPodIsStoppedBeforeTheFencerProvesItStopped(t *testing.T) {
	opts := tenSeconds
	opts.Lease = "pg-primary"
	var tmpl corev1.PodTemplateSpec
	require.NoError(t, opts.Stamp(&tmpl))
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Namespace, pod.Name, pod.UID = "db", "pg-1", "pg-1-uid"
	pod.DeletionTimestamp = &metav1.Time{Time: time.Unix(0, 0)} // evicted: the fencer proves only a pod whose deletion began

	s, clk := newLeaseServer(t), newFakeClock()
	g, _, exits, _ := runHeld(t, s, clk, opts)
	awaitWaiters(t, clk, 2)
	clk.Step(3 * time.Second) // the last renewal: the node fails after it
	require.Eventually(t, func() bool { return s.stored.Load() == 1 }, 5*time.Second, time.Millisecond, "the renewal stored")
	lastRenewal := clk.Now()
	partitioned := make(chan struct{})
	t.Cleanup(func() { close(partitioned) })
	s.setOnUpdate(func(int32) error { <-partitioned; return nil }) // every renewal hangs

	// The fencer reads the API server through a client of its own: the
	// fake clientset answers one request at a time, and the Guard's hangs.
	reader := &fake.Clientset{}
	reader.AddReactor("*", "*", k8stesting.ObjectReaction(s.Tracker()))
	leases, err := kube.NewLiveLeases(reader.CoordinationV1())
	require.NoError(t, err)
	fencer, err := fencing.NewLeaseFencer(leases, fencing.LeaseOptions{})
	require.NoError(t, err)
	rec := fencertest.NewRecord()
	ask := func(now time.Time) health.Fence {
		t.Helper()
		f, err := fencer.Fence(context.Background(), health.FenceQuery{Pod: pod, Now: now, Sightings: rec.At(now)})
		require.NoError(t, err)
		return f
	}
	first := ask(lastRenewal) // the fencer sees the last record at once
	require.Equal(t, health.NoProof, first.Proves)
	require.Equal(t, 10*time.Second+5*time.Second+fencing.DefaultMargin, first.RetryAfter, "the wait the stamp states")

	awaitWaiters(t, clk, 2)
	clk.Step(3 * time.Second) // the next renewal hangs
	awaitWaiters(t, clk, 1)   // the watchdog alone
	clk.Step(7 * time.Second) // 10 s after the last renewal
	awaitWaiters(t, clk, 1)   // writing ended; the stop is armed
	require.False(t, g.MayWrite())
	clk.Step(4 * time.Second) // 14 s after the last renewal
	require.Eventually(t, func() bool { return exits.Load() == 1 }, 5*time.Second, time.Millisecond)
	stopped := clk.Now()

	proof := ask(lastRenewal.Add(first.RetryAfter))
	require.Equal(t, health.PodStopped, proof.Proves)
	require.True(t, stopped.Before(proof.Since), "stopped at %s, proved at %s", stopped, proof.Since)
	require.Equal(t, 3*time.Second, proof.Since.Sub(stopped), "the stop's second and the margin to spare")
}
