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

// The client tells what it served: every write in the order answered,
// with its kind, object and answer, and each delete with its options as
// sent (grace period, UID precondition), so that a test counts and checks
// the force deletes its code sent without an interceptor of its own.
// Reads are not recorded.
func TestTheClientTellsTheWritesItServed(t *testing.T) {
	ctx := context.Background()
	c, err := fakeapi.NewClient(terminating(pod("dead", "lost")))
	require.NoError(t, err)
	dead, err := get(t, c, "dead")
	require.NoError(t, err)
	require.Empty(t, c.Requests(), "a read is not a write")

	stale := types.UID("an-older-pod")
	err = c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dead"}}, client.GracePeriodSeconds(0), client.Preconditions{UID: &stale})
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.NoError(t, c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dead"}}, client.GracePeriodSeconds(0), client.Preconditions{UID: &dead.UID}))
	replacement := pod("replacement", "")
	require.NoError(t, c.Create(ctx, replacement))
	replacement.Status.Phase = corev1.PodRunning
	require.NoError(t, c.Status().Update(ctx, replacement))

	got := c.Requests()
	require.Len(t, got, 4)
	verbs := []string{got[0].Verb, got[1].Verb, got[2].Verb, got[3].Verb + "/" + got[3].Subresource}
	require.Equal(t, []string{"delete", "delete", "create", "update/status"}, verbs)
	for _, r := range got {
		require.Equal(t, "Pod", r.Kind)
		require.Equal(t, "default", r.Namespace)
	}
	require.True(t, apierrors.IsConflict(got[0].Err), "the refused delete's answer")
	require.NoError(t, got[1].Err)

	// readme:begin fakeapi-deletes
	deletes := c.Deletes()
	require.Len(t, deletes, 2)
	require.Equal(t, "dead", deletes[1].Name)
	require.Equal(t, int64(0), *deletes[1].Delete.GracePeriodSeconds)
	require.Equal(t, dead.UID, *deletes[1].Delete.Preconditions.UID)
	// readme:end fakeapi-deletes
	require.Equal(t, stale, *deletes[0].Delete.Preconditions.UID)
	require.Nil(t, got[2].Delete, "only a delete has delete options")
	require.NotEmpty(t, got[2].UID, "a create records the UID it was given")
}
