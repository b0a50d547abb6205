//go:build unix && !linux

package harness

import "syscall"

// sysProcAttr puts a server in its own process group, so that it and anything
// it starts can be signalled together. Outside Linux there is no parent-death
// signal: servers are stopped by test cleanup only.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
