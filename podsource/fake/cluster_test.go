package fake_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/podsource/fake"
)

// ignoreServerFields leaves out what the API server alone writes:
// managedFields, the resourceVersion and, from k8s.io/api v0.33 on, a
// condition's observedGeneration (a field the helpers cannot set at the
// module's floor, v0.31).
var ignoreServerFields = cmp.Options{
	cmpopts.IgnoreFields(corev1.Pod{}, "ManagedFields", "ResourceVersion"),
	cmp.FilterPath(func(p cmp.Path) bool {
		f, ok := p.Last().(cmp.StructField)
		return ok && f.Name() == "ObservedGeneration"
	}, cmp.Ignore()),
}

// untouched is the fixture pod as it was before anything disrupted it:
// no condition, no deletion, generation 1.
func untouched(t *testing.T, file string) *corev1.Pod {
	p := fixture(t, file)
	p.Status.Conditions, p.DeletionTimestamp, p.DeletionGracePeriodSeconds, p.Generation = nil, nil, nil, 1
	return p
}

// TestTaintEvictedLeavesAPodAsTheTaintEvictionControllerDid: from the
// fixture pod before its eviction, TaintEvicted at the moment the real
// controller acted gives what the real control plane served: the same
// condition, deletion deadline, grace period and generation.
func TestTaintEvictedLeavesAPodAsTheTaintEvictionControllerDid(t *testing.T) {
	real := fixture(t, testutil.PodTaintEvicted)
	at := real.Status.Conditions[0].LastTransitionTime.Time
	got := fake.TaintEvicted(untouched(t, testutil.PodTaintEvicted), at)
	require.Empty(t, cmp.Diff(real, got, ignoreServerFields))
}

// TestDrainedLeavesAPodAsTheEvictionAPIDid, likewise for a drain.
func TestDrainedLeavesAPodAsTheEvictionAPIDid(t *testing.T) {
	real := fixture(t, testutil.PodDrained)
	at := real.Status.Conditions[0].LastTransitionTime.Time
	got := fake.Drained(untouched(t, testutil.PodDrained), at)
	require.Empty(t, cmp.Diff(real, got, ignoreServerFields))
}

// TestLostNodeLeavesANodeAsTheNodeLifecycleControllerDid: a Ready node lost
// at the moment the real controller noticed has the fixture's Ready
// condition and taints, and every rule reads it as unreachable.
func TestLostNodeLeavesANodeAsTheNodeLifecycleControllerDid(t *testing.T) {
	real := testutil.LoadNode(t, testutil.NodeLost)
	at := real.Spec.Taints[0].TimeAdded.Time
	ready := fake.ReadyNode("node-lost", real.Status.Conditions[0].LastHeartbeatTime.Time)
	got := fake.LostNode(ready, at)

	require.Empty(t, cmp.Diff(real.Spec.Taints, got.Spec.Taints))
	want := real.Status.Conditions[0]
	require.Empty(t, cmp.Diff(want, got.Status.Conditions[0]))
	require.Equal(t, health.NodeUnreachable, health.NodeStateOf(got))
	require.Equal(t, health.NodeReady, health.NodeStateOf(ready), "LostNode changed no argument")
	require.Len(t, got.Spec.Taints, 2, "losing a lost node again adds no taint")
	require.Len(t, fake.LostNode(got, at.Add(time.Minute)).Spec.Taints, 2)
}

// TestHelpersMakeAFailedNodeThatACheckerRecoversFrom is what an adopter's
// table-driven test does with them: fail a node, evict its pod, and see the
// Checker force-delete it, while a drained pod on a Ready node is left to
// finish.
func TestHelpersMakeAFailedNodeThatACheckerRecoversFrom(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pod := func(name, node string) *corev1.Pod {
		p := untouched(t, testutil.PodAlive)
		p.Name, p.UID, p.Spec.NodeName = name, k8stypes.UID("uid-"+name), node
		return p
	}
	pods := fake.New(fake.Options{},
		fake.TaintEvicted(pod("web-0", "node-a"), now),
		fake.Drained(pod("web-1", "node-b"), now),
	)
	nodes := fake.NewNodes(fake.LostNode(fake.ReadyNode("node-a", now.Add(-time.Hour)), now), fake.ReadyNode("node-b", now))
	checker, err := health.New(pods, pods, health.Options{Nodes: nodes})
	require.NoError(t, err)
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome)
	require.Equal(t, health.Terminating, report.Pods[1].Verdict.State)
	require.Len(t, pods.Deletes(), 1)
}
