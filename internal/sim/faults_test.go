//go:build go1.25

package sim_test

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/podhealth/podhealth/internal/sim"
)

// Each fault a run injects does what its name says, as the history shows
// it, and a run with that fault alone keeps every promise. Each case runs
// the same fault on several seeds (which draw its target, the workload
// and the settings) and asks, of every seed, what the fault must have
// done; it also requires that one seed at least shows the fault at work,
// so that no case passes on runs where the fault found nothing to hit.
func TestEachFaultDoesWhatItSays(t *testing.T) {
	const at, lasts = 2 * time.Minute, 90 * time.Second
	end := at + lasts
	for _, tc := range []struct {
		name   string
		faults []sim.Fault
		// check asks its questions of one run's history, and reports
		// whether the fault hit something there.
		check func(t *testing.T, h *history) bool
	}{
		{
			name:   "a partition loses every request of its node's processes until it heals, and the node turns unreachable",
			faults: []sim.Fault{{Kind: "partition", At: at, Lasts: lasts}},
			check: func(t *testing.T, h *history) bool {
				n := h.must(t, at, `^fault: (node-\d) partitioned for 1m30s$`)[1]
				h.must(t, end, `^heal: `+n+` reconnected$`)
				lost := 0
				for _, e := range h.between(at+h.maxDelay+time.Millisecond, end) {
					if p := h.requester(e); p != "" && h.nodeAt(p, e.at) == n {
						if !strings.HasSuffix(e.text, ": lost (partitioned)") {
							t.Errorf("%s answered from a partitioned node: %s", e.at, e.text)
						}
						lost++
					}
				}
				h.unreachableWithinGrace(t, n, at)
				return lost > 0
			},
		},
		{
			name:   "a frozen node neither writes, nor starts, nor heartbeats until it thaws",
			faults: []sim.Fault{{Kind: "freeze-node", At: at, Lasts: lasts}},
			check: func(t *testing.T, h *history) bool {
				n := h.must(t, at, `^fault: (node-\d) frozen for 1m30s$`)[1]
				h.must(t, end, `^heal: `+n+` thawed$`)
				for _, e := range h.between(at+time.Millisecond, end) {
					if p := h.actor(e); p != "" && h.nodeAt(p, e.at) == n && (strings.Contains(e.text, ": writes ") || strings.Contains(e.text, ": started on ")) {
						t.Errorf("%s on frozen %s: %s", e.at, n, e.text)
					}
					if strings.HasPrefix(e.text, "kubelet "+n+":") {
						t.Errorf("%s the kubelet of frozen %s acted: %s", e.at, n, e.text)
					}
				}
				h.unreachableWithinGrace(t, n, at)
				return len(h.aliveOn(n, at)) > 0
			},
		},
		{
			name:   "a frozen process neither writes nor sends until it thaws",
			faults: []sim.Fault{{Kind: "freeze-process", At: at, Lasts: lasts}},
			check: func(t *testing.T, h *history) bool {
				m := h.find(at, `^fault: (\S+) frozen for 1m30s$`)
				if m == nil {
					return false // the holder's container had no process to freeze
				}
				p := m[1]
				thawed := h.find(end, `^heal: `+regexp.QuoteMeta(p)+` thawed$`) != nil
				killed := h.killedAfter(p, at)
				if !thawed && killed > end {
					t.Errorf("%s neither thawed at %s nor killed meanwhile", p, end)
				}
				for _, e := range h.between(at+h.maxDelay+time.Millisecond, min(end, killed)) {
					if h.requester(e) == p || strings.HasPrefix(e.text, p+": writes ") {
						t.Errorf("%s frozen %s: %s", e.at, p, e.text)
					}
				}
				return true
			},
		},
		{
			name:   "a power-off kills every process of its node at once, and nothing runs there until power returns",
			faults: []sim.Fault{{Kind: "power-off", At: at, Lasts: lasts}},
			check: func(t *testing.T, h *history) bool {
				n := h.must(t, at, `^fault: (node-\d) powered off for 1m30s$`)[1]
				h.must(t, end, `^heal: `+n+` powered on$`)
				alive := h.aliveOn(n, at)
				for _, p := range alive {
					if h.killedAfter(p, at) != at || h.find(at, `^`+regexp.QuoteMeta(p)+`: killed: its node lost power$`) == nil {
						t.Errorf("%s of %s was not killed by the power-off at %s", p, n, at)
					}
					for _, e := range h.between(at+time.Millisecond, h.nextStart(p, at)) {
						if strings.HasPrefix(e.text, p+": writes ") {
							t.Errorf("%s wrote after its node lost power: %s %s", p, e.at, e.text)
						}
					}
				}
				for _, e := range h.between(at+time.Millisecond, end) {
					if strings.HasPrefix(e.text, "kubelet "+n+":") || strings.HasSuffix(strings.SplitN(e.text, " (", 2)[0], "started on "+n) {
						t.Errorf("%s on %s without power: %s", e.at, n, e.text)
					}
				}
				return len(alive) > 0
			},
		},
		{
			name:   "a kubelet crash stops the kubelet, not the containers: they run on, and nothing is started, probed or stopped there",
			faults: []sim.Fault{{Kind: "kubelet-crash", At: at, Lasts: lasts}},
			check: func(t *testing.T, h *history) bool {
				n := h.must(t, at, `^fault: the kubelet of (node-\d) down for 1m30s$`)[1]
				h.must(t, end, `^heal: the kubelet of `+n+` back$`)
				ranOn := false
				for _, e := range h.between(at+time.Millisecond, end) {
					p := h.actor(e)
					if p == "" || h.nodeAt(p, e.at) != n {
						if strings.HasPrefix(e.text, "kubelet "+n+":") {
							t.Errorf("%s the crashed kubelet acted: %s", e.at, e.text)
						}
						continue
					}
					switch {
					case strings.Contains(e.text, ": started on "), strings.Contains(e.text, "killed: its liveness probe"), strings.Contains(e.text, "killed: the kubelet"):
						t.Errorf("%s the crashed kubelet of %s acted: %s", e.at, n, e.text)
					default:
						ranOn = true
					}
				}
				h.unreachableWithinGrace(t, n, at)
				return ranOn
			},
		},
		{
			name:   "an OOM kill ends one container's process, and the kubelet restarts that container after its backoff",
			faults: []sim.Fault{{Kind: "oom-kill", At: at}},
			check: func(t *testing.T, h *history) bool {
				m := h.find(at, `^(\S+)#(\d+): killed: OOM-killed$`)
				if m == nil {
					return false // nothing to kill: the holder's container was down or frozen
				}
				container, incarnation := m[1], m[2]
				n, _ := strconv.Atoi(incarnation)
				next := fmt.Sprintf("%s#%d", container, n+1)
				old := container + "#" + incarnation
				for _, e := range h.between(0, h.last) {
					if strings.HasPrefix(e.text, next+": started on ") {
						if e.at < at+10*time.Second {
							t.Errorf("%s restarted %s after the OOM kill: before the kubelet's first backoff of 10 s", next, e.at-at)
						}
						if h.nodeAt(next, e.at) != h.nodeAt(old, at) {
							t.Errorf("%s restarted on %s, its predecessor ran on %s", next, h.nodeAt(next, e.at), h.nodeAt(old, at))
						}
						return true
					}
				}
				t.Errorf("%s was never restarted after its OOM kill", container)
				return true
			},
		},
		{
			name: "log sinks that block hold no stop back: the partitioned holder is killed by its deadline",
			faults: []sim.Fault{
				{Kind: "block-logs", At: time.Minute},
				{Kind: "partition", At: at, Lasts: 3 * time.Minute},
			},
			check: func(t *testing.T, h *history) bool {
				h.must(t, time.Minute, `^fault: log sinks block$`)
				n := h.must(t, at, `^fault: (node-\d) partitioned for 3m0s$`)[1]
				holder := h.dataWriterAt(at)
				if holder == "" || h.nodeAt(holder, at) != n {
					return false // the partition missed the holder
				}
				// The oracle requires the holder stopped by its Lease's
				// expiry plus the deadline on its own clock; here, that
				// it was stopped at all while every log blocked.
				if k := h.killedAfter(holder, at); k > at+h.duration+h.deadline+h.margin {
					t.Errorf("the partitioned holder %s was not stopped by %s (killed at %s)", holder, at+h.duration+h.deadline+h.margin, k)
				}
				return true
			},
		},
		{
			name:   "a cleared holder is an outside edit that no candidate writes under before a whole wait",
			faults: []sim.Fault{{Kind: "clear-holder", At: at}},
			check:  leaseEdited("clear-holder", at, nil),
		},
		{
			name:   "a deleted Lease is an outside edit that no candidate writes under before a whole wait",
			faults: []sim.Fault{{Kind: "delete-lease", At: at}},
			check: leaseEdited("delete-lease", at, func(t *testing.T, h *history) {
				if !h.any(at, `^\S+ get lease db-primary: error NotFound$`) {
					t.Error("nobody read the Lease as gone")
				}
			}),
		},
		{
			name:   "a Lease taken by another identity is read so, and no candidate writes under it before a whole wait",
			faults: []sim.Fault{{Kind: "take-lease", At: at}},
			check: leaseEdited("take-lease", at, func(t *testing.T, h *history) {
				if !h.any(at, `^\S+ get lease db-primary: rv \d+ holder="intruder"`) {
					t.Error("nobody read the Lease naming the intruder")
				}
			}),
		},
		{
			name:   "an operator restart kills its process, whose requests stop, and a fresh one starts 5 s later",
			faults: []sim.Fault{{Kind: "restart-operator", At: at}},
			check: func(t *testing.T, h *history) bool {
				h.must(t, at, `^fault: the operator restarts$`)
				old := h.must(t, at, `^(operator#\d+): killed: restarted$`)[1]
				fresh := h.must(t, at+5*time.Second, `^(operator#\d+): started \(clock rate \d+ ppm\)$`)[1]
				if fresh == old {
					t.Errorf("the restarted operator is %s again", old)
				}
				for _, e := range h.between(at+h.maxDelay+time.Millisecond, h.last) {
					if strings.HasPrefix(e.text, old+" ") || strings.HasPrefix(e.text, old+":") {
						t.Errorf("%s the killed operator acted: %s", e.at, e.text)
					}
				}
				return true
			},
		},
		{
			name:   "a node lost for good never returns: unreachable, its pods evicted once their toleration runs out, and only the Lease's holder among them freed and recreated",
			faults: []sim.Fault{{Kind: "node-lost", At: at}},
			check: func(t *testing.T, h *history) bool {
				n := h.must(t, at, `^fault: (node-\d) lost for good$`)[1]
				pods := h.podsOn(n, at)
				for _, e := range h.between(at+time.Millisecond, h.last) {
					if strings.HasPrefix(e.text, "heal: "+n) || strings.HasPrefix(e.text, "kubelet "+n+":") || strings.HasSuffix(strings.SplitN(e.text, " (", 2)[0], "started on "+n) {
						t.Errorf("%s the lost %s came back: %s", e.at, n, e.text)
					}
				}
				unreachable := h.unreachableWithinGrace(t, n, at)
				holder, _, _ := strings.Cut(h.dataWriterAt(at), "/")
				for _, pod := range pods {
					e, ok := h.first(unreachable, `^taint-eviction: `+regexp.QuoteMeta(pod)+` deleted gracefully$`)
					if !ok || e.at > unreachable+300*time.Second+5*time.Second {
						t.Errorf("%s of the lost %s was not evicted when its toleration of 300 s ran out (%v)", pod, n, e)
					}
					name, _, _ := strings.Cut(pod, " ")
					freed, ok := h.first(at, `^operator: force delete of `+regexp.QuoteMeta(pod)+`;`)
					switch {
					case ok && name != holder:
						// Only the Lease proves a pod on a node left
						// NotReady stopped: the replica and a candidate
						// that did not hold it wait for node evidence.
						t.Errorf("%s freed %s, which did not hold the Lease: %s", freed.at, pod, freed.text)
					case ok && !h.any(freed.at, `^statefulset: created `+name+` \(\S+\) on node-\d$`):
						t.Errorf("%s freed at %s, never recreated", pod, freed.at)
					}
				}
				return len(pods) > 0
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hit := 0
			for seed := uint64(1); seed <= 4; seed++ {
				res := runSeed(t, seed, sim.Options{Faults: tc.faults})
				if len(res.Violations) > 0 || res.Outside != "" {
					t.Errorf("%s", res.Summary())
				}
				h := parseHistory(t, res.History)
				t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
					if tc.check(t, h) {
						hit++
					}
				})
			}
			if hit == 0 {
				t.Fatal("the fault hit nothing in any seed: the case shows nothing")
			}
		})
	}
}

