package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

var _ health.Deleter = namespacedDeleter{}

// namespacedDeleter force-deletes pods of any namespace, each bound to the
// run's label selector (or, without one, to the whole namespace on
// purpose), with kube.Deleter's checks: a pod outside that scope
// (podsource.InScope) or without a name or UID is refused without a
// request, and the DELETE has a grace period of 0 and a precondition on
// the pod's UID (podsource.ForceDeleteOptions). It is safe for concurrent
// use when its Cluster is.
type namespacedDeleter struct {
	cluster  Cluster
	selector labels.Selector // podsource.WholeNamespace() when -l was not given
}

func (d namespacedDeleter) ForceDelete(ctx context.Context, pod *corev1.Pod) error {
	if pod == nil {
		return errors.New("force delete of a nil pod")
	}
	if err := podsource.ValidateScope(pod.Namespace, d.selector); err != nil {
		return err
	}
	if err := podsource.InScope(pod, pod.Namespace, d.selector); err != nil {
		return err
	}
	if pod.Name == "" || pod.UID == "" {
		return fmt.Errorf("force delete of pod %s/%s: %w", pod.Namespace, pod.Name, health.ErrUnidentifiedPod)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("force delete of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := d.cluster.DeletePod(ctx, pod.Namespace, pod.Name, podsource.ForceDeleteOptions(pod.UID)); err != nil {
		return fmt.Errorf("DELETE pod %s/%s with grace period 0 and UID precondition: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// budgetWindow is the window of the --max-deletes budget: longer than any
// run, so that the budget bounds the run as a whole.
const budgetWindow = 24 * time.Hour

// forceDelete re-reads the candidates (the pods the scan would
// force-delete) and the nodes, and runs one real check over the pods that
// are still the same objects, with the library's policy, breaker and a
// budget of maxDeletes. It fills in each candidate's Result, and returns
// the warnings of the evidence it read; an error only when it could not
// check at all. A failed delete is a result, not an error.
func forceDelete(ctx context.Context, cluster Cluster, selector labels.Selector, candidates []*PodHealth,
	maxDeletes int, pageSize int64, clk clock.PassiveClock) ([]string, error) {
	ev, warnings, err := newEvidence(ctx, cluster, pageSize)
	if err != nil {
		return nil, err
	}
	byUID := map[string]*PodHealth{}
	var fresh []*corev1.Pod
	for _, c := range candidates {
		pod, err := cluster.GetPod(ctx, c.Namespace, c.Name)
		switch {
		case apierrors.IsNotFound(err):
			c.Result, c.done = "already gone", doneRemoved
			continue
		case err != nil:
			c.Result, c.done = fmt.Sprintf("not deleted: cannot read it again before the delete: %v", err), doneFailed
			continue
		case pod.UID != c.UID:
			c.Result, c.done = "left alone: a newer pod holds the name", doneRemoved
			continue
		}
		byUID[string(pod.UID)] = c
		fresh = append(fresh, pod)
	}
	if len(fresh) == 0 {
		return warnings, nil
	}
	budget, err := health.NewDeleteBudget(maxDeletes, budgetWindow)
	if err != nil {
		return warnings, err
	}
	opts := ev.options()
	opts.Budget = budget
	opts.Clock = clk
	checker, err := health.New(health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return fresh, nil }),
		namespacedDeleter{cluster: cluster, selector: selector}, opts)
	if err != nil {
		return warnings, err
	}
	report, checkErr := checker.CheckReport(ctx)
	for _, r := range report.Pods {
		if c := byUID[string(r.Pod.UID)]; c != nil {
			c.Result, c.done = resultText(r), doneOf(r.Outcome)
			if r.Outcome == health.HeldBack {
				c.heldBack(r.HeldBack)
			}
		}
	}
	for _, c := range candidates {
		if c.Result == "" {
			c.Result, c.done = "not attempted: interrupted", doneFailed
		}
	}
	if checkErr != nil && ctx.Err() != nil {
		return warnings, checkErr
	}
	return warnings, nil // failed deletes are in the results
}
