package podsource

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/nilcheck"
)

var _ health.PodSource = (*filtered)(nil)

// Filter returns a source that lists the pods of src for which keep returns
// true, in src's order. Use it to narrow a source to the pods that really
// belong to a workload when its label selector alone cannot say so, without
// keeping a second list: an operator that counts only the pods whose image
// and spec hash match the current spec of what it runs, for example.
//
// The pods listed are src's own objects, never copied and never mutated;
// only the slice that holds them is new for each list, so src's slice is
// never changed either. keep is called once per pod and list, may be called
// from several goroutines at once, and must not mutate the pod it is given.
// A nil entry, which breaks the PodSource contract, is passed on without
// calling keep, so that the caller still sees it (the Checker reports a nil
// pod as invalid).
//
// When ctx is already done, ListPods returns an error wrapping ctx.Err()
// without listing src. An error of src is returned wrapped with %w, so
// errors.Is, errors.As and apierrors.IsXxx still reach it.
//
// The filtered source is safe for concurrent use when src and keep are.
// Filter returns an error if src or keep is nil, or src is a typed nil (a
// nil pointer in the interface), as health.New refuses one.
func Filter(src health.PodSource, keep func(*corev1.Pod) bool) (health.PodSource, error) {
	if nilcheck.IsNil(src) {
		return nil, errors.New("podsource: Filter: nil PodSource (a typed nil, such as a nil *kube.ListerSource, too)")
	}
	if keep == nil {
		return nil, errors.New("podsource: Filter: nil keep function")
	}
	return &filtered{src: src, keep: keep}, nil
}

// filtered is the source that Filter returns.
type filtered struct {
	src  health.PodSource
	keep func(*corev1.Pod) bool
}

// ListPods lists src and returns the pods that keep accepts.
func (f *filtered) ListPods(ctx context.Context) ([]*corev1.Pod, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("podsource: filtered list: %w", err)
	}
	pods, err := f.src.ListPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("podsource: filtered list: %w", err)
	}
	kept := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		if p == nil || f.keep(p) {
			kept = append(kept, p)
		}
	}
	return kept, nil
}
