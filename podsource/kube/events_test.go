package kube_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	podfake "github.com/podhealth/podhealth/podsource/fake"
	"github.com/podhealth/podhealth/podsource/kube"
)

func reportFor(pod *corev1.Pod, outcome health.Outcome, err error) health.PodReport {
	return health.PodReport{
		Pod: pod,
		Verdict: health.Verdict{State: health.Dead, Rule: "TaintEvicted",
			Reason: "deletionTimestamp set and DisruptionTarget=True reason DeletionByTaintManager"},
		Outcome: outcome, Err: err,
	}
}

func TestEventObserverRecordsOneEventPerDeleteOrHeldBackOutcome(t *testing.T) {
	const about = `default/taint-evicted (uid 3c0c8989-7032-484b-9396-d2330489e1cf) on node "node-lost": rule TaintEvicted: deletionTimestamp set and DisruptionTarget=True reason DeletionByTaintManager; outcome `
	const onPod = " involvedObject{kind=Pod,apiVersion=v1}"
	tests := []struct {
		outcome  health.Outcome
		err      error
		heldBack health.Hold
		want     []string
	}{
		{outcome: health.HeldBack, heldBack: health.Hold{Reason: health.HeldForFencing, Detail: "owned by StatefulSet db"},
			want: []string{`Warning DeadPodHeldBack Dead pod default/taint-evicted (uid 3c0c8989-7032-484b-9396-d2330489e1cf) on node "node-lost" not force-deleted: needs fencing evidence (its node gone or out of service, or a fencer's proof): owned by StatefulSet db; rule TaintEvicted: deletionTimestamp set and DisruptionTarget=True reason DeletionByTaintManager` + onPod}},
		{outcome: health.ForceDeleted, want: []string{"Warning ForceDeletedDeadPod Force-deleted dead pod " + about + "ForceDeleted" + onPod}},
		{outcome: health.WasAlreadyGone, want: []string{"Warning ForceDeletedDeadPod Force-deleted dead pod " + about + "WasAlreadyGone" + onPod}},
		{outcome: health.NameReused, want: []string{"Warning ForceDeletedDeadPod Force-deleted dead pod " + about + "NameReused" + onPod}},
		{outcome: health.DeleteFailed, err: errors.New("etcd down"), want: []string{"Warning ForceDeleteDeadPodFailed Failed to force-delete dead pod " + about + "DeleteFailed: etcd down" + onPod}},
		{outcome: health.WouldForceDelete, want: []string{"Warning WouldForceDeleteDeadPod Would force-delete dead pod (dry run) " + about + "WouldForceDelete" + onPod}},
		{outcome: health.DeletedEarlier},
		{outcome: health.BlockedByFinalizers},
		{outcome: health.NotAttempted},
		{outcome: health.NoAction},
	}
	for _, tt := range tests {
		t.Run(tt.outcome.String(), func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			rec.IncludeObject = true
			obs, err := kube.NewEventObserver(rec, kube.EventObserverOptions{})
			require.NoError(t, err)
			pod := loadPod(t, podTaintEvicted)

			r := reportFor(pod, tt.outcome, tt.err)
			r.HeldBack = tt.heldBack
			obs.Observe(context.Background(), r)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			require.Empty(t, cmp.Diff(tt.want, got), "events (-want +got)")
		})
	}
}

// newBroadcastRecorder returns a real recorder whose events are written
// as Event objects through client, as a controller's are.
func newBroadcastRecorder(t testing.TB, client *fake.Clientset) record.EventRecorder {
	t.Helper()
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "podhealth-test"})
}

// waitForEvents waits until namespace holds n events and returns them.
func waitForEvents(t testing.TB, client *fake.Clientset, namespace string, n int) []corev1.Event {
	t.Helper()
	var events []corev1.Event
	require.Eventually(t, func() bool {
		list, err := client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		events = list.Items
		return len(events) >= n
	}, eventually, tick, "waiting for %d events in %s", n, namespace)
	require.Len(t, events, n)
	return events
}

