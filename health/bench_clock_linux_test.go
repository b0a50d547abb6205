package health_test

import (
	"syscall"
	"time"
	"unsafe"
)

// cpuClock returns the CPU time of the calling thread, so that the time
// other processes run in its place does not count. Its caller locks the
// goroutine to its thread.
func cpuClock() time.Duration {
	const clockThreadCPUTimeID = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(errno)
	}
	return time.Duration(ts.Nano())
}
