// Package monitoring holds the tests of podhealth-controller's monitoring
// objects (cmd/podhealth-controller/config/monitoring): the ServiceMonitor
// and PrometheusRule decode into Prometheus Operator's own types, the rules
// pass Prometheus' own rule parser, and every alert is evaluated by
// Prometheus' PromQL engine, step by step, over the series of an outage,
// firing exactly when its rule says; the Grafana dashboard's queries parse
// and evaluate over the same series.
//
// The package has no code outside its tests.
package monitoring
