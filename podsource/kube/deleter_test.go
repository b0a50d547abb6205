package kube_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

func TestDeleterSendsGraceZeroAndUIDPreconditionOnly(t *testing.T) {
	pod := loadPod(t, podTaintEvicted)
	client := fake.NewClientset(objects(pod)...)
	d, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: registry})
	require.NoError(t, err)

	require.NoError(t, d.ForceDelete(context.Background(), pod))

	deletes := deleteActions(client)
	require.Len(t, deletes, 1)
	require.Equal(t, "default", deletes[0].GetNamespace())
	require.Equal(t, "taint-evicted", deletes[0].GetName())
	want := metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: ptr.To(types.UID("3c0c8989-7032-484b-9396-d2330489e1cf"))},
	}
	require.Empty(t, cmp.Diff(want, deletes[0].GetDeleteOptions()), "DeleteOptions (-want +got)")
	require.Equal(t, []string{"delete pods"}, verbs(client, 0), "requests sent")

	_, err = client.CoreV1().Pods("default").Get(context.Background(), "taint-evicted", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "pod still there after the force delete: %v", err)
}

func TestDeleterReturnsTheAPIAnswerWrapped(t *testing.T) {
	notFound := loadStatusError(t, "status-get-after-force-delete.json")
	conflict := loadStatusError(t, "status-delete-uid-conflict.json")
	tests := []struct {
		name   string
		answer error            // nil: the fake clientset deletes the pod
		wantIs func(error) bool // nil: no error expected
	}{
		{name: "accepted is nil"},
		{name: "404 NotFound stays NotFound", answer: notFound, wantIs: apierrors.IsNotFound},
		{name: "409 Conflict on the UID precondition stays Conflict", answer: conflict, wantIs: apierrors.IsConflict},
		{name: "429 TooManyRequests is an error", answer: apierrors.NewTooManyRequests("slow down", 1), wantIs: apierrors.IsTooManyRequests},
		{name: "500 InternalError is an error", answer: apierrors.NewInternalError(errors.New("etcd down")), wantIs: apierrors.IsInternalError},
		{name: "504 server timeout is an error", answer: apierrors.NewServerTimeout(corev1.Resource("pods"), "delete", 1), wantIs: apierrors.IsServerTimeout},
		{name: "504 timeout is an error", answer: apierrors.NewTimeoutError("request timed out", 1), wantIs: apierrors.IsTimeout},
		{name: "403 Forbidden is an error", answer: apierrors.NewForbidden(corev1.Resource("pods"), "taint-evicted", errors.New("no RBAC")), wantIs: apierrors.IsForbidden},
		{name: "client-side deadline is an error", answer: context.DeadlineExceeded, wantIs: func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := loadPod(t, podTaintEvicted)
			client := fake.NewClientset(objects(pod)...)
			if tt.answer != nil {
				client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.answer
				})
			}
			d, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: registry})
			require.NoError(t, err)

			err = d.ForceDelete(context.Background(), pod)
			require.Len(t, deleteActions(client), 1, "DELETE requests sent")
			if tt.wantIs == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.True(t, tt.wantIs(err), "error %q does not match its kind after wrapping", err)
			require.ErrorIs(t, err, tt.answer, "the API error is not wrapped with %%w")
		})
	}
}

// TestDeleterUIDPreconditionSparesNewerPodOfSameName plays the API
// server's precondition check: a newer pod took the name, so the DELETE of
// the dead pod's UID conflicts and the newer pod stays.
func TestDeleterUIDPreconditionSparesNewerPodOfSameName(t *testing.T) {
	dead := loadPod(t, podTaintEvicted)
	newer := loadPod(t, podAlive)
	newer.Name, newer.UID = dead.Name, "0b7e6f1a-0000-4000-8000-000000000001"
	client := fake.NewClientset(objects(newer)...)
	client.PrependReactor("delete", "pods", uidPrecondition(t, client))
	d, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: registry})
	require.NoError(t, err)

	err = d.ForceDelete(context.Background(), dead)
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	got, err := client.CoreV1().Pods("default").Get(context.Background(), dead.Name, metav1.GetOptions{})
	require.NoError(t, err, "the newer pod was deleted")
	require.Equal(t, newer.UID, got.UID)
}

// uidPrecondition returns a reactor that answers a DELETE whose UID
// precondition does not match the stored pod with 409 Conflict, as the API
// server does (the status comes from the real-cluster fixture), and passes
// any other DELETE on to the tracker.
func uidPrecondition(t testing.TB, client *fake.Clientset) k8stesting.ReactionFunc {
	conflict := loadStatusError(t, "status-delete-uid-conflict.json")
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		del := action.(k8stesting.DeleteActionImpl)
		pre := del.GetDeleteOptions().Preconditions
		if pre == nil || pre.UID == nil {
			return false, nil, nil
		}
		obj, err := client.Tracker().Get(del.GetResource(), del.GetNamespace(), del.GetName())
		if err != nil {
			return false, nil, nil // let the tracker answer NotFound
		}
		if obj.(*corev1.Pod).UID != *pre.UID {
			return true, nil, conflict
		}
		return false, nil, nil
	}
}

