package podsource

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
)

// concurrentLists is how many goroutines list at once in the concurrency
// check.
const concurrentLists = 8

// TestPodSource checks that src honours the PodSource contract and that it
// lists exactly the pods in want, in any order. Pods are matched by
// namespace, name and UID; their spec, status and deletion timestamp must
// be equal too. The caller sets src up so that it holds want and does not
// change while the test runs (an informer-backed source must have synced).
//
// It returns nil on success, or an error joining every failure found.
// Run it under the race detector: it lists concurrently.
func TestPodSource(src health.PodSource, want ...*corev1.Pod) error {
	if src == nil {
		return errors.New("podsource: nil PodSource")
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	ctx := context.Background()
	first, err := src.ListPods(ctx)
	if err != nil {
		return fmt.Errorf("ListPods: %w", err)
	}
	if err := checkList(first, want); err != nil {
		fail("first list: %w", err)
	}
	before := deepCopyAll(first)

	second, err := src.ListPods(ctx)
	if err != nil {
		fail("second ListPods: %w", err)
	} else if diff := cmp.Diff(keysOf(first), keysOf(second)); diff != "" {
		fail("two lists with no change in between differ (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(before, first); diff != "" {
		fail("listing again changed pods returned earlier (-before +after):\n%s", diff)
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := src.ListPods(canceled); !errors.Is(err, context.Canceled) {
		fail("ListPods with a canceled context: got error %v, want one wrapping context.Canceled", err)
	}
	expired, cancel := context.WithTimeout(ctx, 0)
	defer cancel()
	if _, err := src.ListPods(expired); !errors.Is(err, context.DeadlineExceeded) {
		fail("ListPods with an expired context: got error %v, want one wrapping context.DeadlineExceeded", err)
	}

	if err := listConcurrently(ctx, src, keysOf(first)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

type podKey struct {
	Namespace, Name string
	UID             types.UID
}

func keyOf(p *corev1.Pod) podKey { return podKey{p.Namespace, p.Name, p.UID} }

// keysOf returns the sorted keys of pods; nil pods are skipped.
func keysOf(pods []*corev1.Pod) []podKey {
	keys := make([]podKey, 0, len(pods))
	for _, p := range pods {
		if p != nil {
			keys = append(keys, keyOf(p))
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.UID < b.UID
	})
	return keys
}

// checkList compares one list with want.
func checkList(got, want []*corev1.Pod) error {
	var errs []error
	seen := make(map[podKey]bool, len(got))
	for i, p := range got {
		switch {
		case p == nil:
			errs = append(errs, fmt.Errorf("pod %d is nil", i))
			continue
		case p.Name == "":
			errs = append(errs, fmt.Errorf("pod %d has no name", i))
		case p.UID == "":
			errs = append(errs, fmt.Errorf("pod %s/%s has no UID", p.Namespace, p.Name))
		}
		if seen[keyOf(p)] {
			errs = append(errs, fmt.Errorf("pod %s/%s (uid %s) listed twice", p.Namespace, p.Name, p.UID))
		}
		seen[keyOf(p)] = true
	}
	if diff := cmp.Diff(keysOf(want), keysOf(got)); diff != "" {
		errs = append(errs, fmt.Errorf("listed pods differ (-want +got):\n%s", diff))
		return errors.Join(errs...)
	}
	byKey := make(map[podKey]*corev1.Pod, len(want))
	for _, p := range want {
		byKey[keyOf(p)] = p
	}
	for _, p := range got {
		if p == nil {
			continue
		}
		w := byKey[keyOf(p)]
		if diff := cmp.Diff(w.Spec, p.Spec); diff != "" {
			errs = append(errs, fmt.Errorf("pod %s/%s: spec differs (-want +got):\n%s", p.Namespace, p.Name, diff))
		}
		if diff := cmp.Diff(w.Status, p.Status); diff != "" {
			errs = append(errs, fmt.Errorf("pod %s/%s: status differs (-want +got):\n%s", p.Namespace, p.Name, diff))
		}
		if !w.DeletionTimestamp.Equal(p.DeletionTimestamp) {
			errs = append(errs, fmt.Errorf("pod %s/%s: deletionTimestamp %v, want %v", p.Namespace, p.Name, p.DeletionTimestamp, w.DeletionTimestamp))
		}
	}
	return errors.Join(errs...)
}

func deepCopyAll(pods []*corev1.Pod) []*corev1.Pod {
	if pods == nil {
		return nil
	}
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p.DeepCopy()
	}
	return out
}

func listConcurrently(ctx context.Context, src health.PodSource, want []podKey) error {
	var wg sync.WaitGroup
	errs := make([]error, concurrentLists)
	for i := range concurrentLists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := src.ListPods(ctx)
			if err != nil {
				errs[i] = fmt.Errorf("concurrent ListPods %d: %w", i, err)
				return
			}
			if diff := cmp.Diff(want, keysOf(got)); diff != "" {
				errs[i] = fmt.Errorf("concurrent ListPods %d differs (-want +got):\n%s", i, diff)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
