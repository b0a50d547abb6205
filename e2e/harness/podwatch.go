package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// PodHistory is what a [PodWatch] saw of one pod (one UID), with the local
// time at which the watch first delivered each state. A zero time means the
// state was not seen.
type PodHistory struct {
	Name     string
	UID      types.UID
	Labels   map[string]string
	NodeName string // as last seen

	// Listed is true for a pod that existed when the watch started; its
	// Added is the start of the watch.
	Listed bool
	Added  time.Time
	// Evicted is when the pod was first seen with DisruptionTarget=True,
	// reason DeletionByTaintManager; EvictedTransition is that condition's
	// lastTransitionTime, as the API server stores it (whole seconds).
	Evicted           time.Time
	EvictedTransition time.Time
	// Terminating is when the pod was first seen with a deletionTimestamp.
	Terminating time.Time
	// Deleted is when the watch delivered the pod's deletion from the API
	// server.
	Deleted time.Time
	// DeletedAtRelist is true when the deletion fell in a watch that
	// expired: Deleted is then the time of the list that found the pod
	// gone, later than its deletion, and Final holds only its name, UID,
	// labels and node.
	DeletedAtRelist bool
	// Final is the pod as its deletion event carried it: its last state,
	// which tells who deleted it when they left a condition. It is nil
	// until the pod is deleted, and must not be changed.
	Final *corev1.Pod
}

// PodWatch records, from a watch on the pods of one namespace started
// before the events of interest, when each pod reached each state. It is
// safe for concurrent use.
type PodWatch struct {
	client    kubernetes.Interface
	namespace string
	cancel    context.CancelFunc
	done      chan struct{}

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	pods    map[types.UID]*PodHistory
	order   []types.UID
	err     error
}

// WatchPods lists the pods of namespace and starts a watch from there. It
// stops when ctx ends, when Stop is called, or when the test ends.
func (cp *ControlPlane) WatchPods(ctx context.Context, namespace string) (*PodWatch, error) {
	list, err := cp.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("harness: listing pods of %s: %w", namespace, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &PodWatch{
		client:    cp.client,
		namespace: namespace,
		cancel:    cancel,
		done:      make(chan struct{}),
		changed:   make(chan struct{}),
		pods:      map[types.UID]*PodHistory{},
	}
	now := time.Now()
	for i := range list.Items {
		w.observe(watch.Added, &list.Items[i], now, true)
	}
	go w.run(wctx, list.ResourceVersion)
	cp.t.Cleanup(w.Stop)
	return w, nil
}

// Stop ends the watch and waits for it to return.
func (w *PodWatch) Stop() {
	w.cancel()
	<-w.done
}

// Err returns the error that ended the watch, if any.
func (w *PodWatch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Pods returns a copy of every pod seen, in the order first seen.
func (w *PodWatch) Pods() []PodHistory {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]PodHistory, 0, len(w.order))
	for _, uid := range w.order {
		out = append(out, *w.pods[uid])
	}
	return out
}

// Pod returns the history of the pod with the given UID.
func (w *PodWatch) Pod(uid types.UID) (PodHistory, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.pods[uid]
	if !ok {
		return PodHistory{}, false
	}
	return *h, true
}

