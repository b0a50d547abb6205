//go:build go1.25

package sim

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/internal/sidecar"
	"github.com/podhealth/podhealth/selffence"
)

// write is one write of a process to a resource: the primary's data,
// which only the Lease's holder may write, or a replica's own volume.
type write struct {
	proc     *process
	pod      string
	resource string
	start    time.Duration
	end      time.Duration // -1 while in flight
	// frozen: the process was frozen while the write was in flight, the
	// window that docs/safety.md names.
	frozen bool
}

// action is a wait of the code under test on the world itself: a kill,
// asked from a goroutine of the code under test, happens in the world's
// goroutine.
type action struct {
	p    *process
	name string
	fn   func()
	done chan struct{}
	over bool
}

func (a *action) owner() *process { return a.p }
func (a *action) key() string     { return "action " + a.name }
func (a *action) schedule(w *world) {
	w.after(0, func() {
		w.ended(a)
		a.fn()
		a.finish()
	})
}
func (a *action) abort(*world) { a.finish() }
func (a *action) finish() {
	if !a.over {
		a.over = true
		close(a.done)
	}
}

// do runs fn in the world's goroutine, for p, and waits until it ran.
func (w *world) do(p *process, name string, fn func()) {
	a := &action{p: p, name: name, fn: fn, done: make(chan struct{})}
	w.hand(a)
	<-a.done
}

// startPod is the kubelet's start of a pod it learned of: its containers
// by the run's mode.
func (w *world) startPod(n *node, pod *corev1.Pod) *podRun {
	ordinal := 0
	fmt.Sscanf(pod.Name, setName+"-%d", &ordinal) //nolint:errcheck // the StatefulSet's own names
	run := &podRun{pod: pod, node: n, ordinal: ordinal, answer: &atomic.Value{}, live: &atomic.Value{}}
	switch {
	case ordinal == replicaOrdinal:
		run.containers = []*container{{name: "db", kind: replica}}
	case w.mode == guardWriter:
		run.containers = []*container{{name: "db", kind: guardWriter}}
	default:
		run.sidecar = &container{name: "fence", kind: sidecarKind}
		run.containers = []*container{run.sidecar, {name: "db", kind: w.mode}}
	}
	n.known[string(pod.UID)] = run
	w.logf("kubelet %s: starting %s (%s)", n.name, pod.Name, pod.UID)
	// A sidecar is a restartable init container: the kubelet starts the
	// workload once it has started.
	for i, c := range run.containers {
		if i == 0 {
			w.startContainer(run, c)
			continue
		}
		c.startAt = w.now + time.Second
	}
	return run
}

// startContainer starts a container's process.
func (w *world) startContainer(run *podRun, c *container) {
	w.procSeq++
	p := w.newProcess(w.procSeq, fmt.Sprintf("%s/%s#%d", run.pod.Name, c.name, c.restarts), w.drawRate(), w.drawOffset())
	w.procs = append(w.procs, p)
	w.nodeOf[p] = run.node
	c.proc, c.started, c.startedUp = p, w.now, false
	c.guard.Store(nil)
	p.onDeath = append(p.onDeath, func() { w.endOpen(p) }, func() { w.died(c) })
	w.logf("%s: started on %s (clock rate %d ppm)", p.name, run.node.name, p.rate)
	switch c.kind {
	case guardWriter:
		guard, err := selffence.New(client{w: w, p: p}, w.guardOptions(p, run.pod))
		if err != nil {
			// The process exits, as a workload whose Guard is refused
			// does; the kubelet restarts it.
			w.kill(p, "exited: "+err.Error())
			return
		}
		c.guard.Store(guard)
		go guard.Run(p.ctx) //nolint:errcheck // its end is the process's
		c.canWrite = func() bool { return w.ignoresGuard || guard.MayWrite() }
		w.writeLoop(p, run.pod.Name, "data", w.askEvery, w.writeTakes, c.canWrite)
	case sidecarKind:
		c.canWrite = nil
		w.runSidecar(run, c, p)
	case asker:
		c.canWrite = func() bool { return w.ignoresGuard || run.mayWrite() }
		w.writeLoop(p, run.pod.Name, "data", w.askEvery, w.writeTakes, c.canWrite)
	case blind:
		var open bool
		c.canWrite = func() bool { return open || w.ignoresGuard || run.mayWrite() }
		w.writeLoop(p, run.pod.Name, "data", time.Second, time.Second, func() bool {
			open = c.canWrite()
			p.continuous = open
			if open && !w.ignoresGuard && run.sidecarAway() && !run.node.kubeletUp {
				// Neither the sidecar nor the workload's liveness probe
				// can stop it: outside what docs/safety.md promises. (A
				// sidecar that answers false but runs still stops it at
				// the deadline.)
				w.outside = "the sidecar and the kubelet were down together"
			}
			return open
		})
	case replica:
		p.continuous = true
		c.canWrite = func() bool { return true }
		w.writeLoop(p, run.pod.Name, fmt.Sprintf("volume-%d", run.ordinal), time.Second, time.Second, c.canWrite)
	}
}

