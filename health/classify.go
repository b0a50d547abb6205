package health

import (
	corev1 "k8s.io/api/core/v1"
)

// The classify stage: the pods that the screens left (evidence_screen.go,
// classify_quiet.go), or every pod when the check reports verdicts, get
// their verdicts from the rules, which read the node evidence that the
// screen found or look it up through the same evidence; a pod the rules
// call Alive on a node that may be unreachable is then the policy's to
// replace (policy_replace.go).

// classifyPods gives their verdicts to the pods of todo, or to every pod
// when all is set (a check that reports verdicts: it validates the list
// first, fills in the report, and tells the observer about the pods that
// are not dead; a dead pod is finished after its force delete). It counts
// the alive ones on top of alive, and returns the dead ones in list order,
// in todo's room.
func (k *check) classifyPods(pods []*corev1.Pod, todo []deadPod, alive int, all bool) (int, []deadPod, error) {
	n := len(todo)
	if all {
		if err := validate(pods); err != nil {
			return 0, nil, err
		}
		if k.report != nil {
			k.report.Pods = make([]PodReport, len(pods))
		}
		n = len(pods)
	}
	// Once a pod is counted alive, the health answer is known unless a
	// force delete fails, so a pod that the Memory holds as force-deleted
	// changes nothing whatever its verdict: it is gone from the API server
	// (or held there by a finalizer), so sending its force delete again
	// could only answer NotFound or change nothing, and it would count at
	// most one more pod alive. A check that reports no verdict does not
	// judge it, which spares reading its conditions and the clock. Without
	// node evidence no rule records anything while it judges, so nothing
	// is lost; a dry run does not read the Memory.
	skipRemembered := !all && alive > 0 && !k.dryRun && k.nodes == nil
	dead := todo[:0] // dead is never longer than the pods of todo read so far
	for j := range n {
		i := j
		if !all {
			i = todo[j].index
		}
		pod := pods[i]
		if skipRemembered && pod.Name != "" && pod.UID != "" && k.memory.holds(pod.UID) {
			continue
		}
		v := k.classify(pod)
		switch v.State {
		case Alive:
			alive++
		case Dead:
			if len(dead) == cap(dead) {
				dead = k.grow(dead, i, len(pods))
			}
			dead = append(dead, deadPod{index: i, verdict: v})
			continue // finished after its force delete
		}
		if k.report != nil || k.observer != nil {
			k.finish(i, PodReport{Pod: pod, Verdict: v})
		}
	}
	return alive, dead, nil
}

// classify gives pod its verdict, reading its facts once and asking for
// node evidence only for pods that are deleting or terminal, or bound to a
// node when a node can be confirmed gone (Options.Nodes and
// Options.LiveNodes) or, under Options.ReplaceUnreachable, when the rules
// call it alive: then each pod costs one lookup of its node in the
// check's table, and each node one lookup per check.
func (k *check) classify(pod *corev1.Pod) Verdict {
	v := k.classifyByRules(pod)
	if v.State == Alive && k.replaceUnreachable {
		return k.replace(pod, v)
	}
	return v
}

// classifyByRules is the verdict of the rules alone.
func (k *check) classifyByRules(pod *corev1.Pod) Verdict {
	f := factsOf(pod)
	if k.orphans && pod.Spec.NodeName != "" && k.getEvidence().gone(pod.Spec.NodeName) {
		f |= onGoneNode
	}
	switch {
	case f == 0 && k.factsRules:
		return aliveByDefault // the common case: a running pod, no rule applies
	case k.evidenceRules && f&(deleting|terminal|onGoneNode) != 0:
		return k.rules.classify(pod, f, k.getEvidence())
	default:
		return k.rules.classify(pod, f, nil)
	}
}

// validate rejects a list that cannot be judged, before anything is
// deleted: a nil pod is a broken source (row D6).
func validate(pods []*corev1.Pod) error {
	for i, pod := range pods {
		if pod == nil {
			return nilPod(i)
		}
	}
	return nil
}
