package health_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// withDryRun returns opts for a Checker that only classifies: no Deleter.
func withDryRun(opts health.Options) health.Options {
	opts.DryRun = true
	return opts
}

// propertyCases is how many generated scenarios each property test checks.
const propertyCases = 2000

// seeded returns the generator of one case; a failing case can be replayed
// from the seed in its name.
func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// TestPropertyClassifyFollowsTheDocumentedRules classifies generated pods,
// odd fields included, and requires the state that the README's rule table
// gives, a rule name and a reason, the same state and rule whatever the
// order of the conditions, and a pod left as it was.
func TestPropertyClassifyFollowsTheDocumentedRules(t *testing.T) {
	rules := health.DefaultRules()
	seen := map[health.State]int{}
	for seed := range uint64(propertyCases) {
		r := seeded(seed)
		pod := genPod(r, 0)
		now := genNow(r, 2)
		var ev *genEvidence
		if seed%2 == 0 {
			ev = genNodeEvidence(r)
		}
		seen[oracle{now: now, ev: ev}.state(pod)]++
		requireClassification(t, rules, pod, now, ev, r)
	}
	// The generator must reach every state often enough to mean something.
	for _, s := range []health.State{health.Alive, health.Terminating, health.Finished, health.Dead} {
		require.Greater(t, seen[s], propertyCases/10, "only %d of %d generated pods are %v: %v", seen[s], propertyCases, s, seen)
	}
	require.Greater(t, seen[health.Unreachable], propertyCases/200, "only %d of %d generated pods are Unreachable: %v", seen[health.Unreachable], propertyCases, seen)
}

// requireClassification is the classification property for one pod: by
// rules alone (Rules.ClassifyAt) without node evidence, else by
// Checker.Classify with the evidence and policy of ev and a fresh Memory.
func requireClassification(t testing.TB, rules health.Rules, pod *corev1.Pod, now time.Time, ev *genEvidence, r *rand.Rand) {
	t.Helper()
	classify := func(p *corev1.Pod) health.Verdict { return rules.ClassifyAt(p, now) }
	if ev != nil {
		classify = func(p *corev1.Pod) health.Verdict {
			c, err := health.New(fake.New(fake.Options{}), nil, withDryRun(ev.options(clocktesting.NewFakePassiveClock(now))))
			require.NoError(t, err)
			return c.Classify(context.Background(), p)
		}
	}
	snap := takeSnapshot(t, []*corev1.Pod{pod})
	got := classify(pod)
	snap.requireUnchanged(t, []*corev1.Pod{pod})
	snap.requireSameJSON(t, []*corev1.Pod{pod})
	require.Equal(t, oracle{now: now, ev: ev}.state(pod), got.State, "pod %s at %v: verdict %+v", dump(pod), now, got)
	require.NotEmpty(t, got.Reason)
	if got.Rule == "" {
		require.Equal(t, health.Alive, got.State, "only the default Alive has no rule")
	}
	shuffled := permuted(r, []*corev1.Pod{pod})[0]
	again := classify(shuffled)
	require.Equal(t, got.State, again.State, "the order of the conditions changed the state")
	require.Equal(t, got.Rule, again.Rule, "the order of the conditions changed the rule")
}

// TestPropertyCheckInvariants runs two checks over each generated pod set,
// with nil entries, nameless and UID-less pods and scripted delete faults
// (NotFound, Conflict, 429, 500, timeouts, plain errors, a cancelled
// context), and requires every invariant of requireInvariants: nothing but
// a dead pod is deleted, never one the policy holds back, and a pod without
// deletionTimestamp only under the kubelet-terminated rule; every delete has grace 0 and the pod's UID; a
// removed UID is not sent again and a failed one is; healthy exactly when a
// pod is alive and no dead pod is left; the listed pods are unchanged.
func TestPropertyCheckInvariants(t *testing.T) {
	var deletes, failures, heldBack, invalid, cancelled, unreachable int
	for seed := range uint64(propertyCases) {
		r := seeded(seed)
		sc := genScenario(r, genOptions{maxPods: 10, invalid: true, cancel: true, nodes: true})
		withReport := seed%4 != 0 // a quarter through Check, the rest through CheckReport
		if !validList(sc.pods) {
			invalid++
		}
		for name, f := range sc.faults {
			if f.kind == faultCancel && slices.ContainsFunc(sc.pods, func(p *corev1.Pod) bool {
				or := oracle{now: sc.now, ev: sc.ev}
				return p != nil && p.Name == name && p.UID != "" && or.state(p) == health.Dead && !or.heldBack(p)
			}) {
				cancelled++
			}
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			logOnFailure(t, sc)
			requireChecks(t, sc, withReport)
		})
		later := oracle{now: sc.now.Add(sc.step), ev: sc.ev, seen: sc.now, saw: true}
		for _, p := range sc.pods {
			if p != nil && later.state(p) == health.Unreachable {
				unreachable++
			}
			if p != nil && p.UID != "" && later.state(p) == health.Dead { // dead by the second check
				if later.heldBack(p) {
					heldBack++
					continue
				}
				deletes++
				if sc.faults[p.Name].kind > faultConflict {
					failures++
				}
			}
		}
	}
	// The generated cases must exercise what the invariants talk about.
	// Fewer than one per case: a quarter of the dead pods are held back
	// (stateful, opted out or malformed), and they count below; and one
	// scenario in eight runs its checks before the deadline of some
	// taint-evicted pods (genNow).
	require.Greater(t, deletes, propertyCases*2/3, "dead pods")
	require.Greater(t, failures, propertyCases/10, "failing deletes")
	require.Greater(t, heldBack, propertyCases/10, "held-back dead pods")
	require.Greater(t, invalid, propertyCases/50, "invalid lists")
	require.Greater(t, cancelled, propertyCases/50, "cancelled checks")
	require.Greater(t, unreachable, propertyCases/50, "pods on unreachable nodes")
}

// TestPropertyResultDoesNotDependOnOrder checks each generated pod set as
// listed and twice shuffled (pods and each pod's conditions), and requires
// the same health, error or not, set of deleted UIDs, and per-pod state and
// outcome.
func TestPropertyResultDoesNotDependOnOrder(t *testing.T) {
	for seed := range uint64(propertyCases) {
		r := seeded(seed + propertyCases)
		sc := genScenario(r, genOptions{maxPods: 10, invalid: true, cancel: false, nodes: true})
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			logOnFailure(t, sc)
			requireOrderIndependent(t, sc, r)
		})
	}
}

// logOnFailure prints the scenario of a failing case.
func logOnFailure(t *testing.T, sc scenario) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pods:\n%s\nfaults: %v\nclock: %v, then +%v", dump(sc.pods...), sc.faults, sc.now, sc.step)
			if sc.ev != nil {
				nodes, _ := json.MarshalIndent(sc.ev.nodes, "", "  ")
				t.Logf("nodes:\n%s\nReplaceUnreachable: %v, UnreachableFor: %v", nodes, sc.ev.replace, sc.ev.unreachableFor)
			}
		}
	})
}

// dump renders pods as JSON for failure messages.
func dump(pods ...*corev1.Pod) string {
	b, err := json.MarshalIndent(pods, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}
