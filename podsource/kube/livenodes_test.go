package kube_test

import (
	"context"
	"errors"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

var nodesResource = schema.GroupResource{Resource: "nodes"}

// TestLiveNodesWrapsAnswersThatNoNodeCanBeReadInErrNodesUnavailable: a 401,
// a 403 (no RBAC for nodes), a 429, a 503 or no answer at all say nothing
// about the node asked for, and wrap health.ErrNodesUnavailable so that a
// check asks about no other node and reports it; the API error is still
// reachable. A NotFound, which says the node is gone, and other errors come
// back as they were.
func TestLiveNodesWrapsAnswersThatNoNodeCanBeReadInErrNodesUnavailable(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/nodes/n", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name        string
		err         error
		unavailable bool
		is          func(error) bool
	}{
		{"401 Unauthorized", apierrors.NewUnauthorized("token expired"), true, apierrors.IsUnauthorized},
		{"403 Forbidden", apierrors.NewForbidden(nodesResource, "n", errors.New("RBAC: no get on nodes")), true, apierrors.IsForbidden},
		{"429 Too Many Requests", apierrors.NewTooManyRequests("slow down", 1), true, apierrors.IsTooManyRequests},
		{"503 Service Unavailable", apierrors.NewServiceUnavailable("etcd leader changed"), true, apierrors.IsServiceUnavailable},
		{"connection refused", refused, true, func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }},
		{"404 NotFound: the node is gone", apierrors.NewNotFound(nodesResource, "n"), false, apierrors.IsNotFound},
		{"500 Internal Server Error", apierrors.NewInternalError(errors.New("boom")), false, apierrors.IsInternalError},
		{"the context ended", &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: context.Canceled}, false, func(err error) bool { return errors.Is(err, context.Canceled) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tt.err })
			live, err := kube.NewLiveNodes(client.CoreV1())
			require.NoError(t, err)
			_, err = live.GetNode(context.Background(), "n")
			require.Equal(t, tt.unavailable, errors.Is(err, health.ErrNodesUnavailable), "%v", err)
			require.True(t, tt.is(err), "the API error is still reachable: %v", err)
			if !tt.unavailable {
				require.Equal(t, tt.err, err, "unchanged")
			}
		})
	}
}

// TestACheckWithLiveNodesAndNoRBACForNodesSaysSoOnce: with live node reads
// as the Checker's Nodes (kube.NewChecker without a node informer) and a
// 403 for every node GET, a check of taint-evicted pods on two nodes sends
// one GET, not one per node, and Report.NodeEvidence says why node
// evidence is missing; before, it stayed nil and nothing was logged.
func TestACheckWithLiveNodesAndNoRBACForNodesSaysSoOnce(t *testing.T) {
	first := loadPod(t, podTaintEvicted)
	second := first.DeepCopy()
	second.Name, second.UID, second.Spec.NodeName = "other", "uid-other", "node-other"
	client := fake.NewClientset(first, second)
	gets := 0
	client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return true, nil, apierrors.NewForbidden(nodesResource, "node-lost", errors.New("RBAC: no get on nodes"))
	})
	checker, err := kube.NewChecker(client, startPodInformer(t, client, first.Namespace), first.Namespace, registry, kube.CheckerOptions{})
	require.NoError(t, err)
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.ErrorIs(t, report.NodeEvidence, health.ErrNodesUnavailable)
	require.True(t, apierrors.IsForbidden(report.NodeEvidence), "%v", report.NodeEvidence)
	require.Equal(t, 1, gets, "one GET for the check, not one per node")
}

// TestConstructorsRefuseATypedNil: a nil pointer in an interface, what a
// constructor returns beside its error when the caller ignored that
// error, is refused with an error at construction, never a panic at the
// first request.
func TestConstructorsRefuseATypedNil(t *testing.T) {
	var client *corev1client.CoreV1Client
	var lister corelisters.PodLister = (*nilPodLister)(nil)
	var claims corelisters.PersistentVolumeClaimLister = (*nilClaimLister)(nil)
	var recorder record.EventRecorder = (*record.FakeRecorder)(nil)
	var clientset *fake.Clientset
	for name, err := range map[string]error{
		"NewLiveNodes":     second(kube.NewLiveNodes(client)),
		"NewDeleter":       second(kube.NewDeleter(client, "ns", kube.DeleterOptions{})),
		"NewClientSource":  second(kube.NewClientSource(client, "ns", registry)),
		"NewListerSource":  second(kube.NewListerSource(lister, "ns", registry)),
		"NewClaimSource":   second(kube.NewClaimSource(claims)),
		"NewEventObserver": second(kube.NewEventObserver(recorder, kube.EventObserverOptions{})),
		"NewChecker":       second(kube.NewChecker(clientset, lister, "ns", registry, kube.CheckerOptions{})),
	} {
		require.ErrorContains(t, err, "nil", name)
	}
}

func second[T any](_ T, err error) error { return err }

type nilPodLister struct{ corelisters.PodLister }
type nilClaimLister struct {
	corelisters.PersistentVolumeClaimLister
}
