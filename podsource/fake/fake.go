package fake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/podhealth/podhealth/health"
)

var (
	_ health.PodSource = (*Pods)(nil)
	_ health.Deleter   = (*Pods)(nil)
)

var podResource = corev1.Resource("pods")

// Options configure Pods. The zero value lists without lag and intercepts
// nothing.
type Options struct {
	// ListLag is how many more ListPods calls still list a pod after it was
	// removed or replaced by another pod of the same name.
	ListLag int
	// Interceptor wraps the calls of Pods.
	Interceptor Interceptor
	// Now gives the time for deletionTimestamp. Nil means metav1.Now.
	Now func() metav1.Time
}

// Interceptor wraps the calls of Pods. A nil field passes the call through.
// Each function gets the real implementation as next: return an error
// without calling next to inject a fault, or call next and change its
// answer.
type Interceptor struct {
	ListPods func(ctx context.Context, next health.PodSourceFunc) ([]*corev1.Pod, error)
	// Delete wraps the API-level delete that ForceDelete and Delete send;
	// its error is the API server's answer.
	Delete func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions, next DeleteFunc) error
}

// DeleteFunc is the API-level delete of one pod.
type DeleteFunc func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error

// DeleteCall is one recorded delete.
type DeleteCall struct {
	Namespace string
	Name      string
	// UID is the UID precondition, empty when none was given.
	UID types.UID
	// GracePeriodSeconds is nil when none was given.
	GracePeriodSeconds *int64
	// Err is the answer, nil on success.
	Err error
}

// Pods is an in-memory pod store that lists like a cache and deletes like
// the API server. Create it with New. It is safe for concurrent use.
type Pods struct {
	opts Options

	mu      sync.Mutex
	pods    map[types.NamespacedName]*corev1.Pod
	ghosts  map[types.NamespacedName]*ghost // still listed after removal
	deletes []DeleteCall
	lists   int
}

type ghost struct {
	pod   *corev1.Pod
	lists int // how many more lists show it
}

// New returns Pods seeded with deep copies of pods. A pod without a UID gets
// a random one. It panics on a nil pod or a duplicate name, since that is a
// bug in the test that calls it.
func New(opts Options, pods ...*corev1.Pod) *Pods {
	f := &Pods{
		opts:   opts,
		pods:   make(map[types.NamespacedName]*corev1.Pod),
		ghosts: make(map[types.NamespacedName]*ghost),
	}
	for _, p := range pods {
		if err := f.Add(p); err != nil {
			panic(fmt.Sprintf("fake.New: %v", err))
		}
	}
	return f
}

// ListPods lists the stored pods sorted by namespace and name, with the
// pods that are still lagging in place of their successors.
func (f *Pods) ListPods(ctx context.Context) ([]*corev1.Pod, error) {
	if f.opts.Interceptor.ListPods != nil {
		return f.opts.Interceptor.ListPods(ctx, f.listPods)
	}
	return f.listPods(ctx)
}

