package kube_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil/informertest"
	"github.com/podhealth/podhealth/podsource/kube"
)

// beforeTaintManager is the taint-evicted pod as the cache saw it just
// before the update that made it dead: being deleted, no DisruptionTarget
// yet (Terminating under the default rules).
func beforeTaintManager(t testing.TB) *corev1.Pod {
	p := loadPod(t, podTaintEvicted)
	p.Status.Conditions = nil
	return p
}

func TestDeadPodHandlerEnqueuesWhenAPodBecomesDead(t *testing.T) {
	type event struct {
		kind     string // add, update, delete
		old, obj any
	}
	dead := loadPod(t, podTaintEvicted)
	tests := []struct {
		name  string
		rules health.Rules
		event event
		want  []string // names enqueued
	}{
		{name: "add of an alive pod", event: event{kind: "add", obj: loadPod(t, podAlive)}},
		{name: "add of a dead pod (initial list)", event: event{kind: "add", obj: dead}, want: []string{"taint-evicted"}},
		{name: "add of a drained pod", event: event{kind: "add", obj: loadPod(t, podDrained)}},
		{name: "add of a user-deleted pod", event: event{kind: "add", obj: loadPod(t, podUserDeleted)}},
		{name: "update that adds DisruptionTarget to a deleting pod", event: event{kind: "update", old: beforeTaintManager(t), obj: dead}, want: []string{"taint-evicted"}},
		{name: "update from alive to dead", event: event{kind: "update", old: loadPod(t, podAlive), obj: dead}, want: []string{"taint-evicted"}},
		{name: "update from dead to dead (resync)", event: event{kind: "update", old: dead, obj: dead}},
		{name: "update from alive to drained", event: event{kind: "update", old: loadPod(t, podAlive), obj: loadPod(t, podDrained)}},
		{name: "update from dead to alive", event: event{kind: "update", old: dead, obj: loadPod(t, podAlive)}},
		{name: "update with an old non-pod", event: event{kind: "update", old: "junk", obj: dead}, want: []string{"taint-evicted"}},
		{name: "update to a non-pod", event: event{kind: "update", old: loadPod(t, podAlive), obj: &corev1.Node{}}},
		{name: "delete of a dead pod", event: event{kind: "delete", obj: dead}},
		{name: "delete tombstone of a dead pod", event: event{kind: "delete", obj: cache.DeletedFinalStateUnknown{Key: "default/taint-evicted", Obj: dead}}},
		{name: "delete tombstone of nothing", event: event{kind: "delete", obj: cache.DeletedFinalStateUnknown{Key: "default/x"}}},
		{name: "add of a tombstone", event: event{kind: "add", obj: cache.DeletedFinalStateUnknown{Key: "default/taint-evicted", Obj: dead}}},
		{name: "add of a node", event: event{kind: "add", obj: &corev1.Node{}}},
		{name: "add of nil", event: event{kind: "add", obj: nil}},
		{name: "add of a nil pod", event: event{kind: "add", obj: (*corev1.Pod)(nil)}},
		{
			name:  "custom rules: a Failed pod under FinishedPodIsDead",
			rules: append(health.Rules{health.FinishedPodIsDead()}, health.DefaultRules()...),
			event: event{kind: "add", obj: failed(loadPod(t, podAlive))},
			want:  []string{"alive"},
		},
		{name: "default rules: a Failed pod is Finished", event: event{kind: "add", obj: failed(loadPod(t, podAlive))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			h, err := kube.DeadPodHandler(classifier(t, tt.rules), func(p *corev1.Pod) { got = append(got, p.Name) })
			require.NoError(t, err)
			require.NotPanics(t, func() {
				switch tt.event.kind {
				case "add":
					h.OnAdd(tt.event.obj, true)
				case "update":
					h.OnUpdate(tt.event.old, tt.event.obj)
				case "delete":
					h.OnDelete(tt.event.obj)
				default:
					t.Fatalf("bad event kind %q", tt.event.kind)
				}
			})
			require.Empty(t, cmp.Diff(tt.want, got), "enqueued (-want +got)")
		})
	}
}

func failed(p *corev1.Pod) *corev1.Pod {
	p.Status.Phase = corev1.PodFailed
	return p
}

// classifier returns a dry-run Checker with rules (empty: the defaults),
// for the handler to classify with.
func classifier(t *testing.T, rules health.Rules) *health.Checker {
	t.Helper()
	none := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return nil, nil })
	checker, err := health.New(none, nil, health.Options{DryRun: true, Rules: rules})
	require.NoError(t, err)
	return checker
}

func TestDeadPodHandlerRefusesMissingInput(t *testing.T) {
	_, err := kube.DeadPodHandler(nil, func(*corev1.Pod) {})
	require.ErrorContains(t, err, "nil Checker")
	_, err = kube.DeadPodHandler(classifier(t, nil), nil)
	require.ErrorContains(t, err, "nil enqueue")
}

// TestDeadPodHandlerFiresOnTheInformersUpdate drives the handler through a
// real informer: the pod is added while being deleted, then the update that
// adds DisruptionTarget arrives, and the handler fires once for it.
func TestDeadPodHandlerFiresOnTheInformersUpdate(t *testing.T) {
	client := fake.NewClientset(objects(beforeTaintManager(t), loadPod(t, podAlive))...)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("default"))
	var (
		mu  sync.Mutex
		got []string
	)
	handler, err := kube.DeadPodHandler(classifier(t, nil), func(p *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p.Name)
	})
	require.NoError(t, err)
	_, err = factory.Core().V1().Pods().Informer().AddEventHandler(handler)
	require.NoError(t, err)
	informertest.StartInformers(t, client, factory, "pods")
	ctx := context.Background()
	enqueued := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	require.Empty(t, enqueued(), "enqueued on the initial list of pods that are not dead")

	_, err = client.CoreV1().Pods("default").UpdateStatus(ctx, loadPod(t, podTaintEvicted), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(enqueued()) > 0 }, eventually, tick)
	require.Equal(t, []string{"taint-evicted"}, enqueued())
}

func TestPodFromObjectUnwrapsTombstones(t *testing.T) {
	pod := loadPod(t, podTaintEvicted)
	tests := []struct {
		name string
		obj  any
		want *corev1.Pod
	}{
		{"pod", pod, pod},
		{"tombstone of a pod", cache.DeletedFinalStateUnknown{Key: "default/taint-evicted", Obj: pod}, pod},
		{"pointer to a tombstone of a pod", &cache.DeletedFinalStateUnknown{Key: "default/taint-evicted", Obj: pod}, pod},
		{"tombstone of a node", cache.DeletedFinalStateUnknown{Key: "n", Obj: &corev1.Node{}}, nil},
		{"empty tombstone", cache.DeletedFinalStateUnknown{}, nil},
		{"nil tombstone pointer", (*cache.DeletedFinalStateUnknown)(nil), nil},
		{"node", &corev1.Node{}, nil},
		{"nil pod", (*corev1.Pod)(nil), nil},
		{"nil", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				got *corev1.Pod
				ok  bool
			)
			require.NotPanics(t, func() { got, ok = kube.PodFromObject(tt.obj) })
			require.Equal(t, tt.want != nil, ok)
			require.Same(t, tt.want, got)
		})
	}
}
