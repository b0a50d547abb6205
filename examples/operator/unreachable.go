package main

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

// ReasonDeletedSurplus is the reason of the Normal event recorded on each
// surplus pod the controller deletes after a node came back.
const ReasonDeletedSurplus = "DeletedSurplusPod"

// wantedPods is how many live pods the controller keeps per workload.
const wantedPods = 1

// removeSurplus deletes, gracefully, the live pods of workload w beyond
// wantedPods, as report lists them. They appear when a node whose pods were
// replaced early (--replace-unreachable) comes back: its old pod is alive
// again next to the replacement. It keeps the pod most likely to serve
// (see keepFirst) and deletes the others with their own grace period and a
// UID precondition, so that a newer pod that took a name is left alone.
// Pods already gone count as deleted. Only live pods are ever deleted:
// never an Unreachable one (its node may come back; the surplus is decided
// then), nor one that is terminating or finished.
func (c *controller) removeSurplus(ctx context.Context, w string, report health.Report) error {
	var alive []*corev1.Pod
	for _, p := range report.Pods {
		if p.Verdict.State == health.Alive {
			alive = append(alive, p.Pod)
		}
	}
	if len(alive) <= wantedPods {
		return nil
	}
	sort.SliceStable(alive, func(i, j int) bool { return keepFirst(alive[i], alive[j]) })
	log := c.log.WithValues("workload", w)
	var errs []error
	for _, pod := range alive[wantedPods:] {
		if c.cfg.DryRun {
			log.Info("would delete surplus pod (dry run)", "namespace", pod.Namespace, "name", pod.Name, "uid", string(pod.UID), "kept", alive[0].Name)
			continue
		}
		err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &pod.UID},
		})
		switch {
		case err == nil:
			log.Info("deleted surplus pod", "namespace", pod.Namespace, "name", pod.Name, "uid", string(pod.UID), "kept", alive[0].Name)
			c.recorder.Eventf(podsource.PodReference(pod), corev1.EventTypeNormal, ReasonDeletedSurplus,
				"Deleted surplus pod %s/%s of workload %s, which has %d live pods and wants %d; kept %s",
				pod.Namespace, pod.Name, w, len(alive), wantedPods, alive[0].Name)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone already, or the name now belongs to a newer pod.
		default:
			errs = append(errs, fmt.Errorf("deleting surplus pod %s/%s of workload %s: %w", pod.Namespace, pod.Name, w, err))
		}
	}
	return errors.Join(errs...)
}

// keepFirst orders the live pods of a workload by which to keep: a Ready
// pod before one that is not (it serves now), then the newest (on a node
// that was healthy when it was created, while the older one's node has
// just come back), then by name so that the order is total.
func keepFirst(a, b *corev1.Pod) bool {
	if ra, rb := podReady(a), podReady(b); ra != rb {
		return ra
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeMarkedUnreachable reports whether node carries the node-lifecycle
// controller's unreachable or not-ready taint with effect NoExecute. The
// node handler enqueues a node's workloads when this changes too, not only
// Ready: the controller sets Ready=Unknown first and adds the taint a
// moment later, and only then are the pods Unreachable.
func nodeMarkedUnreachable(node *corev1.Node) bool {
	if node == nil {
		return false
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute && (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady) {
			return true
		}
	}
	return false
}
