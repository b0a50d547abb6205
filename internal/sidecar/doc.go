// Package sidecar is the logic of podhealth-selffence, the self-fencing
// protocol's sidecar, apart from what it needs from the operating system:
// the order of its start (the stop of whatever a predecessor left running,
// before the Lease is read or anything answered), the Guard with its stop
// at the deadline, and what it does once writing has stopped. The command
// binds it to kill(2), a listener and a file; a simulation binds it to a
// process table of its own, so that both run this same code.
//
// Run is safe to call from several goroutines, each with its own Hooks.
package sidecar
