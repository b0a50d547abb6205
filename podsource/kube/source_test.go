package kube_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

var registry = labels.SelectorFromSet(labels.Set{"app": "registry"})

// bystanders are pods that a source for app=registry in namespace default
// must not list: another workload, and the same labels in another
// namespace.
func bystanders(t testing.TB) []*corev1.Pod {
	other := loadPod(t, podAlive)
	other.Name, other.UID, other.Labels = "other-app", "00000000-0000-0000-0000-0000000000a1", map[string]string{"app": "other"}
	elsewhere := loadPod(t, podAlive)
	elsewhere.Namespace, elsewhere.UID = "elsewhere", "00000000-0000-0000-0000-0000000000a2"
	return []*corev1.Pod{other, elsewhere}
}

func TestListerSourcePassesConformanceOverSyncedInformer(t *testing.T) {
	want := allFixturePods(t)
	client := fake.NewClientset(objects(append(want, bystanders(t)...)...)...)
	lister := startPodInformer(t, client, "") // all namespaces: the source must filter

	src, err := kube.NewListerSource(lister, "default", registry)
	require.NoError(t, err)
	require.NoError(t, podsource.TestPodSource(src, want...))
}

func TestListerSourceSendsNoRequest(t *testing.T) {
	client := fake.NewClientset(objects(allFixturePods(t)...)...)
	lister := startPodInformer(t, client, "default")
	src, err := kube.NewListerSource(lister, "default", registry)
	require.NoError(t, err)

	before := len(client.Actions())
	const lists = 100
	for range lists {
		pods, err := src.ListPods(context.Background())
		require.NoError(t, err)
		require.Len(t, pods, 4)
	}
	require.Empty(t, verbs(client, before), "API requests sent by %d ListPods calls", lists)
}

func TestListerSourceReturnsTheCachedObjectsUnchanged(t *testing.T) {
	client := fake.NewClientset(objects(allFixturePods(t)...)...)
	lister := startPodInformer(t, client, "default")
	src, err := kube.NewListerSource(lister, "default", registry)
	require.NoError(t, err)

	pods, err := src.ListPods(context.Background())
	require.NoError(t, err)
	for _, p := range pods {
		cached, err := lister.Pods("default").Get(p.Name)
		require.NoError(t, err)
		require.Same(t, cached, p, "pod %s is not the cache's object", p.Name)
		require.Empty(t, cmp.Diff(loadPod(t, "pod-"+p.Name+".json").Spec, p.Spec), "pod %s", p.Name)
	}
}

func TestListerSourceWrapsListerError(t *testing.T) {
	boom := errors.New("index broken")
	src, err := kube.NewListerSource(failingLister{err: boom}, "default", registry)
	require.NoError(t, err)
	_, err = src.ListPods(context.Background())
	require.ErrorIs(t, err, boom)
}

func TestClientSourcePassesConformanceOverFakeClientset(t *testing.T) {
	want := allFixturePods(t)
	client := fake.NewClientset(objects(append(want, bystanders(t)...)...)...)
	src, err := kube.NewClientSource(client.CoreV1(), "default", registry)
	require.NoError(t, err)
	require.NoError(t, podsource.TestPodSource(src, want...))
}

func TestClientSourceSendsOneLabelSelectedListPerCall(t *testing.T) {
	client := fake.NewClientset(objects(allFixturePods(t)...)...)
	src, err := kube.NewClientSource(client.CoreV1(), "default", registry)
	require.NoError(t, err)

	_, err = src.ListPods(context.Background())
	require.NoError(t, err)
	actions := client.Actions()
	require.Len(t, actions, 1)
	list, ok := actions[0].(k8stesting.ListActionImpl)
	require.True(t, ok, "action %T is not a list", actions[0])
	require.Equal(t, "default", list.GetNamespace())
	require.Equal(t, "pods", list.GetResource().Resource)
	require.Equal(t, "app=registry", list.GetListRestrictions().Labels.String())
}

func TestClientSourceSendsNothingWhenContextIsDone(t *testing.T) {
	client := fake.NewClientset(objects(allFixturePods(t)...)...)
	src, err := kube.NewClientSource(client.CoreV1(), "default", registry)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = src.ListPods(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, client.Actions())
}

func TestClientSourceWrapsAPIError(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("no RBAC"))
	})
	src, err := kube.NewClientSource(client.CoreV1(), "default", registry)
	require.NoError(t, err)
	_, err = src.ListPods(context.Background())
	require.Error(t, err)
	require.True(t, apierrors.IsForbidden(err), "apierrors.IsForbidden(%v) = false", err)
}

func TestConstructorsRejectBadInputWithoutPanicking(t *testing.T) {
	client := fake.NewClientset()
	lister := corelisters.NewPodLister(podIndexer())
	tests := []struct {
		name    string
		build   func() (any, error)
		wantErr string
	}{
		{"lister source: nil lister", func() (any, error) { return kube.NewListerSource(nil, "default", registry) }, "nil PodLister"},
		{"lister source: empty namespace", func() (any, error) { return kube.NewListerSource(lister, "", registry) }, "empty namespace"},
		{"lister source: invalid namespace", func() (any, error) { return kube.NewListerSource(lister, "Not_A_Namespace", registry) }, "invalid namespace"},
		{"lister source: nil selector", func() (any, error) { return kube.NewListerSource(lister, "default", nil) }, "nil label selector"},
		{"client source: nil client", func() (any, error) { return kube.NewClientSource(nil, "default", registry) }, "nil PodsGetter"},
		{"client source: empty namespace", func() (any, error) { return kube.NewClientSource(client.CoreV1(), "", registry) }, "empty namespace"},
		{"client source: nil selector", func() (any, error) { return kube.NewClientSource(client.CoreV1(), "default", nil) }, "nil label selector"},
		{"deleter: nil client", func() (any, error) { return kube.NewDeleter(nil, "default", kube.DeleterOptions{Selector: registry}) }, "nil PodsGetter"},
		{"deleter: empty namespace", func() (any, error) {
			return kube.NewDeleter(client.CoreV1(), "", kube.DeleterOptions{Selector: registry})
		}, "empty namespace"},
		{"deleter: invalid namespace", func() (any, error) {
			return kube.NewDeleter(client.CoreV1(), "a/b", kube.DeleterOptions{Selector: registry})
		}, "invalid namespace"},
		{"deleter: zero options", func() (any, error) { return kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{}) }, "nil label selector"},
		{"event observer: nil recorder", func() (any, error) { return kube.NewEventObserver(nil, kube.EventObserverOptions{}) }, "nil EventRecorder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				got any
				err error
			)
			require.NotPanics(t, func() { got, err = tt.build() })
			require.ErrorContains(t, err, tt.wantErr)
			require.Nil(t, reflectNil(got), "constructor returned a value with its error")
		})
	}
}

// reflectNil returns nil when v holds a nil pointer, else v.
func reflectNil(v any) any {
	switch p := v.(type) {
	case *kube.ListerSource:
		if p == nil {
			return nil
		}
	case *kube.ClientSource:
		if p == nil {
			return nil
		}
	case *kube.Deleter:
		if p == nil {
			return nil
		}
	case *kube.EventObserver:
		if p == nil {
			return nil
		}
	}
	return v
}

type failingLister struct{ err error }

func (f failingLister) List(labels.Selector) ([]*corev1.Pod, error) { return nil, f.err }
func (f failingLister) Pods(string) corelisters.PodNamespaceLister  { return f }
func (f failingLister) Get(string) (*corev1.Pod, error)             { return nil, f.err }
