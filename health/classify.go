package health

import (
	corev1 "k8s.io/api/core/v1"
)

// The classify stage: every listed pod gets its verdict from the rules,
// reading node evidence only for the pods that need it (evidence*.go).
// The quiet path (classify_quiet.go) is its fast form for checks that
// report nothing.

// classifyAll validates the pods, then classifies every one, filling in
// the report and telling the observer about the pods that are not dead (a
// dead pod is finished after its force delete). It returns the dead pods
// in list order, appended to dead.
func (k *check) classifyAll(pods []*corev1.Pod, dead []deadPod) (alive int, _ []deadPod, _ error) {
	if err := validate(pods); err != nil {
		return 0, nil, err
	}
	if k.report != nil {
		k.report.Pods = make([]PodReport, len(pods))
	}
	for i, pod := range pods {
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
		return k.unreachable(pod, v)
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
