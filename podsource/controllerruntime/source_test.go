package controllerruntime_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/podsource"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
)

func TestPodSourcePassesTheConformanceSuite(t *testing.T) {
	alive := loadPod(t, testutil.PodAlive)
	evicted := loadPod(t, testutil.PodTaintEvicted) // deletionTimestamp, no finalizers: seeded through fakeapi
	drained := loadPod(t, testutil.PodDrained)
	other := relabel(alive, "other", "00000000-0000-0000-0000-0000000000a1", map[string]string{"app": "other"})
	elsewhere := relabel(alive, "elsewhere", "00000000-0000-0000-0000-0000000000a2", alive.Labels)
	elsewhere.Namespace = "elsewhere"
	c := apiServer(t, objects(alive, evicted, drained, other, elsewhere)...)

	src, err := crh.NewPodSource(c, "default", registry)
	require.NoError(t, err)
	require.NoError(t, podsource.TestPodSource(src, alive, evicted, drained))

	whole, err := crh.NewPodSource(c, "default", podsource.WholeNamespace())
	require.NoError(t, err)
	require.NoError(t, podsource.TestPodSource(whole, alive, evicted, drained, other))
}

// TestPodSourceChecksTheContextBecauseTheCacheIgnoresIt: the manager's
// cache answers a List whatever its context; the source must not.
func TestPodSourceChecksTheContextBecauseTheCacheIgnoresIt(t *testing.T) {
	var n calls
	ignoresContext := interceptor.NewClient(apiServer(t, loadPod(t, testutil.PodAlive)), interceptor.Funcs{
		List: func(_ context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			n.add("list")
			return c.List(context.Background(), list, opts...)
		},
	})
	src, err := crh.NewPodSource(ignoresContext, "default", registry)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pods, err := src.ListPods(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, pods)
	require.Zero(t, n.get("list"), "a done context still reached the reader")

	pods, err = src.ListPods(context.Background())
	require.NoError(t, err)
	require.Len(t, pods, 1)
	require.Equal(t, 1, n.get("list"))
}

func TestPodSourceWrapsTheReadersErrors(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no RBAC"))
	c := interceptor.NewClient(apiServer(t), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return forbidden
		},
	})
	src, err := crh.NewPodSource(c, "default", registry)
	require.NoError(t, err)
	_, err = src.ListPods(context.Background())
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	require.ErrorIs(t, err, forbidden)
}

// selectorsOfEveryPod are selectors that a mistake produces and that reach
// every pod of a namespace.
func selectorsOfEveryPod(t *testing.T) map[string]labels.Selector {
	fromNil, err := metav1.LabelSelectorAsSelector(nil)
	require.NoError(t, err)
	return map[string]labels.Selector{
		"nil":                                 nil,
		"labels.Everything()":                 labels.Everything(),
		"labels.Nothing()":                    labels.Nothing(),
		"metav1.LabelSelectorAsSelector(nil)": fromNil,
		"labels.NewSelector()":                labels.NewSelector(),
		"WholeNamespace() deep-copied":        podsource.WholeNamespace().DeepCopySelector(),
	}
}

func TestConstructorsRefuseSelectorsOfEveryPodAsPodsourceKubeDoes(t *testing.T) {
	c := apiServer(t)
	mgr := &manager{cache: c, live: c, recorder: &recordingRecorder{}}
	for name, sel := range selectorsOfEveryPod(t) {
		t.Run(name, func(t *testing.T) {
			want := podsource.ValidateScope("default", sel)
			require.Error(t, want)
			src, err := crh.NewPodSource(c, "default", sel)
			require.ErrorContains(t, err, want.Error())
			require.Nil(t, src)
			del, err := crh.NewDeleter(c, "default", sel)
			require.ErrorContains(t, err, want.Error())
			require.Nil(t, del)
			checkers, err := crh.NewCheckers(mgr, crh.CheckersOptions{})
			require.NoError(t, err)
			checker, err := checkers.For("default", sel, crh.CheckOptions{})
			require.ErrorContains(t, err, want.Error())
			require.Nil(t, checker)
		})
	}
	for _, ns := range []string{"", "Not_A_Namespace"} {
		_, err := crh.NewPodSource(c, ns, registry)
		require.Error(t, err, "namespace %q", ns)
		_, err = crh.NewDeleter(c, ns, registry)
		require.Error(t, err, "namespace %q", ns)
	}
}

func TestConstructorsRefuseNilAndTypedNilDependencies(t *testing.T) {
	var typedNil client.Client = (*nilClient)(nil)
	_, err := crh.NewPodSource(nil, "default", registry)
	require.ErrorContains(t, err, "nil client.Reader")
	_, err = crh.NewPodSource(typedNil, "default", registry)
	require.ErrorContains(t, err, "nil client.Reader")
	_, err = crh.NewDeleter(typedNil, "default", registry)
	require.ErrorContains(t, err, "nil client.Writer")
	_, err = crh.NewNodes(typedNil)
	require.ErrorContains(t, err, "nil client.Reader")
	_, err = crh.NewClaims(nil)
	require.ErrorContains(t, err, "nil client.Reader")
	_, err = crh.NewEventObserver(nil, crh.EventObserverOptions{})
	require.ErrorContains(t, err, "nil events.EventRecorder")
	_, err = crh.NewCheckers(nil, crh.CheckersOptions{})
	require.ErrorContains(t, err, "nil Manager")
	var zero *crh.Checkers
	_, err = zero.For("default", registry, crh.CheckOptions{})
	require.ErrorContains(t, err, "not made by NewCheckers")
	_, err = crh.DeadPodPredicate(nil)
	require.ErrorContains(t, err, "nil Checker")
}

// nilClient is a client.Client type whose nil pointer tests typed-nil
// checks; its methods are never called.
type nilClient struct{ client.Client }