// WaitFor waits until cond is true of the pods seen, and returns them. It
// gives up when ctx ends or the watch fails.
func (w *PodWatch) WaitFor(ctx context.Context, what string, cond func([]PodHistory) bool) ([]PodHistory, error) {
	for {
		w.mu.Lock()
		changed, err := w.changed, w.err
		w.mu.Unlock()
		pods := w.Pods()
		if cond(pods) {
			return pods, nil
		}
		if err != nil {
			return pods, fmt.Errorf("waiting for %s: pod watch ended: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return pods, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-changed:
		}
	}
}

// run watches from resourceVersion, and watches again from the last version
// seen when the server ends a watch.
func (w *PodWatch) run(ctx context.Context, resourceVersion string) {
	defer close(w.done)
	fail := func(err error) {
		w.mu.Lock()
		w.err = err
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
	}
watching:
	for ctx.Err() == nil {
		wi, err := w.client.CoreV1().Pods(w.namespace).Watch(ctx, metav1.ListOptions{
			ResourceVersion:     resourceVersion,
			AllowWatchBookmarks: true,
		})
		if err != nil {
			if ctx.Err() == nil {
				fail(err)
			}
			return
		}
		for ev := range wi.ResultChan() {
			now := time.Now()
			switch ev.Type {
			case watch.Error:
				wi.Stop()
				if status, ok := ev.Object.(*metav1.Status); ok && status.Code == http.StatusGone {
					// The version to resume from has expired (the API
					// server keeps a window of them): list again, as an
					// informer does, and watch from there.
					if resourceVersion, err = w.relist(ctx); err != nil {
						if ctx.Err() == nil {
							fail(fmt.Errorf("relisting after an expired watch: %w", err))
						}
						return
					}
					continue watching
				}
				fail(fmt.Errorf("watch error: %v", ev.Object))
				return
			case watch.Bookmark:
				if m, err := metaOf(ev.Object); err == nil {
					resourceVersion = m.GetResourceVersion()
				}
				continue
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			resourceVersion = pod.ResourceVersion
			w.observe(ev.Type, pod, now, false)
		}
		wi.Stop()
	}
}

// relist lists the pods again after a watch's version expired: each pod
// listed is observed as it is now, and each pod seen before that is no
// longer listed was deleted meanwhile, at a time the watch cannot know: its
// Deleted is the relist's, later than the deletion, and DeletedAtRelist
// says so. It returns the list's version, to watch from.
func (w *PodWatch) relist(ctx context.Context) (string, error) {
	list, err := w.client.CoreV1().Pods(w.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	now := time.Now()
	listed := make(map[types.UID]bool, len(list.Items))
	for i := range list.Items {
		listed[list.Items[i].UID] = true
		w.observe(watch.Modified, &list.Items[i], now, false)
	}
	w.mu.Lock()
	var gone []*corev1.Pod
	for _, uid := range w.order {
		if h := w.pods[uid]; h.Deleted.IsZero() && !listed[uid] {
			h.DeletedAtRelist = true
			gone = append(gone, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: h.Name, Namespace: w.namespace, UID: uid, Labels: h.Labels}, Spec: corev1.PodSpec{NodeName: h.NodeName}})
		}
	}
	w.mu.Unlock()
	for _, pod := range gone {
		w.observe(watch.Deleted, pod, now, false)
	}
	return list.ResourceVersion, nil
}

func metaOf(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, errors.New("not an object")
	}
	return m, nil
}

func (w *PodWatch) observe(t watch.EventType, pod *corev1.Pod, now time.Time, listed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.pods[pod.UID]
	if !ok {
		h = &PodHistory{Name: pod.Name, UID: pod.UID, Listed: listed, Added: now}
		w.pods[pod.UID] = h
		w.order = append(w.order, pod.UID)
	}
	h.Labels = pod.Labels
	h.NodeName = pod.Spec.NodeName
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue &&
			c.Reason == "DeletionByTaintManager" && h.Evicted.IsZero() {
			h.Evicted = now
			h.EvictedTransition = c.LastTransitionTime.Time
		}
	}
	if pod.DeletionTimestamp != nil && h.Terminating.IsZero() {
		h.Terminating = now
	}
	if t == watch.Deleted && h.Deleted.IsZero() {
		h.Deleted = now
		h.Final = pod
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// Durations returns the durations ds sorted, with their median and maximum.
func Durations(ds []time.Duration) (sorted []time.Duration, median, max time.Duration) {
	sorted = append([]time.Duration(nil), ds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	n := len(sorted)
	if n == 0 {
		return sorted, 0, 0
	}
	if n%2 == 1 {
		median = sorted[n/2]
	} else {
		median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	return sorted, median, sorted[n-1]
}
