package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/health"
)

// scan lists the pods of namespace (every namespace when it is empty) that
// match selector, a page at a time, and judges each page with a dry-run
// Checker over the run's evidence. It keeps only the pods worth listing,
// copied out of their page, so that memory stays bounded by one page plus
// the listed pods however many pods the cluster has.
type scan struct {
	cluster   Cluster
	namespace string
	selector  string
	pageSize  int64
	evidence  *evidence
	clock     clock.PassiveClock
	// progress, when not nil, gets a line on each page after the first,
	// rewritten in place (a terminal).
	progress io.Writer
	// memory is shared by the dry-run checks of the pages.
	memory *health.Memory
	// claimErr joins the errors of claims that could not be read: their
	// pods are listed, held, and the run then fails.
	claimErr error
}

// scanResult is what a scan found.
type scanResult struct {
	rows     []PodHealth
	scanned  int
	pages    int
	warnings []string
}

func (s *scan) run(ctx context.Context) (scanResult, error) {
	var res scanResult
	opts := metav1.ListOptions{LabelSelector: s.selector, Limit: s.pageSize}
	start := s.clock.Now()
	defer s.endProgress(&res)
	for {
		page, err := s.cluster.ListPods(ctx, s.namespace, opts)
		if next, ok := resumeExpired(err, opts); ok {
			// The scan outlived its continue token: go on from the next
			// pod at the current state, as the API server offers.
			opts.Continue = next
			res.warnings = appendOnce(res.warnings, "the pod list took longer than the API server keeps a consistent snapshot; the rest of it was read at a later state")
			continue
		}
		if err != nil {
			return res, s.listError(err)
		}
		res.pages++
		pods := make([]*corev1.Pod, len(page.Items))
		for i := range page.Items {
			pods[i] = &page.Items[i]
		}
		res.scanned += len(pods)
		rows, err := s.judge(ctx, pods)
		if err != nil {
			return res, err
		}
		res.rows = append(res.rows, rows...)
		if page.Continue == "" {
			return res, nil
		}
		s.showProgress(res, page.RemainingItemCount, s.clock.Since(start))
		opts.Continue = page.Continue
	}
}

func (s *scan) listError(err error) error {
	where := "in namespace " + s.namespace
	if s.namespace == "" {
		where = "in any namespace"
	}
	return fmt.Errorf("cannot list pods %s: %w", where, err)
}

// judge runs a dry-run check over one page and returns the rows of the
// pods worth listing: dead (to be force-deleted, held back, or refused), or
// terminating on a node that is not Ready.
func (s *scan) judge(ctx context.Context, pods []*corev1.Pod) ([]PodHealth, error) {
	opts := s.evidence.options()
	opts.DryRun = true
	opts.Clock = s.clock
	if s.memory == nil {
		s.memory = health.NewMemory(health.MemoryOptions{})
	}
	opts.Memory = s.memory
	checker, err := health.New(health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return pods, nil }), nil, opts)
	if err != nil {
		return nil, err
	}
	report, err := checker.CheckReport(ctx)
	if err != nil && !errors.Is(err, health.ErrClaimUnavailable) {
		return nil, err
	}
	// A claim that could not be read (RBAC, a timeout) holds its pod: the
	// pod is listed, held, and the error is reported after the list.
	s.claimErr = errors.Join(s.claimErr, err)
	var rows []PodHealth
	for _, r := range report.Pods {
		if r.Verdict.State != health.Dead && r.Verdict.State != health.Terminating {
			continue
		}
		node := s.view(ctx, r.Pod.Spec.NodeName)
		if r.Verdict.State == health.Terminating && !s.stuck(r.Pod, node) {
			continue
		}
		r.Pod = r.Pod.DeepCopy() // let the page go
		rows = append(rows, describe(r, node))
	}
	return rows, nil
}

// stuck is true of a terminating pod whose node is down
// (health.NodeState.Down); when the node's state is unknown, of one whose
// deletion deadline has passed.
func (s *scan) stuck(pod *corev1.Pod, node nodeView) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	if node.known {
		return node.down
	}
	return pod.DeletionTimestamp != nil && s.clock.Now().After(pod.DeletionTimestamp.Time)
}

// view describes the node name from the run's evidence, reading it live
// only when the snapshot misses it (the Checker usually did already).
func (s *scan) view(ctx context.Context, name string) nodeView {
	return s.evidence.view(ctx, name, s.clock.Now())
}

func (e *evidence) view(ctx context.Context, name string, now time.Time) nodeView {
	if name == "" || e.nodes == nil {
		return nodeView{state: stateUnknown}
	}
	if n, ok := e.nodes.byName[name]; ok {
		return viewNode(n, false, now)
	}
	n, err := e.live.GetNode(ctx, name)
	switch {
	case err == nil && n != nil:
		return viewNode(n, false, now)
	case apierrors.IsNotFound(err):
		return viewNode(nil, true, now)
	}
	return nodeView{state: stateUnknown}
}

func (s *scan) showProgress(res scanResult, remaining *int64, elapsed time.Duration) {
	if s.progress == nil {
		return
	}
	total := ""
	if remaining != nil {
		total = fmt.Sprintf(" of about %d", int64(res.scanned)+*remaining)
	}
	fmt.Fprintf(s.progress, "\r\x1b[Kscanning pods: %d%s (%d pages, %v)", res.scanned, total, res.pages, elapsed.Round(100*time.Millisecond))
}

func (s *scan) endProgress(res *scanResult) {
	if s.progress != nil && res.pages > 1 {
		fmt.Fprint(s.progress, "\r\x1b[K")
	}
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