// leaseEdited checks an outside edit of the Lease, kind, at at: then
// read, as also asks, and written under by no other candidate before a
// whole wait.
func leaseEdited(kind string, at time.Duration, also func(*testing.T, *history)) func(*testing.T, *history) bool {
	return func(t *testing.T, h *history) bool {
		if h.must(t, at, `^fault: `+kind+`(: no Lease| \(<nil>\))$`)[1] != " (<nil>)" {
			return false // no Lease to edit: the workload's Guard refused its settings
		}
		if also != nil {
			also(t, h)
		}
		return h.noNewWriterWithinAWait(t, at)
	}
}

// history is a run's history, parsed for the fault tests.
type history struct {
	events []event
	last   time.Duration
	// starts are each process name's starts, in order: a pod recreated
	// under its name starts its processes' names again.
	starts map[string][]start
	// the run's settings, from its first line.
	duration, deadline, margin, maxDelay time.Duration
}

type event struct {
	at   time.Duration
	text string
}

var (
	eventLine    = regexp.MustCompile(`^(\d+)\.(\d{3}) (.*)$`)
	startedLine  = regexp.MustCompile(`^(\S+): started on (node-\d) `)
	settingsLine = regexp.MustCompile(`^settings: mode \S+, duration (\S+), deadline (\S+), .* maxDelay:(\d+)\}$`)
	// requestLine is an answer, or a loss, of a process's request: "P
	// verb what: outcome".
	requestLine = regexp.MustCompile(`^(\S+) (get|create|update|delete|list|watch|patch) `)
	actorLine   = regexp.MustCompile(`^(\S+): `)
)

