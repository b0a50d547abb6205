// Package fencertest checks a health.Fencer against the Fencer contract,
// in the spirit of testing/fstest.TestFS: TestFencer returns nil, or an
// error joining every failure it found, so that a test calls it as
//
//	if err := fencertest.TestFencer(f, cases...); err != nil {
//		t.Fatal(err)
//	}
//
// The caller gives the cases: queries the fencer must prove, and queries
// it must not, with the earlier sightings a Checker would have made
// (Case.Earlier). Beyond each case's answer, TestFencer checks what any
// fencer must do:
//
//   - Name is not empty, and the same on every call.
//   - An answer is well formed: a Proof it defines, By set on a proof, no
//     negative RetryAfter; with an error, nothing to act on.
//   - Asking again at the same time, on the same record, answers the same.
//   - Time alone proves nothing: on a fresh record (a new Memory), a clock
//     far ahead proves no more than the case's own time does.
//   - A nil pod is no proof, and no panic.
//   - With a done context, the answer is the same or an error wrapping
//     ctx.Err().
//   - The query's pod and node are not mutated.
//   - Concurrent questions answer as sequential ones (run it under the
//     race detector); asked only of a fencer that passed the rest.
//
// A panic in the fencer is recovered and reported as a failure.
package fencertest
