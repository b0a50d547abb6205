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

// fencerTaint is a fencing tool's own taint, named beside the cloud's.
const fencerTaint = "fencing.example.com/powered-off"

// shutdownInput is one decoded input of FuzzShutdownTaints: a taint-evicted
// StatefulSet pod on node n1, checked twice, the second time second after
// the first.
type shutdownInput struct {
	configured []health.ShutdownTaint
	// readyFirst and readySecond are the node's Ready status at each check;
	// "" means no Ready condition.
	readyFirst, readySecond corev1.ConditionStatus
	// taintedFirst and taintedSecond say which of the two keys the node
	// carries at each check.
	taintedFirst, taintedSecond map[string]bool
	effect                      corev1.TaintEffect
	lifecycleTaint              bool          // node-lifecycle's unreachable:NoExecute too
	provider                    string        // the node's spec.providerID
	transition                  time.Duration // the Ready condition's lastTransitionTime after the first check; 0: none
	hasTransition               bool
	second                      time.Duration // may be negative: a clock set back
	// retransition: between the checks the node came back and failed
	// again unseen, so the second check sees a new lastTransitionTime,
	// transitionSecond after the first check (it has one even when the
	// first had none).
	retransition     bool
	transitionSecond time.Duration
}

func genShutdownInput(c *byteChooser) shutdownInput {
	in := shutdownInput{taintedFirst: map[string]bool{}, taintedSecond: map[string]bool{}}
	after := func() time.Duration { return time.Duration(1+c.IntN(90)) * time.Second }
	switch c.IntN(3) {
	case 0:
		in.configured = []health.ShutdownTaint{{Key: health.TaintCloudShutdown, After: after()}}
	case 1:
		in.configured = []health.ShutdownTaint{{Key: fencerTaint, After: after()}}
	default:
		in.configured = []health.ShutdownTaint{{Key: health.TaintCloudShutdown, After: after()}, {Key: fencerTaint, After: after()}}
	}
	statuses := []corev1.ConditionStatus{corev1.ConditionUnknown, corev1.ConditionFalse, corev1.ConditionTrue, ""}
	in.readySecond = statuses[c.IntN(len(statuses))]
	in.readyFirst = in.readySecond
	if c.IntN(4) == 3 {
		in.readyFirst = statuses[c.IntN(len(statuses))]
	}
	for _, key := range []string{health.TaintCloudShutdown, fencerTaint} {
		in.taintedSecond[key] = c.IntN(3) != 2
		in.taintedFirst[key] = in.taintedSecond[key]
		if c.IntN(4) == 3 {
			in.taintedFirst[key] = !in.taintedFirst[key]
		}
	}
	in.effect = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule}[c.IntN(3)]
	in.lifecycleTaint = c.IntN(2) == 1
	in.provider = []string{"", "aws:///eu-west-1a/i-0abc", "aws:///eu-west-1a/fargate-ip-10-0-1-2.ec2.internal", "kubevirt://vm-1", "gce://p/z/n1", "azure:///subscriptions/s/vm"}[c.IntN(6)]
	if in.hasTransition = c.IntN(3) != 2; in.hasTransition {
		in.transition = time.Duration(c.IntN(241)-180) * time.Second // 3 minutes before the first check to 1 after
	}
	// 0 to 120 s on, or up to 10 s back.
	if in.second = time.Duration(c.IntN(131)) * time.Second; in.second > 120*time.Second {
		in.second = 120*time.Second - in.second
	}
	if in.retransition = c.IntN(3) == 2; in.retransition {
		in.transitionSecond = time.Duration(c.IntN(121)) * time.Second
	}
	return in
}

func (in shutdownInput) node(ready corev1.ConditionStatus, tainted map[string]bool, start time.Time, second bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: in.provider}}
	if ready != "" {
		cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: ready}
		switch {
		case second && in.retransition:
			cond.LastTransitionTime = metav1.NewTime(start.Add(in.transitionSecond))
		case in.hasTransition:
			cond.LastTransitionTime = metav1.NewTime(start.Add(in.transition))
		}
		n.Status.Conditions = []corev1.NodeCondition{cond}
	}
	if in.lifecycleTaint {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
	}
	for _, key := range []string{health.TaintCloudShutdown, fencerTaint} {
		if tainted[key] {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: in.effect})
		}
	}
	return n
}

