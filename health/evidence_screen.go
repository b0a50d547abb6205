package health

import corev1 "k8s.io/api/core/v1"

// The evidence screen: with node evidence for orphans (Options.Nodes and
// Options.LiveNodes) or early replacement (Options.ReplaceUnreachable), a
// check that reports no verdict looks up the node of each running pod
// before any rule runs, and counts it alive when its node is not suspect.
// The rules then judge only the others, reading what the screen found.

// nodeBlock is how many pods screen reads before it looks their nodes up.
const nodeBlock = 32

// screen is the quiet path's pass with node evidence for orphans or early
// replacement, before any rule runs: a pod that is neither deleting nor
// terminal is alive unless its node is suspect (see suspectNode). It
// returns alive and the pods to classify, in list order, appended to
// others. It returns an error for a nil pod, before any rule sees the
// list.
//
// A pod's node name is a string of its own, away from the pod, so that
// looking it up right after reading the pod would wait for two reads from
// memory in turn, pod after pod. Instead the pods are read by blocks: the
// node names of a block are gathered, then touched all at once, so that
// their reads overlap, and only then looked up in the check's table (see
// nodeTable), in front of evidence.seen, where each node is looked up in
// Options.Nodes once per check.
func (k *check) screen(pods []*corev1.Pod, others []deadPod) (alive int, _ []deadPod, _ error) {
	type entry struct {
		index int
		node  string // "" for a pod to classify
	}
	var block [nodeBlock]entry
	e := k.getEvidence()
	// A short list meets few nodes more than once: filling the table would
	// cost more than it saves.
	tabled := len(pods) > 2*nodeBlock
	for start := 0; start < len(pods); start += nodeBlock {
		n := 0
		for i := start; i < min(start+nodeBlock, len(pods)); i++ {
			switch pod := pods[i]; {
			case pod == nil:
				return 0, nil, nilPod(i)
			case pod.DeletionTimestamp != nil || isTerminalPhase(pod):
				block[n] = entry{index: i}
				n++
			case pod.Spec.NodeName == "":
				alive++ // no node, so not an orphan
			default:
				block[n] = entry{index: i, node: pod.Spec.NodeName}
				n++
			}
		}
		var touched byte
		for j := range n {
			if node := block[j].node; node != "" {
				touched |= node[len(node)-1]
			}
		}
		e.touched |= touched
		for j := range n {
			b := &block[j]
			if b.node != "" {
				suspect, ok := e.table.suspect(b.node)
				if !ok {
					suspect = k.suspectNode(e, b.node)
					if tabled {
						e.table.put(b.node, suspect)
					}
				}
				if !suspect {
					alive++
					continue
				}
			}
			if len(others) == cap(others) {
				others = k.grow(others, b.index, len(pods))
			}
			others = append(others, deadPod{index: b.index})
		}
	}
	return alive, others, nil
}

// suspectNode reports whether a running pod on the named node needs the
// rules after all: the node is confirmed gone (NodeGone), or, under
// Options.ReplaceUnreachable, one whose pods early replacement may replace
// (see replacement; how long it has been so is left to the policy's
// replace).
func (k *check) suspectNode(e *evidence, name string) bool {
	if k.orphans && e.gone(name) {
		return true
	}
	if !k.replaceUnreachable {
		return false
	}
	ok, _, _ := e.replacement(name, false)
	return ok
}
