package podsource

import (
	"context"
	"errors"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// NoNodeReadable reports whether err, the answer to a GET of one node from
// the API server, says that no node can be read now rather than something
// about that node: 401 Unauthorized, 403 Forbidden (no RBAC for nodes), 429
// Too Many Requests, 503 Service Unavailable, or no HTTP answer at all (a
// *url.Error without a status, such as a refused connection). A canceled or
// expired context is not such an answer. A health.Options.LiveNodes that
// reads the API server wraps health.ErrNodesUnavailable around these
// errors, so that a check asks about no other node; kube.LiveNodes does.
func NoNodeReadable(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	var status apierrors.APIStatus
	var transport *url.Error
	// client-go wraps a request that got no HTTP answer in a *url.Error;
	// one that got an answer carries its status.
	return !errors.As(err, &status) && errors.As(err, &transport) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
