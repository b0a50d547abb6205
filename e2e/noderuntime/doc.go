// Package noderuntime pins, as tool dependencies of a module of its own, the
// container runtime that the e2e suite's real nodes run: containerd v2 (its
// daemon, its runc shim and ctr), runc, and the CNI plugins bridge,
// host-local and loopback. Their dependencies (a newer gRPC and protobuf
// among them) stay out of the e2e module's graph; the harness builds them
// with `go build` from this directory.
package noderuntime
