package selffence

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/fencing"
)

// The defaults of Options.
const (
	// DefaultDuration is Options.Duration by default, the Lease duration
	// of Kubernetes' own components.
	DefaultDuration = 15 * time.Second
	// DefaultDeadline is Options.Deadline by default.
	DefaultDeadline = 10 * time.Second
	// DefaultStopTakes is Options.StopTakes by default: ample for
	// os.Exit.
	DefaultStopTakes = time.Second
)

// Options configure a Guard, and the annotations that Stamp writes. The
// zero value, with the Lease named (and, for a Guard, the namespace and
// identity), is the default.
type Options struct {
	// Namespace and Lease name the Lease the workload must hold to write.
	// Lease is required; Namespace is required by New (Stamp leaves the
	// namespace to the pod's: the fencer reads the Lease in the pod's
	// namespace).
	Namespace, Lease string
	// Identity is the Lease's holderIdentity while this process holds it:
	// the pod's name (the downward API's metadata.name), which is the
	// holder that fencing.LeaseFencer expects. Required by New.
	Identity string
	// Duration is the Lease's duration, in whole seconds. Zero means
	// DefaultDuration.
	Duration time.Duration
	// RenewInterval is how long after the start of one renewal the next
	// starts. It must be below Duration. Zero means a third of Duration.
	RenewInterval time.Duration
	// Deadline is how long after the Lease's expiry (the start of its
	// last successful renewal plus Duration, on the process's clock) the
	// process has stopped: what a pod states in
	// fencing.AnnotationDeadline. It must exceed StopTakes. Zero means
	// DefaultDeadline.
	Deadline time.Duration
	// StopTakes is how long Exit takes to stop the process: the Guard
	// calls Exit at the Lease's expiry plus Deadline less StopTakes. Zero
	// means DefaultStopTakes.
	StopTakes time.Duration
	// Margin is added to the wait (the Lease's duration plus Deadline)
	// before a Guard takes over a Lease whose holder stopped renewing it,
	// for the clocks' rates. Zero means fencing.DefaultMargin.
	Margin time.Duration
	// Clock is the process's clock: it must read a monotonic time (the
	// real clock's does). Nil means the real clock.
	Clock clock.WithTicker
	// Exit stops the process, and must not return before it has. Nil
	// means os.Exit(1).
	Exit func()
	// Logger logs the Lease's acquisition, its loss and the stop. The
	// zero Logger discards.
	Logger logr.Logger
}

// withDefaults returns o with its defaults filled in, or an error that
// names every setting that cannot be kept. guard adds what a Guard needs
// beyond what Stamp does.
func (o Options) withDefaults(guard bool) (Options, error) {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(o.Lease); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("the Lease %q is not a Lease name: %s", o.Lease, msgs[0]))
	}
	if guard {
		if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("the namespace %q is not a namespace: %s", o.Namespace, msgs[0]))
		}
		if o.Identity == "" {
			errs = append(errs, errors.New("the identity is empty: it is the Lease's holder, the pod's name"))
		}
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = o.Duration / 3
	}
	if o.Deadline == 0 {
		o.Deadline = DefaultDeadline
	}
	if o.StopTakes == 0 {
		o.StopTakes = DefaultStopTakes
	}
	if o.Margin == 0 {
		o.Margin = fencing.DefaultMargin
	}
	switch {
	case o.Duration < time.Second:
		errs = append(errs, fmt.Errorf("the duration %s is under a second: a Lease states its duration in whole seconds", o.Duration))
	case o.Duration%time.Second != 0:
		errs = append(errs, fmt.Errorf("the duration %s is not whole seconds: a Lease states its duration in whole seconds", o.Duration))
	}
	if o.RenewInterval <= 0 || o.RenewInterval >= o.Duration {
		errs = append(errs, fmt.Errorf("the renew interval %s is not below the duration %s: the Lease would expire before each renewal", o.RenewInterval, o.Duration))
	}
	if o.StopTakes < 0 {
		errs = append(errs, fmt.Errorf("the time a stop takes %s is negative", o.StopTakes))
	}
	if o.Deadline <= o.StopTakes {
		errs = append(errs, fmt.Errorf("the deadline %s is not longer than the time a stop takes (%s): the stop could not be over by the deadline", o.Deadline, o.StopTakes))
	}
	if o.Margin < 0 {
		errs = append(errs, fmt.Errorf("the margin %s is negative", o.Margin))
	}
	if len(errs) > 0 {
		return o, fmt.Errorf("selffence: settings that cannot be kept: %w", errors.Join(errs...))
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o, nil
}

// Stamp writes the protocol's annotations on template, from the same
// settings that the pods' Guards enforce: fencing.AnnotationLease and
// fencing.AnnotationDeadline. It refuses settings that cannot be kept,
// and then leaves template as it was. The holder is the pod's name, which
// is what Identity must be; Stamp writes no fencing.AnnotationHolder.
func (o Options) Stamp(template *corev1.PodTemplateSpec) error {
	if template == nil {
		return errors.New("selffence: Stamp: nil pod template")
	}
	o, err := o.withDefaults(false)
	if err != nil {
		return err
	}
	if template.Annotations == nil {
		template.Annotations = map[string]string{}
	}
	template.Annotations[fencing.AnnotationLease] = o.Lease
	template.Annotations[fencing.AnnotationDeadline] = o.Deadline.String()
	return nil
}
