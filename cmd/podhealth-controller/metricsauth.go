package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsAuth is the filter of the secure /metrics endpoint: the API
// server authenticates each scrape's token (TokenReview) and authorizes
// its GET of the path (SubjectAccessReview), both cached. It answers as
// Prometheus and the docs expect:
//   - no token, or one the API server rejects (invalid, expired): 401;
//   - a token whose account may not get the path: 403;
//   - a review that could not be made (the API server unreachable or
//     failing): 503, which is a fault of the server side.
//
// A failure is logged once per change of its words, not once per scrape.
func metricsAuth(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authenticate, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                 time.Minute,
		TokenAccessReviewClient:  authn,
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("the /metrics authenticator: %w", err)
	}
	authorize, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("the /metrics authorizer: %w", err)
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return &authFilter{authenticate: authenticate, authorize: authorize, next: next, log: log}, nil
	}, nil
}

type authFilter struct {
	authenticate authenticator.Request
	authorize    authorizer.Authorizer
	next         http.Handler
	log          logr.Logger

	mu         sync.Mutex
	lastLogged string
}

func (f *authFilter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	res, ok, err := f.authenticate.AuthenticateRequest(req)
	switch {
	case err != nil && reviewUnavailable(err):
		f.logOnce(err, "cannot authenticate a scrape of /metrics: the TokenReview failed")
		http.Error(w, "authentication unavailable", http.StatusServiceUnavailable)
		return
	case err != nil || !ok:
		// The API server read the token and did not accept it.
		f.log.V(1).Info("refused a scrape of /metrics: not authenticated", "reason", fmt.Sprint(err))
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path}
	decision, reason, err := f.authorize.Authorize(req.Context(), attrs)
	switch {
	case err != nil:
		f.logOnce(err, "cannot authorize a scrape of /metrics: the SubjectAccessReview failed")
		http.Error(w, "authorization unavailable", http.StatusServiceUnavailable)
		return
	case decision != authorizer.DecisionAllow:
		f.log.V(1).Info("refused a scrape of /metrics: not authorized", "user", res.User.GetName(), "reason", reason)
		http.Error(w, "Forbidden: "+res.User.GetName()+" may not get "+req.URL.Path, http.StatusForbidden)
		return
	}
	f.next.ServeHTTP(w, req)
}

// logOnce logs err unless its words are those logged last.
func (f *authFilter) logOnce(err error, msg string) {
	f.mu.Lock()
	repeat := f.lastLogged == msg+err.Error()
	f.lastLogged = msg + err.Error()
	f.mu.Unlock()
	if !repeat {
		f.log.Error(err, msg)
	}
}

// reviewUnavailable reports whether err is a review that could not be
// made, rather than the API server's answer that a token is not valid
// (which comes back as a TokenReview with its own error text): a request
// that did not reach the API server or timed out, or one it refused with
// a status of its own (429, 5xx, or a 403 for a controller without the
// right to create TokenReviews).
func reviewUnavailable(err error) bool {
	// The union of authenticators joins its errors in an aggregate that
	// errors.As does not look into.
	if agg, ok := err.(interface{ Errors() []error }); ok {
		for _, e := range agg.Errors() {
			if reviewUnavailable(e) {
				return true
			}
		}
		return false
	}
	var netErr net.Error
	var urlErr *url.Error
	var status apierrors.APIStatus
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.As(err, &netErr) || errors.As(err, &urlErr) || errors.As(err, &status)
}
