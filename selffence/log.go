package selffence

import (
	"sync"

	"github.com/go-logr/logr"
)

// asyncLog writes a Guard's log lines from a goroutine of its own, so
// that no step of the protocol waits on the Logger: a sink that blocks (a
// full pipe to a log shim that stopped reading, a slow disk) must not
// delay a renewal, the watchdog's start or the stop at the deadline.
// Lines that find the queue full are dropped and counted; the next line
// written says how many. It is safe for concurrent use.
type asyncLog struct {
	logger logr.Logger
	queue  chan logLine

	mu       sync.Mutex // held only to start the writer or count a drop, never while writing
	draining bool
	dropped  int
}

type logLine struct {
	msg string
	kv  []any
}

// logQueue is how many lines wait for a slow Logger before lines are
// dropped: a standby logs once per renew interval.
const logQueue = 64

func newAsyncLog(logger logr.Logger) *asyncLog {
	return &asyncLog{logger: logger, queue: make(chan logLine, logQueue)}
}

// info queues a line, or drops it when the queue is full. It never
// blocks on the Logger.
func (l *asyncLog) info(msg string, kv ...any) {
	if l.logger.GetSink() == nil {
		return // the zero Logger discards
	}
	select {
	case l.queue <- logLine{msg: msg, kv: kv}:
	default:
		l.mu.Lock()
		l.dropped++
		l.mu.Unlock()
	}
	l.mu.Lock()
	start := !l.draining
	l.draining = true
	l.mu.Unlock()
	if start {
		go l.drain()
	}
}

// drain writes the queued lines until the queue is empty, then ends.
func (l *asyncLog) drain() {
	for {
		select {
		case line := <-l.queue:
			l.mu.Lock()
			dropped := l.dropped
			l.dropped = 0
			l.mu.Unlock()
			if dropped > 0 {
				l.logger.Info("log lines dropped: the Logger was too slow", "dropped", dropped)
			}
			l.logger.Info(line.msg, line.kv...)
		default:
			l.mu.Lock()
			if len(l.queue) > 0 {
				l.mu.Unlock()
				continue
			}
			l.draining = false
			l.mu.Unlock()
			return
		}
	}
}
