package controllerruntime_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/podsource"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
)

var conformanceSelector = podsource.WholeNamespace()

// newConformanceDeleter builds a Deleter over a fakeapi client, which
// answers deletes as the API server does.
func newConformanceDeleter(pods ...*corev1.Pod) (health.Deleter, podsource.GetPodFunc, error) {
	c, err := newFakeAPI(pods...)
	if err != nil {
		return nil, nil, err
	}
	d, err := crh.NewDeleter(c, podsource.DeleterTestNamespace, conformanceSelector)
	return d, getPod(c), err
}

func newFakeAPI(pods ...*corev1.Pod) (client.WithWatch, error) {
	return fakeapiNewClient(objects(pods...)...)
}

func getPod(c client.Reader) podsource.GetPodFunc {
	return func(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
		var pod corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pod); err != nil {
			return nil, err
		}
		return &pod, nil
	}
}

func TestDeleterPassesTheDeleterConformanceSuite(t *testing.T) {
	require.NoError(t, podsource.TestDeleter(newConformanceDeleter))
}

// TestTheBareFakeClientCannotRunTheConformanceSuite is why fakeapi
// exists: controller-runtime's fake client refuses to hold a pod that
// died with its node, and ignores the UID precondition.
func TestTheBareFakeClientCannotRunTheConformanceSuite(t *testing.T) {
	err := podsource.TestDeleter(func(pods ...*corev1.Pod) (health.Deleter, podsource.GetPodFunc, error) {
		c, err := bareFake(pods...)
		if err != nil {
			return nil, nil, err
		}
		d, err := crh.NewDeleter(c, podsource.DeleterTestNamespace, conformanceSelector)
		return d, getPod(c), err
	})
	require.ErrorContains(t, err, "metadata.deletionTimestamp but no finalizers")

	// And it deletes the newer pod that holds the name.
	dead := loadPod(t, testutil.PodTaintEvicted)
	newer := loadPod(t, testutil.PodAlive)
	newer.Name = dead.Name
	c, err := bareFake(newer)
	require.NoError(t, err)
	d, err := crh.NewDeleter(c, "default", registry)
	require.NoError(t, err)
	require.NoError(t, d.ForceDelete(context.Background(), dead), "the bare fake answered the UID precondition")
	_, err = getPod(c)(context.Background(), "default", dead.Name)
	require.True(t, apierrors.IsNotFound(err), "the bare fake spared the newer pod: %v", err)
}

// bareFake is controller-runtime's fake client with nothing in front.
func bareFake(pods ...*corev1.Pod) (c client.WithWatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New(fmtAny(r))
		}
	}()
	return fake.NewClientBuilder().WithObjects(objects(pods...)...).Build(), nil
}

func TestDeleterSendsGraceZeroAndTheUIDPreconditionAndNothingElse(t *testing.T) {
	dead := loadPod(t, testutil.PodTaintEvicted)
	var n calls
	c := counted(apiServer(t, dead), &n)
	d, err := crh.NewDeleter(c, "default", registry)
	require.NoError(t, err)
	arg := dead.DeepCopy()
	require.NoError(t, d.ForceDelete(context.Background(), arg))
	require.Empty(t, cmp.Diff(dead, arg), "ForceDelete changed its argument")
	require.Len(t, n.deletes, 1)
	got := n.deletes[0].AsDeleteOptions()
	want := podsource.ForceDeleteOptions(dead.UID)
	require.Empty(t, cmp.Diff(&want, got))
	_, err = getPod(c)(context.Background(), "default", dead.Name)
	require.True(t, apierrors.IsNotFound(err), "the dead pod is still there: %v", err)
}

func TestDeleterAnswersTheAPIServersConflictWhenTheNameWasReused(t *testing.T) {
	dead := loadPod(t, testutil.PodTaintEvicted)
	newer := relabel(dead, dead.Name, "00000000-0000-0000-0000-000000000000", dead.Labels)
	newer.DeletionTimestamp = nil
	c := apiServer(t, newer)
	d, err := crh.NewDeleter(c, "default", registry)
	require.NoError(t, err)
	err = d.ForceDelete(context.Background(), dead)
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	// The same Status as the real API server's 409, captured from it (the
	// UIDs are the other way round there: the precondition was zeros).
	var status *apierrors.StatusError
	require.ErrorAs(t, err, &status)
	real := testutil.LoadStatusError(t, testutil.StatusUIDConflict)
	require.Equal(t, real.ErrStatus.Code, status.ErrStatus.Code)
	require.Equal(t, real.ErrStatus.Reason, status.ErrStatus.Reason)
	require.Equal(t, real.ErrStatus.Details.Kind, status.ErrStatus.Details.Kind)
	require.Equal(t, real.ErrStatus.Details.Name, status.ErrStatus.Details.Name)
	require.Contains(t, status.ErrStatus.Message, `Operation cannot be fulfilled on Pod "taint-evicted": the UID in the precondition (`+string(dead.UID)+`) does not match the UID in record (`+string(newer.UID)+`)`)
	pod, err := getPod(c)(context.Background(), "default", dead.Name)
	require.NoError(t, err)
	require.Equal(t, newer.UID, pod.UID)
	require.Nil(t, pod.DeletionTimestamp, "the newer pod was marked for deletion")
}

func TestDeleterRefusesWithoutARequest(t *testing.T) {
	dead := loadPod(t, testutil.PodTaintEvicted)
	otherApp := relabel(dead, "other-app", "00000000-0000-0000-0000-0000000000b1", map[string]string{"app": "other"})
	otherNS := relabel(dead, "other-ns", "00000000-0000-0000-0000-0000000000b2", dead.Labels)
	otherNS.Namespace = "elsewhere"
	noUID := relabel(dead, "no-uid", "", dead.Labels)
	noName := relabel(dead, "", "00000000-0000-0000-0000-0000000000b3", dead.Labels)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		pod   *corev1.Pod
		check func(t *testing.T, err error)
	}{
		{"other labels", context.Background(), otherApp, func(t *testing.T, err error) {
			var oos *podsource.OutOfScopeError
			require.ErrorAs(t, err, &oos)
			require.Equal(t, "app=registry", oos.ScopeSelector)
		}},
		{"other namespace", context.Background(), otherNS, func(t *testing.T, err error) {
			var oos *podsource.OutOfScopeError
			require.ErrorAs(t, err, &oos)
			require.Equal(t, "default", oos.ScopeNamespace)
		}},
		{"no UID", context.Background(), noUID, func(t *testing.T, err error) { require.ErrorIs(t, err, health.ErrUnidentifiedPod) }},
		{"no name", context.Background(), noName, func(t *testing.T, err error) { require.ErrorIs(t, err, health.ErrUnidentifiedPod) }},
		{"nil pod", context.Background(), nil, func(t *testing.T, err error) { require.ErrorContains(t, err, "nil pod") }},
		{"done context", canceled, dead, func(t *testing.T, err error) { require.ErrorIs(t, err, context.Canceled) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n calls
			c := counted(apiServer(t, dead, otherApp, otherNS), &n)
			d, err := crh.NewDeleter(c, "default", registry)
			require.NoError(t, err)
			tc.check(t, d.ForceDelete(tc.ctx, tc.pod))
			require.Zero(t, n.get("delete"), "a DELETE was sent")
		})
	}
	var zero crh.Deleter
	require.ErrorContains(t, zero.ForceDelete(context.Background(), dead), "not built by NewDeleter")
}
