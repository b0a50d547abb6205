// Package database is a database operator's whole podhealth glue, as an
// operator that has never used podhealth adds it: a Cluster resource owns
// its instance pods directly (no StatefulSet, no label to select on), and
// its reconciler force-deletes the instances that died with their node
// once the primary's Lease proves they stopped, reports whether one runs,
// and looks again when podhealth says to.
//
// Every line that podhealth adds to this code or changes in it is marked,
// between "podhealth:begin" and "podhealth:end" comments or by a
// "podhealth:" comment at its end; TestTheGlueIsAtMost40Lines counts them
// by the rule of docs/operators.md ("Counting the glue"). The rest is what
// the operator has anyway: its Cluster type, the Get of the Cluster, its
// event recorder, its failover and the controller's builder.
//
// The primary writes only while it holds the Lease <cluster>-primary, and
// stops within Spec.StopDeadline of losing it: the operator states that
// protocol in process, from its own resource
// (podhealthcr.CheckOptions.LeaseProtocol), so nothing is stamped on its pods.
// It states it only for the instance labelled primary: a replica writes
// its own volume outside the Lease, and a takeover of the Lease proves
// only that the holder it replaced has stopped, so a dead replica waits
// for node evidence (its node gone, or out of service). The obligations
// the primary takes on are in docs/safety.md; the database's own code
// must keep them.
package database
