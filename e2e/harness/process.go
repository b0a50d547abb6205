package harness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one control-plane server: a command started in its own process
// group with its output appended to a log file.
type process struct {
	name    string
	path    string
	args    []string
	env     []string // added to the test binary's environment
	logPath string
	// restart starts the process again restartDelay after any exit of
	// its own (not stopped or killed by the test), as a Deployment's
	// kubelet restarts a container whatever made it exit: a lost leader
	// election, or an error during an outage.
	restart bool

	mu       sync.Mutex
	restarts int    // how many times restart started it again
	exits    []Exit // every exit of its own, in order
	logStart int64  // the log file's size when it was last started
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd has exited
	err      error         // cmd's exit status, valid once done is closed
}

// start launches the process. Output goes to the log file, which is appended
// to, so a restarted process keeps its earlier output.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s is already running", p.name)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		logFile.Close()
		return err
	}
	fmt.Fprintf(logFile, "==== %s: starting %s\n", time.Now().Format(time.RFC3339Nano), p.name)
	cmd := exec.Command(p.path, p.args...)
	if p.env != nil {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.logStart = cmd, done, logStart
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
		p.restartAfterOwnExit(cmd, err)
	}()
	return nil
}

// restartDelay is how long a process is left down before it is started
// again: the kubelet restarts a container at once after its first exit,
// then backs off; one second keeps a test's timing close to the first.
const restartDelay = time.Second

// Exit is one exit a process made on its own: when, how (its exit status
// or the signal that ended it), the last lines it logged before it, and
// whether it was started again.
type Exit struct {
	At        time.Time
	Status    string
	LastLines []string
	Restarted bool
}

// exitLines is how many of its last lines an Exit keeps.
const exitLines = 10

// restartAfterOwnExit records the exit of cmd, its run that has just
// ended, if the process made it on its own (a stop or kill by the test
// is not recorded), and with restart starts it again restartDelay from
// now. A stop or kill in the meantime wins.
func (p *process) restartAfterOwnExit(cmd *exec.Cmd, err error) {
	p.mu.Lock()
	ownExit := p.cmd == cmd
	p.mu.Unlock()
	if !ownExit {
		return
	}
	status := "exit status 0"
	if err != nil {
		status = err.Error()
	}
	exit := Exit{At: time.Now(), Status: status, LastLines: p.lastLines(exitLines), Restarted: p.restart}
	p.mu.Lock()
	p.exits = append(p.exits, exit)
	p.mu.Unlock()
	if !p.restart {
		return
	}
	time.AfterFunc(restartDelay, func() {
		p.mu.Lock()
		if p.cmd != cmd {
			p.mu.Unlock()
			return
		}
		p.cmd, p.done = nil, nil
		p.restarts++
		p.mu.Unlock()
		if logFile, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			fmt.Fprintf(logFile, "==== %s: %s exited (%s): starting it again, as its Deployment would\n", time.Now().Format(time.RFC3339Nano), p.name, status)
			logFile.Close()
		}
		if err := p.start(); err != nil {
			p.mu.Lock()
			p.err = err
			p.mu.Unlock()
		}
	})
}

// exited reports whether the running process has exited, and how.
func (p *process) exited() (bool, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true, errors.New("not started")
	}
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// stop signals the whole process group with SIGTERM, waits up to grace for
// the process to exit, then kills the group. It returns how the process
// ended (nil for a clean exit). It is a no-op if the process is not running.
func (p *process) stop(grace time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
	}
	// Kill the group even when the leader is gone, in case it left children.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// tail returns at most the last n lines of the log file.
func (p *process) tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.logPath, err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// errorLines returns at most the last n lines of the log file that log
// an error: klog's (E or F, then the date) and logrus's (level=error or
// level=fatal), each cut to errorLineMax bytes.
func (p *process) errorLines(n int) []string { return p.lastLinesWhere(n, isErrorLine) }

// lastLines returns at most the last n lines of the log file, each cut to
// errorLineMax bytes.
func (p *process) lastLines(n int) []string {
	return p.lastLinesWhere(n, func(line string) bool { return strings.TrimSpace(line) != "" })
}

func (p *process) lastLinesWhere(n int, keep func(string) bool) []string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return []string{fmt.Sprintf("(reading %s: %v)", p.logPath, err)}
	}
	var found []string
	for _, line := range strings.Split(string(data), "\n") {
		if !keep(line) {
			continue
		}
		if len(line) > errorLineMax {
			line = line[:errorLineMax] + "..."
		}
		found = append(found, line)
	}
	if len(found) > n {
		found = found[len(found)-n:]
	}
	return found
}

const errorLineMax = 300

func isErrorLine(line string) bool {
	if strings.Contains(line, "level=error") || strings.Contains(line, "level=fatal") {
		return true
	}
	if len(line) < 6 || (line[0] != 'E' && line[0] != 'F') {
		return false
	}
	for _, c := range line[1:5] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return line[5] == ' '
}

// processAlive reports whether pid names a live process.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// kill ends the process group at once with SIGKILL, as a crash would, and
// reaps the process. It is a no-op if the process is not running.
func (p *process) kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	return nil
}

// signal sends sig to the running process alone.
func (p *process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s is not running", p.name)
	}
	return syscall.Kill(p.cmd.Process.Pid, sig)
}
