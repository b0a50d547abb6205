package health_test

import (
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/podhealth/podhealth/health"
)

// The fuzz targets decode their input with byteChooser into the same
// scenarios that the property tests draw at random (see scenario_test.go),
// so every input is some pod set: nil entries, nameless and UID-less pods,
// any deletionTimestamp and grace period, duplicate and unknown conditions
// with any status and reason, unknown phases, owners, nodes, finalizers,
// and a scripted answer to each delete. Run one longer with
//
//	go test ./health -run '^$' -fuzz '^FuzzCheck$' -fuzztime=500000x
//
// (a count, not a duration: see the README's note on golang/go#75804).

// shuffleSeed derives the order a target compares against from its input.
func shuffleSeed(data []byte) *rand.Rand {
	h := fnv.New64a()
	h.Write(data)
	return rand.New(rand.NewPCG(h.Sum64(), 1))
}

// FuzzClassify requires of each decoded pod the documented state, a reason,
// the same state and rule in any order of its conditions, and no mutation:
// by the rules alone, or, when the input goes on to decode node evidence,
// by a Checker with that evidence and the unreachable policy.
func FuzzClassify(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})                                                          // taint-evicted, plain
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0})                                                          // terminated by the kubelet
	f.Add([]byte{2, 0, 0, 1, 0, 0, 0, 0})                                                          // drained
	f.Add([]byte{5, 4, 1, 0, 0, 0, 3, 0, 1, 2, 6, 0, 0, 0})                                        // anything, with conditions
	f.Add([]byte{3, 5, 6, 7, 4, 5, 0, 3, 1, 0, 7, 6, 1, 7, 5, 5, 3, 2, 6, 1, 5, 0, 1, 7, 3, 4, 2}) // running on an unreachable node: Unreachable
	rules := health.DefaultRules()
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{data: data}
		pod := genPod(c, 0)
		now := genNow(c, 2)
		var ev *genEvidence
		if c.IntN(2) == 1 {
			ev = genNodeEvidence(c)
		}
		requireClassification(t, rules, pod, now, ev, shuffleSeed(data))
	})
}

// FuzzCheck runs two checks over each decoded scenario with the fake as
// source and deleter, requires the invariants after each, and compares the
// result with that of the same scenario shuffled.
func FuzzCheck(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 4})
	f.Add([]byte{0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 8, 0, 3, 3, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{data: data}
		withReport := c.IntN(4) != 0
		sc := genScenario(c, genOptions{maxPods: 8, invalid: true, cancel: true, nodes: true})
		requireChecks(t, sc, withReport)
		requireOrderIndependent(t, sc, shuffleSeed(data))
	})
}
