package fakeapi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

func pod(name, node string, finalizers ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Finalizers: finalizers},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
}

func terminating(p *corev1.Pod) *corev1.Pod {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

func get(t *testing.T, c client.Client, name string) (*corev1.Pod, error) {
	t.Helper()
	var p corev1.Pod
	err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &p)
	return &p, err
}

func TestDeletesAnswerAsTheAPIServerDoesForPodsOnALostNode(t *testing.T) {
	zero, thirty := int64(0), int64(30)
	otherUID := types.UID("someone-else")
	tests := []struct {
		name        string
		seed        *corev1.Pod
		opts        client.DeleteOptions
		wantErr     func(error) bool
		wantGone    bool
		wantDeleted bool // stays, with a deletionTimestamp
		wantFinals  []string
		deleteName  string // what to delete, when not the seeded pod
	}{
		{name: "graceful delete of a bound pod: stays Terminating", seed: pod("bound", "node-lost"), wantDeleted: true},
		{name: "explicit grace period: stays Terminating", seed: pod("bound", "node-lost"), opts: client.DeleteOptions{GracePeriodSeconds: &thirty}, wantDeleted: true},
		{name: "grace 0: gone", seed: pod("bound", "node-lost"), opts: client.DeleteOptions{GracePeriodSeconds: &zero}, wantGone: true},
		{name: "unbound pod: gone at once", seed: pod("unbound", ""), wantGone: true},
		{name: "seeded Terminating without finalizers, grace 0: gone", seed: terminating(pod("stuck", "node-lost")), opts: client.DeleteOptions{GracePeriodSeconds: &zero}, wantGone: true},
		{name: "seeded Terminating, graceful again: still there", seed: terminating(pod("stuck", "node-lost")), wantDeleted: true},
		{name: "own finalizer holds a grace-0 delete", seed: terminating(pod("held", "node-lost", "example.com/hold")), opts: client.DeleteOptions{GracePeriodSeconds: &zero}, wantDeleted: true, wantFinals: []string{"example.com/hold"}},
		{name: "UID precondition of another pod: 409, untouched", seed: pod("reused", "node-lost"), opts: client.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &otherUID}}, wantErr: apierrors.IsConflict},
		{name: "missing pod: 404", seed: pod("present", ""), deleteName: "missing", wantErr: apierrors.IsNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seeded := tc.seed.DeepCopy()
			c, err := fakeapi.NewClient(tc.seed)
			require.NoError(t, err)
			require.Equal(t, seeded, tc.seed, "NewClient changed its argument")
			target := tc.seed.DeepCopy()
			if tc.deleteName != "" {
				target.Name = tc.deleteName
			}
			err = c.Delete(context.Background(), target, &tc.opts)
			got, getErr := get(t, c, tc.seed.Name)
			switch {
			case tc.wantErr != nil:
				require.True(t, tc.wantErr(err), "got %v", err)
				require.NoError(t, getErr)
				require.Equal(t, tc.seed.DeletionTimestamp == nil, got.DeletionTimestamp == nil, "the pod's deletion changed")
			case tc.wantGone:
				require.NoError(t, err)
				require.True(t, apierrors.IsNotFound(getErr), "still there: %v", getErr)
			case tc.wantDeleted:
				require.NoError(t, err)
				require.NoError(t, getErr)
				require.NotNil(t, got.DeletionTimestamp)
				require.Equal(t, tc.wantFinals, got.Finalizers, "the hidden finalizer shows, or an own one was lost")
				var list corev1.PodList
				require.NoError(t, c.List(context.Background(), &list))
				require.Len(t, list.Items, 1)
				require.Equal(t, tc.wantFinals, list.Items[0].Finalizers)
			}
		})
	}
}

func TestCreateSetsAUIDAndACreationTimestamp(t *testing.T) {
	c, err := fakeapi.NewClient()
	require.NoError(t, err)
	p := pod("", "")
	p.UID, p.GenerateName = "", "registry-"
	require.NoError(t, c.Create(context.Background(), p))
	require.NotEmpty(t, p.Name)
	require.NotEmpty(t, p.UID)
	require.False(t, p.CreationTimestamp.IsZero())
	q := pod("", "")
	q.UID, q.GenerateName = "", "registry-"
	require.NoError(t, c.Create(context.Background(), q))
	require.NotEqual(t, p.UID, q.UID)
}

