package podsource_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/fake"
)

// fixed is a PodSource that returns the same slice, or the same error, on
// every call, and counts its calls. It ignores ctx on purpose: the tests
// show that Filter honours a done context by itself.
type fixed struct {
	pods  []*corev1.Pod
	err   error
	calls atomic.Int32
}

func (s *fixed) ListPods(context.Context) ([]*corev1.Pod, error) {
	s.calls.Add(1)
	if s.err != nil {
		return nil, s.err
	}
	return s.pods, nil
}

// countingKeep wraps keep and counts its calls per pod name.
type countingKeep struct {
	keep  func(*corev1.Pod) bool
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingKeep) fn(p *corev1.Pod) bool {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[p.Name]++
	c.mu.Unlock()
	return c.keep(p)
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		if p == nil {
			out = append(out, "<nil>")
			continue
		}
		out = append(out, p.Name)
	}
	return out
}

func named(keep ...string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		for _, n := range keep {
			if p.Name == n {
				return true
			}
		}
		return false
	}
}

func TestFilterListsTheKeptPodsOfTheSourceInItsOrder(t *testing.T) {
	a, b, c, d := pod("a"), pod("b"), pod("c"), pod("d")
	tests := []struct {
		name      string
		src       []*corev1.Pod
		keep      func(*corev1.Pod) bool
		want      []string
		wantCalls map[string]int
	}{
		{
			name: "keeps the matching pods, unsorted as the source lists them",
			src:  []*corev1.Pod{d, b, a, c},
			keep: named("a", "c", "d"),
			want: []string{"d", "a", "c"},
		},
		{name: "keeps every pod", src: []*corev1.Pod{a, b}, keep: named("a", "b"), want: []string{"a", "b"}},
		{name: "keeps no pod", src: []*corev1.Pod{a, b}, keep: named(), want: []string{}},
		{name: "an empty source lists nothing", src: nil, keep: named("a"), want: []string{}},
		{
			// keep would panic on nil: it must never see the nil entry,
			// which is passed on for the Checker to report.
			name: "passes a nil entry on without calling keep",
			src:  []*corev1.Pod{a, nil, b},
			keep: func(p *corev1.Pod) bool { return p.Name != "b" },
			want: []string{"a", "<nil>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fixed{pods: tt.src}
			srcSlice := append([]*corev1.Pod(nil), tt.src...)
			var before []*corev1.Pod
			for _, p := range tt.src {
				before = append(before, p.DeepCopy())
			}
			keep := &countingKeep{keep: tt.keep}
			filtered, err := podsource.Filter(src, keep.fn)
			require.NoError(t, err)

			for list := 1; list <= 2; list++ {
				got, err := filtered.ListPods(context.Background())
				require.NoError(t, err)
				require.Empty(t, cmp.Diff(tt.want, names(got)), "list %d (-want +got)", list)
				for _, p := range got {
					if p != nil {
						require.GreaterOrEqualf(t, indexOf(tt.src, p), 0, "pod %s is not one of the source's own objects", p.Name)
					}
				}
				for _, p := range tt.src {
					if p != nil {
						require.Equalf(t, list, keep.calls[p.Name], "keep calls for pod %s after %d lists", p.Name, list)
					}
				}
			}
			require.Len(t, keep.calls, len(tt.src)-countNil(tt.src), "keep saw a pod the source did not list")
			require.Equal(t, srcSlice, tt.src, "the source's slice was changed")
			require.Empty(t, cmp.Diff(before, tt.src), "a pod was mutated (-before +after)")
		})
	}
}

// indexOf returns the index of the very object p in pods, or -1.
func indexOf(pods []*corev1.Pod, p *corev1.Pod) int {
	for i, q := range pods {
		if q == p {
			return i
		}
	}
	return -1
}

// countNil counts the nil entries of pods.
func countNil(pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p == nil {
			n++
		}
	}
	return n
}

