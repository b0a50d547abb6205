package health_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
)

// afterDeadline is a time after the deletion deadline of every test pod,
// when a Checker without node evidence calls a taint-evicted pod dead.
var afterDeadline = deletedAt.Add(time.Hour)

func TestDefaultRulesClassify(t *testing.T) {
	tests := []struct {
		name      string
		pod       *corev1.Pod
		wantState health.State
		wantRule  string
	}{
		{"running pod is alive", newPod("p"), health.Alive, ""},
		{"pending pod is alive", newPod("p", phase(corev1.PodPending)), health.Alive, ""},
		{"taint-evicted and deleting, past its deadline, is dead", taintEvicted("p"), health.Dead, health.RuleTaintEvicted},
		{"taint-eviction condition without deletionTimestamp is alive: the condition can be stale",
			newPod("p", disruption("DeletionByTaintManager")), health.Alive, health.RuleStaleDisruptionTarget},
		{"failed and terminated by kubelet is dead without deletionTimestamp",
			newPod("p", phase(corev1.PodFailed), disruption("TerminationByKubelet")), health.Dead, health.RuleTerminatedByKubelet},
		{"failed, terminated by kubelet and deleting is dead",
			newPod("p", phase(corev1.PodFailed), disruption("TerminationByKubelet"), deleting), health.Dead, health.RuleTerminatedByKubelet},
		{"running with kubelet termination condition is alive: the condition can be stale",
			newPod("p", disruption("TerminationByKubelet")), health.Alive, health.RuleStaleDisruptionTarget},
		{"drained pod is terminating, never dead", drained("p"), health.Terminating, health.RuleGracefulDeletion},
		{"preempted pod is terminating", newPod("p", deleting, disruption("PreemptionByScheduler")), health.Terminating, health.RuleGracefulDeletion},
		{"user-deleted pod is terminating", newPod("p", deleting), health.Terminating, health.RuleGracefulDeletion},
		{"taint-manager reason with status False is terminating",
			newPod("p", deleting, condition(corev1.DisruptionTarget, corev1.ConditionFalse, "DeletionByTaintManager")), health.Terminating, health.RuleGracefulDeletion},
		{"unknown condition type with the taint reason is terminating",
			newPod("p", deleting, condition("SomethingElse", corev1.ConditionTrue, "DeletionByTaintManager")), health.Terminating, health.RuleGracefulDeletion},
		{"duplicate conditions, True one last, still dead",
			newPod("p", deleting, condition(corev1.DisruptionTarget, corev1.ConditionFalse, "DeletionByTaintManager"), disruption("DeletionByTaintManager")), health.Dead, health.RuleTaintEvicted},
		{"duplicate conditions, drain first then taint eviction, still dead",
			newPod("p", deleting, disruption("EvictionByEvictionAPI"), disruption("DeletionByTaintManager")), health.Dead, health.RuleTaintEvicted},
		{"succeeded pod is finished, not alive", newPod("p", phase(corev1.PodSucceeded)), health.Finished, health.RuleFinishedPod},
		{"failed pod without disruption is finished", newPod("p", phase(corev1.PodFailed)), health.Finished, health.RuleFinishedPod},
		{"failed pod with a drain condition is finished", newPod("p", phase(corev1.PodFailed), disruption("EvictionByEvictionAPI")), health.Finished, health.RuleFinishedPod},
		{"failed pod being deleted is terminating", newPod("p", phase(corev1.PodFailed), deleting), health.Terminating, health.RuleGracefulDeletion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			got := health.DefaultRules().ClassifyAt(tt.pod, afterDeadline)
			require.Equal(t, tt.wantState, got.State, "verdict %+v", got)
			require.Equal(t, tt.wantRule, got.Rule)
			require.NotEmpty(t, got.Reason)
			require.Empty(t, cmp.Diff(before, tt.pod), "Classify mutated the pod")
		})
	}
}

