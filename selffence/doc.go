// Package selffence is the workload's side of the self-fencing Lease
// protocol that fencing.LeaseFencer trusts: a single writer written in Go
// embeds a Guard, writes only while Guard.MayWrite says so (or within
// Guard.Context), and the Guard makes the process keep the protocol's
// obligations (docs/safety.md):
//
//   - it writes only while less than the Lease's duration has passed
//     since the start of its last successful renewal, on the process's
//     own monotonic clock: MayWrite turns false, and Context ends, at that
//     moment;
//   - it stops on any failed renewal, whatever its peers say: a renewal
//     that fails, that does not complete before the Lease expires, or
//     that finds the Lease taken over ends writing at once, and the Guard
//     does not try again (Run returns a *LostError);
//   - by that start plus the duration plus the deadline, its whole stop is
//     over: the Guard stops the process (Options.Exit, os.Exit by default)
//     at that moment less the time a stop takes, whether or not the
//     workload listened. Nothing on the way from that moment to Exit can
//     block: the Guard's log lines are queued and written apart.
//
// Before it writes, a Guard waits out any holder that may still write: a
// holder whose record it sees unchanged for the record's duration plus
// the deadline plus a margin, and, for a Lease that is missing or names
// no holder (never held, or cleared or deleted under its holder), the
// same wait after its own claim of it (see Guard.Run). And it claims only
// for a pod that is there under its UID and not being deleted, and writes
// under a claim only once a read of its pod, sent after the claim's
// answer, says the same: the fencer proves a pod stopped only from a read
// of the Lease made once the pod's deletion began, so no process of a pod
// it freed writes afterwards (ErrPodEnded). The Guard reads its Lease and
// its pod through a Client: it needs get, create and update on leases and
// get on pods in its namespace.
//
// Options.Stamp writes the same settings on a pod template as the
// protocol's annotations, so that the deadline a pod states is the one its
// Guard enforces.
//
// It reuses client-go's resourcelock.LeaseLock to read, create and update
// the Lease (each update a conditional write on the resourceVersion last
// read), but not client-go's leaderelection.LeaderElector, whose
// obligations differ: it counts a lease from the end of a renewal, not
// its start; it retries a failed renewal until its RenewDeadline, asking
// the API server again on a slow path; and it leaves stopping to a
// callback the workload may ignore.
//
// What the Guard cannot do: stop a write already in flight when the
// process is frozen (SIGSTOP, a hung node, a paused VM) and then resumed
// after the deadline; make storage that caches writes flush them in time;
// measure time on a node whose monotonic clock stops while the process
// runs. docs/safety.md states these windows.
package selffence
