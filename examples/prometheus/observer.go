package main

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podhealth/podhealth/health"
)

var _ health.Observer = (*Metrics)(nil)

// Metrics is a health.Observer that counts the Checker's decisions and
// force deletes in Prometheus counters. It is safe for concurrent use.
type Metrics struct {
	decisions    *prometheus.CounterVec
	forceDeletes *prometheus.CounterVec
}

// NewMetrics registers the counters with reg and returns the observer.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "podhealth",
			Name:      "decisions_total",
			Help:      "Pods judged by podhealth checks, by verdict, deciding rule and outcome.",
		}, []string{"state", "rule", "outcome"}),
		forceDeletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "podhealth",
			Name:      "force_deletes_total",
			Help:      "Force deletes sent (or, in a dry run, that would be sent), by deciding rule and outcome.",
		}, []string{"rule", "outcome"}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.forceDeletes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Observe counts one pod's decision and, when the check sent a force
// delete for it (or would have, in a dry run), that force delete.
func (m *Metrics) Observe(_ context.Context, r health.PodReport) {
	m.decisions.WithLabelValues(r.Verdict.State.String(), r.Verdict.Rule, r.Outcome.String()).Inc()
	switch r.Outcome {
	case health.ForceDeleted, health.WasAlreadyGone, health.NameReused, health.DeleteFailed, health.WouldForceDelete:
		m.forceDeletes.WithLabelValues(r.Verdict.Rule, r.Outcome.String()).Inc()
	}
}