// The pods a real control plane left behind classify as documented, by a
// Checker without node evidence after their deletion deadlines.
func TestDefaultRulesOnRealClusterPods(t *testing.T) {
	tests := []struct {
		file string
		want health.State
	}{
		{"pod-alive.json", health.Alive},
		{"pod-taint-evicted.json", health.Dead},
		{"pod-drained.json", health.Terminating},
		{"pod-user-deleted.json", health.Terminating},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got := health.DefaultRules().ClassifyAt(fixturePod(t, tt.file), afterDeadline)
			require.Equal(t, tt.want, got.State, "verdict %+v", got)
		})
	}
}

func TestFinishedPodIsDeadIsOptIn(t *testing.T) {
	rules := append(health.Rules{health.FinishedPodIsDead()}, health.DefaultRules()...)
	tests := []struct {
		name string
		pod  *corev1.Pod
		want health.State
	}{
		{"succeeded pod is dead", newPod("p", phase(corev1.PodSucceeded)), health.Dead},
		{"failed pod is dead", newPod("p", phase(corev1.PodFailed)), health.Dead},
		{"succeeded pod being deleted stays terminating", newPod("p", phase(corev1.PodSucceeded), deleting), health.Terminating},
		{"running pod stays alive", newPod("p"), health.Alive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, rules.Classify(tt.pod).State)
			if tt.want == health.Dead {
				require.Equal(t, health.Finished, health.DefaultRules().Classify(tt.pod).State, "the default rules must not delete finished pods")
			}
		})
	}
}

func TestRulesComposeFirstOpinionWins(t *testing.T) {
	keepAlive := health.Rule{Name: "KeepCanary", Classify: func(p *corev1.Pod) (health.Verdict, bool) {
		if p.Labels["canary"] != "true" {
			return health.Verdict{}, false
		}
		return health.Verdict{State: health.Alive, Reason: "canary pods are never deleted"}, true
	}}
	rules := append(health.Rules{{Name: "NoOpinion"}, keepAlive}, health.DefaultRules()...)

	canary := taintEvicted("canary")
	canary.Labels = map[string]string{"canary": "true"}
	require.Equal(t, health.Verdict{State: health.Alive, Rule: "KeepCanary", Reason: "canary pods are never deleted"}, rules.Classify(canary))
	require.Equal(t, health.RuleTaintEvicted, rules.ClassifyAt(taintEvicted("other"), afterDeadline).Rule, "a rule without opinion hands over to the next one")
}

func TestEmptyRulesCallEverythingAlive(t *testing.T) {
	got := health.Rules{}.Classify(taintEvicted("p"))
	require.Equal(t, health.Alive, got.State)
	require.Empty(t, got.Rule)
}

func TestClassifyOfANilPodIsNoPanicAndNoDelete(t *testing.T) {
	var got health.Verdict
	require.NotPanics(t, func() { got = health.DefaultRules().Classify(nil) })
	require.Equal(t, health.Verdict{State: health.Alive, Reason: "nil pod"}, got)
}

func TestRuleWhenSkipsPodsThatLackTheFacts(t *testing.T) {
	tests := []struct {
		name      string
		when      health.Facts
		pod       *corev1.Pod
		wantCalls int
	}{
		{"no facts required: called for a live pod", 0, newPod("p"), 1},
		{"Deleting: not called for a live pod", health.Deleting, newPod("p"), 0},
		{"Deleting: called for a deleting pod", health.Deleting, newPod("p", deleting), 1},
		{"Deleting and Disrupted: not called without the condition", health.Deleting | health.Disrupted, newPod("p", deleting), 0},
		{"Deleting and Disrupted: called with both", health.Deleting | health.Disrupted, drained("p"), 1},
		{"Terminal: called for a succeeded pod", health.Terminal, newPod("p", phase(corev1.PodSucceeded)), 1},
		{"Disrupted: a False condition is not the fact", health.Disrupted, newPod("p", condition(corev1.DisruptionTarget, corev1.ConditionFalse, "x")), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			rule := health.WithWhen(health.Rule{Name: "Counting", Classify: func(*corev1.Pod) (health.Verdict, bool) {
				calls++
				return health.Verdict{}, false
			}}, tt.when)
			health.Rules{rule}.Classify(tt.pod)
			require.Equal(t, tt.wantCalls, calls)
		})
	}
}
