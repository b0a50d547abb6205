//go:build go1.25

package sim

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing/synctest"
	"time"
)

// origin is the true time at which every run starts.
var origin = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// event is one step of a run, at a true time since the run's start.
type event struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// world is one run: its time, its queue of events, its random source and
// what the code under test waits for.
type world struct {
	seed uint64
	// The seed's random streams: settings draws the run's settings,
	// faults its faults, rng everything that happens as it runs. Apart,
	// a draw added to one changes none of the others; add new draws at
	// the end of a stream, or every saved seed replays another run.
	settings, faults, rng *rand.Rand
	now                   time.Duration
	seq                   uint64
	queue                 eventQueue
	hist                  strings.Builder
	steps                 int

	// mu guards what goroutines of the code under test hand to the
	// world while they run: the timers and requests they wait on.
	mu      sync.Mutex
	waiting []waiter

	// outstanding are the waits scheduled and not yet ended: teardown
	// ends them. Only the world's goroutine touches it.
	outstanding map[waiter]struct{}

	runState

	// tearingDown: the run is over; every wait ends at once.
	tearingDown bool
}

// waiter is a wait of the code under test that the world ends: a timer
// of a process's clock, or a request to the API server.
type waiter interface {
	// owner is the process that waits.
	owner() *process
	// key orders the waiters handed over in one step, so that the order
	// in which goroutines ran does not matter.
	key() string
	// schedule puts the waiter's end in the world's queue.
	schedule(w *world)
	// abort ends the wait at once, at teardown.
	abort(w *world)
}

func newWorld(seed uint64) *world {
	stream := func(n uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, n*0x9e3779b97f4a7c15)) }
	return &world{seed: seed, settings: stream(1), faults: stream(2), rng: stream(3), outstanding: map[waiter]struct{}{}}
}

// at schedules fn at true time t (not before now).
func (w *world) at(t time.Duration, fn func()) {
	if t < w.now {
		t = w.now
	}
	w.seq++
	heap.Push(&w.queue, &event{at: t, seq: w.seq, fn: fn})
}

// after schedules fn d after now.
func (w *world) after(d time.Duration, fn func()) { w.at(w.now+d, fn) }

// logf appends a line to the history.
func (w *world) logf(format string, args ...any) {
	ms := w.now.Milliseconds()
	fmt.Fprintf(&w.hist, "%d.%03d ", ms/1000, ms%1000)
	fmt.Fprintf(&w.hist, format, args...)
	w.hist.WriteByte('\n')
}

// hand is called by the code under test, from any goroutine, to hand
// over a wait.
func (w *world) hand(wt waiter) {
	w.mu.Lock()
	done := w.tearingDown
	if !done {
		w.waiting = append(w.waiting, wt)
	}
	w.mu.Unlock()
	if done {
		wt.abort(w)
	}
}

// settle lets every goroutine of the bubble run until it waits, then
// schedules what they wait for, in the order of their keys.
func (w *world) settle() {
	for {
		synctest.Wait()
		w.mu.Lock()
		handed := w.waiting
		w.waiting = nil
		w.mu.Unlock()
		if len(handed) == 0 {
			return
		}
		sort.SliceStable(handed, func(i, j int) bool {
			a, b := handed[i], handed[j]
			if a.owner().id != b.owner().id {
				return a.owner().id < b.owner().id
			}
			if a.key() != b.key() {
				return a.key() < b.key()
			}
			// Alike requests of one process with different deadlines go
			// in the deadlines' order, not in the order their goroutines
			// ran; alike ones with one deadline are twins (below).
			ra, okA := a.(*request)
			rb, okB := b.(*request)
			return okA && okB && ra.timeout < rb.timeout
		})
		var lead *request
		for _, wt := range handed {
			// Requests alike from one process in one step (concurrent
			// reads of one Lease by a check's fencers) go and come back
			// together, with the first: which goroutine sent which does
			// not matter then.
			if r, ok := wt.(*request); ok {
				if lead != nil && lead.p == r.p && lead.key() == r.key() && lead.timeout == r.timeout {
					lead.twins = append(lead.twins, r)
					w.remember(wt)
					continue
				}
				lead = r
			} else {
				lead = nil
			}
			w.remember(wt)
			wt.schedule(w)
		}
	}
}

// remember records a wait scheduled, for teardown to end.
func (w *world) remember(wt waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.outstanding[wt] = struct{}{}
}

// ended forgets a wait that has ended.
// At teardown, goroutines of the code under test end their own waits:
// the world's mu guards the map then.
func (w *world) ended(wt waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.tearingDown {
		delete(w.outstanding, wt)
	}
}

// over reports whether the run is over (teardown has begun).
func (w *world) over() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tearingDown
}

// run steps through the queue until the true time end.
func (w *world) run(end time.Duration) {
	w.settle()
	for w.queue.Len() > 0 {
		e := heap.Pop(&w.queue).(*event)
		if e.at > end {
			heap.Push(&w.queue, e)
			break
		}
		w.now = e.at
		w.steps++
		e.fn()
		w.settle()
	}
	w.now = end
}

// teardown ends every wait of the code under test and lets its
// goroutines return: the bubble must end with none. The history is
// complete before it starts.
func (w *world) teardown(procs []*process) {
	w.mu.Lock()
	w.tearingDown = true
	waits := w.waiting
	for wt := range w.outstanding {
		waits = append(waits, wt)
	}
	w.waiting, w.outstanding = nil, nil
	w.mu.Unlock()
	w.queue = nil
	for _, p := range procs {
		p.cancel()
		p.die()
	}
	for _, wt := range waits {
		wt.abort(w)
	}
	synctest.Wait()
}

// scale converts d on a clock that runs at rate (parts per million of
// true time, 1e6 the true rate) to true time, rounded up: a timer never
// fires early on its own clock.
func scale(d time.Duration, rate uint64) time.Duration {
	if d <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(d), 1e6)
	q, r := bits.Div64(hi, lo, rate)
	if r > 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(q)
}

// local converts a true duration to a clock that runs at rate.
func local(d time.Duration, rate uint64) time.Duration {
	hi, lo := bits.Mul64(uint64(d), rate)
	q, _ := bits.Div64(hi, lo, 1e6)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(q)
}

// contextTimeout is how long, on the caller's clock, ctx gives a request:
// the bubble's time does not move, so a deadline is as far off as when it
// was set. Zero means none.
func contextTimeout(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	if d := time.Until(dl); d > 0 {
		return d
	}
	return time.Nanosecond
}
