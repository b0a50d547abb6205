package fake_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/fake"
)

var (
	fixture  = testutil.LoadPod
	realPods = testutil.LoadPods
)

func TestPodsPassesTheConformanceSuite(t *testing.T) {
	pods := realPods(t)
	require.NoError(t, podsource.TestPodSource(fake.New(fake.Options{}, pods...), pods...))
}

func TestPodsWithLagPassesTheConformanceSuiteOnceSettled(t *testing.T) {
	pods := realPods(t)
	f := fake.New(fake.Options{ListLag: 2}, pods...)
	require.NoError(t, podsource.TestPodSource(f, pods...), "lag only applies to removed pods")
}

func grace(s int64) *int64 { return &s }

func uidPrecondition(uid types.UID) *metav1.Preconditions { return &metav1.Preconditions{UID: &uid} }

func pod(name string, finalizers ...string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Finalizers: finalizers}}
}

// TestDeleteActsAsTheAPIServer checks the delete semantics that the
// real-cluster fixtures recorded.
func TestDeleteActsAsTheAPIServer(t *testing.T) {
	tests := []struct {
		name          string
		pod           *corev1.Pod
		deleteName    string
		opts          metav1.DeleteOptions
		wantErr       func(error) bool
		wantGone      bool
		wantDeleting  bool
		wantGraceLeft int64
	}{
		{name: "force delete with the right UID removes the pod", pod: pod("a"), deleteName: "a",
			opts: metav1.DeleteOptions{GracePeriodSeconds: grace(0), Preconditions: uidPrecondition("uid-a")}, wantGone: true},
		{name: "force delete with another UID is a Conflict and keeps the pod", pod: pod("a"), deleteName: "a",
			opts: metav1.DeleteOptions{GracePeriodSeconds: grace(0), Preconditions: uidPrecondition("other")}, wantErr: apierrors.IsConflict},
		{name: "delete of a missing pod is NotFound", pod: pod("a"), deleteName: "b",
			opts: metav1.DeleteOptions{GracePeriodSeconds: grace(0)}, wantErr: apierrors.IsNotFound},
		{name: "graceful delete only marks the pod: no kubelet confirms it", pod: pod("a"), deleteName: "a",
			opts: metav1.DeleteOptions{}, wantDeleting: true, wantGraceLeft: 30},
		{name: "force delete of a pod with finalizers marks it with grace 0", pod: pod("a", "example.com/f"), deleteName: "a",
			opts: metav1.DeleteOptions{GracePeriodSeconds: grace(0)}, wantDeleting: true, wantGraceLeft: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fake.New(fake.Options{}, tt.pod)
			err := f.Delete(context.Background(), "ns", tt.deleteName, tt.opts)
			if tt.wantErr != nil {
				require.True(t, tt.wantErr(err), "unexpected error %v", err)
			} else {
				require.NoError(t, err)
			}
			got, getErr := f.Get("ns", "a")
			if tt.wantGone {
				require.True(t, apierrors.IsNotFound(getErr))
				return
			}
			require.NoError(t, getErr)
			require.Equal(t, tt.wantDeleting, got.DeletionTimestamp != nil)
			if tt.wantDeleting {
				require.Equal(t, tt.wantGraceLeft, *got.DeletionGracePeriodSeconds)
			}
		})
	}
}

func TestConflictMessageMatchesTheRealAPIServer(t *testing.T) {
	want := testutil.LoadStatusError(t, testutil.StatusUIDConflict).ErrStatus

	f := fake.New(fake.Options{}, fixture(t, "pod-taint-evicted.json"))
	err := f.Delete(context.Background(), "default", "taint-evicted", metav1.DeleteOptions{GracePeriodSeconds: grace(0), Preconditions: uidPrecondition("00000000-0000-0000-0000-000000000000")})
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	got := status.Status()
	require.Equal(t, want.Code, got.Code)
	require.Equal(t, want.Reason, got.Reason)
	require.Equal(t, want.Details.Name, got.Details.Name)
	require.Contains(t, got.Message, "does not match the UID in record")
}

func TestForceDeleteAnswersLikeTheAPIServerAndRecordsEveryCall(t *testing.T) {
	f := fake.New(fake.Options{}, pod("a"), pod("b"))
	replacement, err := f.Replace(pod("b"))
	require.NoError(t, err)

	require.NoError(t, f.ForceDelete(context.Background(), pod("a")), "deleted")
	require.True(t, apierrors.IsNotFound(f.ForceDelete(context.Background(), pod("a"))), "already gone")
	require.True(t, apierrors.IsConflict(f.ForceDelete(context.Background(), pod("b"))), "the name belongs to a newer pod")

	calls := f.Deletes()
	require.Len(t, calls, 3)
	for _, c := range calls {
		require.Equal(t, int64(0), *c.GracePeriodSeconds)
	}
	require.Equal(t, []types.UID{"uid-a", "uid-a", "uid-b"}, []types.UID{calls[0].UID, calls[1].UID, calls[2].UID})
	require.True(t, apierrors.IsNotFound(calls[1].Err))
	require.True(t, apierrors.IsConflict(calls[2].Err))
	b, err := f.Get("ns", "b")
	require.NoError(t, err)
	require.Equal(t, replacement.UID, b.UID)
}

