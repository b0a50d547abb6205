package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// FreezeAPIServer suspends kube-apiserver with SIGSTOP. Unlike
// [ControlPlane.StopAPIServer], the port stays open and the kernel still
// accepts connections, but nothing is answered: requests hang until their
// client gives up, as with a server that is overloaded or cut off behind a
// load balancer. [ControlPlane.ThawAPIServer] resumes it; so does the end of
// the test.
//
// It returns once every thread of the API server is stopped, as
// /proc reports them: kill returns when the signal is sent, and a thread
// that the kernel has not yet stopped (on a busy machine, one whose CPU is
// not running) could still answer one more request. A check that should
// meet a frozen server so never meets a live one.
func (cp *ControlPlane) FreezeAPIServer() error {
	if err := cp.signalAPIServer(syscall.SIGSTOP); err != nil {
		return err
	}
	cp.t.Cleanup(func() { _ = cp.ThawAPIServer() })
	return cp.waitAPIServerStopped(10 * time.Second)
}

// waitAPIServerStopped waits until every thread of the API server's process
// is in the stopped state.
func (cp *ControlPlane) waitAPIServerStopped(timeout time.Duration) error {
	cp.apiServer.mu.Lock()
	pid := cp.apiServer.cmd.Process.Pid
	cp.apiServer.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		running, err := runningThreads(pid)
		if err == nil && running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("harness: kube-apiserver (pid %d) not stopped %v after SIGSTOP: %d threads still running (%v)", pid, timeout, running, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runningThreads counts the threads of pid that are not stopped, from
// /proc/PID/task/TID/stat, whose state follows the command's closing
// parenthesis.
func runningThreads(pid int) (int, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return -1, fmt.Errorf("no threads listed for pid %d: %v", pid, err)
	}
	running := 0
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the thread has exited
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 || i+2 >= len(data) {
			return -1, fmt.Errorf("unreadable %s", path)
		}
		if state := data[i+2]; state != 'T' && state != 't' {
			running++
		}
	}
	return running, nil
}

// ThawAPIServer resumes an API server suspended by FreezeAPIServer with
// SIGCONT. Thawing a running API server does nothing.
func (cp *ControlPlane) ThawAPIServer() error {
	return cp.signalAPIServer(syscall.SIGCONT)
}

// signalAPIServer sends sig to kube-apiserver's process group.
func (cp *ControlPlane) signalAPIServer(sig syscall.Signal) error {
	p := cp.apiServer
	if p == nil {
		return errors.New("harness: no API server")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return errors.New("harness: the API server is not running")
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("harness: sending %v to kube-apiserver: %w", sig, err)
	}
	return nil
}
