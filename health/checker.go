package health

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Options configure a Checker. The zero value is the default: force deletes
// are sent, nothing is logged, the real clock is used, the rules are
// DefaultRules(), the Checker has a Memory of its own with default bounds,
// and nobody is notified.
type Options struct {
	// DryRun classifies and reports what would be force-deleted, and calls
	// neither the Deleter nor the Memory. Its health answer is the one the
	// real check would give if every force delete succeeded.
	DryRun bool
	// Logger gets one structured line per force delete (or would-be force
	// delete in dry run) with namespace, name, uid, rule, reason and outcome.
	// The zero Logger discards.
	Logger logr.Logger
	// Clock measures the Memory's expiry. Nil means the real clock.
	Clock clock.PassiveClock
	// Rules classify pods. Empty means DefaultRules().
	Rules Rules
	// Memory remembers deleted UIDs. Nil means a new Memory with default
	// bounds, private to this Checker. Share one Memory between Checkers
	// that see the same pods.
	Memory *Memory
	// Observer, when not nil, is told about each force delete.
	Observer Observer
}

// Observer is told about each force delete that a Checker sends and, in dry
// run, about each it would send. ObserveForceDelete is called after the
// delete ends, with the pod as listed and its report entry (Outcome is
// ForceDeleted, WasAlreadyGone, NameReused, DeleteFailed or
// WouldForceDelete). It must not mutate pod, should return quickly, and
// must be safe for concurrent use.
type Observer interface {
	ObserveForceDelete(ctx context.Context, pod *corev1.Pod, r PodReport)
}

// Checker answers whether one workload is healthy, force-deleting the pods
// that its rules call dead. See the package documentation for the decision
// table.
//
// A Checker is safe for concurrent use by many goroutines. Concurrent checks
// that meet the same dead pod send one DELETE between them.
type Checker struct {
	source   PodSource
	deleter  Deleter
	dryRun   bool
	log      logr.Logger
	clock    clock.PassiveClock
	rules    Rules
	memory   *Memory
	observer Observer
}