// sidecarAnswer is the sidecar's answer held in v (to GET /may-write or
// GET /live), or nil while nothing answers: the sidecar dead, frozen or
// not serving.
func (run *podRun) sidecarAnswer(v *atomic.Value) func() bool {
	sc := run.sidecar
	if sc == nil || sc.proc == nil || sc.proc.dead || sc.proc.frozen {
		return nil
	}
	f, _ := v.Load().(func() bool)
	return f
}

// mayWrite is the sidecar's answer, as the workload reads it: false while
// nothing answers.
func (run *podRun) mayWrite() bool {
	f := run.sidecarAnswer(run.answer)
	return f != nil && f()
}

// sidecarAway reports whether the pod's sidecar answers nothing.
func (run *podRun) sidecarAway() bool { return run.sidecarAnswer(run.answer) == nil }

// alive is the sidecar's answer to the workload's liveness probe, GET
// /live: false while nothing answers.
func (run *podRun) alive() bool {
	f := run.sidecarAnswer(run.live)
	return f != nil && f()
}

// runSidecar runs the sidecar's logic in p, over the pod's processes.
func (w *world) runSidecar(run *podRun, c *container, p *process) {
	others := func() {
		for _, c := range run.containers {
			if c.proc != nil && c.proc != p {
				w.kill(c.proc, "the sidecar "+p.name+" stopped the pod's other processes")
			}
		}
	}
	hooks := sidecar.Hooks{
		Start: func() error { w.do(p, "start", others); return nil },
		Stop: func() {
			w.do(p, "stop", func() {
				others()
				w.kill(p, "the sidecar's deadline")
			})
		},
		Serve: func(g *selffence.Guard) (func(), error) {
			answer := g.MayWrite
			run.answer.Store(answer)
			run.live.Store(func() bool { return sidecar.Live(g) })
			c.guard.Store(g)
			return func() {
				run.answer.Store((func() bool)(nil))
				run.live.Store((func() bool)(nil))
			}, nil
		},
		Stopped: p.stopped,
	}
	go func() {
		err := sidecar.Run(p.ctx, client{w: w, p: p}, w.guardOptions(p, run.pod), hooks)
		// The command exits when Run returns, with its error.
		w.do(p, "exit", func() {
			if !p.dead {
				w.kill(p, fmt.Sprintf("exited: %v", err))
			}
		})
	}()
}

// guardOptions are the run's protocol settings for a process of pod.
func (w *world) guardOptions(p *process, pod *corev1.Pod) selffence.Options {
	o := w.protocol
	o.Namespace, o.Lease, o.Identity, o.PodUID = namespace, primaryLease, pod.Name, pod.UID
	if w.workloadMargin != 0 {
		o.Margin = w.workloadMargin
	}
	o.Clock = procClock{p}
	o.Exit = func() { w.do(p, "exit", func() { w.kill(p, "its Guard's deadline") }) }
	o.Logger = logr.New(&logSink{w: w})
	return o
}

// writeLoop makes p write to resource every `every` on its clock while
// may says so, each write taking `takes` (true time).
func (w *world) writeLoop(p *process, pod, resource string, every, takes time.Duration, may func() bool) {
	var tick func()
	tick = func() {
		p.wake(func() {
			if may() {
				w.startWrite(p, pod, resource, takes)
			}
			w.after(scale(every, p.rate), tick)
		})
	}
	w.after(scale(every, p.rate), tick)
}

func (w *world) startWrite(p *process, pod, resource string, takes time.Duration) {
	wr := &write{proc: p, pod: pod, resource: resource, start: w.now, end: -1, frozen: p.thawed}
	w.logf("%s: writes %s", p.name, resource)
	w.writes = append(w.writes, wr)
	w.open[p] = append(w.open[p], wr)
	w.after(takes, func() { p.wake(func() { w.endWrite(wr) }) })
}

// endOpen ends p's writes in flight: it died.
func (w *world) endOpen(p *process) {
	for _, wr := range append([]*write(nil), w.open[p]...) {
		w.endWrite(wr)
	}
}

func (w *world) endWrite(wr *write) {
	if wr.end >= 0 {
		return
	}
	wr.end = w.now
	open := w.open[wr.proc]
	for i, o := range open {
		if o == wr {
			w.open[wr.proc] = append(open[:i:i], open[i+1:]...)
			break
		}
	}
}

// logSink is the Guard's log: it discards, or, once the run's log sink
// blocks, blocks until the run is over.
type logSink struct{ w *world }

func (s *logSink) Init(logr.RuntimeInfo)          {}
func (s *logSink) Enabled(int) bool               { return true }
func (s *logSink) Error(error, string, ...any)    { s.block() }
func (s *logSink) Info(int, string, ...any)       { s.block() }
func (s *logSink) WithValues(...any) logr.LogSink { return s }
func (s *logSink) WithName(string) logr.LogSink   { return s }
func (s *logSink) block() {
	if s.w.logsBlock.Load() {
		<-s.w.unblockLogs
	}
}
