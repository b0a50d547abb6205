//go:build go1.25

// Package sim is a deterministic simulation of the self-fencing protocol
// that drives the real code: selffence.Guard in a writer's process, the
// sidecar's logic (internal/sidecar) over a process table of its own,
// and an operator's kube.Checkers with fencing.LeaseFencer, which
// decide the force deletes. Around them it models what they run on: an
// API server for Leases, Pods and Nodes that honours resourceVersion and
// UID preconditions and answers late, twice or never; nodes whose
// kubelets heartbeat, start and stop containers; the node-lifecycle and
// taint-eviction controllers at Kubernetes' times; and a StatefulSet that
// recreates a deleted pod on another node. Faults are drawn from a seed:
// partitions, freezes of a node or a process (its clock runs on),
// power-offs, kubelet crashes, OOM kills of one container, a log sink that
// blocks, outside edits of the Lease, and clocks that run at their own
// rates.
//
// One seed is one run. The code under test runs in goroutines of a
// testing/synctest bubble, so that the simulator knows when all of them
// wait; every wait they have (a timer of their process's clock, an answer
// of the API server) is the simulator's, which wakes one at a time in an
// order drawn from the seed. A run's history is its text, event by event;
// the same seed writes the same history, byte for byte.
//
// The Oracle judges a history: never two processes writing one resource
// at overlapping times, every force delete of a pod whose processes had
// stopped, and, once the faults heal, a writer again within a bound.
//
// Run is not safe for concurrent use within one bubble; separate runs
// share nothing.
package sim
