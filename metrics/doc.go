// Package metrics counts what podhealth Checkers decide and do, in
// Prometheus metrics that an operator registers on its own
// prometheus.Registerer (controller-runtime's metrics.Registry included).
// It lives in a module of its own, so that the root module never gets
// Prometheus in its graph. Its floors (go.mod): Go 1.22, client_golang
// v1.11.1 (the first with the fix of CVE-2022-21698), k8s.io v0.31.0 and
// the root module v0.1.0.
//
// An Observer is a health.Observer: give it to every Checker of an
// operator in health.Options.Observer (or next to an EventObserver, see
// health.Observer), and it records, per pod and check:
//
//	podhealth_force_deletes_total{outcome}           counter: force deletes sent, by outcome
//	                                                 (ForceDeleted, WasAlreadyGone, NameReused, DeleteFailed;
//	                                                 WouldForceDelete in a dry run)
//	podhealth_held_back_total{reason}                counter: dead pods held back, one per pod and check,
//	                                                 by health.HoldReason (HeldForFencing, HeldByBreaker, ...)
//	podhealth_breaker_open                           gauge: with Options.Breaker, 1 when that Breaker stops
//	                                                 force deletes on some node (health.Breaker.Open, read at
//	                                                 each scrape), else 0; without it, 1 when the last dead
//	                                                 pod that reached a Breaker was held back by it, 0 when
//	                                                 it let that pod on (sent, would be sent in a dry run, or
//	                                                 held by the budget), kept until another dead pod reaches
//	                                                 it
//	podhealth_dead_pod_age_at_force_delete_seconds{since}
//	                                                 histogram: how long a pod had been dead when its force
//	                                                 delete was accepted, since its DisruptionTarget condition
//	                                                 (since="disruption_target") and since its deletion was
//	                                                 requested (since="deletion_request": the deletionTimestamp
//	                                                 less the grace period)
//
// Upstream Kubernetes counts force deletes only; the age histograms give
// the recovery latency of each phase, which is what users ask for. Label
// values are health's own type names, so that dashboards switch on the
// same words as code does.
//
// An Observer is safe for concurrent use; Observe never blocks.
package metrics
