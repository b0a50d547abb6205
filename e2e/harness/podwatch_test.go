package harness

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestAPodWatchWhoseVersionExpiredListsAgain: when the API server ends a
// re-watch with 410 Gone (the version to resume from has expired), the
// watch lists the pods again and goes on from there; a pod deleted in the
// gap is recorded as deleted at the relist, and says so.
func TestAPodWatchWhoseVersionExpiredListsAgain(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}, Spec: corev1.PodSpec{NodeName: "n1"}}
	}
	client := fake.NewClientset(pod("kept"), pod("gone"))
	var watches atomic.Int32
	later := watch.NewFake()
	client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		if watches.Add(1) == 1 {
			expired := watch.NewFake()
			go expired.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
			return true, expired, nil
		}
		return true, later, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &PodWatch{client: client, namespace: "ns", cancel: cancel, done: make(chan struct{}), changed: make(chan struct{}), pods: map[types.UID]*PodHistory{}}
	now := time.Now()
	for _, p := range []*corev1.Pod{pod("kept"), pod("gone")} {
		w.observe(watch.Added, p, now, true)
	}
	// "gone" is deleted while no watch runs.
	if err := client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "ns", "gone"); err != nil {
		t.Fatal(err)
	}
	go w.run(ctx, "1")
	if _, err := w.WaitFor(ctx, "the deletion found by the relist", func([]PodHistory) bool {
		h, ok := w.Pod("uid-gone")
		return ok && !h.Deleted.IsZero()
	}); err != nil {
		t.Fatal(err)
	}
	gone, _ := w.Pod("uid-gone")
	if !gone.DeletedAtRelist || gone.Final == nil || gone.Final.Name != "gone" || gone.Final.Spec.NodeName != "n1" {
		t.Fatalf("the pod deleted in the gap: %+v", gone)
	}
	// The watch goes on after the relist.
	later.Add(runtime.Object(pod("new")))
	if _, err := w.WaitFor(ctx, "a pod created after the relist", func([]PodHistory) bool {
		_, ok := w.Pod("uid-new")
		return ok
	}); err != nil {
		t.Fatal(err)
	}
	if kept, _ := w.Pod("uid-kept"); !kept.Deleted.IsZero() || kept.DeletedAtRelist {
		t.Fatalf("a pod still listed: %+v", kept)
	}
	if got := watches.Load(); got != 2 {
		t.Fatalf("%d watches, want 2: the expired one and the one after the relist", got)
	}
	cancel()
	later.Stop() // a real watch ends with its context; the fake one does not
	<-w.done
}
