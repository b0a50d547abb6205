package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
)

// fakeReviews is an API server that answers TokenReviews and
// SubjectAccessReviews as a real one does: "good" and "stranger" are
// valid tokens, "stranger" may not get /metrics, any other token is
// rejected with the error text the API server gives; with down set, it
// answers 503.
func fakeReviews(t *testing.T, down *atomic.Bool) *rest.Config {
	t.Helper()
	// httptest binds to 127.0.0.1.
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is down","reason":"ServiceUnavailable","code":503}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/tokenreviews"):
			var review authenticationv1.TokenReview
			require.NoError(t, json.NewDecoder(r.Body).Decode(&review))
			switch review.Spec.Token {
			case "good", "stranger":
				review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:" + review.Spec.Token}}
			default:
				review.Status = authenticationv1.TokenReviewStatus{Error: "[invalid bearer token, service account token has expired]"}
			}
			_ = json.NewEncoder(w).Encode(review)
		case strings.HasSuffix(r.URL.Path, "/subjectaccessreviews"):
			var review authorizationv1.SubjectAccessReview
			require.NoError(t, json.NewDecoder(r.Body).Decode(&review))
			review.Status.Allowed = review.Spec.User == "system:serviceaccount:monitoring:good" && review.Spec.NonResourceAttributes.Path == "/metrics"
			_ = json.NewEncoder(w).Encode(review)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(server.Close)
	return &rest.Config{Host: server.URL}
}

// The secure endpoint answers each scraper as Prometheus reads it: no
// token or one the API server rejects (invalid, expired) is 401, not the
// 500 that a server fault would be; an account without the right is 403;
// the reader gets the metrics; and a review the API server cannot make is
// 503, logged once however many scrapes meet it.
func TestSecureMetricsAnswer401ForARejectedToken(t *testing.T) {
	var down atomic.Bool
	config := fakeReviews(t, &down)
	filter, err := metricsAuth(config, http.DefaultClient)
	require.NoError(t, err)
	var errorsLogged atomic.Int32
	logger := funcr.New(func(prefix, args string) {
		if strings.Contains(args, `"error"`) {
			errorsLogged.Add(1)
		}
	}, funcr.Options{})
	handler, err := filter(logger, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("podhealth_memory_shed_total 0\n"))
	}))
	require.NoError(t, err)
	scrape := func(token string) int {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusUnauthorized, scrape(""))
	require.Equal(t, http.StatusUnauthorized, scrape("expired"), "a token the API server rejects")
	require.Equal(t, http.StatusForbidden, scrape("stranger"))
	require.Equal(t, http.StatusOK, scrape("good"))
	require.Zero(t, errorsLogged.Load(), "a rejected token is no error of the controller's")

	down.Store(true)
	for range 2 { // each waits out the review's retries
		require.Equal(t, http.StatusServiceUnavailable, scrape("unseen"))
	}
	require.Equal(t, int32(1), errorsLogged.Load(), "one line for one failure, not one per scrape")
}
