package fencertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
)

// Case is one question to ask a fencer, and the proof it must answer.
type Case struct {
	// Name identifies the case in failures.
	Name string
	// Query is asked at Query.Now. Its Sightings is not used: the suite
	// gives each run of a case a record of its own.
	Query health.FenceQuery
	// Earlier are times, before Query.Now, at which the same query is
	// asked first, on the same record: the checks a Checker would have
	// made before.
	Earlier []time.Time
	// Want is the proof the fencer must give at Query.Now; NoProof means
	// that it must not prove anything.
	Want health.Proof
}

// farAhead is how far ahead the clock runs in the time-alone check.
const farAhead = 1000 * time.Hour

// concurrentRounds is how many times each case is asked at once.
const concurrentRounds = 4

// TestFencer checks that f honours the Fencer contract and answers each
// case as it says. It returns nil on success, or an error joining every
// failure found. Run it under the race detector: it asks concurrently.
func TestFencer(f health.Fencer, cases ...Case) error {
	if f == nil {
		return errors.New("fencertest: nil Fencer")
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	name, err := call(func() string { return f.Name() })
	switch {
	case err != nil:
		return fmt.Errorf("fencertest: asking the fencer its name: %w", err)
	case name == "":
		fail("Name is empty")
	}

	ctx := context.Background()
	sequential := make([]health.Proof, len(cases))
	for i, c := range cases {
		label := fmt.Sprintf("case %d (%s)", i, c.Name)
		pod, node := copyPod(c.Query.Pod), copyNode(c.Query.Node)
		rec := newRecord()
		got, err := replay(ctx, f, c, rec)
		if err != nil {
			fail("%s: %w", label, err)
			continue
		}
		sequential[i] = got.Proves
		if got.Proves != c.Want {
			fail("%s: proves %v, want %v (detail %q)", label, got.Proves, c.Want, got.Detail)
		}
		if err := wellFormed(got); err != nil {
			fail("%s: %w", label, err)
		}
		if again, err := ask(ctx, f, c.Query, c.Query.Now, rec); err != nil {
			fail("%s, asked again: %w", label, err)
		} else if again.Proves != got.Proves {
			fail("%s: asked again at the same time on the same record, proves %v, then %v", label, got.Proves, again.Proves)
		}
		if diff := cmp.Diff(pod, c.Query.Pod); diff != "" {
			fail("%s: the query's pod was mutated (-before +after):\n%s", label, diff)
		}
		if diff := cmp.Diff(node, c.Query.Node); diff != "" {
			fail("%s: the query's node was mutated (-before +after):\n%s", label, diff)
		}

		fresh, err := ask(ctx, f, c.Query, c.Query.Now, newRecord())
		if err != nil {
			fail("%s, on a fresh record: %w", label, err)
			continue
		}
		ahead, err := ask(ctx, f, c.Query, c.Query.Now.Add(farAhead), newRecord())
		switch {
		case err != nil:
			fail("%s, with the clock %v ahead on a fresh record: %w", label, farAhead, err)
		case ahead.Proves != health.NoProof && fresh.Proves == health.NoProof:
			fail("%s: time alone proves: on a fresh record the fencer proves nothing at the case's time, but %v with the clock %v ahead", label, ahead.Proves, farAhead)
		}

		noPod := c.Query
		noPod.Pod = nil
		if got, err := ask(ctx, f, noPod, c.Query.Now, newRecord()); err == nil && got.Proves != health.NoProof {
			fail("%s: a nil pod proves %v", label, got.Proves)
		} else if errors.Is(err, errPanicked) {
			fail("%s, with a nil pod: %w", label, err)
		}

		done, cancel := context.WithCancel(ctx)
		cancel()
		if got, err := replay(done, f, c, newRecord()); err != nil && !errors.Is(err, context.Canceled) {
			fail("%s: with a canceled context: got error %v, want the same answer or one wrapping context.Canceled", label, err)
		} else if err == nil && got.Proves != sequential[i] {
			fail("%s: with a canceled context, proves %v, not %v", label, got.Proves, sequential[i])
		}
	}

	if len(errs) > 0 {
		// A fencer that fails alone (one that mutates its query, say)
		// would only race with itself when asked concurrently.
		return errors.Join(errs...)
	}
	return errors.Join(concurrently(ctx, f, cases, sequential)...)
}

// concurrently asks every case concurrentRounds times at once, each on a
// record of its own, and compares the answers with the sequential ones.
func concurrently(ctx context.Context, f health.Fencer, cases []Case, want []health.Proof) []error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for round := range concurrentRounds {
		for i, c := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := replay(ctx, f, c, newRecord())
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs = append(errs, fmt.Errorf("case %d (%s), concurrent round %d: %w", i, c.Name, round, err))
				case got.Proves != want[i]:
					errs = append(errs, fmt.Errorf("case %d (%s), concurrent round %d: proves %v, not %v as asked alone", i, c.Name, round, got.Proves, want[i]))
				}
			}()
		}
	}
	wg.Wait()
	return errs
}

