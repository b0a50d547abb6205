package harness

import (
	"errors"
	"fmt"
	"syscall"
)

// FreezeAPIServer suspends kube-apiserver with SIGSTOP. Unlike
// [ControlPlane.StopAPIServer], the port stays open and the kernel still
// accepts connections, but nothing is answered: requests hang until their
// client gives up, as with a server that is overloaded or cut off behind a
// load balancer. [ControlPlane.ThawAPIServer] resumes it; so does the end of
// the test.
func (cp *ControlPlane) FreezeAPIServer() error {
	if err := cp.signalAPIServer(syscall.SIGSTOP); err != nil {
		return err
	}
	cp.t.Cleanup(func() { _ = cp.ThawAPIServer() })
	return nil
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
