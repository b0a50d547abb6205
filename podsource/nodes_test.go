package podsource_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podhealth/podhealth/podsource"
)

func TestNoNodeReadableTellsAnAnswerAboutEveryNodeFromOneAboutThisNode(t *testing.T) {
	nodes := corev1.Resource("nodes")
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/nodes/n1", Err: syscall.ECONNREFUSED}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"401 Unauthorized", apierrors.NewUnauthorized("token expired"), true},
		{"403 Forbidden: no RBAC for nodes", apierrors.NewForbidden(nodes, "n1", errors.New("no get on nodes")), true},
		{"429 Too Many Requests", apierrors.NewTooManyRequests("slow down", 1), true},
		{"503 Service Unavailable", apierrors.NewServiceUnavailable("etcd down"), true},
		{"no HTTP answer: connection refused", refused, true},
		{"no HTTP answer, wrapped", fmt.Errorf("reading: %w", refused), true},
		{"404 NotFound: this node is gone", apierrors.NewNotFound(nodes, "n1"), false},
		{"500 Internal Server Error: about this request", apierrors.NewInternalError(errors.New("boom")), false},
		{"canceled context, inside a url.Error", &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: context.Canceled}, false},
		{"expired context, inside a url.Error", &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: context.DeadlineExceeded}, false},
		{"an error of some other kind", errors.New("decoding the node"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, podsource.NoNodeReadable(tt.err))
		})
	}
}