func parseHistory(t *testing.T, text string) *history {
	t.Helper()
	h := &history{starts: map[string][]start{}, margin: 2 * time.Second}
	for line := range strings.Lines(text) {
		m := eventLine.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
		if m == nil {
			t.Fatalf("history line %q has no time", line)
		}
		s, _ := strconv.Atoi(m[1])
		ms, _ := strconv.Atoi(m[2])
		e := event{at: time.Duration(s)*time.Second + time.Duration(ms)*time.Millisecond, text: m[3]}
		h.events, h.last = append(h.events, e), e.at
		if m := startedLine.FindStringSubmatch(e.text); m != nil {
			h.starts[m[1]] = append(h.starts[m[1]], start{at: e.at, node: m[2]})
		}
		if m := settingsLine.FindStringSubmatch(e.text); m != nil {
			var err error
			if h.duration, err = time.ParseDuration(m[1]); err == nil {
				h.deadline, err = time.ParseDuration(m[2])
			}
			ns, _ := strconv.ParseInt(m[3], 10, 64)
			h.maxDelay = time.Duration(ns)
			if err != nil {
				t.Fatalf("settings %q: %v", e.text, err)
			}
		}
	}
	if h.duration == 0 {
		t.Fatal("the history states no settings")
	}
	return h
}

