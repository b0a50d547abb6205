package health

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Options configure a Checker. The zero value is the default: force deletes
// are sent, nothing is logged, the real clock is used, the rules are
// DefaultRules(), the policy is the zero Policy (FenceStateful), there is no
// node evidence, no budget and no breaker, the Checker has a Memory of its
// own with default bounds, and nobody is notified.
type Options struct {
	// DryRun classifies and reports what would be force-deleted, and calls
	// neither the Deleter nor the Memory nor the Budget. Its health answer is
	// the one the real check would give if every force delete succeeded.
	DryRun bool
	// Logger gets one structured line per force delete (or would-be force
	// delete in dry run) with namespace, name, uid, rule, reason and outcome.
	// The zero Logger discards.
	Logger logr.Logger
	// Clock measures the Memory's expiry and how long pods and nodes have
	// been seen in a state. Nil means the real clock.
	Clock clock.PassiveClock
	// Rules classify pods. Empty means DefaultRules().
	Rules Rules
	// NodeEvidence is where node-aware rules and the policy learn about
	// nodes. The zero value means no node evidence.
	NodeEvidence NodeEvidence
	// Policy decides which dead pods need fencing evidence.
	Policy Policy
	// Budget, when not nil, limits force deletes per time window; share one
	// between Checkers to limit them together.
	Budget *DeleteBudget
	// Breaker stops force deletes when many nodes fail at once. The zero
	// value never trips.
	Breaker Breaker
	// Memory remembers deleted UIDs. Nil means a new Memory with default
	// bounds, private to this Checker. Share one Memory between Checkers
	// that see the same pods.
	Memory *Memory
	// Observer, when not nil, is told about each decision and each force
	// delete.
	Observer Observer
}

// Observer is told what a Checker decides and does. Its methods are called
// synchronously from Check, must not mutate pod, should return quickly, and
// must be safe for concurrent use. Implementations in this repository:
// podsource/kube.EventObserver (Kubernetes events) and the Metrics of
// examples/prometheus.
type Observer interface {
	// ObserveDecision is called once per listed pod and check, with its
	// verdict and outcome (NoAction for pods that are not dead).
	ObserveDecision(ctx context.Context, pod *corev1.Pod, r PodReport)
	// ObserveForceDelete is called after each force delete that the
	// Checker sends and, in dry run, for each it would send; the Outcome is
	// ForceDeleted, WasAlreadyGone, NameReused, DeleteFailed or
	// WouldForceDelete.
	ObserveForceDelete(ctx context.Context, pod *corev1.Pod, r PodReport)
}

