package health_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// mutatorKey marks the context of deletes that the mutators send (graceful
// deletes, as the taint-eviction controller and a drain send them), to tell
// them from the Checkers' force deletes.
type mutatorKey struct{}

// forceDeleteLog records the Checkers' force deletes of one workload, as the
// fake's interceptor sees them, and any breach of the safety invariants.
type forceDeleteLog struct {
	mu         sync.Mutex
	calls      []fake.DeleteCall
	violations []string
	sent       int
}

func (l *forceDeleteLog) violate(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations = append(l.violations, fmt.Sprintf(format, args...))
}

// TestConcurrentChecksAndMutationsStaySafe runs, under -race, checkers of
// three workloads (two Checkers each, one Memory shared by all six) while
// one mutator per workload adds pods, evicts them as the taint manager does
// (DisruptionTarget, then a graceful delete), drains them, and replaces
// them by name; the fake lags and fails one delete in five with a 500. It
// requires that no pod that is alive, terminating or finished is ever
// removed, that every force delete carries the pod's UID and grace 0, and
// that a UID is not sent again once a delete of it succeeded.
func TestConcurrentChecksAndMutationsStaySafe(t *testing.T) {
	const (
		workloads         = 3
		checkersPerWorkld = 2
		checksPerChecker  = 50
		mutations         = 200
	)
	memory := health.NewMemory(health.MemoryOptions{})
	stores := make([]*fake.Pods, workloads)
	logs := make([]*forceDeleteLog, workloads)
	for w := range workloads {
		log := &forceDeleteLog{}
		logs[w] = log
		var store *fake.Pods
		store = fake.New(fake.Options{ListLag: 2, Interceptor: fake.Interceptor{
			Delete: func(ctx context.Context, ns, name string, opts metav1.DeleteOptions, next fake.DeleteFunc) error {
				if ctx.Value(mutatorKey{}) != nil {
					return next(ctx, ns, name, opts)
				}
				if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 {
					log.violate("force delete of %s without grace period 0", name)
				}
				if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID == "" {
					log.violate("force delete of %s without a UID precondition", name)
					return next(ctx, ns, name, opts)
				}
				uid := *opts.Preconditions.UID
				// The pod this delete would remove must be dead: the
				// mutators only ever move pods towards dead, so what is
				// dead now is still dead when the delete lands.
				if current, err := store.Get(ns, name); err == nil && current.UID == uid {
					if s := wantState(current, time.Now()); s != health.Dead { // the checkers use the real clock; dead then is dead now
						log.violate("force delete of %s (uid %s), which is %v", name, uid, s)
					}
				}
				log.mu.Lock()
				log.sent++
				fail := log.sent%5 == 0
				log.mu.Unlock()
				var err error
				if fail {
					err = apierrors.NewInternalError(errors.New("etcd leader changed"))
				} else {
					err = next(ctx, ns, name, opts)
				}
				log.mu.Lock()
				log.calls = append(log.calls, fake.DeleteCall{Namespace: ns, Name: name, UID: uid, Err: err})
				log.mu.Unlock()
				return err
			},
		}})
		stores[w] = store
		for i := range 4 {
			require.NoError(t, store.Add(newPod(fmt.Sprintf("w%d-pod-%d", w, i), func(p *corev1.Pod) { p.UID = "" })))
		}
	}

	var checkers, mutators sync.WaitGroup
	mutated := make(chan struct{})
	var errsMu sync.Mutex
	var errs []error
	for w := range workloads {
		for range checkersPerWorkld {
			// Each checker's deleter checks the pod as the checker listed it.
			deleter := health.DeleterFunc(func(ctx context.Context, pod *corev1.Pod) error {
				if s := wantState(pod, time.Now()); s != health.Dead {
					logs[w].violate("the Deleter got pod %s (uid %s), which is %v", pod.Name, pod.UID, s)
				}
				return stores[w].ForceDelete(ctx, pod)
			})
			checker, err := health.New(stores[w], deleter, health.Options{Memory: memory})
			require.NoError(t, err)
			checkers.Add(1)
			go func() {
				defer checkers.Done()
				// Check at least checksPerChecker times, and on until the
				// mutators are done, then once more so that the last dead
				// pods they made are checked too, however the goroutines
				// were scheduled.
				for i := 0; ; i++ {
					last := false
					select {
					case <-mutated:
						last = i >= checksPerChecker
					default:
					}
					var err error
					if i%2 == 0 {
						_, err = checker.Check(context.Background())
					} else {
						_, err = checker.CheckReport(context.Background())
					}
					if err != nil {
						errsMu.Lock()
						errs = append(errs, err)
						errsMu.Unlock()
					}
					if last {
						return
					}
				}
			}()
		}
		mutators.Add(1)
		go func() {
			defer mutators.Done()
			mutate(t, stores[w], w, mutations)
		}()
	}
	mutators.Wait()
	close(mutated)
	checkers.Wait()

	for _, err := range errs {
		require.True(t, apierrors.IsInternalError(err), "the only failures are the injected 500s: %v", err)
	}
	total := 0
	for w, log := range logs {
		require.Empty(t, log.violations, "workload %d", w)
		removed := map[types.UID]bool{}
		for _, c := range log.calls {
			require.False(t, removed[c.UID], "workload %d: uid %s (%s) force-deleted again after a delete of it succeeded", w, c.UID, c.Name)
			if countsAsDeleted(c.Err) {
				removed[c.UID] = true
			}
		}
		total += len(log.calls)
	}
	t.Logf("%d force deletes", total)
	// How many dead pods the checkers meet depends on how the goroutines
	// were scheduled: about 45 when nothing else runs, half that under
	// load, when the mutators recreate dead pods before a check sees them.
	// What this test proves is above; here only that the run gave the
	// checkers something to delete.
	require.Positive(t, total, "the mutators must give the checkers dead pods to delete")
}

// mutate changes one workload's pods the way a cluster does, never
// reversing a deletion, and only through new objects.
func mutate(t *testing.T, store *fake.Pods, w, n int) {
	r := rand.New(rand.NewPCG(uint64(w), 7))
	ctx := context.WithValue(context.Background(), mutatorKey{}, true)
	next := 4
	for i := range n {
		if i%4 == 0 {
			runtime.Gosched() // let the checkers in
		}
		name := fmt.Sprintf("w%d-pod-%d", w, r.IntN(next))
		switch r.IntN(5) {
		case 0: // a new pod
			_ = store.Add(newPod(fmt.Sprintf("w%d-pod-%d", w, next), func(p *corev1.Pod) { p.UID = "" }))
			next++
		case 1, 2: // the node is lost: taint eviction
			disrupt(ctx, t, store, name, health.ReasonDeletionByTaintManager)
		case 3: // a drain
			disrupt(ctx, t, store, name, "EvictionByEvictionAPI")
		case 4: // the controller recreates the pod by name
			if _, err := store.Replace(newPod(name)); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("replace %s: %v", name, err)
			}
		}
	}
}

// disrupt adds DisruptionTarget=True with reason and deletes the pod
// gracefully, as the controller named by reason does.
func disrupt(ctx context.Context, t *testing.T, store *fake.Pods, name, reason string) {
	pod, err := store.Get("ns", name)
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Errorf("get %s: %v", name, err)
		return
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason})
	if err := store.Update(pod); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("update %s: %v", name, err)
		return
	}
	grace := int64(30)
	if err := store.Delete(ctx, "ns", name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %s: %v", name, err)
	}
}
