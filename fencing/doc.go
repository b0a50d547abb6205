// Package fencing holds opt-in health.Fencers for the proof that a
// workload, its storage or a fencing tool holds, beyond the node evidence
// that every health.Checker reads itself. Add them to
// health.Options.Fencers; each names what it proves in the terms of
// health.Proof.
//
// LeaseFencer is the fencer of workloads that fence themselves: a pod
// states in annotations the Lease it must hold to write and the deadline
// within which it stops once it cannot renew it, and the fencer proves
// the pod stopped once a live read shows the Lease unrenewed for its
// duration plus that deadline plus a margin, on the Checker's own clock.
//
// NetworkFenceFencer is the storage's fencer: it proves a node cut off
// once csi-addons NetworkFences that report a fence operation succeeded
// cover every address of the node.
// docs/safety.md says what each fencer proves, what it does not, and the
// failure that would break it.
//
// Like package health, it uses the k8s.io/api and k8s.io/apimachinery
// types and never client-go: podsource/kube.LiveLeases reads Leases for a
// LeaseFencer, and podsource/kube.LiveNetworkFences lists NetworkFences. Every fencer passes the conformance suite of package
// health/fencertest.
package fencing