// Checker answers whether one workload is healthy, force-deleting the pods
// that its rules call dead and its policy lets go. See the package
// documentation for the decision table.
//
// A Checker is safe for concurrent use by many goroutines. Concurrent checks
// that meet the same dead pod send one DELETE between them.
type Checker struct {
	source        PodSource
	deleter       Deleter
	dryRun        bool
	log           logr.Logger
	clock         clock.PassiveClock
	rules         Rules
	evidenceRules bool
	// factsRules is true when every rule declares Rule.When: a pod with no
	// facts is then alive without asking any rule.
	factsRules bool
	nodes      NodeEvidence
	policy     Policy
	budget     *DeleteBudget
	breaker    Breaker
	memory     *Memory
	observer   Observer
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
	switch opts.Policy.Fencing {
	case FenceStateful, FenceAlways, FenceNever:
	default:
		return nil, fmt.Errorf("podhealth: New: unknown Policy.Fencing %d", int(opts.Policy.Fencing))
	}
	c := &Checker{
		source:   source,
		deleter:  deleter,
		dryRun:   opts.DryRun,
		log:      opts.Logger,
		clock:    opts.Clock,
		rules:    opts.Rules,
		nodes:    opts.NodeEvidence,
		policy:   opts.Policy,
		budget:   opts.Budget,
		breaker:  opts.Breaker,
		memory:   opts.Memory,
		observer: opts.Observer,
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if len(c.rules) == 0 {
		c.rules = DefaultRules()
	}
	c.evidenceRules = c.rules.needEvidence()
	c.factsRules = c.rules.needFacts()
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

// check is the state of one run.
type check struct {
	*Checker
	ctx        context.Context
	now        time.Time
	report     *Report
	evidence   *Evidence   // made on first use
	disruption *disruption // read on first use
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
	k := check{Checker: c, ctx: ctx, now: c.clock.Now(), report: report}

	alive := 0
	var dead []deadPod // allocated only when there is a dead pod
	for i, pod := range pods {
		facts := FactsOf(pod)
		var v Verdict
		switch {
		case facts == 0 && c.factsRules:
			v = aliveByDefault // the common case: a running pod, no rule applies
		case c.evidenceRules && facts&(Deleting|Terminal) != 0:
			v = c.rules.classify(pod, facts, k.getEvidence())
		default:
			v = c.rules.classify(pod, facts, nil)
		}
		switch v.State {
		case Alive:
			alive++
		case Dead:
			dead = append(dead, deadPod{index: i, verdict: v})
		}
		if report != nil {
			report.Pods = append(report.Pods, newPodReport(pod, v))
		}
		if v.State != Dead && c.observer != nil {
			c.observer.ObserveDecision(ctx, pod, newPodReport(pod, v))
		}
	}

	var errs []error
	for n, d := range dead {
		pod := pods[d.index]
		if err := ctx.Err(); err != nil {
			for _, rest := range dead[n:] {
				k.record(pods[rest.index], rest.index, rest.verdict, result{outcome: NotAttempted})
			}
			errs = append(errs, stopped(err))
			break
		}
		res := k.removeDead(pod, d.verdict)
		k.record(pod, d.index, d.verdict, res)
		if res.err != nil {
			errs = append(errs, res.err)
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

// result is what happened to one dead pod.
type result struct {
	outcome    Outcome
	heldBack   string // why, when outcome is HeldBack
	retryAfter time.Duration
	err        error
}

// record writes a dead pod's result into the report and tells the observer.
func (k *check) record(pod *corev1.Pod, index int, v Verdict, res result) {
	if k.report != nil {
		p := &k.report.Pods[index]
		p.Outcome, p.HeldBack, p.Err = res.outcome, res.heldBack, res.err
		if res.retryAfter > 0 && (k.report.RetryAfter == 0 || res.retryAfter < k.report.RetryAfter) {
			k.report.RetryAfter = res.retryAfter
		}
	}
	if k.observer != nil {
		r := newPodReport(pod, v)
		r.Outcome, r.HeldBack, r.Err = res.outcome, res.heldBack, res.err
		k.observer.ObserveDecision(k.ctx, pod, r)
	}
}

// removeDead force-deletes one dead pod, unless something says it must not
// or need not be sent: a missing UID, a dry run, the Memory, the policy,
// the breaker, the budget, or another check already deleting it.
func (k *check) removeDead(pod *corev1.Pod, v Verdict) result {
	if pod.UID == "" {
		err := &DeleteError{Namespace: pod.Namespace, Name: pod.Name, Err: ErrMissingUID}
		k.log.Error(err, "not force-deleting pod", podKeys(pod, v)...)
		return result{outcome: DeleteFailed, err: err}
	}
	if !k.dryRun && k.memory.Remembers(pod.UID, k.now) {
		if len(pod.Finalizers) > 0 {
			return result{outcome: BlockedByFinalizers}
		}
		return result{outcome: DeletedEarlier}
	}
	if why := k.holdBack(pod, v); why != "" {
		k.log.V(1).Info("holding back force delete", append(podKeys(pod, v), "heldBack", why)...)
		return result{outcome: HeldBack, heldBack: why}
	}
	if k.dryRun {
		k.log.Info("would force-delete pod", podKeys(pod, v)...)
		k.observeDelete(pod, v, result{outcome: WouldForceDelete})
		return result{outcome: WouldForceDelete}
	}

	remembered, call, owner := k.memory.claimUnlessRemembered(pod.UID, k.now)
	if remembered {
		return result{outcome: DeletedEarlier} // another check finished it just now
	}
	if !owner {
		// Another check is deleting this pod; share its result.
		select {
		case <-call.done:
		case <-k.ctx.Done():
			return result{outcome: NotAttempted, err: stopped(k.ctx.Err())}
		}
		return call.res
	}

	res := k.send(pod, v)
	k.memory.finish(pod.UID, call, res, k.clock.Now())
	return res
}

// send spends the budget and sends the DELETE.
func (k *check) send(pod *corev1.Pod, v Verdict) result {
	if k.budget != nil {
		if ok, retryAfter := k.budget.take(k.now); !ok {
			why := fmt.Sprintf("force-delete budget of %d per %v used up", k.budget.max, k.budget.window)
			k.log.V(1).Info("holding back force delete", append(podKeys(pod, v), "heldBack", why)...)
			return result{outcome: HeldBack, heldBack: why, retryAfter: retryAfter}
		}
	}
	deleteResult, err := k.deleter.ForceDelete(k.ctx, pod)
	if err == nil && (deleteResult < Deleted || deleteResult > UIDMismatch) {
		err = fmt.Errorf("deleter returned an unknown result %d with no error", int(deleteResult))
	}
	var res result
	if err != nil {
		res = result{outcome: DeleteFailed, err: &DeleteError{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Err: err}}
		k.log.Error(res.err, "force delete failed", podKeys(pod, v)...)
	} else {
		res = result{outcome: outcomeOf(deleteResult)}
		k.log.Info("force-deleted pod", append(podKeys(pod, v), "outcome", res.outcome.String())...)
	}
	k.observeDelete(pod, v, res)
	return res
}

// holdBack returns why the policy or the breaker keeps a dead pod, or "".
func (k *check) holdBack(pod *corev1.Pod, v Verdict) string {
	if optedOut(pod) {
		return "opted out by annotation " + AnnotationForceDelete + "=" + ForceDeleteNever
	}
	if !v.Fenced {
		if why := k.policy.needsFencing(k.ctx, pod); why != "" && !fenced(pod, k.getEvidence()) {
			return "needs fencing evidence (node gone, or not Ready with the out-of-service taint): " + why
		}
	}
	if k.breaker.Nodes != nil {
		if k.disruption == nil {
			k.disruption = k.breaker.read(k.ctx)
		}
		if why := k.breaker.tripped(k.disruption, pod.Spec.NodeName); why != "" {
			return "breaker open: " + why
		}
	}
	return ""
}

func (k *check) getEvidence() *Evidence {
	if k.evidence == nil {
		k.evidence = newEvidence(k.ctx, k.nodes, k.now, k.memory.sightings)
	}
	return k.evidence
}

func (k *check) observeDelete(pod *corev1.Pod, v Verdict, res result) {
	if k.observer == nil {
		return
	}
	r := newPodReport(pod, v)
	r.Outcome, r.Err = res.outcome, res.err
	k.observer.ObserveForceDelete(k.ctx, pod, r)
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