func TestNewClientRefusesANilObject(t *testing.T) {
	_, err := fakeapi.NewClient(nil)
	require.ErrorContains(t, err, "nil")
}

// TestDryRunDeleteChangesNothing: a DELETE with DryRun All answers as the
// API server does (404 for a missing pod, 409 for a wrong UID
// precondition, else nil) and leaves every pod as it was.
func TestDryRunDeleteChangesNothing(t *testing.T) {
	zero := int64(0)
	otherUID := types.UID("someone-else")
	tests := []struct {
		name    string
		target  string
		opts    client.DeleteOptions
		wantErr func(error) bool
	}{
		{name: "force delete", target: "bound", opts: client.DeleteOptions{GracePeriodSeconds: &zero, DryRun: []string{metav1.DryRunAll}}},
		{name: "graceful delete", target: "bound", opts: client.DeleteOptions{DryRun: []string{metav1.DryRunAll}}},
		{name: "force delete of a stuck pod", target: "stuck", opts: client.DeleteOptions{GracePeriodSeconds: &zero, DryRun: []string{metav1.DryRunAll}}},
		{name: "wrong UID", target: "bound", opts: client.DeleteOptions{GracePeriodSeconds: &zero, DryRun: []string{metav1.DryRunAll}, Preconditions: &metav1.Preconditions{UID: &otherUID}}, wantErr: apierrors.IsConflict},
		{name: "missing", target: "missing", opts: client.DeleteOptions{DryRun: []string{metav1.DryRunAll}}, wantErr: apierrors.IsNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := fakeapi.NewClient(pod("bound", "node-lost"), terminating(pod("stuck", "node-lost")))
			require.NoError(t, err)
			before := map[string]*corev1.Pod{}
			for _, name := range []string{"bound", "stuck"} {
				before[name], err = get(t, c, name)
				require.NoError(t, err)
			}
			target := pod(tc.target, "")
			err = c.Delete(context.Background(), target, &tc.opts)
			if tc.wantErr != nil {
				require.True(t, tc.wantErr(err), "error %v", err)
			} else {
				require.NoError(t, err)
			}
			for name, was := range before {
				now, err := get(t, c, name)
				require.NoError(t, err, "pod %s is still there", name)
				require.Equal(t, was.DeletionTimestamp == nil, now.DeletionTimestamp == nil, "pod %s: deletionTimestamp unchanged", name)
				require.Equal(t, was.Finalizers, now.Finalizers)
			}
		})
	}
}

// TestGetThenUpdateOfAStuckPodLeavesItStuck: an Update built from a Get of
// a pod seeded Terminating keeps it Terminating (the hidden finalizer
// survives), as on an API server, where no finalizer disappears because a
// client did not see it; a later force delete still removes it.
func TestGetThenUpdateOfAStuckPodLeavesItStuck(t *testing.T) {
	c, err := fakeapi.NewClient(terminating(pod("stuck", "node-lost")))
	require.NoError(t, err)
	p, err := get(t, c, "stuck")
	require.NoError(t, err)
	require.Empty(t, p.Finalizers, "Get hides the client's finalizer")
	p.Labels = map[string]string{"touched": "yes"}
	require.NoError(t, c.Update(context.Background(), p))
	require.Empty(t, p.Finalizers, "the caller's object still shows what Get shows")

	after, err := get(t, c, "stuck")
	require.NoError(t, err, "the pod is still stuck, not removed by the update")
	require.NotNil(t, after.DeletionTimestamp)
	require.Equal(t, "yes", after.Labels["touched"])

	zero := int64(0)
	require.NoError(t, c.Delete(context.Background(), after, &client.DeleteOptions{GracePeriodSeconds: &zero}))
	_, err = get(t, c, "stuck")
	require.True(t, apierrors.IsNotFound(err), "a force delete removes it: %v", err)
}
