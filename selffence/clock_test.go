package selffence_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
)

// fakeClock is a clock that moves only when told to, and counts the
// timers waiting on it, so that a test steps it only once the Guard's
// goroutines wait where the test expects them to.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeTimer
}

var _ clock.WithTicker = (*fakeClock)(nil)

type fakeTimer struct {
	c  *fakeClock
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *fakeClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.waiters = append(c.waiters, t)
	return t
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// Step moves the clock by d, firing the timers due.
func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	waiting := c.waiters[:0]
	for _, t := range c.waiters {
		if t.at.After(c.now) {
			waiting = append(waiting, t)
			continue
		}
		t.ch <- c.now
	}
	c.waiters = waiting
}

// Waiters is how many timers wait.
func (c *fakeClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

func (c *fakeClock) Sleep(time.Duration)                         { panic("unused") }
func (c *fakeClock) Tick(time.Duration) <-chan time.Time         { panic("unused") }
func (c *fakeClock) NewTicker(time.Duration) clock.Ticker        { panic("unused") }
func (c *fakeClock) AfterFunc(time.Duration, func()) clock.Timer { panic("unused") }

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, w := range t.c.waiters {
		if w == t {
			t.c.waiters = append(t.c.waiters[:i], t.c.waiters[i+1:]...)
			return true
		}
	}
	return false
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	stopped := t.Stop()
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.at = t.c.now.Add(d)
	t.c.waiters = append(t.c.waiters, t)
	return stopped
}

// awaitWaiters waits until n timers wait on c.
func awaitWaiters(t *testing.T, c *fakeClock, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return c.Waiters() == n }, 5*time.Second, time.Millisecond, "want %d timers waiting", n)
}
