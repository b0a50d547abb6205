//go:build linux

// Command podhealth-selffence is the self-fencing Lease protocol's sidecar,
// for a single-writer workload not written in Go (a Redis primary, an MQTT
// broker, a home-grown store): it holds the Lease for its pod with a
// selffence.Guard, tells the workload whether it may write, and at the
// deadline kills the processes of the pod's other containers, which share
// its process namespace (shareProcessNamespace: true), then exits.
//
// The workload asks before each write, on one or both of:
//
//   - --listen (127.0.0.1:8089 by default): GET /may-write answers 200
//     "true" while it may write, 503 "false" otherwise;
//   - --file: a file that exists while it may write (in an emptyDir
//     both containers mount): created once the Lease is held, removed as
//     soon as writing must stop, a moment after the endpoint turns
//     false (a goroutine's wake-up). A file outlives a sidecar killed
//     without warning; the next sidecar removes it when it starts, but a
//     workload container that starts before it could read it. Prefer
//     --listen: a sidecar that is gone answers nothing.
//
// On --listen, GET /live is for the workload container's liveness probe
// (the kubelet as a second stop, for a workload that cannot ask before
// each write): it answers 200 "true" while the sidecar has not yet let the
// workload write, or lets it now, and 503 "false" for good once writing
// has ended after a yes. Give it no startup probe: the kubelet forgets a
// startup probe's success when it restarts, and then holds the liveness
// probe until the startup probe passes again.
//
// The answer turns to false, and the file goes, the moment the Guard stops
// holding: the Lease's duration since the start of its last successful
// renewal, or the first failed renewal. At that moment plus --deadline
// less --stop-takes, it kills every other process of the pod with SIGKILL
// (kill(-1): no file system, log or lock on the way) and exits, whether
// or not the workload listened. The pod states the same settings with the
// annotations that --print-annotations prints.
//
// Every time it starts, before it reads the Lease or answers anything, it
// removes a may-write file a predecessor left and kills the pod's other
// processes: a sidecar killed without warning (an OOM kill) is restarted
// alone, and the workload it left running is one that nothing would stop
// at its deadline. The kubelet restarts the workload, which asks again.
// It refuses to run as PID 1 (no shared process namespace) or in the
// host's PID namespace, and an --identity that is not $POD_NAME. It reads
// its pod's UID from $POD_UID (the downward API's metadata.uid) or
// --pod-uid: it claims the Lease only while its pod is there under that
// UID and not being deleted, and answers true under a claim only once a
// read of its pod after the claim says the same.
//
// What it cannot do: a write the workload started just before the answer
// turned false is in flight, and finishes if its process is frozen and
// later resumed (the deadline bounds it only while the node runs);
// storage that caches writes must have them on disk within the deadline;
// a node whose monotonic clock stops measures nothing. docs/safety.md
// states these windows. It needs get, create and update on the Lease
// (coordination.k8s.io leases) and get on pods in its pod's namespace.
package main