// between are the events in [from, to).
func (h *history) between(from, to time.Duration) []event {
	var out []event
	for _, e := range h.events {
		if e.at >= from && e.at < to {
			out = append(out, e)
		}
	}
	return out
}

// find matches pattern against the events at exactly at.
func (h *history) find(at time.Duration, pattern string) []string {
	re := regexp.MustCompile(pattern)
	for _, e := range h.events {
		if e.at == at {
			if m := re.FindStringSubmatch(e.text); m != nil {
				return m
			}
		}
	}
	return nil
}

// must is find, failing the test when nothing matches.
func (h *history) must(t *testing.T, at time.Duration, pattern string) []string {
	t.Helper()
	m := h.find(at, pattern)
	if m == nil {
		t.Fatalf("no event at %s matches %q", at, pattern)
	}
	return m
}

// requester is the process whose request an event answers, if any.
func (h *history) requester(e event) string {
	if m := requestLine.FindStringSubmatch(e.text); m != nil {
		return m[1]
	}
	return ""
}

// actor is the process an event names first: its own line, or its
// request's answer.
func (h *history) actor(e event) string {
	if p := h.requester(e); p != "" {
		return p
	}
	if m := actorLine.FindStringSubmatch(e.text); m != nil {
		return m[1]
	}
	return ""
}

// start is a process's start: when, and on which node.
type start struct {
	at   time.Duration
	node string
}

// nodeAt is the node of the process named p that ran at t: its latest
// start by then.
func (h *history) nodeAt(p string, t time.Duration) string {
	node := ""
	for _, st := range h.starts[p] {
		if st.at <= t {
			node = st.node
		}
	}
	return node
}

// nextStart is when a process named p starts again after from; past the
// history's end if never.
func (h *history) nextStart(p string, from time.Duration) time.Duration {
	for _, st := range h.starts[p] {
		if st.at > from {
			return st.at
		}
	}
	return h.last + 1
}

