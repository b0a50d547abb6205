package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/nilcheck"
)

var _ health.Observer = (*Observer)(nil)

// Options configure NewObserver. The zero value is the default.
type Options struct {
	// Clock tells the time of a force delete, for the age histograms. Nil
	// means the real clock.
	Clock clock.PassiveClock
	// Buckets are the age histograms' upper bounds, in seconds: finite and
	// strictly increasing (Prometheus adds +Inf itself). Nil means
	// DefaultBuckets; NewObserver refuses an empty list and any other.
	Buckets []float64
	// Breaker, when its Nodes are set, is the Breaker the Checkers share:
	// podhealth_breaker_open then reads its state at each scrape
	// (health.Breaker.Open), so that it falls to 0 as soon as the nodes
	// recover, with no dead pod asking. The zero Breaker means the gauge
	// follows the last dead pod that reached a Breaker.
	Breaker health.Breaker
	// BreakerTimeout bounds each scrape's reading of Breaker's nodes; a
	// reading that does not finish counts as open. Zero means 5 s; it needs
	// Breaker.Nodes, and NewObserver refuses it without them, or negative.
	BreakerTimeout time.Duration
}

// defaultBreakerTimeout is Options.BreakerTimeout's default.
const defaultBreakerTimeout = 5 * time.Second

// DefaultBuckets are the age histograms' default bounds: 10 ms to 30
// minutes, so that both an immediate force delete (tens of milliseconds
// after the eviction) and one that waited for a deletion deadline or the
// TerminatingTooLong margin (minutes) fall in a bucket of their own.
var DefaultBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

// Observer is a health.Observer that records podhealth's metrics (see the
// package documentation).
type Observer struct {
	clock        clock.PassiveClock
	forceDeletes *prometheus.CounterVec
	heldBack     *prometheus.CounterVec
	breakerOpen  prometheus.Gauge // nil when breakerFunc reads the Breaker's state
	breakerFunc  prometheus.GaugeFunc
	age          *prometheus.HistogramVec
}

// NewObserver registers podhealth's metrics with reg and returns the
// Observer that records them. It fails when reg is nil, when
// Options.Buckets are not finite and strictly increasing, or when reg
// already holds metrics of the same names (one Observer per registry
// serves every Checker of an operator). When it fails it leaves reg as it
// was: what it registered before the failure is unregistered.
func NewObserver(reg prometheus.Registerer, opts Options) (*Observer, error) {
	if isNil(reg) {
		return nil, errors.New("metrics: NewObserver: nil prometheus.Registerer")
	}
	buckets := opts.Buckets
	if buckets == nil {
		buckets = DefaultBuckets
	}
	if err := validBuckets(buckets); err != nil {
		return nil, fmt.Errorf("metrics: NewObserver: Options.Buckets: %w", err)
	}
	switch {
	case opts.BreakerTimeout < 0:
		return nil, fmt.Errorf("metrics: NewObserver: negative Options.BreakerTimeout %v", opts.BreakerTimeout)
	case opts.BreakerTimeout > 0 && isNil(opts.Breaker.Nodes):
		return nil, errors.New("metrics: NewObserver: Options.BreakerTimeout without Options.Breaker.Nodes would do nothing: the gauge then reads no nodes")
	}
	o := &Observer{
		clock: opts.Clock,
		forceDeletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "podhealth", Name: "force_deletes_total",
			Help: "Force deletes of dead pods sent by podhealth checks (or, in a dry run, that would be sent), by outcome.",
		}, []string{"outcome"}),
		heldBack: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "podhealth", Name: "held_back_total",
			Help: "Dead pods that podhealth checks held back, one per pod and check, by reason.",
		}, []string{"reason"}),
		age: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "podhealth", Name: "dead_pod_age_at_force_delete_seconds",
			Help:    "How long a pod had been dead when its force delete was accepted: since its DisruptionTarget condition, and since its deletion was requested.",
			Buckets: buckets,
		}, []string{"since"}),
	}
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	var breaker prometheus.Collector
	if isNil(opts.Breaker.Nodes) {
		o.breakerOpen = prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "podhealth", Name: "breaker_open",
			Help: "1 when the last dead pod that reached the breaker was held back by it; 0 when the breaker let that pod on.",
		})
		breaker = o.breakerOpen
	} else {
		timeout := opts.BreakerTimeout
		if timeout == 0 {
			timeout = defaultBreakerTimeout
		}
		b := opts.Breaker
		o.breakerFunc = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "podhealth", Name: "breaker_open",
			Help: "1 when the breaker stops force deletes on some node now (the cluster or a zone has too many nodes not Ready, or the nodes cannot be read); 0 when it stops none.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if b.Open(ctx) != "" {
				return 1
			}
			return 0
		})
		breaker = o.breakerFunc
	}
	collectors := []prometheus.Collector{o.forceDeletes, o.heldBack, breaker, o.age}
	for i, c := range collectors {
		if err := reg.Register(c); err != nil {
			// Collectors left behind would stay at zero for ever, and
			// make every later NewObserver on reg fail too.
			for _, registered := range collectors[:i] {
				reg.Unregister(registered)
			}
			return nil, fmt.Errorf("metrics: NewObserver: %w", err)
		}
	}
	return o, nil
}

