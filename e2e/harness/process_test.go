package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestErrorLinesKeepsTheLastErrorsOfKlogAndLogrus(t *testing.T) {
	long := "E1204 17:00:00.000001    42 kubelet.go:1] " + strings.Repeat("x", errorLineMax)
	log := strings.Join([]string{
		"==== 2026-12-04T17:00:00Z: starting kubelet",
		"I1204 17:00:00.000001    42 server.go:1] Starting",
		"E1204 17:00:00.000002    42 kubelet.go:2] first error",
		`time="2026-12-04T17:00:00Z" level=info msg="loading plugin"`,
		`time="2026-12-04T17:00:01Z" level=error msg="failed to load cni"`,
		"Error: a line that only looks like one",
		"F1204 17:00:02.000003    42 server.go:3] failed to run Kubelet",
		long,
	}, "\n")
	path := filepath.Join(t.TempDir(), "kubelet.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &process{name: "kubelet", logPath: path}
	want := []string{
		`time="2026-12-04T17:00:01Z" level=error msg="failed to load cni"`,
		"F1204 17:00:02.000003    42 server.go:3] failed to run Kubelet",
		long[:errorLineMax] + "...",
	}
	if diff := cmp.Diff(want, p.errorLines(3)); diff != "" {
		t.Errorf("errorLines(3) (-want +got):\n%s", diff)
	}
}

func TestLastLinesSkipsEmptyLinesAndCutsLongOnes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet.log")
	log := "==== starting kubelet\nsh: 1: Syntax error: Unterminated quoted string\n\n" + strings.Repeat("y", errorLineMax+1) + "\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &process{name: "kubelet", logPath: path}
	want := []string{"sh: 1: Syntax error: Unterminated quoted string", strings.Repeat("y", errorLineMax) + "..."}
	if diff := cmp.Diff(want, p.lastLines(2)); diff != "" {
		t.Errorf("lastLines(2) (-want +got):\n%s", diff)
	}
}

// exitingProcess is a shell that logs line and exits 1 on its first run,
// and runs for a minute on the next.
func exitingProcess(t *testing.T, line string, restart bool) *process {
	t.Helper()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	script := `if [ -e "$1" ]; then exec sleep 60; fi; touch "$1"; echo "$2"; exit 1`
	p := &process{name: "controller", path: "/bin/sh", args: []string{"-c", script, "sh", marker, line}, logPath: filepath.Join(dir, "controller.log"), restart: restart}
	t.Cleanup(func() { _ = p.stop(time.Second) })
	return p
}

// A controller is started again after any exit of its own, as its
// Deployment would: a lost leader election, and an exit for another
// reason during an outage too (before, that one left it down for the
// rest of the test). Each exit is recorded with its status and its last
// lines. A stop by the test, and a process started without restart, stay
// down.
func TestAControllerIsStartedAgainAfterAnyExitOfItsOwn(t *testing.T) {
	for _, tc := range []struct {
		name        string
		line        string
		restart     bool
		stopAtExit  bool
		wantRestart bool
	}{
		{name: "a lost leader election", line: "error: leader election lost", restart: true, wantRestart: true},
		{name: "an error during an outage", line: "error: failed to wait for caches to sync", restart: true, wantRestart: true},
		{name: "the test stopped it before the restart", line: "error: leader election lost", restart: true, stopAtExit: true},
		{name: "a process without restart", line: "error: leader election lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := exitingProcess(t, tc.line, tc.restart)
			if err := p.start(); err != nil {
				t.Fatal(err)
			}
			p.mu.Lock()
			done := p.done
			p.mu.Unlock()
			<-done
			if tc.stopAtExit {
				_ = p.stop(time.Second)
			}
			running := func() (int, bool) {
				exited, _ := p.exited()
				p.mu.Lock()
				defer p.mu.Unlock()
				return p.restarts, !exited
			}
			if tc.wantRestart {
				// Started again after restartDelay, or at the deadline, on
				// a busy machine, a failure.
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					if restarts, ok := running(); restarts == 1 && ok {
						p.mu.Lock()
						exits := append([]Exit(nil), p.exits...)
						p.mu.Unlock()
						if len(exits) != 1 || exits[0].Status != "exit status 1" || !exits[0].Restarted || !strings.Contains(strings.Join(exits[0].LastLines, "\n"), tc.line) {
							t.Fatalf("the exit as recorded: %+v", exits)
						}
						return
					}
				}
				restarts, ok := running()
				t.Fatalf("not started again: restarts %d, running %v; log:\n%s", restarts, ok, p.tail(10))
			}
			time.Sleep(2 * restartDelay)
			if restarts, ok := running(); restarts != 0 || ok {
				t.Errorf("started again: restarts %d, running %v; log:\n%s", restarts, ok, p.tail(10))
			}
		})
	}
}
