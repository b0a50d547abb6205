//go:build go1.25

package sim

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// process is one simulated process: its own clock, and whether it runs,
// is frozen (its clock runs on; what it waits for is held until it
// thaws) or has died.
type process struct {
	w    *world
	id   int
	name string
	// rate is the process's clock rate in parts per million of true
	// time; offset is its clock's reading at the run's start.
	rate   uint64
	offset time.Duration

	frozen bool
	dead   bool
	// held are the wakeups that came while the process was frozen, in
	// order; they happen when it thaws.
	held []func()
	// onDeath run when the process dies (its writes end).
	onDeath []func()
	// continuous: the process writes without asking between writes (a
	// blind workload once its gate opened, a replica); thawed: it was
	// frozen since it started writing so. Its writes from then on are in
	// the window: a frozen writer resumes mid-write.
	continuous, thawed bool
	// frozenAt is when it was last frozen; renewedAt the true time at
	// which its last successful write of the Lease was sent.
	frozenAt, renewedAt time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	// stopped is closed when the process dies.
	stopped chan struct{}
}

func (w *world) newProcess(id int, name string, rate uint64, offset time.Duration) *process {
	p := &process{w: w, id: id, name: name, rate: rate, offset: offset, stopped: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// wake runs fn now, or when the process thaws; never if it died.
func (p *process) wake(fn func()) {
	switch {
	case p.dead:
	case p.frozen:
		p.held = append(p.held, fn)
	default:
		fn()
	}
}

func (p *process) freeze() {
	if !p.dead {
		p.frozen, p.frozenAt = true, p.w.now
	}
}

// thaw resumes the process: what it waited for while frozen happens now,
// in an order drawn from the seed (which of a write in flight and a
// timer's firing comes first is a race in a real process).
func (p *process) thaw() {
	if !p.frozen {
		return
	}
	p.frozen = false
	p.thawed = p.thawed || p.continuous
	held := p.held
	p.held = nil
	p.w.rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
	for _, fn := range held {
		if p.dead {
			return
		}
		fn()
		p.w.settle()
	}
}

// die kills the process: it never runs again.
func (p *process) die() {
	if p.dead {
		return
	}
	p.dead, p.frozen, p.held = true, false, nil
	close(p.stopped)
	for _, fn := range p.onDeath {
		fn()
	}
	p.onDeath = nil
}

// localNow is the process's clock now.
func (p *process) localNow() time.Duration { return p.offset + local(p.w.now, p.rate) }

// clock is a process's clock, as the code under test sees it.
type procClock struct{ p *process }

var _ clock.WithTicker = procClock{}

func (c procClock) Now() time.Time                  { return origin.Add(c.p.localNow()) }
func (c procClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c procClock) After(d time.Duration) <-chan time.Time {
	return c.NewTimer(d).C()
}
func (c procClock) Sleep(d time.Duration) { <-c.After(d) }

// Tick and NewTicker: the code under test uses no ticker; a simulation of
// one would be untested.
func (c procClock) Tick(time.Duration) <-chan time.Time {
	panic(fmt.Sprintf("sim: process %s asked for a ticker, which the simulation does not have", c.p.name))
}
func (c procClock) NewTicker(time.Duration) clock.Ticker {
	panic(fmt.Sprintf("sim: process %s asked for a ticker, which the simulation does not have", c.p.name))
}

func (c procClock) NewTimer(d time.Duration) clock.Timer {
	t := &timer{p: c.p, ch: make(chan time.Time, 1)}
	t.arm(d)
	return t
}

// timer is a timer of a process's clock. Its fields are guarded by the
// world's mu: the code under test stops it from its goroutines.
type timer struct {
	p       *process
	ch      chan time.Time
	due     time.Duration // on the process's clock
	pending bool
	gen     int // which arming the world schedules
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) arm(d time.Duration) {
	w := t.p.w
	w.mu.Lock()
	t.gen++
	t.due = t.p.localNow() + d
	t.pending = true
	w.mu.Unlock()
	if d <= 0 {
		t.fire()
		return
	}
	w.hand(&timerWait{t: t, gen: t.gen})
}

func (t *timer) Stop() bool {
	w := t.p.w
	w.mu.Lock()
	defer w.mu.Unlock()
	was := t.pending
	t.pending = false
	return was
}

func (t *timer) Reset(d time.Duration) bool {
	was := t.Stop()
	t.arm(d)
	return was
}

// fire sends the process's time on the timer's channel, if it is still
// armed.
func (t *timer) fire() {
	w := t.p.w
	w.mu.Lock()
	ok := t.pending
	t.pending = false
	w.mu.Unlock()
	if ok {
		select {
		case t.ch <- origin.Add(t.p.localNow()):
		default:
		}
	}
}

// timerWait is one arming of a timer, handed to the world.
type timerWait struct {
	t   *timer
	gen int
}

func (tw *timerWait) owner() *process { return tw.t.p }
func (tw *timerWait) key() string     { return fmt.Sprintf("timer %020d", tw.t.due) }
func (tw *timerWait) schedule(w *world) {
	p := tw.t.p
	w.after(scale(tw.t.due-p.localNow(), p.rate), func() {
		// A process that is frozen gets it when it thaws; one that died
		// never does, and teardown ends the wait.
		p.wake(func() {
			w.ended(tw)
			tw.fire()
		})
	})
}
func (tw *timerWait) abort(*world) { tw.fire() }

func (tw *timerWait) fire() {
	w := tw.t.p.w
	w.mu.Lock()
	current := tw.gen == tw.t.gen
	w.mu.Unlock()
	if current {
		tw.t.fire()
	}
}