// killedAfter is when the process named p that ran at from was killed;
// past the history's end if it never was.
func (h *history) killedAfter(p string, from time.Duration) time.Duration {
	for _, e := range h.between(from, h.nextStart(p, from)) {
		if strings.HasPrefix(e.text, p+": killed: ") {
			return e.at
		}
	}
	return h.last + 1
}

// aliveOn are the processes running on node at at: started there before
// it, and not killed since.
func (h *history) aliveOn(node string, at time.Duration) []string {
	var alive []string
	for _, p := range slices.Sorted(maps.Keys(h.starts)) {
		if st, ok := h.startBefore(p, at); ok && st.node == node && h.killedAfter(p, st.at) >= at {
			alive = append(alive, p)
		}
	}
	return alive
}

// startBefore is the latest start of a process named p before at.
func (h *history) startBefore(p string, at time.Duration) (start, bool) {
	var last start
	found := false
	for _, st := range h.starts[p] {
		if st.at < at {
			last, found = st, true
		}
	}
	return last, found
}

// podsOn are the pods, "name (uid)", that node's kubelet started before
// at and whose deletion it had not confirmed.
func (h *history) podsOn(node string, at time.Duration) []string {
	started := regexp.MustCompile(`^kubelet ` + node + `: starting (\S+ \(\S+\))$`)
	var pods []string
	for _, e := range h.between(0, at) {
		if m := started.FindStringSubmatch(e.text); m != nil {
			pods = append(pods, m[1])
		}
	}
	var out []string
	for _, pod := range pods {
		if h.findBefore(at, `^kubelet `+node+`: `+regexp.QuoteMeta(pod)+` .*(deletion confirmed|stopping it)`) == nil {
			out = append(out, pod)
		}
	}
	return out
}

// first is the first event from at on that matches pattern.
func (h *history) first(at time.Duration, pattern string) (event, bool) {
	re := regexp.MustCompile(pattern)
	for _, e := range h.between(at, h.last+1) {
		if re.MatchString(e.text) {
			return e, true
		}
	}
	return event{}, false
}

// any reports whether an event from at on matches pattern.
func (h *history) any(at time.Duration, pattern string) bool {
	_, ok := h.first(at, pattern)
	return ok
}

func (h *history) findBefore(at time.Duration, pattern string) []string {
	re := regexp.MustCompile(pattern)
	for _, e := range h.between(0, at) {
		if m := re.FindStringSubmatch(e.text); m != nil {
			return m
		}
	}
	return nil
}

// unreachableWithinGrace requires the node-lifecycle controller to mark
// node unreachable once its last heartbeat (up to 10 s before at) is 40 s
// old, at its next 5 s period, and returns when.
func (h *history) unreachableWithinGrace(t *testing.T, node string, at time.Duration) time.Duration {
	t.Helper()
	for _, e := range h.between(at, h.last+1) {
		if e.text == "node-lifecycle: "+node+" unreachable" {
			if e.at <= at+30*time.Second || e.at > at+45*time.Second {
				t.Errorf("%s marked unreachable %s after its fault, want within (30 s, 45 s]", node, e.at-at)
			}
			return e.at
		}
	}
	t.Errorf("%s never marked unreachable after its fault at %s", node, at)
	return h.last
}

// dataWriterAt is the last process to write the data before at.
func (h *history) dataWriterAt(at time.Duration) string {
	writer := ""
	for _, e := range h.between(0, at) {
		if p, ok := strings.CutSuffix(e.text, ": writes data"); ok {
			writer = p
		}
	}
	return writer
}

// noNewWriterWithinAWait requires that, after an outside edit of the
// Lease at at, no process but the one writing then writes the data
// before the edit is a wait old (the Lease's duration and deadline; the
// margin covers the clocks' rates); and reports whether a new writer
// wrote at all, later.
func (h *history) noNewWriterWithinAWait(t *testing.T, at time.Duration) bool {
	t.Helper()
	holder := h.dataWriterAt(at)
	for _, e := range h.between(at, h.last+1) {
		p, ok := strings.CutSuffix(e.text, ": writes data")
		if !ok || p == holder {
			continue
		}
		if e.at < at+h.duration+h.deadline {
			t.Errorf("%s wrote the data %s after the edit, within a wait (%s)", p, e.at-at, h.duration+h.deadline)
		}
		return true
	}
	return false
}
