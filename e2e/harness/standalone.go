package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// FatalError is the panic value of the harness helpers that stop a test with
// t.Fatal (such as [ControlPlane.AddNode] and [ControlPlane.CreatePod]) when
// they run on a control plane started by [StartStandalone]: there is no test
// to stop, so they panic instead. A program recovers it where it cleans up.
type FatalError struct {
	Msg string
}

func (e *FatalError) Error() string { return e.Msg }

// StartStandalone starts a control plane outside of go test, for a program
// such as a demo: the same processes, flags and readiness checks as [Start].
// State and logs go to a new directory under os.TempDir.
//
// It returns the control plane and a stop function that kills every process
// the control plane, its nodes and its operators started, stops the
// heartbeats, and removes the directory; call it exactly once, also when the
// program is interrupted. On error nothing is left running and stop need not
// be called.
//
// Helpers that take a testing.TB are given [ControlPlane.TB]. Those that
// would stop a test with t.Fatal panic with a *FatalError instead; call
// TB().Fail() before stop to have the tail of each process's output written
// to standard error.
func StartStandalone(ctx context.Context, bins Binaries, opts Options) (*ControlPlane, func(), error) {
	opts = opts.withDefaults()
	dir, err := os.MkdirTemp("", "podhealth-e2e-standalone-")
	if err != nil {
		return nil, nil, err
	}
	tb := &standaloneTB{dir: dir, out: os.Stderr}
	cp := &ControlPlane{t: tb, opts: opts, dir: tb.TempDir()}
	tb.Cleanup(cp.shutdown)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			tb.runCleanups()
			os.RemoveAll(dir)
		})
	}

	startCtx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := cp.start(startCtx, bins); err != nil {
		tb.Fail()
		stop()
		return nil, nil, fmt.Errorf("harness: starting the control plane: %w", err)
	}
	return cp, stop, nil
}

// TB returns the testing.TB the control plane reports to: the test's for
// [Start], a stand-in for [StartStandalone].
func (cp *ControlPlane) TB() testing.TB { return cp.t }

// standaloneTB stands in for a test outside go test. Cleanups run when the
// program calls the stop function of StartStandalone; Fatal panics with a
// *FatalError; logs go to out.
type standaloneTB struct {
	// testing.TB is embedded only for its unexported method; every
	// exported method is implemented below, so it is never called.
	testing.TB

	dir string
	out io.Writer

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	tempDirs int
}

func (s *standaloneTB) runCleanups() {
	for {
		s.mu.Lock()
		n := len(s.cleanups)
		if n == 0 {
			s.mu.Unlock()
			return
		}
		f := s.cleanups[n-1]
		s.cleanups = s.cleanups[:n-1]
		s.mu.Unlock()
		f()
	}
}

func (s *standaloneTB) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *standaloneTB) TempDir() string {
	s.mu.Lock()
	s.tempDirs++
	d := filepath.Join(s.dir, strconv.Itoa(s.tempDirs))
	s.mu.Unlock()
	if err := os.MkdirAll(d, 0o755); err != nil {
		s.Fatalf("TempDir: %v", err)
	}
	return d
}

func (s *standaloneTB) ArtifactDir() string    { return s.TempDir() }
func (s *standaloneTB) Attr(key, value string) {}
func (s *standaloneTB) Helper()                {}
func (s *standaloneTB) Name() string           { return "standalone" }
func (s *standaloneTB) Context() context.Context {
	return context.Background()
}
func (s *standaloneTB) Output() io.Writer { return s.out }

func (s *standaloneTB) Fail() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = true
}

func (s *standaloneTB) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *standaloneTB) FailNow() {
	s.Fail()
	panic(&FatalError{Msg: "FailNow"})
}

func (s *standaloneTB) Log(args ...any) { fmt.Fprintln(s.out, args...) }
func (s *standaloneTB) Logf(format string, args ...any) {
	fmt.Fprintf(s.out, format+"\n", args...)
}

func (s *standaloneTB) Error(args ...any) {
	s.Fail()
	s.Log(args...)
}

func (s *standaloneTB) Errorf(format string, args ...any) {
	s.Fail()
	s.Logf(format, args...)
}

func (s *standaloneTB) Fatal(args ...any) {
	s.Fail()
	panic(&FatalError{Msg: fmt.Sprint(args...)})
}

func (s *standaloneTB) Fatalf(format string, args ...any) {
	s.Fail()
	panic(&FatalError{Msg: fmt.Sprintf(format, args...)})
}

func (s *standaloneTB) Setenv(key, value string) {
	prev, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		s.Fatalf("Setenv: %v", err)
	}
	s.Cleanup(func() {
		if had {
			os.Setenv(key, prev)
		} else {
			os.Unsetenv(key)
		}
	})
}

func (s *standaloneTB) Chdir(dir string) {
	prev, err := os.Getwd()
	if err == nil {
		err = os.Chdir(dir)
	}
	if err != nil {
		s.Fatalf("Chdir: %v", err)
	}
	s.Cleanup(func() { os.Chdir(prev) })
}

func (s *standaloneTB) Skip(args ...any) { s.Fatal(append([]any{"skipped: "}, args...)...) }
func (s *standaloneTB) SkipNow()         { s.Fatal("skipped") }
func (s *standaloneTB) Skipf(format string, args ...any) {
	s.Fatalf("skipped: "+format, args...)
}
func (s *standaloneTB) Skipped() bool { return false }