// The source's slice must stay as it was even when keep drops pods from
// its middle: a source may hand out a slice it keeps.
func TestFilterNeverWritesToTheSourcesSlice(t *testing.T) {
	shared := []*corev1.Pod{pod("a"), pod("b"), pod("c")}
	want := append([]*corev1.Pod(nil), shared...)
	filtered, err := podsource.Filter(&fixed{pods: shared}, named("c"))
	require.NoError(t, err)

	got, err := filtered.ListPods(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"c"}, names(got))
	for i := range want {
		require.Same(t, want[i], shared[i], "entry %d of the source's slice", i)
	}
}

func TestFilterPassesTheConformanceSuite(t *testing.T) {
	cache := fake.New(fake.Options{}, pod("a"), pod("b"), pod("c"), pod("d"))
	tests := []struct {
		name string
		keep func(*corev1.Pod) bool
		want []*corev1.Pod
	}{
		{"some pods", named("b", "d"), []*corev1.Pod{pod("b"), pod("d")}},
		{"every pod", named("a", "b", "c", "d"), []*corev1.Pod{pod("a"), pod("b"), pod("c"), pod("d")}},
		{"no pod", named(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			filtered, err := podsource.Filter(cache, tt.keep)
			require.NoError(t, err)
			require.NoError(t, podsource.TestPodSource(filtered, tt.want...))
		})
	}
}

func TestFilterRefusesANilOrTypedNilSourceOrKeep(t *testing.T) {
	tests := []struct {
		name    string
		src     health.PodSource
		keep    func(*corev1.Pod) bool
		wantErr string
	}{
		{"nil source", nil, named("a"), "nil PodSource"},
		{"nil keep", fake.New(fake.Options{}), nil, "nil keep"},
		{"both nil", nil, nil, "nil PodSource"},
		// A constructor's nil result kept by a caller who ignored its
		// error: health.New refuses it, and so does Filter, so that the
		// check never panics on it.
		{"typed nil source", (*fake.Pods)(nil), named("a"), "nil PodSource"},
		{"typed nil func source", health.PodSourceFunc(nil), named("a"), "nil PodSource"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			filtered, err := podsource.Filter(tt.src, tt.keep)
			require.ErrorContains(t, err, tt.wantErr)
			require.Nil(t, filtered)
		})
	}
}

var errBoom = errors.New("boom")

func TestFilterWrapsTheSourcesError(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("apiserver is shutting down")
	tests := []struct {
		name   string
		srcErr error
		check  func(t *testing.T, err error)
	}{
		{"a sentinel is found with errors.Is", fmt.Errorf("listing: %w", errBoom), func(t *testing.T, err error) {
			require.ErrorIs(t, err, errBoom)
		}},
		{"an API error keeps its reason", unavailable, func(t *testing.T, err error) {
			require.True(t, apierrors.IsServiceUnavailable(err), "apierrors.IsServiceUnavailable(%v)", err)
			var status *apierrors.StatusError
			require.ErrorAs(t, err, &status)
			require.Same(t, unavailable, status)
		}},
		{"the source's own context error is found with errors.Is", fmt.Errorf("informer: %w", context.DeadlineExceeded), func(t *testing.T, err error) {
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keep := &countingKeep{keep: named("a")}
			filtered, err := podsource.Filter(&fixed{err: tt.srcErr}, keep.fn)
			require.NoError(t, err)
			pods, err := filtered.ListPods(context.Background())
			require.Error(t, err)
			require.Nil(t, pods)
			require.Contains(t, err.Error(), tt.srcErr.Error())
			tt.check(t, err)
			require.Empty(t, keep.calls, "keep was called although the list failed")
		})
	}
}

func TestFilterHonoursADoneContextWithoutListingTheSource(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancelExpired := context.WithTimeout(context.Background(), 0)
	defer cancelExpired()
	tests := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"canceled", canceled, context.Canceled},
		{"deadline exceeded", expired, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fixed{pods: []*corev1.Pod{pod("a")}} // ignores ctx
			keep := &countingKeep{keep: named("a")}
			filtered, err := podsource.Filter(src, keep.fn)
			require.NoError(t, err)
			pods, err := filtered.ListPods(tt.ctx)
			require.ErrorIs(t, err, tt.want)
			require.Nil(t, pods)
			require.Zero(t, src.calls.Load(), "the source was listed with a done context")
			require.Empty(t, keep.calls)
		})
	}
}