// New returns a Checker over source and deleter. The deleter may be nil only
// in dry run.
func New(source PodSource, deleter Deleter, opts Options) (*Checker, error) {
	if source == nil {
		return nil, errors.New("podhealth: New: nil PodSource")
	}
	if deleter == nil && !opts.DryRun {
		return nil, errors.New("podhealth: New: nil Deleter (only a dry run may have none)")
	}
	c := &Checker{
		source:   source,
		deleter:  deleter,
		dryRun:   opts.DryRun,
		log:      opts.Logger,
		clock:    opts.Clock,
		rules:    opts.Rules,
		memory:   opts.Memory,
		observer: opts.Observer,
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if len(c.rules) == 0 {
		c.rules = DefaultRules()
	}
	if c.memory == nil {
		c.memory = NewMemory(MemoryOptions{})
	}
	return c, nil
}

// Check lists the workload's pods, force-deletes the dead ones, and answers
// whether the workload is healthy, as the decision table in the package
// documentation says. It is the drop-in for a CheckRegistryServer-style
// caller: on (false, nil) the caller should create a replacement; on an
// error it should retry.
func (c *Checker) Check(ctx context.Context) (healthy bool, err error) {
	return c.run(ctx, nil)
}

// CheckReport does what Check does and also returns a Report that lists
// every pod with its verdict and the outcome of its force delete. The
// Report is filled in also when an error is returned, as far as the check
// got.
func (c *Checker) CheckReport(ctx context.Context) (Report, error) {
	r := Report{DryRun: c.dryRun}
	healthy, err := c.run(ctx, &r)
	r.Healthy = healthy
	return r, err
}

// run is Check, filling in report when it is not nil. With no report and
// no dead pod it allocates nothing.
func (c *Checker) run(ctx context.Context, report *Report) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, stopped(err)
	}
	pods, err := c.source.ListPods(ctx)
	if err != nil {
		return false, &ListError{Err: err}
	}
	if err := validate(pods); err != nil {
		return false, err
	}
	if report != nil {
		report.Pods = make([]PodReport, 0, len(pods))
	}

	alive := 0
	var dead []deadPod // allocated only when there is a dead pod
	for i, pod := range pods {
		v := c.rules.Classify(pod)
		switch v.State {
		case Alive:
			alive++
		case Dead:
			dead = append(dead, deadPod{index: i, verdict: v})
		}
		if report != nil {
			report.Pods = append(report.Pods, newPodReport(pod, v))
		}
	}

	var errs []error
	for n, d := range dead {
		if err := ctx.Err(); err != nil {
			if report != nil {
				for _, rest := range dead[n:] {
					report.Pods[rest.index].Outcome = NotAttempted
				}
			}
			errs = append(errs, stopped(err))
			break
		}
		outcome, err := c.forceDelete(ctx, pods[d.index], d.verdict)
		if report != nil {
			report.Pods[d.index].Outcome = outcome
			report.Pods[d.index].Err = err
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	return alive > 0, nil
}

// deadPod is a dead pod's place in the list, with its verdict.
type deadPod struct {
	index   int
	verdict Verdict
}

// forceDelete removes one dead pod, unless a dry run, the Memory or another
// check in flight says it need not be sent.
func (c *Checker) forceDelete(ctx context.Context, pod *corev1.Pod, v Verdict) (Outcome, error) {
	if pod.UID == "" {
		err := &DeleteError{Namespace: pod.Namespace, Name: pod.Name, Err: ErrMissingUID}
		c.log.Error(err, "not force-deleting pod", podKeys(pod, v)...)
		return DeleteFailed, err
	}
	if c.dryRun {
		c.log.Info("would force-delete pod", podKeys(pod, v)...)
		c.observe(ctx, pod, v, WouldForceDelete, nil)
		return WouldForceDelete, nil
	}

	remembered, call, owner := c.memory.claimUnlessRemembered(pod.UID, c.clock.Now())
	if remembered {
		if len(pod.Finalizers) > 0 {
			return BlockedByFinalizers, nil
		}
		return DeletedEarlier, nil
	}
	if !owner {
		// Another check is deleting this pod; share its result.
		select {
		case <-call.done:
		case <-ctx.Done():
			return NotAttempted, stopped(ctx.Err())
		}
		if call.err != nil {
			return DeleteFailed, call.err
		}
		return outcomeOf(call.result), nil
	}

	result, err := c.deleter.ForceDelete(ctx, pod)
	if err == nil && (result < Deleted || result > UIDMismatch) {
		err = fmt.Errorf("deleter returned an unknown result %d with no error", int(result))
	}
	if err != nil {
		err = &DeleteError{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Err: err}
	}
	c.memory.finish(pod.UID, call, result, err, c.clock.Now())
	if err != nil {
		c.log.Error(err, "force delete failed", podKeys(pod, v)...)
		c.observe(ctx, pod, v, DeleteFailed, err)
		return DeleteFailed, err
	}
	outcome := outcomeOf(result)
	c.log.Info("force-deleted pod", append(podKeys(pod, v), "outcome", outcome.String())...)
	c.observe(ctx, pod, v, outcome, nil)
	return outcome, nil
}

func (c *Checker) observe(ctx context.Context, pod *corev1.Pod, v Verdict, o Outcome, err error) {
	if c.observer == nil {
		return
	}
	r := newPodReport(pod, v)
	r.Outcome, r.Err = o, err
	c.observer.ObserveForceDelete(ctx, pod, r)
}

func newPodReport(pod *corev1.Pod, v Verdict) PodReport {
	return PodReport{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, NodeName: pod.Spec.NodeName, Verdict: v}
}

func podKeys(pod *corev1.Pod, v Verdict) []any {
	return []any{"namespace", pod.Namespace, "name", pod.Name, "uid", string(pod.UID), "node", pod.Spec.NodeName, "rule", v.Rule, "reason", v.Reason}
}

// validate rejects a list that cannot be judged safely, before anything is
// deleted.
func validate(pods []*corev1.Pod) error {
	for i, pod := range pods {
		switch {
		case pod == nil:
			return &InvalidPodError{Index: i, Reason: "nil pod"}
		case pod.Name == "":
			return &InvalidPodError{Index: i, Reason: "pod has no name"}
		}
	}
	return nil
}

// stopped wraps the error of an ended context (row D7).
func stopped(err error) error {
	return fmt.Errorf("podhealth: check stopped: %w", err)
}