func TestInterceptorInjectsRealAPIErrors(t *testing.T) {
	f := fake.New(fake.Options{Interceptor: fake.Interceptor{
		Delete: func(context.Context, string, string, metav1.DeleteOptions, fake.DeleteFunc) error {
			return apierrors.NewTooManyRequests("slow down", 5)
		},
		ListPods: func(ctx context.Context, next health.PodSourceFunc) ([]*corev1.Pod, error) {
			pods, err := next(ctx)
			return pods[:0], err // hide everything
		},
	}}, pod("a"))

	err := f.ForceDelete(context.Background(), pod("a"))
	require.True(t, apierrors.IsTooManyRequests(err))
	delay, ok := apierrors.SuggestsClientDelay(err)
	require.True(t, ok)
	require.Equal(t, 5, delay)
	_, getErr := f.Get("ns", "a")
	require.NoError(t, getErr, "the injected error stopped the delete")

	listed, err := f.ListPods(context.Background())
	require.NoError(t, err)
	require.Empty(t, listed)
	require.Equal(t, 1, f.Lists())
}

func TestListLagKeepsRemovedPodsForNLists(t *testing.T) {
	f := fake.New(fake.Options{ListLag: 2}, pod("a"), pod("b"))
	err := f.ForceDelete(context.Background(), pod("a"))
	require.NoError(t, err)

	var seen [][]string
	for range 3 {
		listed, err := f.ListPods(context.Background())
		require.NoError(t, err)
		var names []string
		for _, p := range listed {
			names = append(names, p.Name)
		}
		seen = append(seen, names)
	}
	require.Equal(t, [][]string{{"a", "b"}, {"a", "b"}, {"b"}}, seen)
}

func TestListLagShowsTheOldPodInPlaceOfItsReplacement(t *testing.T) {
	f := fake.New(fake.Options{ListLag: 1}, pod("a"))
	newer, err := f.Replace(pod("a"))
	require.NoError(t, err)

	first, err := f.ListPods(context.Background())
	require.NoError(t, err)
	second, err := f.ListPods(context.Background())
	require.NoError(t, err)
	require.Equal(t, []types.UID{"uid-a"}, []types.UID{first[0].UID})
	require.Len(t, first, 1)
	require.Equal(t, []types.UID{newer.UID}, []types.UID{second[0].UID})
}

func TestListedPodsAreNeverMutatedByLaterChanges(t *testing.T) {
	f := fake.New(fake.Options{}, pod("a", "example.com/f"))
	listed, err := f.ListPods(context.Background())
	require.NoError(t, err)
	before := listed[0].DeepCopy()

	require.NoError(t, f.Delete(context.Background(), "ns", "a", metav1.DeleteOptions{}))
	updated := pod("a")
	updated.Labels = map[string]string{"changed": "yes"}
	require.NoError(t, f.Update(updated))

	require.Empty(t, cmp.Diff(before, listed[0]))
}

func TestSeedAndAddCopyTheirInput(t *testing.T) {
	p := pod("a")
	f := fake.New(fake.Options{}, p)
	p.Labels = map[string]string{"mutated": "after seeding"}
	got, err := f.Get("ns", "a")
	require.NoError(t, err)
	require.Empty(t, got.Labels)
	require.True(t, apierrors.IsAlreadyExists(f.Add(pod("a"))))
}

func TestRemovingTheLastFinalizerOfAForceDeletedPodRemovesIt(t *testing.T) {
	f := fake.New(fake.Options{}, pod("a", "example.com/f"))
	err := f.ForceDelete(context.Background(), pod("a"))
	require.NoError(t, err)
	held, err := f.Get("ns", "a")
	require.NoError(t, err)

	held.Finalizers = nil
	require.NoError(t, f.Update(held))
	_, err = f.Get("ns", "a")
	require.True(t, apierrors.IsNotFound(err))
}

func TestAddAssignsAUIDWhenMissing(t *testing.T) {
	f := fake.New(fake.Options{}, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	got, err := f.Get("ns", "a")
	require.NoError(t, err)
	require.NotEmpty(t, got.UID)
}

func TestBadInputIsAnErrorNotAPanic(t *testing.T) {
	f := fake.New(fake.Options{})
	require.True(t, apierrors.IsBadRequest(f.Add(nil)))
	require.True(t, apierrors.IsBadRequest(f.Update(nil)))
	_, err := f.Replace(nil)
	require.True(t, apierrors.IsBadRequest(err))
	require.True(t, apierrors.IsNotFound(f.Update(pod("missing"))))
	_, err = f.Replace(pod("missing"))
	require.True(t, apierrors.IsNotFound(err))
}

func TestCanceledContextIsHonoured(t *testing.T) {
	f := fake.New(fake.Options{}, pod("a"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.ListPods(ctx)
	require.ErrorIs(t, err, context.Canceled)
	err = f.ForceDelete(ctx, pod("a"))
	require.ErrorIs(t, err, context.Canceled, "the Deleter contract: nothing is sent")
	require.Empty(t, f.Deletes())
	err = f.Delete(ctx, "ns", "a", metav1.DeleteOptions{})
	require.True(t, apierrors.IsTimeout(err), "the API-level delete answers as the server does; got %v", err)
	_, getErr := f.Get("ns", "a")
	require.NoError(t, getErr)
}

func TestPodsIsSafeForConcurrentUse(t *testing.T) {
	f := fake.New(fake.Options{ListLag: 3})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				p := pod(string(rune('a'+i)) + "-" + string(rune('a'+j%26)))
				_ = f.Add(p)
				_, _ = f.ListPods(context.Background())
				_ = f.ForceDelete(context.Background(), p)
				_ = f.Deletes()
			}
		}()
	}
	wg.Wait()
	require.Len(t, f.Deletes(), 8*50)
}
