package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"log"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	text := strings.TrimRight(b.buf.String(), "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// loggerWithFlags parses args as the program's log flags and returns a
// logger writing to out, with a clock the test moves.
func loggerWithFlags(t *testing.T, out *syncBuffer, now *time.Time, args ...string) logr.Logger {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	opts := bindLogFlags(fs)
	require.NoError(t, fs.Parse(args))
	return newLogger(opts, out, func() time.Time { return *now })
}

func decode(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &m), line)
	return m
}

func TestLogFlagsChooseTheEncodingAndTheTimeFormatWithISO8601JSONByDefault(t *testing.T) {
	now := time.Now()
	iso8601 := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	t.Run("default: JSON with ISO 8601 timestamps", func(t *testing.T) {
		var out syncBuffer
		loggerWithFlags(t, &out, &now).Info("starting", "workers", 4)
		lines := out.lines()
		require.Len(t, lines, 1)
		m := decode(t, lines[0])
		require.Equal(t, "starting", m["msg"])
		require.EqualValues(t, 4, m["workers"])
		ts, ok := m["ts"].(string)
		require.True(t, ok, "ts is a string, not epoch seconds: %v", m["ts"])
		require.Regexp(t, iso8601, ts)
	})
	t.Run("--zap-time-encoding=epoch: seconds as a number", func(t *testing.T) {
		var out syncBuffer
		loggerWithFlags(t, &out, &now, "--zap-time-encoding=epoch").Info("starting")
		_, isNumber := decode(t, out.lines()[0])["ts"].(float64)
		require.True(t, isNumber, out.lines()[0])
	})
	t.Run("--zap-encoder=console: not JSON", func(t *testing.T) {
		var out syncBuffer
		loggerWithFlags(t, &out, &now, "--zap-encoder=console").Info("starting", "workers", 4)
		line := out.lines()[0]
		require.False(t, json.Valid([]byte(line)), line)
		require.Contains(t, line, "starting")
		require.Contains(t, line, `{"workers": 4}`)
		require.Regexp(t, `^\d{4}-\d\d-\d\dT`, line)
	})
}

func TestAnErrorIsLoggedWithoutAStackTraceUnlessTheFlagAsksForOne(t *testing.T) {
	now := time.Now()
	var out syncBuffer
	loggerWithFlags(t, &out, &now).Error(errors.New("pods is forbidden"), "Failed to watch")
	m := decode(t, out.lines()[0])
	require.Equal(t, "pods is forbidden", m["error"])
	require.NotContains(t, m, "stacktrace")

	var traced syncBuffer
	loggerWithFlags(t, &traced, &now, "--zap-stacktrace-level=error").Error(errors.New("pods is forbidden"), "Failed to watch")
	require.Contains(t, decode(t, traced.lines()[0]), "stacktrace")
}

func TestARepeatedErrorIsLoggedOncePerChangeAndAgainWithItsCountEveryTenMinutes(t *testing.T) {
	now := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	var out syncBuffer
	logger := loggerWithFlags(t, &out, &now).WithName("reflector")
	forbidden := errors.New(`pods is forbidden: User "system:serviceaccount:podhealth-system:podhealth-controller" cannot list resource "pods" in the namespace "shop"`)
	watch := func(err error) { logger.Error(err, "Failed to watch", "type", "*v1.Pod") }

	for range 30 { // every few seconds for a minute and a half
		watch(forbidden)
		now = now.Add(3 * time.Second)
	}
	require.Len(t, out.lines(), 1, "one line for thirty repeats")

	// Another logger name, message or key-value pair is another error.
	logger.Error(forbidden, "Failed to watch", "type", "*v1.Node")
	logger.WithName("other").Error(forbidden, "Failed to watch", "type", "*v1.Pod")
	logger.WithValues("namespace", "shop").Error(forbidden, "Failed to watch", "type", "*v1.Pod")
	require.Len(t, out.lines(), 4)

	// A change of text is logged at once, and so is its return.
	watch(errors.New("connection refused"))
	watch(forbidden)
	require.Len(t, out.lines(), 6)
	// Infos are never held back.
	logger.Info("retrying")
	logger.Info("retrying")
	require.Len(t, out.lines(), 8)

	// Ten minutes after it was last logged, the same error again, with
	// the count of repeats left out since.
	for range 5 {
		now = now.Add(time.Minute)
		watch(forbidden)
	}
	require.Len(t, out.lines(), 8)
	now = now.Add(5 * time.Minute)
	watch(forbidden)
	lines := out.lines()
	require.Len(t, lines, 9)
	last := decode(t, lines[8])
	require.EqualValues(t, 5, last["repeats"])
	require.Equal(t, "reflector", last["logger"])

	// A clock that jumps back does not silence an error for good.
	now = now.Add(-time.Hour)
	watch(forbidden)
	require.Len(t, out.lines(), 10)
}

func TestRepeatsRemembersABoundedNumberOfErrors(t *testing.T) {
	now := time.Now()
	r := &repeats{now: func() time.Time { return now }, last: map[string]*repeat{}}
	for i := range 3 * maxRepeatKeys {
		ok, _ := r.admit(strings.Repeat("k", i%50)+string(rune('a'+i%26))+time.Duration(i).String(), "err")
		require.True(t, ok)
		require.LessOrEqual(t, len(r.last), maxRepeatKeys)
	}
}

// TestEveryLineOfTheProcessGoesThroughTheLogger: the standard library's
// log package (net/http's "TLS handshake error") and klog (client-go's
// leader election and reflectors) write JSON lines through the logger,
// not lines of their own format.
func TestEveryLineOfTheProcessGoesThroughTheLogger(t *testing.T) {
	now := time.Now()
	var out syncBuffer
	var set logr.Logger
	defer func() {
		log.SetOutput(os.Stderr)
		log.SetFlags(log.LstdFlags)
		klog.ClearLogger()
	}()
	routeLogs(loggerWithFlags(t, &out, &now), func(l logr.Logger) { set = l })
	require.NotNil(t, set.GetSink(), "the controller-runtime logger is set")

	log.Printf("http: TLS handshake error from 127.0.0.1:53422: EOF")
	klog.InfoS("attempting to acquire leader lease", "lease", "podhealth-system/podhealth-controller")
	klog.ErrorS(errors.New("leases is forbidden"), "error retrieving resource lock")
	klog.Flush()

	lines := out.lines()
	require.Len(t, lines, 3, "%q", lines)
	stdlib := decode(t, lines[0])
	require.Equal(t, "stdlib", stdlib["logger"])
	require.Equal(t, "http: TLS handshake error from 127.0.0.1:53422: EOF", stdlib["msg"])
	require.Equal(t, "attempting to acquire leader lease", decode(t, lines[1])["msg"])
	failed := decode(t, lines[2])
	require.Equal(t, "leases is forbidden", failed["error"])
	require.Equal(t, "error", failed["level"])
}
