package podsource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
)

// Every pod TestDeleter hands to a deleter is in this namespace and carries
// this label, so that a deleter bound to a namespace and a label selector
// can be built to admit them all.
const (
	DeleterTestNamespace  = "default"
	DeleterTestLabelKey   = "app"
	DeleterTestLabelValue = "podsource-test"
)

// concurrentDeletes is how many goroutines force-delete at once in the
// concurrency check.
const concurrentDeletes = 16

// GetPodFunc reads the store behind a deleter under test: it returns the
// stored pod of that namespace and name, or an error for which
// apierrors.IsNotFound is true when there is none.
type GetPodFunc func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// NewDeleterFunc returns a deleter in front of a new store that holds
// exactly pods (which it must copy, not keep), and a GetPodFunc over that
// store. TestDeleter calls it once per property it checks.
//
// The store must answer deletes as the API server does for pods whose node
// is gone: a UID precondition that does not match the stored pod fails
// with 409 Conflict and leaves the pod alone, a missing pod is 404
// NotFound, a grace period of 0 removes a pod without finalizers at once,
// and any longer grace period (or none) only marks the pod for deletion,
// since no kubelet will ever confirm it. podsource/fake.Pods does all of
// that; over client-go's fake clientset, whose tracker deletes
// unconditionally, a reactor must enforce the precondition and the grace
// period.
type NewDeleterFunc func(pods ...*corev1.Pod) (health.Deleter, GetPodFunc, error)

// TestDeleter checks that the deleters newDeleter builds honour the
// health.Deleter contract, in the spirit of testing/fstest.TestFS:
//
//   - a force delete that returns nil removed the pod (grace period 0);
//   - a pod whose name now belongs to another UID is not deleted, and the
//     answer is a Conflict (apierrors.IsConflict);
//   - a missing pod is NotFound (apierrors.IsNotFound), never nil;
//   - the pod argument is never changed (deep compare);
//   - with ctx already canceled or expired, the error wraps ctx.Err() and
//     nothing is deleted or marked;
//   - concurrent force deletes of distinct pods all succeed (run it under
//     the race detector to check that they are safe, too).
//
// Every pod it uses is in namespace DeleterTestNamespace with the label
// DeleterTestLabelKey=DeleterTestLabelValue. It returns nil on success, or
// an error joining every failure found.
func TestDeleter(newDeleter NewDeleterFunc) error {
	if newDeleter == nil {
		return errors.New("podsource: nil NewDeleterFunc")
	}
	t := &deleterTest{newDeleter: newDeleter}
	t.removesThePod()
	t.sparesANewerPodOfTheSameName()
	t.answersNotFoundForAMissingPod()
	t.honoursADoneContext()
	t.deletesConcurrently()
	return errors.Join(t.errs...)
}

type deleterTest struct {
	newDeleter NewDeleterFunc
	errs       []error
}

func (t *deleterTest) fail(format string, args ...any) {
	t.errs = append(t.errs, fmt.Errorf(format, args...))
}

// setUp builds a deleter over pods; ok is false when the harness failed.
func (t *deleterTest) setUp(check string, pods ...*corev1.Pod) (health.Deleter, GetPodFunc, bool) {
	seeded := deepCopyAll(pods)
	d, get, err := t.newDeleter(seeded...)
	switch {
	case err != nil:
		t.fail("%s: NewDeleterFunc: %w", check, err)
		return nil, nil, false
	case d == nil || get == nil:
		t.fail("%s: NewDeleterFunc returned a nil Deleter or GetPodFunc", check)
		return nil, nil, false
	}
	return d, get, true
}

// forceDelete calls ForceDelete on a copy of pod and reports any change the
// call made to its argument.
func (t *deleterTest) forceDelete(check string, ctx context.Context, d health.Deleter, pod *corev1.Pod) error {
	arg := pod.DeepCopy()
	err := d.ForceDelete(ctx, arg)
	if diff := cmp.Diff(pod, arg); diff != "" {
		t.fail("%s: ForceDelete changed its pod argument (-before +after):\n%s", check, diff)
	}
	return err
}

// stored reads a pod back; ok is false (and a failure recorded) when it is
// not there.
func (t *deleterTest) stored(check string, get GetPodFunc, pod *corev1.Pod) (*corev1.Pod, bool) {
	got, err := get(context.Background(), pod.Namespace, pod.Name)
	if err != nil {
		t.fail("%s: pod %s/%s is no longer stored: %w", check, pod.Namespace, pod.Name, err)
		return nil, false
	}
	return got, true
}

// untouched reports a stored pod that is not the one seeded or was marked
// for deletion since.
func (t *deleterTest) untouched(check string, get GetPodFunc, seeded *corev1.Pod) {
	got, ok := t.stored(check, get, seeded)
	if !ok {
		return
	}
	if got.UID != seeded.UID {
		t.fail("%s: pod %s/%s has UID %s, want %s", check, seeded.Namespace, seeded.Name, got.UID, seeded.UID)
	}
	if !got.DeletionTimestamp.Equal(seeded.DeletionTimestamp) || !equalInt64(got.DeletionGracePeriodSeconds, seeded.DeletionGracePeriodSeconds) {
		t.fail("%s: pod %s/%s was marked for deletion: deletionTimestamp %v, deletionGracePeriodSeconds %v; want %v, %v",
			check, seeded.Namespace, seeded.Name, got.DeletionTimestamp, ptrString(got.DeletionGracePeriodSeconds),
			seeded.DeletionTimestamp, ptrString(seeded.DeletionGracePeriodSeconds))
	}
}

