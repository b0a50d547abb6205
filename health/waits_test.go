package health_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// waitFencer proves a pod stopped once it has seen it for wait, measured
// from its first sighting in the Checker's Memory, as a fencer that waits
// out a self-fencing deadline does.
type waitFencer struct{ wait time.Duration }

func (waitFencer) Name() string { return "test/wait" }

func (f waitFencer) Fence(_ context.Context, q health.FenceQuery) (health.Fence, error) {
	first := q.Sightings.FirstSeen(string(q.Pod.UID))
	if left := first.Add(f.wait).Sub(q.Now); left > 0 {
		return health.Fence{Detail: "waiting", RetryAfter: left}, nil
	}
	return health.Fence{Proves: health.PodStopped, By: "test", Since: first.Add(f.wait)}, nil
}

// TestEveryWaitEndsForACallerThatLooksOnlyAtRetryAfter runs each wait that
// is measured from a sighting in the Memory, 15 minutes long against the
// Memory's TTL of 10, with a caller that checks again only when
// Report.RetryAfter says: the wait must end at its time, not start again
// at every look because the Memory forgot its start in between.
func TestEveryWaitEndsForACallerThatLooksOnlyAtRetryAfter(t *testing.T) {
	const wait = 15 * time.Minute
	start := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	lost := newNode("n1", notReady, taint(corev1.TaintNodeUnreachable))
	tests := []struct {
		name string
		pod  *corev1.Pod
		opts health.Options
		done func(health.PodReport) bool
	}{
		{"a shutdown taint's After", evictedOn("db-0", "n1", ownedByStatefulSet),
			health.Options{Nodes: fake.NewNodes(newNode("n1", notReady, taint(corev1.TaintNodeUnreachable), cloudShutdown)), ShutdownTaints: []health.ShutdownTaint{{Key: health.TaintCloudShutdown, After: wait}}},
			func(r health.PodReport) bool { return r.Outcome == health.ForceDeleted }},
		{"UnreachableFor", newPod("web-1", onNode("n1")),
			health.Options{Nodes: fake.NewNodes(newNode("n1", markedUnreachable)), ReplaceUnreachable: true, UnreachableFor: wait},
			func(r health.PodReport) bool { return r.Verdict.State == health.Unreachable }},
		{"TerminatingTooLong", func() *corev1.Pod {
			p := drained("web-2")
			p.Spec.NodeName = "n1"
			p.DeletionTimestamp = &metav1.Time{Time: start.Add(-time.Hour)}
			return p
		}(),
			health.Options{Nodes: fake.NewNodes(lost), Rules: health.Rules{health.TerminatingTooLong(wait), health.GracefulDeletion()}},
			func(r health.PodReport) bool { return r.Outcome == health.ForceDeleted }},
		{"a fencer's wait", evictedOn("db-1", "n1", ownedByStatefulSet),
			health.Options{Nodes: fake.NewNodes(lost), Fencers: []health.Fencer{waitFencer{wait}}},
			func(r health.PodReport) bool { return r.Outcome == health.ForceDeleted }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			pods := fake.New(fake.Options{}, tt.pod)
			opts := tt.opts
			opts.Clock = clk
			opts.Memory = health.NewMemory(health.MemoryOptions{TTL: 10 * time.Minute})
			checker := newChecker(t, pods, opts)
			for looks := 1; ; looks++ {
				report, err := checker.CheckReport(context.Background())
				require.NoError(t, err)
				require.Len(t, report.Pods, 1)
				if tt.done(report.Pods[0]) {
					require.LessOrEqual(t, clk.Now().Sub(start), wait+time.Minute, "ended late, after %d looks", looks)
					require.GreaterOrEqual(t, clk.Now().Sub(start), wait, "ended before the wait")
					return
				}
				require.Positive(t, report.RetryAfter, "a wait with no RetryAfter: the caller never looks again (%+v)", report.Pods[0])
				require.Less(t, looks, 5, "the wait started again at each look: %+v", report.Pods[0])
				clk.SetTime(clk.Now().Add(report.RetryAfter))
			}
		})
	}
}
