package harness

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// RequestKey identifies a group of API requests in the API server's
// apiserver_request_total counter.
type RequestKey struct {
	// Verb as the API server reports it, in upper case: GET, LIST, WATCH,
	// POST, PUT, PATCH, DELETE, DELETECOLLECTION, APPLY, CONNECT.
	Verb string
	// Resource is the resource, with "/subresource" appended for requests
	// to a subresource: "pods", "pods/status", "pods/eviction".
	Resource string
	// Code is the HTTP status code of the response, such as "200" or "409".
	Code string
}

// Requests reads the API server's /metrics and returns apiserver_request_total
// summed by verb, resource (with subresource) and response code, over all
// other labels. The counts cover the API server's current run only: they
// start from zero when it is restarted. They include the harness's own
// requests, such as node heartbeats.
func (cp *ControlPlane) Requests(ctx context.Context) (map[RequestKey]float64, error) {
	body, err := cp.client.CoreV1().RESTClient().Get().
		AbsPath("/metrics").
		SetHeader("Accept", "text/plain; version=0.0.4").
		DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	counts := map[RequestKey]float64{}
	family, ok := families["apiserver_request_total"]
	if !ok {
		return counts, nil
	}
	for _, m := range family.GetMetric() {
		var key RequestKey
		var subresource string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "verb":
				key.Verb = l.GetValue()
			case "resource":
				key.Resource = l.GetValue()
			case "subresource":
				subresource = l.GetValue()
			case "code":
				key.Code = l.GetValue()
			}
		}
		if subresource != "" {
			key.Resource += "/" + subresource
		}
		counts[key] += m.GetCounter().GetValue()
	}
	return counts, nil
}

// RequestCount returns how many requests with the given verb the API server
// has answered for resource, whatever their response code. The verb is
// matched without regard to case; resource is as in [RequestKey], so "pods"
// does not include "pods/status".
func (cp *ControlPlane) RequestCount(ctx context.Context, verb, resource string) (float64, error) {
	counts, err := cp.Requests(ctx)
	if err != nil {
		return 0, err
	}
	var n float64
	for k, v := range counts {
		if strings.EqualFold(k.Verb, verb) && k.Resource == resource {
			n += v
		}
	}
	return n, nil
}

// WriteCount returns how many requests that may change state (any verb but
// GET, LIST and WATCH) the API server has answered for resource, whatever
// their response code. resource is as in [RequestKey].
func (cp *ControlPlane) WriteCount(ctx context.Context, resource string) (float64, error) {
	counts, err := cp.Requests(ctx)
	if err != nil {
		return 0, err
	}
	var n float64
	for k, v := range counts {
		if k.Resource == resource && IsWriteVerb(k.Verb) {
			n += v
		}
	}
	return n, nil
}

// IsWriteVerb reports whether an apiserver_request_total verb may change
// state: anything but GET, LIST and WATCH.
func IsWriteVerb(verb string) bool {
	switch strings.ToUpper(verb) {
	case "GET", "LIST", "WATCH":
		return false
	}
	return true
}