// gone reports a pod still stored after a force delete that returned nil.
func (t *deleterTest) gone(check string, get GetPodFunc, pod *corev1.Pod) {
	got, err := get(context.Background(), pod.Namespace, pod.Name)
	switch {
	case err == nil:
		t.fail("%s: ForceDelete returned nil but pod %s/%s is still stored (deletionTimestamp %v, deletionGracePeriodSeconds %s): was the grace period not 0?",
			check, pod.Namespace, pod.Name, got.DeletionTimestamp, ptrString(got.DeletionGracePeriodSeconds))
	case !apierrors.IsNotFound(err):
		t.fail("%s: reading pod %s/%s back: %w", check, pod.Namespace, pod.Name, err)
	}
}

func (t *deleterTest) removesThePod() {
	const check = "force delete"
	dead, bystander := testPod("dead"), testPod("bystander")
	d, get, ok := t.setUp(check, dead, bystander)
	if !ok {
		return
	}
	if err := t.forceDelete(check, context.Background(), d, dead); err != nil {
		t.fail("%s of a stored pod: %w", check, err)
		return
	}
	t.gone(check, get, dead)
	t.untouched(check+" (another pod)", get, bystander)
}

func (t *deleterTest) sparesANewerPodOfTheSameName() {
	const check = "UID precondition"
	dead := testPod("reused")
	newer := testPod("reused")
	newer.UID = dead.UID + "-newer"
	newer.DeletionTimestamp, newer.DeletionGracePeriodSeconds = nil, nil
	d, get, ok := t.setUp(check, newer)
	if !ok {
		return
	}
	err := t.forceDelete(check, context.Background(), d, dead)
	if !apierrors.IsConflict(err) {
		t.fail("%s: force delete of pod %s/%s (uid %s) whose name now belongs to uid %s: got error %v, want a Conflict",
			check, dead.Namespace, dead.Name, dead.UID, newer.UID, err)
	}
	t.untouched(check+": the newer pod", get, newer)
}

func (t *deleterTest) answersNotFoundForAMissingPod() {
	const check = "missing pod"
	missing, bystander := testPod("missing"), testPod("bystander")
	d, get, ok := t.setUp(check, bystander)
	if !ok {
		return
	}
	if err := t.forceDelete(check, context.Background(), d, missing); !apierrors.IsNotFound(err) {
		t.fail("%s: force delete of pod %s/%s that is not stored: got error %v, want a NotFound", check, missing.Namespace, missing.Name, err)
	}
	t.untouched(check+" (another pod)", get, bystander)
}

func (t *deleterTest) honoursADoneContext() {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancelExpired()
	for _, tc := range []struct {
		check string
		ctx   context.Context
		want  error
	}{
		{"canceled context", canceled, context.Canceled},
		{"expired context", expired, context.DeadlineExceeded},
	} {
		dead := testPod("dead")
		d, get, ok := t.setUp(tc.check, dead)
		if !ok {
			continue
		}
		if err := t.forceDelete(tc.check, tc.ctx, d, dead); !errors.Is(err, tc.want) {
			t.fail("%s: got error %v, want one wrapping %v", tc.check, err, tc.want)
		}
		t.untouched(tc.check, get, dead)
	}
}

func (t *deleterTest) deletesConcurrently() {
	const check = "concurrent force deletes"
	pods := make([]*corev1.Pod, concurrentDeletes)
	for i := range pods {
		pods[i] = testPod(fmt.Sprintf("dead-%02d", i))
	}
	d, get, ok := t.setUp(check, pods...)
	if !ok {
		return
	}
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	args := deepCopyAll(pods)
	for i := range pods {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = d.ForceDelete(context.Background(), args[i]) }()
	}
	wg.Wait()
	for i, p := range pods {
		if errs[i] != nil {
			t.fail("%s: pod %s/%s: %w", check, p.Namespace, p.Name, errs[i])
			continue
		}
		if diff := cmp.Diff(p, args[i]); diff != "" {
			t.fail("%s: ForceDelete changed its pod argument (-before +after):\n%s", check, diff)
		}
		t.gone(check, get, p)
	}
}

// testPod returns a pod as the taint-eviction controller leaves it on a
// lost node: deleting gracefully, DisruptionTarget set, never confirmed.
func testPod(name string) *corev1.Pod {
	deletion := metav1.NewTime(time.Date(2026, 11, 29, 16, 45, 0, 0, time.UTC))
	grace := int64(30)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:                  DeleterTestNamespace,
			Name:                       name,
			UID:                        types.UID("podsource-test-" + name),
			Labels:                     map[string]string{DeleterTestLabelKey: DeleterTestLabelValue},
			DeletionTimestamp:          &deletion,
			DeletionGracePeriodSeconds: &grace,
		},
		Spec: corev1.PodSpec{
			NodeName:                      "node-lost",
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager",
			}},
		},
	}
}

func equalInt64(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func ptrString(p *int64) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}
