package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/replacements"
)

// ReasonDeletedSurplus is the reason of the Normal event recorded on each
// surplus pod the controller deletes after a node came back.
const ReasonDeletedSurplus = "DeletedSurplusPod"

// wantedPods is how many live pods the controller keeps per workload.
const wantedPods = 1

// surplusDeletes remembers, per workload, the surplus pods deleted that the
// cache still lists as alive. A graceful delete only sets the pod's
// deletionTimestamp, and the next check may run before the cache shows it:
// without this record that check would delete the same pod again. A pod is
// forgotten when a report no longer lists it alive (the cache caught up)
// or after replacements.DefaultTTL, when it is deleted again: the way back
// if the delete was lost. Safe for concurrent use.
type surplusDeletes struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	deleted map[string]map[types.UID]time.Time // by workload: when each was deleted
}

func newSurplusDeletes(clk clock.PassiveClock) *surplusDeletes {
	return &surplusDeletes{clock: clk, deleted: make(map[string]map[types.UID]time.Time)}
}

// pending forgets the pods of workload w that alive no longer holds, and
// those deleted replacements.DefaultTTL ago or longer, and returns when each
// remaining one was deleted.
func (s *surplusDeletes) pending(w string, alive []*corev1.Pod) map[types.UID]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	listed := make(map[types.UID]bool, len(alive))
	for _, p := range alive {
		listed[p.UID] = true
	}
	now := s.clock.Now()
	out := make(map[types.UID]time.Time)
	for uid, at := range s.deleted[w] {
		// A clock set back makes the age negative: the pod is kept until
		// the clock passes the TTL again or the cache catches up.
		if !listed[uid] || now.Sub(at) >= replacements.DefaultTTL {
			delete(s.deleted[w], uid)
			continue
		}
		out[uid] = at
	}
	if len(s.deleted[w]) == 0 {
		delete(s.deleted, w)
	}
	return out
}

func (s *surplusDeletes) record(w string, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted[w] == nil {
		s.deleted[w] = make(map[types.UID]time.Time)
	}
	s.deleted[w][uid] = s.clock.Now()
}

// removeSurplus deletes, gracefully, the live pods of workload w beyond
// wantedPods, as report lists them. They appear when a node whose pods were
// replaced early (--replace-unreachable) comes back: its old pod is alive
// again next to the replacement. It keeps the pod most likely to serve
// (see keepFirst) and deletes the others with their own grace period and a
// UID precondition, so that a newer pod that took a name is left alone.
// Pods already gone count as deleted. Only live pods are ever deleted:
// never an Unreachable one (its node may come back; the surplus is decided
// then), nor one that is terminating or finished. A pod it deleted that the
// cache still lists as alive is not deleted again (see surplusDeletes);
// the workload is checked again when that record expires.
func (c *controller) removeSurplus(ctx context.Context, w string, report health.Report) error {
	var alive []*corev1.Pod
	for _, p := range report.Pods {
		if p.Verdict.State == health.Alive {
			alive = append(alive, p.Pod)
		}
	}
	pending := c.surplus.pending(w, alive)
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
		if at, ok := pending[pod.UID]; ok {
			log.V(1).Info("surplus pod deleted already; the cache does not show it yet", "namespace", pod.Namespace, "name", pod.Name, "uid", string(pod.UID))
			c.queue.AddAfter(w, at.Add(replacements.DefaultTTL).Sub(c.cfg.Clock.Now()))
			continue
		}
		err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &pod.UID},
		})
		switch {
		case err == nil:
			c.surplus.record(w, pod.UID)
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
