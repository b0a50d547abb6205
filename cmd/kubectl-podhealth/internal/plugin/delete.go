package plugin

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

var _ health.Deleter = (*namespacedDeleter)(nil)

// namespacedDeleter hands each pod to a kube.Deleter of the pod's own
// namespace, bound to the run's label selector (or, without one, to the
// whole namespace on purpose), so that a run over every namespace keeps the
// library's scope check. It is safe for concurrent use.
type namespacedDeleter struct {
	client   kubernetes.Interface
	selector labels.Selector // podsource.WholeNamespace() when -l was not given

	mu       sync.Mutex
	deleters map[string]*kube.Deleter
}

func newNamespacedDeleter(client kubernetes.Interface, selector labels.Selector) *namespacedDeleter {
	return &namespacedDeleter{client: client, selector: selector, deleters: map[string]*kube.Deleter{}}
}

func (d *namespacedDeleter) ForceDelete(ctx context.Context, pod *corev1.Pod) error {
	if pod == nil {
		return fmt.Errorf("force delete of a nil pod")
	}
	d.mu.Lock()
	del, ok := d.deleters[pod.Namespace]
	if !ok {
		var err error
		del, err = kube.NewDeleter(d.client.CoreV1(), pod.Namespace, kube.DeleterOptions{Selector: d.selector})
		if err != nil {
			d.mu.Unlock()
			return err
		}
		d.deleters[pod.Namespace] = del
	}
	d.mu.Unlock()
	return del.ForceDelete(ctx, pod)
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
func forceDelete(ctx context.Context, client kubernetes.Interface, selector labels.Selector, candidates []*PodHealth,
	maxDeletes int, pageSize int64, clk clock.PassiveClock) ([]string, error) {
	ev, warnings, err := newEvidence(ctx, client, pageSize)
	if err != nil {
		return nil, err
	}
	byUID := map[string]*PodHealth{}
	var fresh []*corev1.Pod
	for _, c := range candidates {
		pod, err := client.CoreV1().Pods(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
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
		newNamespacedDeleter(client, selector), opts)
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
