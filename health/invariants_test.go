package health_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
)

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
		seen[wantState(pod, now)]++
		requireClassification(t, rules, pod, now, r)
	}
	// The generator must reach every state often enough to mean something.
	for _, s := range []health.State{health.Alive, health.Terminating, health.Finished, health.Dead} {
		require.Greater(t, seen[s], propertyCases/10, "only %d of %d generated pods are %v: %v", seen[s], propertyCases, s, seen)
	}
}

// requireClassification is the classification property for one pod.
func requireClassification(t testing.TB, rules health.Rules, pod *corev1.Pod, now time.Time, r *rand.Rand) {
	t.Helper()
	snap := takeSnapshot(t, []*corev1.Pod{pod})
	got := rules.ClassifyAt(pod, now)
	snap.requireUnchanged(t, []*corev1.Pod{pod})
	snap.requireSameJSON(t, []*corev1.Pod{pod})
	require.Equal(t, wantState(pod, now), got.State, "pod %s at %v: verdict %+v", dump(pod), now, got)
	require.NotEmpty(t, got.Reason)
	if got.Rule == "" {
		require.Equal(t, health.Alive, got.State, "only the default Alive has no rule")
	}
	shuffled := permuted(r, []*corev1.Pod{pod})[0]
	again := rules.ClassifyAt(shuffled, now)
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
	var deletes, failures, heldBack, invalid, cancelled int
	for seed := range uint64(propertyCases) {
		r := seeded(seed)
		sc := genScenario(r, genOptions{maxPods: 10, invalid: true, cancel: true})
		withReport := seed%4 != 0 // a quarter through Check, the rest through CheckReport
		if !validList(sc.pods) {
			invalid++
		}
		for name, f := range sc.faults {
			if f.kind == faultCancel && slices.ContainsFunc(sc.pods, func(p *corev1.Pod) bool {
				return p != nil && p.Name == name && p.UID != "" && wantState(p, sc.now) == health.Dead && !wantHeldBack(p)
			}) {
				cancelled++
			}
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			logOnFailure(t, sc)
			requireChecks(t, sc, withReport)
		})
		for _, p := range sc.pods {
			if p != nil && p.UID != "" && wantState(p, sc.now.Add(sc.step)) == health.Dead { // dead by the second check
				if wantHeldBack(p) {
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
}

// TestPropertyResultDoesNotDependOnOrder checks each generated pod set as
// listed and twice shuffled (pods and each pod's conditions), and requires
// the same health, error or not, set of deleted UIDs, and per-pod state and
// outcome.
func TestPropertyResultDoesNotDependOnOrder(t *testing.T) {
	for seed := range uint64(propertyCases) {
		r := seeded(seed + propertyCases)
		sc := genScenario(r, genOptions{maxPods: 10, invalid: true, cancel: false})
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
