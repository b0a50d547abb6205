package replacements

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/health"
)

// DefaultTTL is how long a created pod is remembered when no list contains
// it: the expectation timeout of Kubernetes' own controllers.
const DefaultTTL = 5 * time.Minute

// Options configure a Tracker. The zero value is the documented default.
type Options struct {
	// Clock measures the TTL; nil means the real clock.
	Clock clock.PassiveClock
	// TTL is how long a created pod is remembered without a list that
	// contains it; zero or negative means DefaultTTL.
	TTL time.Duration
}

// Tracker remembers, per workload, the pods an operator created until a
// list of the workload's pods contains them or they expire. The zero value
// is ready to use, as New(Options{}). A Tracker is safe for concurrent use;
// it must not be copied after first use.
type Tracker struct {
	clock clock.PassiveClock // nil: the real clock
	ttl   time.Duration      // zero: DefaultTTL

	mu      sync.Mutex
	created map[string][]expectation // by workload; never an empty slice; nil until the first Created
}

// expectation is one created pod that no list has contained yet.
type expectation struct {
	uid       types.UID
	namespace string
	name      string
	at        time.Time
}

// matches reports whether pod is the pod e remembers: by UID when e has
// one, else by namespace and name. An expectation with neither matches no
// pod and ends only when it expires.
func (e expectation) matches(pod *corev1.Pod) bool {
	if e.uid != "" {
		return pod.UID == e.uid
	}
	return e.name != "" && pod.Name == e.name && pod.Namespace == e.namespace
}

// New returns a Tracker that remembers nothing yet.
func New(opts Options) *Tracker {
	if opts.TTL < 0 {
		opts.TTL = 0
	}
	return &Tracker{clock: opts.Clock, ttl: opts.TTL}
}

func (t *Tracker) now() time.Time {
	if t.clock == nil {
		return time.Now()
	}
	return t.clock.Now()
}

// expiry returns when an expectation created at expires.
func (t *Tracker) expiry(at time.Time) time.Time {
	if t.ttl == 0 {
		return at.Add(DefaultTTL)
	}
	return at.Add(t.ttl)
}

// Created records that pod was created for workload. Call it after each
// successful Create, with the object the API server returned (it carries the
// name chosen for a generateName and the UID). The Tracker keeps only the
// pod's UID, namespace and name, never the object. Creating the same UID
// twice is remembered once, from the first call.
func (t *Tracker) Created(workload string, pod *corev1.Pod) {
	var e expectation
	if pod != nil {
		e = expectation{uid: pod.UID, namespace: pod.Namespace, name: pod.Name}
	}
	e.at = t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.created == nil {
		t.created = map[string][]expectation{}
	}
	if e.uid != "" {
		for _, x := range t.created[workload] {
			if x.uid == e.uid {
				return
			}
		}
	}
	t.created[workload] = append(t.created[workload], e)
}

// Pending forgets every pod remembered for workload that listed contains
// (by UID) or that has expired, and returns how many remain: created, and
// not yet in the list. Above zero, do not create another pod yet. listed
// should be the pods of the list that decided a replacement is due; Pending
// only reads them.
func (t *Tracker) Pending(workload string, listed []*corev1.Pod) int {
	return t.pending(workload, len(listed), func(i int) *corev1.Pod { return listed[i] })
}

// PendingReport is Pending over the pods of report (report.Pods[i].Pod), as
// Checker.CheckReport returned it.
func (t *Tracker) PendingReport(workload string, report health.Report) int {
	return t.pending(workload, len(report.Pods), func(i int) *corev1.Pod { return report.Pods[i].Pod })
}

func (t *Tracker) pending(workload string, n int, pod func(int) *corev1.Pod) int {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	remembered, ok := t.created[workload]
	if !ok {
		return 0
	}
	kept := remembered[:0]
	for _, e := range remembered {
		if !now.Before(t.expiry(e.at)) || listedIn(e, n, pod) {
			continue
		}
		kept = append(kept, e)
	}
	if len(kept) == 0 {
		delete(t.created, workload)
		return 0
	}
	clear(remembered[len(kept):])
	t.created[workload] = kept
	return len(kept)
}

func listedIn(e expectation, n int, pod func(int) *corev1.Pod) bool {
	for i := 0; i < n; i++ {
		if p := pod(i); p != nil && e.matches(p) {
			return true
		}
	}
	return false
}

// Wait returns how long until the first pod remembered for workload
// expires: when Pending answers above zero, check the workload again after
// Wait at the latest, in case the pod never shows up in the cache (a lost
// watch event, a pod deleted at once). Zero when nothing is remembered or
// has already expired. Wait forgets nothing.
func (t *Tracker) Wait(workload string) time.Duration {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var first time.Duration
	for i, e := range t.created[workload] {
		left := t.expiry(e.at).Sub(now)
		if left <= 0 {
			return 0
		}
		if i == 0 || left < first {
			first = left
		}
	}
	return first
}

// Forget drops everything remembered for workload: call it when the
// workload is deleted.
func (t *Tracker) Forget(workload string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.created, workload)
}