// shutdownOracle is ShutdownTaint's documented rule, and nothing else, for
// the pod at the second check: a taint fences when the node's Ready is
// Unknown (False is posted by a kubelet that runs), the node carries a
// configured key, the provider is trusted for the cloud's key, and the
// taint has been seen for its After, counted from the first check that saw
// it as a candidate under the same Ready transition and from the Ready
// condition's lastTransitionTime. It returns the outcome, and the
// RetryAfter of a wait (zero when none).
func shutdownOracle(in shutdownInput) (health.Outcome, time.Duration) {
	switch in.readySecond {
	case corev1.ConditionTrue:
		return health.NoAction, 0 // its kubelet finishes the deletion
	case "":
		return health.HeldBack, 0
	}
	untrusted := in.provider == "kubevirt://vm-1" || in.provider == "aws:///eu-west-1a/fargate-ip-10-0-1-2.ec2.internal"
	candidate := func(ready corev1.ConditionStatus, tainted map[string]bool, key string) bool {
		return ready == corev1.ConditionUnknown && tainted[key] &&
			!(key == health.TaintCloudShutdown && untrusted)
	}
	var retry time.Duration
	for _, t := range in.configured {
		if !candidate(in.readySecond, in.taintedSecond, t.Key) {
			continue
		}
		seen := time.Duration(0) // first seen by the second check
		sameTransition := !in.retransition || (in.hasTransition && in.transitionSecond == in.transition)
		if candidate(in.readyFirst, in.taintedFirst, t.Key) && sameTransition {
			seen = in.second
		}
		switch {
		case in.retransition:
			seen = min(seen, in.second-in.transitionSecond)
		case in.hasTransition:
			seen = min(seen, in.second-in.transition)
		}
		left := t.After - max(seen, 0)
		if left <= 0 {
			return health.ForceDeleted, 0
		}
		if retry == 0 || left < retry {
			retry = left
		}
	}
	return health.HeldBack, retry
}

// FuzzShutdownTaints compares two checks of a taint-evicted StatefulSet
// pod with ShutdownTaints against shutdownOracle: any Ready status or none
// at each check, either or both keys named and carried, with any effect,
// beside the node-lifecycle taint or not, on any provider, with any Ready
// transition time, a new transition at the second check or not, and a
// second check up to two minutes on or ten seconds back. The first check never deletes. Run it longer with
//
//	go test ./health -run '^$' -fuzz '^FuzzShutdownTaints$' -fuzztime=200000x
func FuzzShutdownTaints(f *testing.F) {
	// Each input decodes, a byte a choice, in genShutdownInput's order;
	// a missing byte is choice 0.
	f.Add([]byte{})
	f.Add([]byte{0, 29, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 30})        // cloud's taint, 30 s, seen for 30 s: deleted
	f.Add([]byte{0, 29, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 30})        // the same on kubevirt: held
	f.Add([]byte{2, 9, 19, 0, 0, 2, 0, 0, 0, 1, 1, 1, 0, 175, 10})   // both named, the fencer's carried, failed 5 s before the first check: 10 s to go
	f.Add([]byte{0, 29, 0, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 60})     // Ready at the first check: the wait starts at the second
	f.Add([]byte{1, 59, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 125})          // the clock set back 5 s
	f.Add([]byte{0, 29, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 30})        // Ready=False, which a running kubelet posts (a boot): held
	f.Add([]byte{0, 29, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 30, 2, 20}) // back and failed again unseen, 20 s after the first check: the whole 30 s from the second
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := genShutdownInput(&byteChooser{data: data})
		clk := clocktesting.NewFakePassiveClock(start)
		nodes := fake.NewNodes(in.node(in.readyFirst, in.taintedFirst, start, false))
		pods := fake.New(fake.Options{}, evictedOn("db-0", "n1", ownedByStatefulSet))
		checker, err := health.New(pods, pods, health.Options{Nodes: nodes, Clock: clk, ShutdownTaints: in.configured})
		require.NoError(t, err)

		first, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		require.Len(t, first.Pods, 1)
		require.NotEqual(t, health.ForceDeleted, first.Pods[0].Outcome, "the first sighting fenced: %+v", in)

		clk.SetTime(start.Add(in.second))
		nodes.Set(in.node(in.readySecond, in.taintedSecond, start, true))
		second, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		require.Len(t, second.Pods, 1)
		wantOutcome, wantRetry := shutdownOracle(in)
		require.Equal(t, wantOutcome, second.Pods[0].Outcome, "input %+v, held: %v", in, second.Pods[0].HeldBack)
		require.Equal(t, wantRetry, second.RetryAfter, "input %+v", in)
		if wantOutcome == health.ForceDeleted {
			require.Len(t, pods.Deletes(), 1)
		} else {
			require.Empty(t, pods.Deletes())
		}
	})
}
