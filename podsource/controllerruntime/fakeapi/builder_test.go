package fakeapi_test

import (
	"context"
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
