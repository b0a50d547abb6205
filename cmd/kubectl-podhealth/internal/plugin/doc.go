// Package plugin is kubectl-podhealth: it lists the pods that died with
// their node, as package health judges them, and force-deletes those that
// its policy lets go.
//
// A run lists the nodes once (paginated) for node evidence, then the pods a
// page at a time (DefaultPageSize per LIST), judging each page with a
// dry-run health.Checker and keeping only the pods worth listing, so that
// its memory is bounded by one page plus the listed pods. With
// --force-delete it re-reads the nodes and each pod it would delete, and
// runs one real health.Checker over those pods, with the library's policy,
// a health.Breaker over the nodes and a health.DeleteBudget of
// --max-deletes, through a deleter with kube.Deleter's checks. It reaches
// the API server through a Cluster, a REST client of core/v1 alone.
//
// Main is the whole command; it is not safe for concurrent use with the
// same streams.
package plugin
