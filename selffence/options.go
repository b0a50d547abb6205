package selffence

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
// zero value, with the Lease named (and, for a Guard, the namespace,
// identity and pod's UID), is the default.
type Options struct {
	// Namespace and Lease name the Lease the workload must hold to write.
	// Lease is required; Namespace is required by New (Stamp leaves the
	// namespace to the pod's: the fencer reads the Lease in the pod's
	// namespace).
	Namespace, Lease string
	// Identity is the Lease's holderIdentity while this process holds it:
	// the pod's name (the downward API's metadata.name), which is the
	// holder that fencing.LeaseFencer expects. Required by New; refused
	// by Stamp (see Stamp).
	Identity string
	// PodUID is the UID of the pod this process runs in (the downward
	// API's metadata.uid), the pod named Identity in Namespace. The Guard
	// claims the Lease only while that pod exists under that UID and is
	// not being deleted, and writes only once a read of the pod made
	// after its claim applied shows it so: a process left running after
	// its pod was deleted (its kubelet gone) never writes under a claim
	// that the fencer, which proves the pod stopped, did not see.
	// Required by New; refused by Stamp.
	PodUID types.UID
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
	// before a Guard writes under a Lease whose holder stopped renewing
	// it, or whose holder it could not see, for the clocks' rates. Zero
	// means fencing.DefaultMargin.
	//
	// Every duration here is at most fencing.MaxDuration, the longest a
	// Lease can state: longer ones are refused.
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
	if !guard && o.Identity != "" {
		errs = append(errs, fmt.Errorf("the identity %q is set: the annotations state the protocol for every pod of a template, each holding the Lease under its own name, so a Guard's Identity is its pod's name; stamp without an Identity", o.Identity))
	}
	if !guard && o.PodUID != "" {
		errs = append(errs, fmt.Errorf("the pod's UID %q is set: the annotations state the protocol for every pod of a template; stamp without a PodUID", o.PodUID))
	}
	if guard {
		if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("the namespace %q is not a namespace: %s", o.Namespace, msgs[0]))
		}
		if o.Identity == "" {
			errs = append(errs, errors.New("the identity is empty: it is the Lease's holder, the pod's name"))
		}
		if o.PodUID == "" {
			errs = append(errs, errors.New("the pod's UID is empty: it is the downward API's metadata.uid, without which a process could not tell its pod deleted or replaced"))
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
	// A Lease states its duration in an int32 of seconds: a longer one
	// would be written wrapped around (2^32 + 10 s as 10 s) while the
	// Guard counted the whole. The other settings are bounded alike, so
	// that no sum of them wraps around to a short wait.
	for _, s := range []struct {
		name string
		d    time.Duration
	}{{"duration", o.Duration}, {"renew interval", o.RenewInterval}, {"deadline", o.Deadline}, {"time a stop takes", o.StopTakes}, {"margin", o.Margin}} {
		if s.d > fencing.MaxDuration {
			errs = append(errs, fmt.Errorf("the %s %s is longer than %s, the longest a Lease states (math.MaxInt32 seconds)", s.name, s.d, fencing.MaxDuration))
		}
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
// and then leaves template as it was.
//
// It states the protocol for every pod of the template, each the Lease's
// holder under its own name, which is what each pod's Guard must use as
// its Identity (the downward API's metadata.name) and what the fencer
// expects. So Stamp refuses a set Identity: a template cannot name each
// pod's holder, and a Guard whose Identity is not its pod's name would
// have its own renewals read as another holder's takeover. It refuses a
// set PodUID alike. Stamp with the Options of the Guards less their
// Identity and PodUID.
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

// durationOfSeconds is a Lease record's duration, which an int32 of
// seconds bounds (resourcelock widens it to an int).
func durationOfSeconds(seconds int) time.Duration {
	switch {
	case seconds <= 0:
		return 0
	case time.Duration(seconds) > fencing.MaxDuration/time.Second:
		return fencing.MaxDuration
	}
	return time.Duration(seconds) * time.Second
}

// addSaturating adds two Durations that are not negative, saturating at
// the longest Duration instead of wrapping around.
func addSaturating(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
