package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// repeatEvery is how often an error that keeps repeating unchanged is
// logged again, with the count of the repeats left out since.
const repeatEvery = 10 * time.Minute

// bindLogFlags registers controller-runtime's --zap-* flags on fs, with
// this program's defaults: ISO 8601 timestamps, and no stack trace below
// panic (an API error that repeats every few seconds is not a bug in this
// program, and its stack says nothing an admin can act on).
func bindLogFlags(fs *flag.FlagSet) *zap.Options {
	panicLevel := zapcore.PanicLevel
	opts := &zap.Options{TimeEncoder: zapcore.ISO8601TimeEncoder, StacktraceLevel: panicLevel}
	opts.BindFlags(fs)
	// controller-runtime's own help names its defaults, not these.
	fs.Lookup("zap-time-encoding").Usage = "time encoding of the logs: epoch, millis, nano, iso8601, rfc3339 or rfc3339nano (default iso8601)"
	fs.Lookup("zap-stacktrace-level").Usage = "level at and above which log lines carry a stack trace: info, error or panic (default panic)"
	fs.Lookup("zap-encoder").Usage = "log encoding: json or console (default json)"
	return opts
}

// newLogger is the program's logger, writing to w with the flags' options:
// JSON by default, and each error that repeats unchanged logged once per
// change (onceSink).
func newLogger(opts *zap.Options, w io.Writer, now func() time.Time) logr.Logger {
	o := *opts
	o.DestWriter = w
	inner := zap.New(zap.UseFlagOptions(&o)).GetSink()
	if d, ok := inner.(logr.CallDepthLogSink); ok {
		// onceSink is one more frame between the caller and zap.
		inner = d.WithCallDepth(1)
	}
	return logr.New(&onceSink{sink: inner, seen: &repeats{now: now, last: map[string]*repeat{}}})
}

// routeLogs makes logger the destination of every line the process writes:
// controller-runtime's, client-go's (klog: leader election, reflectors) and
// the standard library's (net/http's "TLS handshake error"), so that each is
// one line of the logger's encoding.
func routeLogs(logger logr.Logger, setControllerRuntime func(logr.Logger)) {
	setControllerRuntime(logger)
	klog.SetLogger(logger)
	log.SetFlags(0)
	log.SetOutput(stdlibWriter{logger.WithName("stdlib")})
}

// stdlibWriter logs each line the standard library's log package writes.
type stdlibWriter struct{ logger logr.Logger }

func (w stdlibWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.logger.Info(line)
	}
	return len(p), nil
}

// onceSink passes every line to sink, but an error that repeats the last
// one of its logger name, message and key-value pairs with the same text:
// that one is logged again only when repeatEvery has passed, with the count
// of repeats left out ("repeats"). Safe for concurrent use, as LogSinks must
// be.
type onceSink struct {
	sink   logr.LogSink
	name   string
	values string
	seen   *repeats
}

var (
	_ logr.LogSink          = (*onceSink)(nil)
	_ logr.CallDepthLogSink = (*onceSink)(nil)
)

// repeats is what onceSink and the sinks derived from it have logged.
type repeats struct {
	mu   sync.Mutex
	now  func() time.Time
	last map[string]*repeat
}

type repeat struct {
	err        string
	logged     time.Time
	suppressed int
}

// maxRepeatKeys bounds what repeats remembers: errors of distinct objects
// (a reconcile error of each pod) would otherwise grow it without end.
const maxRepeatKeys = 1024

// admit says whether the error text for key is to be logged now, and how
// many repeats of it were left out since it last was.
func (r *repeats) admit(key, text string) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	last, ok := r.last[key]
	if ok && last.err == text && now.Sub(last.logged) < repeatEvery && now.Sub(last.logged) >= 0 {
		last.suppressed++
		return false, 0
	}
	suppressed := 0
	if ok && last.err == text {
		suppressed = last.suppressed
	}
	if !ok && len(r.last) >= maxRepeatKeys {
		for k, v := range r.last {
			if now.Sub(v.logged) >= repeatEvery || now.Sub(v.logged) < 0 {
				delete(r.last, k)
			}
		}
		if len(r.last) >= maxRepeatKeys {
			clear(r.last)
		}
	}
	r.last[key] = &repeat{err: text, logged: now}
	return true, suppressed
}

func (s *onceSink) Init(logr.RuntimeInfo) {
	// The sink was initialized when it was made; see newLogger.
}

func (s *onceSink) Enabled(level int) bool { return s.sink.Enabled(level) }

func (s *onceSink) Info(level int, msg string, keysAndValues ...any) {
	s.sink.Info(level, msg, keysAndValues...)
}

func (s *onceSink) Error(err error, msg string, keysAndValues ...any) {
	text := "<nil>"
	if err != nil {
		text = err.Error()
	}
	key := s.name + "\x00" + msg + "\x00" + s.values + "\x00" + fmt.Sprint(keysAndValues...)
	ok, suppressed := s.seen.admit(key, text)
	if !ok {
		return
	}
	if suppressed > 0 {
		keysAndValues = append(keysAndValues[:len(keysAndValues):len(keysAndValues)], "repeats", suppressed)
	}
	s.sink.Error(err, msg, keysAndValues...)
}

func (s *onceSink) WithValues(keysAndValues ...any) logr.LogSink {
	c := *s
	c.sink = s.sink.WithValues(keysAndValues...)
	c.values = s.values + "\x00" + fmt.Sprint(keysAndValues...)
	return &c
}

func (s *onceSink) WithName(name string) logr.LogSink {
	c := *s
	c.sink = s.sink.WithName(name)
	if c.name != "" {
		c.name += "."
	}
	c.name += name
	return &c
}

func (s *onceSink) WithCallDepth(depth int) logr.LogSink {
	d, ok := s.sink.(logr.CallDepthLogSink)
	if !ok {
		return s
	}
	c := *s
	c.sink = d.WithCallDepth(depth)
	return &c
}