func TestEventObserverEventsLandAsEventObjectsOnThePod(t *testing.T) {
	pod := loadPod(t, podTaintEvicted)
	client := fake.NewClientset(objects(pod)...)
	lister := startPodInformer(t, client, "default")
	cached, err := lister.Pods("default").Get(pod.Name)
	require.NoError(t, err)
	before := cached.DeepCopy()

	obs, err := kube.NewEventObserver(newBroadcastRecorder(t, client), kube.EventObserverOptions{})
	require.NoError(t, err)
	obs.Observe(context.Background(), reportFor(cached, health.ForceDeleted, nil))

	ev := waitForEvents(t, client, "default", 1)[0]
	require.Equal(t, corev1.EventTypeWarning, ev.Type)
	require.Equal(t, podsource.ReasonForceDeleted, ev.Reason)
	require.Contains(t, ev.Message, "rule TaintEvicted")
	require.Contains(t, ev.Message, `on node "node-lost"`)
	require.Empty(t, cmp.Diff(corev1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "taint-evicted",
		UID: pod.UID, ResourceVersion: pod.ResourceVersion,
	}, ev.InvolvedObject), "involvedObject (-want +got)")
	require.Equal(t, "podhealth-test", ev.Source.Component)

	require.Empty(t, cmp.Diff(before, cached), "recording changed the cached pod")
	again, err := lister.Pods("default").Get(pod.Name)
	require.NoError(t, err)
	require.Same(t, cached, again, "the cache replaced the pod, so the comparison above proves nothing")
}

func TestEventObserverRecordsOnTheObjectTheCallerChose(t *testing.T) {
	owner := &corev1.ConfigMap{ // stands in for a custom resource owning the workload
		TypeMeta:   metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "registry-owner", UID: "owner-uid"},
	}
	client := fake.NewClientset()
	obs, err := kube.NewEventObserver(newBroadcastRecorder(t, client), kube.EventObserverOptions{Object: owner})
	require.NoError(t, err)
	pod := loadPod(t, podTaintEvicted)
	obs.Observe(context.Background(), reportFor(pod, health.WouldForceDelete, nil))

	ev := waitForEvents(t, client, "default", 1)[0]
	require.Equal(t, podsource.ReasonWouldForceDelete, ev.Reason)
	require.Equal(t, "ConfigMap", ev.InvolvedObject.Kind)
	require.Equal(t, "registry-owner", ev.InvolvedObject.Name)
	require.Contains(t, ev.Message, "default/taint-evicted", "the message must name the pod when the event is on another object")
}

// A Checker that checks every second holds a StatefulSet pod: its
// observer records one event for the hold, not one per check, also when
// the observer is built anew per check and shares its HeldEvents; once the
// pod is deleted, that is recorded too.
func TestEventObserverRecordsAHoldOnceNotAtEachCheck(t *testing.T) {
	pod := loadPod(t, podTaintEvicted)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts", Controller: ptr.To(true)}}
	for _, perCheck := range []bool{false, true} {
		t.Run(fmt.Sprintf("observer built per check: %v", perCheck), func(t *testing.T) {
			pods := podfake.New(podfake.Options{}, pod.DeepCopy())
			rec := record.NewFakeRecorder(100)
			held, err := podsource.NewHeldEvents(podsource.HeldEventsOptions{})
			require.NoError(t, err)
			shared, err := kube.NewEventObserver(rec, kube.EventObserverOptions{})
			require.NoError(t, err)
			memory := &health.Memory{}
			check := func(fencing health.Fencing) {
				obs := shared
				if perCheck {
					obs, err = kube.NewEventObserver(rec, kube.EventObserverOptions{HeldEvents: held})
					require.NoError(t, err)
				}
				checker, err := health.New(pods, pods, health.Options{Observer: obs, Memory: memory, Fencing: fencing})
				require.NoError(t, err)
				_, err = checker.CheckReport(context.Background())
				require.NoError(t, err)
			}
			for range 5 {
				check(health.FenceStateful)
			}
			check(health.FenceNever)
			close(rec.Events)
			var reasons []string
			for e := range rec.Events {
				reasons = append(reasons, strings.Fields(e)[1])
			}
			require.Equal(t, []string{podsource.ReasonHeldBack, podsource.ReasonForceDeleted}, reasons)
		})
	}
}
