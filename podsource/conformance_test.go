package podsource_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// honest lists a fixed set of pods and honours ctx.
func honest(pods ...*corev1.Pod) health.PodSourceFunc {
	return func(ctx context.Context) ([]*corev1.Pod, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return append([]*corev1.Pod(nil), pods...), nil
	}
}

func TestTestPodSourceAcceptsAnHonestSource(t *testing.T) {
	require.NoError(t, podsource.TestPodSource(honest(pod("a"), pod("b")), pod("b"), pod("a")))
	require.NoError(t, podsource.TestPodSource(honest()), "an empty workload is fine")
}

// Each broken source must be caught, with a message that says what broke.
func TestTestPodSourceCatchesBrokenSources(t *testing.T) {
	a, b := pod("a"), pod("b")
	var mu sync.Mutex
	calls := 0
	tests := []struct {
		name    string
		src     health.PodSource
		want    []*corev1.Pod
		wantErr string
	}{
		{"nil source", nil, nil, "nil PodSource"},
		{"missing pod", honest(a), []*corev1.Pod{a, b}, "listed pods differ"},
		{"extra pod", honest(a, b), []*corev1.Pod{a}, "listed pods differ"},
		{"nil pod in the list", health.PodSourceFunc(func(ctx context.Context) ([]*corev1.Pod, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return []*corev1.Pod{a, nil}, nil
		}), []*corev1.Pod{a}, "is nil"},
		{"pod listed twice", honest(a, a), []*corev1.Pod{a, a}, "listed twice"},
		{"pod without UID", honest(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}),
			[]*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}}, "has no UID"},
		{"different status", honest(a), []*corev1.Pod{func() *corev1.Pod { p := a.DeepCopy(); p.Status.Phase = corev1.PodFailed; return p }()}, "status differs"},
		{"ignores a canceled context", health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) {
			return []*corev1.Pod{a}, nil
		}), []*corev1.Pod{a}, "canceled context"},
		{"mutates pods it returned before", health.PodSourceFunc(func(ctx context.Context) ([]*corev1.Pod, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls == 2 {
				a.Labels = map[string]string{"touched": "yes"}
			}
			return []*corev1.Pod{a}, nil
		}), []*corev1.Pod{a.DeepCopy()}, "changed pods returned earlier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := podsource.TestPodSource(tt.src, tt.want...)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
