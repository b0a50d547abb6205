package harness

import "syscall"

// sysProcAttr puts a server in its own process group, so that it and anything
// it starts can be signalled together, and asks the kernel to kill it if the
// test binary dies first (for example on Ctrl-C or SIGTERM of go test), so no
// server outlives the tests.
//
// Pdeathsig fires when the thread that started the child exits. The Go runtime
// only retires threads that were locked with runtime.LockOSThread, which the
// harness never does, so in practice this is the life of the test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
