package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Operator is a running example controller process: examples/operator or
// examples/controllerruntime.
type Operator struct {
	proc *process
}

// StartOperator runs the example operator against cp with --kubeconfig and
// the given extra arguments (such as --workloads and --namespace). Its
// output goes to a log file in the control plane's directory. It is stopped
// with SIGTERM in t.Cleanup, and the tail of its log is printed if the test
// failed. It stops the test with t.Fatal if the process cannot start.
func (cp *ControlPlane) StartOperator(t testing.TB, bins Binaries, args ...string) *Operator {
	t.Helper()
	return cp.startExample(t, "operator", bins.Operator, args)
}

// StartControllerRuntime runs the controller-runtime example
// (examples/controllerruntime) against cp, as StartOperator runs
// examples/operator: with --kubeconfig and args, its output in a log file of
// the control plane's directory, stopped in t.Cleanup.
func (cp *ControlPlane) StartControllerRuntime(t testing.TB, bins Binaries, args ...string) *Operator {
	t.Helper()
	return cp.startExample(t, "controllerruntime", bins.ControllerRuntime, args)
}

// StartController runs podhealth-controller (cmd/podhealth-controller)
// against cp, as StartOperator runs examples/operator: with --kubeconfig
// and args (a later --kubeconfig wins), stopped in t.Cleanup. Its output
// goes to the log file podhealth-controller-<replica>.log of the control
// plane's directory, one per replica name.
//
// A replica that exits on its own, whatever the reason (a lost leader
// election when the API server is too busy to answer its renewals within
// the renew deadline, an error during an outage), is started again a
// second later, as its Deployment would start it again: Restarts counts
// those, and Exits says when and why each exit came. A test's Stop or
// Kill is not restarted.
func (cp *ControlPlane) StartController(t testing.TB, bins Binaries, replica string, args ...string) *Operator {
	t.Helper()
	return cp.startProcess(t, "podhealth-controller-"+replica, bins.Controller, args, true)
}

// LeaderElectionLost is what controller-runtime's manager returns, and
// podhealth-controller logs as it exits, when it loses its leader
// election.
const LeaderElectionLost = "leader election lost"

// leadershipWords are what client-go's leader election and
// podhealth-controller log as leadership changes.
var leadershipWords = []string{"attempting to acquire leader lease", "successfully acquired lease", "failed to renew lease", LeaderElectionLost}

// startExample runs one of the example controllers. name names its log
// file; several processes of one name share a log file.
func (cp *ControlPlane) startExample(t testing.TB, name, path string, args []string) *Operator {
	t.Helper()
	return cp.startProcess(t, name, path, args, false)
}

// startProcess runs a controller, started again after any exit of its own
// with restart.
func (cp *ControlPlane) startProcess(t testing.TB, name, path string, args []string, restart bool) *Operator {
	t.Helper()
	if path == "" {
		t.Fatalf("harness: no %s binary: BuildBinaries builds it", name)
	}
	logPath := filepath.Join(cp.dir, name+".log")
	p := &process{
		name:    name,
		path:    path,
		args:    append([]string{"--kubeconfig=" + cp.kubeconfig}, args...),
		logPath: logPath,
		restart: restart,
	}
	if err := p.start(); err != nil {
		t.Fatalf("harness: %v", err)
	}
	op := &Operator{proc: p}
	t.Cleanup(func() {
		op.Stop()
		if t.Failed() {
			t.Logf("---- last %d lines of %s output (%s) ----\n%s", cp.opts.LogTailLines, name, logPath, p.tail(cp.opts.LogTailLines))
		}
	})
	return op
}

// Stop sends SIGTERM and waits for the operator to exit (killing it after 10
// seconds). It returns how the process ended; a clean shutdown is nil.
func (op *Operator) Stop() error {
	return op.proc.stop(10 * time.Second)
}

// Kill sends SIGKILL, as a node that dies takes its processes, and
// waits for the process to be gone: it gives up nothing it holds.
func (op *Operator) Kill() error {
	return op.proc.kill()
}

// Pid returns the operator's process ID, or 0 if it is not running.
func (op *Operator) Pid() int {
	op.proc.mu.Lock()
	defer op.proc.mu.Unlock()
	if op.proc.cmd == nil || op.proc.cmd.Process == nil {
		return 0
	}
	return op.proc.cmd.Process.Pid
}

// Restarts returns how many times the operator was started again after
// an exit by design (see StartController).
func (op *Operator) Restarts() int {
	op.proc.mu.Lock()
	defer op.proc.mu.Unlock()
	return op.proc.restarts
}

// Exits returns the exits the operator made on its own, in order.
func (op *Operator) Exits() []Exit {
	op.proc.mu.Lock()
	defer op.proc.mu.Unlock()
	return append([]Exit(nil), op.proc.exits...)
}

// Leadership returns the lines of its output where its leadership
// changed: an attempt to acquire the leader lease, its acquisition, a
// failed renewal, a lost election.
func (op *Operator) Leadership() []string {
	var out []string
	for _, line := range strings.Split(op.Log(), "\n") {
		for _, w := range leadershipWords {
			if strings.Contains(line, w) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// LastLines returns at most the last n lines of its output.
func (op *Operator) LastLines(n int) []string { return op.proc.lastLines(n) }

// Log returns the operator's output so far.
func (op *Operator) Log() string {
	data, err := os.ReadFile(op.proc.logPath)
	if err != nil {
		return ""
	}
	return string(data)
}

// LogLines returns the lines of the operator's output that contain substr.
func (op *Operator) LogLines(substr string) []string {
	var out []string
	for _, line := range strings.Split(op.Log(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}