// validBuckets returns why buckets cannot be a histogram's bounds, or nil.
// Prometheus itself panics at the first observation on bounds that do not
// increase: inside the check that has just sent a DELETE.
func validBuckets(buckets []float64) error {
	if len(buckets) == 0 {
		return errors.New("empty (nil means DefaultBuckets)")
	}
	for i, b := range buckets {
		switch {
		case math.IsNaN(b) || math.IsInf(b, 0):
			return fmt.Errorf("bound %d is %v, not a finite number of seconds", i, b)
		case i > 0 && b <= buckets[i-1]:
			return fmt.Errorf("bound %d (%v) is not above bound %d (%v): bounds must strictly increase", i, b, i-1, buckets[i-1])
		}
	}
	return nil
}

// Observe records one pod's report.
func (o *Observer) Observe(_ context.Context, r health.PodReport) {
	switch r.Outcome {
	case health.ForceDeleted, health.WasAlreadyGone, health.NameReused, health.DeleteFailed:
		o.forceDeletes.WithLabelValues(r.Outcome.String()).Inc()
		if r.Outcome == health.ForceDeleted && r.Pod != nil {
			o.observeAge(r.Pod)
		}
	case health.WouldForceDelete:
		o.forceDeletes.WithLabelValues(r.Outcome.String()).Inc()
	case health.HeldBack:
		o.heldBack.WithLabelValues(r.HeldBack.Reason.String()).Inc()
	}
	if o.breakerOpen == nil {
		return // the gauge reads the Breaker itself
	}
	if open, reached := breakerState(r); reached {
		o.breakerOpen.Set(open)
	}
}

// breakerState tells whether r is a dead pod that reached the Breaker, and
// then whether the Breaker held it back (1) or let it on (0). A check asks
// the Breaker after the annotation, the pod's form and the fencing policy,
// and before the budget and the DELETE, so every pod sent (or that a dry
// run would send) or held by the budget passed it. Pods held back before
// it, and pods force-deleted by an earlier check, say nothing about it.
func breakerState(r health.PodReport) (open float64, reached bool) {
	switch r.Outcome {
	case health.ForceDeleted, health.WasAlreadyGone, health.NameReused, health.DeleteFailed, health.WouldForceDelete:
		return 0, true
	case health.HeldBack:
		switch r.HeldBack.Reason {
		case health.HeldByBreaker:
			return 1, true
		case health.HeldByBudget:
			return 0, true
		}
	}
	return 0, false
}

// observeAge records how long pod had been dead at its force delete.
func (o *Observer) observeAge(pod *corev1.Pod) {
	now := o.clock.Now()
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			o.age.WithLabelValues("disruption_target").Observe(seconds(now.Sub(c.LastTransitionTime.Time)))
			break
		}
	}
	if pod.DeletionTimestamp != nil {
		requested := pod.DeletionTimestamp.Time
		if g := pod.DeletionGracePeriodSeconds; g != nil && *g > 0 && *g < 1<<32 { // a larger one is no real grace period
			requested = requested.Add(-time.Duration(*g) * time.Second)
		}
		o.age.WithLabelValues("deletion_request").Observe(seconds(now.Sub(requested)))
	}
}

// seconds is d in seconds, and zero for a clock behind the API server's.
func seconds(d time.Duration) float64 {
	return max(d, 0).Seconds()
}

var isNil = nilcheck.IsNil