// replay asks the case's query at each of its Earlier times, then at its
// own, on rec, and returns the last answer.
func replay(ctx context.Context, f health.Fencer, c Case, rec *Record) (health.Fence, error) {
	for _, at := range c.Earlier {
		if !at.Before(c.Query.Now) {
			return health.Fence{}, fmt.Errorf("case time %v of Earlier is not before the query's %v", at, c.Query.Now)
		}
		if _, err := ask(ctx, f, c.Query, at, rec); err != nil {
			return health.Fence{}, fmt.Errorf("asked at the earlier %v: %w", at, err)
		}
	}
	return ask(ctx, f, c.Query, c.Query.Now, rec)
}

var errPanicked = errors.New("fencertest: the fencer panicked")

// ask asks f about q at now, on rec.
func ask(ctx context.Context, f health.Fencer, q health.FenceQuery, now time.Time, rec *Record) (fence health.Fence, err error) {
	q.Now = now
	q.Sightings = rec.At(now)
	defer func() {
		if p := recover(); p != nil {
			fence, err = health.Fence{}, fmt.Errorf("%w: %v", errPanicked, p)
		}
	}()
	return f.Fence(ctx, q)
}

func call[T any](fn func() T) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errPanicked, p)
		}
	}()
	return fn(), nil
}

// wellFormed checks an answer given without an error.
func wellFormed(f health.Fence) error {
	var errs []error
	switch f.Proves {
	case health.NoProof:
	case health.PodStopped, health.NodeStopped:
		if f.By == "" {
			errs = append(errs, fmt.Errorf("proves %v but says by whom (By) nowhere", f.Proves))
		}
	default:
		errs = append(errs, fmt.Errorf("proves %v, which the Fencer contract does not define", f.Proves))
	}
	if f.RetryAfter < 0 {
		errs = append(errs, fmt.Errorf("negative RetryAfter %v", f.RetryAfter))
	}
	return errors.Join(errs...)
}

func copyPod(p *corev1.Pod) *corev1.Pod {
	if p == nil {
		return nil
	}
	return p.DeepCopy()
}

func copyNode(n *corev1.Node) *corev1.Node {
	if n == nil {
		return nil
	}
	return n.DeepCopy()
}

// Record is an in-memory record of first sightings, as a Checker's Memory
// keeps them for one fencer, for a test that asks a fencer itself. It is
// safe for concurrent use.
type Record struct {
	mu    sync.Mutex
	first map[string]time.Time
}

// NewRecord returns an empty Record.
func NewRecord() *Record { return &Record{first: make(map[string]time.Time)} }

func newRecord() *Record { return NewRecord() }

// At returns the Sightings of a question asked at now: a key first seen
// now is recorded at now.
func (r *Record) At(now time.Time) health.Sightings { return sightingsAt{r, now} }

type sightingsAt struct {
	r   *Record
	now time.Time
}

func (s sightingsAt) FirstSeen(key string) time.Time {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if t, ok := s.r.first[key]; ok {
		return t
	}
	s.r.first[key] = s.now
	return s.now
}

func (s sightingsAt) Forget(key string) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	delete(s.r.first, key)
}

var _ health.Sightings = sightingsAt{}
