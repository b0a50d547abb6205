//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// initialPIDNamespace is the inode of the host's own PID namespace, the
// same on every Linux since 3.8 (PROC_PID_INIT_INO).
const initialPIDNamespace = "pid:[4026531836]"

// checkProcessNamespace refuses to run where stopOthers could not keep
// the protocol or would harm the host: as PID 1 (the pod does not share
// its process namespace, so the workload's processes are out of reach),
// or in the host's own PID namespace (where it would signal every
// process of the machine).
func checkProcessNamespace() error {
	if os.Getpid() == 1 {
		return errors.New("running as PID 1: the pod does not share its process namespace (shareProcessNamespace: true), so the sidecar could not stop the workload")
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return fmt.Errorf("reading the PID namespace: %w", err)
	}
	if ns == initialPIDNamespace {
		return errors.New("running in the host's PID namespace: its stop would signal every process of the machine; run it in a pod with shareProcessNamespace: true")
	}
	return nil
}

// stopOthers sends SIGKILL to every other process of the pod's process
// namespace: kill(2) with pid -1 reaches every process the caller may
// signal but PID 1 (the sandbox's pause process) and the caller. It is one
// system call a round and reads no file system, so nothing on the way
// from a deadline to the kill can block. It repeats, for a process may
// fork while it dies, until none is left (ESRCH) or for a second (a
// killed process answers until its parent reaps it). It fails if it
// could signal none of the processes there are (EPERM: run the sidecar
// as the workload's user, or with the KILL capability).
func stopOthers() error {
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		switch err := syscall.Kill(-1, syscall.SIGKILL); {
		case errors.Is(err, syscall.ESRCH):
			return nil
		case errors.Is(err, syscall.EPERM):
			return errors.New("no right to signal the pod's other processes: run the sidecar as the workload's user, or add the KILL capability")
		case err != nil:
			return fmt.Errorf("signalling the pod's other processes: %w", err)
		}
		if time.Now().After(deadline) {
			return nil
		}
	}
}
