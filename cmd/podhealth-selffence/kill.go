//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// killOthers sends SIGKILL to every process that procDir lists but self
// and PID 1 (the sandbox's pause process in a shared process namespace),
// round after round until none is left or a second has passed: a process
// may fork while it dies. It reports how many it signalled.
func killOthers(procDir string, self int) int {
	signalled := map[int]bool{}
	for deadline := time.Now().Add(time.Second); ; {
		left := 0
		for _, pid := range pids(procDir) {
			if pid == self || pid == 1 {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil || err == syscall.EPERM {
				left++
				signalled[pid] = true
			}
		}
		if left == 0 || time.Now().After(deadline) {
			return len(signalled)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pids lists the process IDs in procDir.
func pids(procDir string) []int {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			if _, err := os.Stat(filepath.Join(procDir, e.Name())); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
