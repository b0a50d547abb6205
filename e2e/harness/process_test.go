package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