func TestDeleterRefusesWithoutSendingAnything(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		opts    kube.DeleterOptions
		ctx     context.Context
		pod     func(*corev1.Pod) *corev1.Pod
		wantErr func(t *testing.T, err error)
	}{
		{
			name: "pod of another namespace",
			pod:  func(p *corev1.Pod) *corev1.Pod { p.Namespace = "kube-system"; return p },
			wantErr: func(t *testing.T, err error) {
				var scope *podsource.OutOfScopeError
				require.ErrorAs(t, err, &scope)
				require.Equal(t, podsource.OutOfScopeError{Namespace: "kube-system", Name: "taint-evicted", ScopeNamespace: "default", Reason: `namespace "kube-system" is not "default"`}, *scope)
			},
		},
		{
			name: "pod outside the label selector",
			opts: kube.DeleterOptions{Selector: labels.SelectorFromSet(labels.Set{"app": "other"})},
			pod:  func(p *corev1.Pod) *corev1.Pod { return p },
			wantErr: func(t *testing.T, err error) {
				var scope *podsource.OutOfScopeError
				require.ErrorAs(t, err, &scope)
				require.Equal(t, "app=other", scope.ScopeSelector)
			},
		},
		{
			name: "pod without labels under a selector",
			opts: kube.DeleterOptions{Selector: registry},
			pod:  func(p *corev1.Pod) *corev1.Pod { p.Labels = nil; return p },
			wantErr: func(t *testing.T, err error) {
				var scope *podsource.OutOfScopeError
				require.ErrorAs(t, err, &scope)
			},
		},
		{
			name:    "pod without UID",
			pod:     func(p *corev1.Pod) *corev1.Pod { p.UID = ""; return p },
			wantErr: func(t *testing.T, err error) { require.ErrorIs(t, err, health.ErrUnidentifiedPod) },
		},
		{
			name:    "nil pod",
			pod:     func(*corev1.Pod) *corev1.Pod { return nil },
			wantErr: func(t *testing.T, err error) { require.ErrorContains(t, err, "nil pod") },
		},
		{
			name:    "context already canceled",
			ctx:     canceled,
			pod:     func(p *corev1.Pod) *corev1.Pod { return p },
			wantErr: func(t *testing.T, err error) { require.ErrorIs(t, err, context.Canceled) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := loadPod(t, podTaintEvicted)
			client := fake.NewClientset(objects(stored)...)
			opts := tt.opts
			if opts.Selector == nil {
				opts.Selector = registry
			}
			d, err := kube.NewDeleter(client.CoreV1(), "default", opts)
			require.NoError(t, err)
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			err = d.ForceDelete(ctx, tt.pod(loadPod(t, podTaintEvicted)))
			require.Error(t, err)
			tt.wantErr(t, err)
			require.Empty(t, client.Actions(), "requests sent for a refused pod")
		})
	}
}

func TestDeleterInScopeMatchesNamespaceAndSelector(t *testing.T) {
	d, err := kube.NewDeleter(fake.NewClientset().CoreV1(), "default", kube.DeleterOptions{Selector: registry})
	require.NoError(t, err)
	require.NoError(t, d.InScope(loadPod(t, podTaintEvicted)))

	whole, err := kube.NewDeleter(fake.NewClientset().CoreV1(), "default", kube.DeleterOptions{Selector: podsource.WholeNamespace()})
	require.NoError(t, err)
	other := loadPod(t, podAlive)
	other.Labels = map[string]string{"app": "other"}
	require.NoError(t, whole.InScope(other), "WholeNamespace() bounds to the namespace only")
	require.Error(t, d.InScope(other))
	require.Error(t, new(kube.Deleter).InScope(other), "a Deleter not built by NewDeleter admits nothing")
}

func TestDeleterDoesNotChangeThePod(t *testing.T) {
	pod := loadPod(t, podTaintEvicted)
	before := pod.DeepCopy()
	client := fake.NewClientset(objects(pod)...)
	d, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: registry})
	require.NoError(t, err)
	err = d.ForceDelete(context.Background(), pod)
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(before, pod))
}

func TestDeleteOptionsAreGraceZeroWithUIDPrecondition(t *testing.T) {
	got := podsource.ForceDeleteOptions("u-1")
	want := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("u-1"))}}
	require.Empty(t, cmp.Diff(want, got))
}
