//go:build !linux

package health_test

import "time"

var clockStart = time.Now()

// cpuClock is the wall clock where the thread's CPU time is not read.
func cpuClock() time.Duration { return time.Since(clockStart) }