func (f *Pods) listPods(ctx context.Context) ([]*corev1.Pod, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake: list pods: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	out := make([]*corev1.Pod, 0, len(f.pods)+len(f.ghosts))
	for key, p := range f.pods {
		if _, lagging := f.ghosts[key]; !lagging {
			out = append(out, p)
		}
	}
	for key, g := range f.ghosts {
		out = append(out, g.pod)
		if g.lists--; g.lists <= 0 {
			delete(f.ghosts, key)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// ForceDelete deletes pod with a grace period of 0 and a UID precondition,
// and returns the answer as the API server gives it: nil, NotFound,
// Conflict, or any error an Interceptor injects. With ctx already done it
// returns an error wrapping ctx.Err() and records nothing. A nil pod is
// refused with a BadRequest.
func (f *Pods) ForceDelete(ctx context.Context, pod *corev1.Pod) error {
	if pod == nil {
		return apierrors.NewBadRequest("fake: force delete of a nil pod")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fake: force delete of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	zero := int64(0)
	uid := pod.UID
	return f.Delete(ctx, pod.Namespace, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
}

// Delete deletes a pod as the API server does; see the package
// documentation. The call is recorded.
func (f *Pods) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	var err error
	if f.opts.Interceptor.Delete != nil {
		err = f.opts.Interceptor.Delete(ctx, namespace, name, opts, f.delete)
	} else {
		err = f.delete(ctx, namespace, name, opts)
	}
	call := DeleteCall{Namespace: namespace, Name: name, Err: err}
	if opts.Preconditions != nil && opts.Preconditions.UID != nil {
		call.UID = *opts.Preconditions.UID
	}
	if opts.GracePeriodSeconds != nil {
		grace := *opts.GracePeriodSeconds
		call.GracePeriodSeconds = &grace
	}
	f.mu.Lock()
	f.deletes = append(f.deletes, call)
	f.mu.Unlock()
	return err
}

func (f *Pods) delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	if err := ctx.Err(); err != nil {
		return apierrors.NewTimeoutError(fmt.Sprintf("fake: delete pod: %v", err), 0)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := types.NamespacedName{Namespace: namespace, Name: name}
	stored, ok := f.pods[key]
	if !ok {
		return apierrors.NewNotFound(podResource, name)
	}
	if opts.Preconditions != nil && opts.Preconditions.UID != nil && *opts.Preconditions.UID != stored.UID {
		return apierrors.NewConflict(podResource, name, fmt.Errorf(
			"the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated",
			*opts.Preconditions.UID, stored.UID))
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if stored.Spec.TerminationGracePeriodSeconds != nil {
		grace = *stored.Spec.TerminationGracePeriodSeconds
	}
	if opts.GracePeriodSeconds != nil {
		grace = *opts.GracePeriodSeconds
	}
	if grace == 0 && len(stored.Finalizers) == 0 {
		f.removeLocked(key, stored)
		return nil
	}
	// A graceful delete, or finalizers: the pod stays, marked for deletion.
	updated := stored.DeepCopy()
	if updated.DeletionTimestamp == nil {
		now := f.now()
		updated.DeletionTimestamp = &now
	}
	if updated.DeletionGracePeriodSeconds == nil || grace < *updated.DeletionGracePeriodSeconds {
		updated.DeletionGracePeriodSeconds = &grace
	}
	f.pods[key] = updated
	return nil
}

// removeLocked drops the pod, keeping it listed for ListLag more lists.
func (f *Pods) removeLocked(key types.NamespacedName, old *corev1.Pod) {
	delete(f.pods, key)
	if f.opts.ListLag > 0 {
		if _, lagging := f.ghosts[key]; !lagging {
			f.ghosts[key] = &ghost{pod: old, lists: f.opts.ListLag}
		}
	}
}

func (f *Pods) now() metav1.Time {
	if f.opts.Now != nil {
		return f.opts.Now()
	}
	return metav1.Now()
}

// Add stores a deep copy of pod. A pod without a UID gets a random one. It
// fails with AlreadyExists if the name is taken.
func (f *Pods) Add(pod *corev1.Pod) error {
	if pod == nil {
		return apierrors.NewBadRequest("fake: nil pod")
	}
	p := pod.DeepCopy()
	if p.UID == "" {
		p.UID = uuid.NewUUID()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	if _, ok := f.pods[key]; ok {
		return apierrors.NewAlreadyExists(podResource, p.Name)
	}
	f.pods[key] = p
	return nil
}

// Update stores a deep copy of pod in place of the stored pod with the same
// name and UID, as a status or metadata update does. It fails with NotFound
// if there is none, and with Conflict if the UID differs.
func (f *Pods) Update(pod *corev1.Pod) error {
	if pod == nil {
		return apierrors.NewBadRequest("fake: nil pod")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	stored, ok := f.pods[key]
	if !ok {
		return apierrors.NewNotFound(podResource, pod.Name)
	}
	if pod.UID != "" && pod.UID != stored.UID {
		return apierrors.NewConflict(podResource, pod.Name, fmt.Errorf("UID %s does not match %s", pod.UID, stored.UID))
	}
	p := pod.DeepCopy()
	p.UID = stored.UID
	if len(p.Finalizers) == 0 && stored.DeletionTimestamp != nil && stored.DeletionGracePeriodSeconds != nil && *stored.DeletionGracePeriodSeconds == 0 {
		// The last finalizer of a force-deleted pod is gone: the pod goes.
		f.removeLocked(key, stored)
		return nil
	}
	f.pods[key] = p
	return nil
}

// Replace swaps the stored pod of the same name for a new pod with a new
// UID, as when a controller recreates a pod by name. It returns the new pod
// (a copy). It fails with NotFound if there is no pod of that name.
func (f *Pods) Replace(pod *corev1.Pod) (*corev1.Pod, error) {
	if pod == nil {
		return nil, apierrors.NewBadRequest("fake: nil pod")
	}
	p := pod.DeepCopy()
	p.UID = uuid.NewUUID()
	p.DeletionTimestamp = nil
	p.DeletionGracePeriodSeconds = nil
	f.mu.Lock()
	defer f.mu.Unlock()
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	old, ok := f.pods[key]
	if !ok {
		return nil, apierrors.NewNotFound(podResource, p.Name)
	}
	f.removeLocked(key, old)
	f.pods[key] = p
	return p.DeepCopy(), nil
}

// Get returns a copy of the stored pod, or a NotFound error.
func (f *Pods) Get(namespace, name string) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(podResource, name)
	}
	return p.DeepCopy(), nil
}

// Deletes returns every delete sent so far, in order.
func (f *Pods) Deletes() []DeleteCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deletes)
}

// Lists returns how many times ListPods reached the store.
func (f *Pods) Lists() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}
