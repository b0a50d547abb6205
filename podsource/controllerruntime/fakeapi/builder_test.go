package fakeapi_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

// ownerIndex is an operator's field index of pods by their controller.
const ownerIndex = ".metadata.controller"

func byController(o client.Object) []string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return []string{ref.Name}
	}
	return nil
}

// An operator's own builder (its scheme, a field index, a status
// subresource, an interceptor of its own) keeps all of it under fakeapi:
// List by the index works, the operator's interceptor is still called,
// seeded objects without a UID get one, a dead pod seeds with no
// finalizer, and the UID precondition and grace-0 removal hold.
func TestNewClientFromKeepsTheOperatorsBuilder(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(s))
	require.NoError(t, appsv1.AddToScheme(s))
	var operatorGets atomic.Int32
	builder := fake.NewClientBuilder().WithScheme(s).
		WithIndex(&corev1.Pod{}, ownerIndex, byController).
		WithStatusSubresource(&appsv1.StatefulSet{}).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			operatorGets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		}})
	owned := func(name string) *corev1.Pod {
		p := pod(name, "lost")
		p.UID = "" // as operators' fixtures often leave it
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "db.example.com/v1", Kind: "Cluster", Name: "pg", UID: "c", Controller: ptrTo(true)}}
		return p
	}
	c, err := fakeapi.NewClientFrom(builder, terminating(owned("pg-1")), owned("pg-2"), pod("other", "n1"),
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}})
	require.NoError(t, err)
	ctx := context.Background()

	var list corev1.PodList
	require.NoError(t, c.List(ctx, &list, client.InNamespace("default"), client.MatchingFields{ownerIndex: "pg"}))
	require.Len(t, list.Items, 2, "the operator's field index")
	for _, p := range list.Items {
		require.NotEmpty(t, p.UID, "pod %s seeded without a UID has one", p.Name)
		require.Empty(t, p.Finalizers, "the hidden finalizer does not show")
	}

	dead, err := get(t, c, "pg-1")
	require.NoError(t, err)
	require.NotNil(t, dead.DeletionTimestamp, "seeded Terminating with no finalizer")
	require.Positive(t, operatorGets.Load(), "the operator's own interceptor runs")

	stale := types.UID("an-older-pod")
	err = c.Delete(ctx, dead, client.GracePeriodSeconds(0), client.Preconditions{UID: &stale})
	require.True(t, apierrors.IsConflict(err), "a UID precondition that does not hold: %v", err)
	require.NoError(t, c.Delete(ctx, dead, client.GracePeriodSeconds(0), client.Preconditions{UID: &dead.UID}))
	_, err = get(t, c, "pg-1")
	require.True(t, apierrors.IsNotFound(err), "grace 0 removes the stuck pod: %v", err)

	var sts appsv1.StatefulSet
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, &sts))
	sts.Status.Replicas = 3
	require.NoError(t, c.Update(ctx, &sts))
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, &sts))
	require.Zero(t, sts.Status.Replicas, "the builder's status subresource: an Update does not write status")
}

func TestNewClientFromRefusesWhatCannotWork(t *testing.T) {
	_, err := fakeapi.NewClientFrom(nil)
	require.ErrorContains(t, err, "nil *fake.ClientBuilder")
	_, err = fakeapi.NewClientFrom(fake.NewClientBuilder().WithScheme(runtime.NewScheme()))
	require.ErrorContains(t, err, "does not know pods")
}

func ptrTo[T any](v T) *T { return &v }

// The operator's own Delete interceptor sees every delete that passes the
// UID precondition, with the options it was sent with, and what it answers
// is the answer: an injected error leaves the pod as it was, whether it is
// the grace-0 delete of a pod already Terminating (the dead pod, exactly),
// a graceful delete of a running pod on a node, or a grace-0 delete of
// one. Before, the first was finished with an Update that never reached
// the interceptor, and the others reached it without their options.
func TestTheOperatorsDeleteInterceptorSeesEveryDeleteWithItsOptions(t *testing.T) {
	for _, tt := range []struct {
		name     string
		seed     *corev1.Pod
		grace    int64
		goneOnOK bool // removed when the interceptor lets the delete through
	}{
		{"grace 0 of a Terminating pod", terminating(pod("dead", "lost")), 0, true},
		{"graceful delete of a running pod on a node", pod("running", "n1"), 30, false},
		{"grace 0 of a running pod", pod("forced", "n1"), 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var seen []client.DeleteOptions
			fail := true
			builder := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					seen = append(seen, *(&client.DeleteOptions{}).ApplyOptions(opts))
					if fail {
						return apierrors.NewInternalError(errors.New("injected"))
					}
					return c.Delete(ctx, obj, opts...)
				}})
			c, err := fakeapi.NewClientFrom(builder, tt.seed)
			require.NoError(t, err)
			before, err := get(t, c, tt.seed.Name)
			require.NoError(t, err)
			uid := before.UID

			err = c.Delete(context.Background(), before, client.GracePeriodSeconds(tt.grace), client.Preconditions{UID: &uid})
			require.True(t, apierrors.IsInternalError(err), "the injected error is the answer: %v", err)
			require.Len(t, seen, 1)
			require.Equal(t, tt.grace, *seen[0].GracePeriodSeconds, "the interceptor sees the grace period sent")
			require.Equal(t, uid, *seen[0].Preconditions.UID, "the interceptor sees the UID precondition sent")
			after, err := get(t, c, tt.seed.Name)
			require.NoError(t, err, "a failed delete removes nothing")
			require.Equal(t, before.DeletionTimestamp == nil, after.DeletionTimestamp == nil, "a failed delete marks nothing")

			fail = false
			require.NoError(t, c.Delete(context.Background(), after, client.GracePeriodSeconds(tt.grace), client.Preconditions{UID: &uid}))
			after, err = get(t, c, tt.seed.Name)
			if tt.goneOnOK {
				require.True(t, apierrors.IsNotFound(err), "removed: %v", err)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, after.DeletionTimestamp, "a graceful delete of a pod on a node leaves it Terminating")
			require.Empty(t, after.Finalizers, "the hidden finalizer does not show")
		})
	}
}
