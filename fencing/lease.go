package fencing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/nilcheck"
)

// The annotations of the self-fencing protocol that a LeaseFencer reads
// from a pod (see LeaseFencer).
const (
	// AnnotationLease names the Lease, in the pod's namespace, that
	// the pod must hold to write.
	AnnotationLease = "podhealth.io/fence-lease"
	// AnnotationDeadline is how long after its Lease expires (its
	// renewTime plus its leaseDurationSeconds) the pod has stopped
	// writing, at the latest: a Go duration such as "10s".
	AnnotationDeadline = "podhealth.io/fence-deadline"
	// AnnotationHolder is the Lease's holderIdentity while the pod
	// holds it. Without it, the pod's name.
	AnnotationHolder = "podhealth.io/fence-holder"
)

// LeaseGetter gets a Lease by namespace and name, with an error for which
// apierrors.IsNotFound is true when there is none. It must read the live
// object (a cache that lags would show a renewed Lease as expired), and
// the Lease returned must not be mutated. Implementations must be safe for
// concurrent use; podsource/kube.LiveLeases is one over client-go.
type LeaseGetter interface {
	GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
}

// LeaseOptions configure a LeaseFencer. The zero value is the
// default.
type LeaseOptions struct {
	// Margin is added to every wait, for the clocks of the pod's node and
	// of the Checker, which may differ in rate and in offset. Zero means
	// DefaultMargin; it must not be negative.
	Margin time.Duration
	// Seen, when not nil, tells the fencer when the Checker's process
	// first saw a Lease's record before any check asked about it, so that
	// the wait runs from then: typically a watch of the workload's Leases
	// (podsource/kube.LeaseWatch). Nil means the wait runs from the first
	// check that asks.
	Seen LeaseSightings
	// Protocol, when not nil, states each pod's protocol in process: an
	// operator's own checker computes it from its live custom resource,
	// so that nothing is stamped on pods and nothing public is claimed.
	// It returns false for a pod that does not follow the protocol. The
	// pod's annotations are then not read. It is called once per dead pod
	// that needs fencing and check, maybe from several goroutines at once,
	// and must not mutate the pod; a protocol it returns that cannot be
	// kept (a Lease name that is not one, a deadline not positive) is no
	// evidence, and a panic in it fails the check for that pod (fail
	// closed). Nil means the annotations (AnnotationLease...).
	Protocol func(pod *corev1.Pod) (LeaseProtocol, bool)
}

// LeaseProtocol is one pod's self-fencing protocol, as LeaseOptions.Protocol
// states it: the Lease, in the pod's namespace, that the pod must hold to
// write; the Lease's holderIdentity while the pod holds it (empty: the
// pod's name); and the deadline by which, after the Lease's expiry, its
// whole stop is over (see docs/safety.md).
type LeaseProtocol struct {
	Lease    string
	Holder   string
	Deadline time.Duration
}

// LeaseSightings says what a watch of the Leases saw, on the Checker's
// clock, before any check asked: when it first saw a Lease's record, when
// it first saw a holder's acquisition, and whether it saw a holder hold a
// Lease at all. Its answers must be real observations (a record seen at
// that time, not a timestamp read from the object), or the waits they
// shorten are no longer measured, and the takeovers they admit no longer
// proven. Implementations must be safe for concurrent use;
// podsource/kube.LeaseWatch is one.
type LeaseSightings interface {
	// LeaseSeen returns when the record of Lease namespace/name at
	// resourceVersion was first seen, and false when it was not.
	LeaseSeen(namespace, name, resourceVersion string) (time.Time, bool)
	// AcquisitionSeen returns when holder's acquisition of Lease
	// namespace/name, the record with that acquireTime and
	// leaseTransitions (whatever its renewals), was first seen, and false
	// when it was not.
	AcquisitionSeen(namespace, name, holder string, acquired time.Time, transitions int32) (time.Time, bool)
	// HolderSeen reports whether a record of Lease namespace/name held
	// by holder was ever seen: what shows that a pod took part in the
	// protocol as a holder.
	HolderSeen(namespace, name, holder string) bool
}

// DefaultMargin is LeaseOptions.Margin by default.
const DefaultMargin = 2 * time.Second

// MaxDuration is the longest setting the protocol takes, in any of its
// places (a Lease's duration, a deadline, a margin): math.MaxInt32
// seconds, the longest duration a Lease's leaseDurationSeconds states.
// Three of them add up to less than the longest time.Duration, so no
// wait computed from them wraps around; longer ones are refused
// (selffence.Options, LeaseOptions.Margin) or read as no evidence (a
// pod's AnnotationDeadline).
const MaxDuration = math.MaxInt32 * time.Second

// LeaseFencer is the Fencer of workloads that fence themselves, named
// "lease". A pod follows its protocol when it carries
// AnnotationLease and AnnotationDeadline (and, when the
// Lease's holderIdentity is not its name, AnnotationHolder), and
// keeps the protocol's obligations (docs/safety.md states them): it writes
// only while less than the Lease's duration has passed since the start of
// its last successful renewal, it stops on any failed renewal whatever its
// peers say, and by that start plus the duration plus the deadline, on its
// own monotonic clock, its whole stop is over. Only a workload whose code
// keeps them may carry the annotations.
//
// It proves PodStopped (never NodeStopped: the node and its volumes may
// still be attached) when a live read of the Lease shows it held by the
// pod's holder, with a leaseDurationSeconds and a renewTime (or
// acquireTime), and that record has been unrenewed for its duration plus
// the pod's deadline plus the Margin, measured both ways:
//   - on the Checker's clock, since the Checker (or one sharing its
//     Memory) first saw that very record (same holder, renewTime and
//     resourceVersion), or since LeaseOptions.Seen saw that
//     resourceVersion when that is earlier, so that neither a clock far
//     ahead nor a stale renewTime shortens the wait; a fresh Memory
//     without Seen waits the whole wait;
//   - since the renewTime, on the Checker's clock: a renewTime ahead of
//     that clock (a Checker's clock behind the holder's) lengthens the
//     wait by as much, and the detail says so.
//
// So the wait runs from the first check that sees the record, at the
// earliest: a pod that a check first asks about long after the holder's
// last renewal still waits the whole wait from then, unless a watch of the
// Leases (LeaseOptions.Seen) saw the record earlier.
//
// A Lease that another holder took over proves the old holder stopped once
// the takeover has been seen for the duration plus the deadline plus the
// Margin (see takenOver; docs/safety.md states the argument), but only for
// a pod that this process saw hold the Lease: a record of its holder seen
// by LeaseOptions.Seen, or by an earlier check sharing the Memory, in a
// read of the Lease for whichever pod that check asked about. A
// takeover proves only that the holder it replaced has stopped; a pod
// never seen holding may be one that writes outside the Lease (a replica
// on its own volume) and was annotated by mistake, so it gets no proof.
//
// No proof, with a detail that says why: a pod without the annotations; an
// annotation that is not valid; a Lease that is missing, held by none, or
// without a duration or a renew time; held by another holder without an
// acquireTime; a renewal (a new record waits afresh); a pod whose
// deletion has not begun (no deletionTimestamp): a process of it that
// does not hold the Lease (restarted while its node was cut off) may
// claim it after this read, and selffence.Guard refuses to write under a
// claim only once its pod's deletion has begun, so only a read made after
// that proves the pod's processes stopped. A Lease that cannot be read
// (RBAC denied, a timeout) is an error, and the check says the fencer
// failed.
//
// A LeaseFencer must come from NewLeaseFencer. It is safe for concurrent
// use.
type LeaseFencer struct {
	leases   LeaseGetter
	margin   time.Duration
	seen     LeaseSightings
	protocol func(*corev1.Pod) (LeaseProtocol, bool)
}

var _ health.Fencer = (*LeaseFencer)(nil)

// NewLeaseFencer returns a LeaseFencer that reads Leases live through
// leases.
func NewLeaseFencer(leases LeaseGetter, opts LeaseOptions) (*LeaseFencer, error) {
	switch {
	case nilcheck.IsNil(leases):
		return nil, errors.New("fencing: NewLeaseFencer: nil LeaseGetter")
	case opts.Margin < 0:
		return nil, fmt.Errorf("fencing: NewLeaseFencer: negative LeaseOptions.Margin %v", opts.Margin)
	case opts.Margin > MaxDuration:
		return nil, fmt.Errorf("fencing: NewLeaseFencer: LeaseOptions.Margin %v is longer than MaxDuration (%v)", opts.Margin, MaxDuration)
	}
	margin := opts.Margin
	if margin == 0 {
		margin = DefaultMargin
	}
	seen := opts.Seen
	if nilcheck.IsNil(seen) {
		seen = nil
	}
	return &LeaseFencer{leases: leases, margin: margin, seen: seen, protocol: opts.Protocol}, nil
}

// Name is "lease".
func (f *LeaseFencer) Name() string { return "lease" }

// Fence reads the pod's Lease and says whether it has been expired long
// enough; see LeaseFencer.
func (f *LeaseFencer) Fence(ctx context.Context, q health.FenceQuery) (health.Fence, error) {
	if f == nil || f.leases == nil {
		return health.Fence{}, errors.New("the LeaseFencer was not made by NewLeaseFencer")
	}
	pod := q.Pod
	if pod == nil {
		return health.Fence{}, nil
	}
	var proto leaseProtocol
	var bad string
	if f.protocol != nil {
		stated, follows, err := f.stated(pod)
		switch {
		case err != nil:
			return health.Fence{}, err
		case !follows:
			return health.Fence{}, nil // the pod does not follow the protocol
		}
		proto, bad = stated.check(pod)
	} else {
		if pod.Annotations[AnnotationLease] == "" {
			return health.Fence{}, nil // the pod does not follow the protocol
		}
		proto, bad = leaseProtocolOf(pod)
	}
	if bad != "" {
		return health.Fence{Detail: "lease fencing: " + bad + ": no evidence"}, nil
	}
	lease, err := f.leases.GetLease(ctx, pod.Namespace, proto.lease)
	switch {
	case apierrors.IsNotFound(err):
		return health.Fence{Detail: "lease " + pod.Namespace + "/" + proto.lease + " not found: no evidence"}, nil
	case err != nil:
		return health.Fence{}, fmt.Errorf("reading lease %s/%s: %w", pod.Namespace, proto.lease, err)
	case lease == nil:
		return health.Fence{Detail: "lease " + pod.Namespace + "/" + proto.lease + ": the getter returned nothing: no evidence"}, nil
	}
	name := "lease " + pod.Namespace + "/" + proto.lease
	spec := &lease.Spec
	holder := ""
	if spec.HolderIdentity != nil {
		holder = *spec.HolderIdentity
	}
	renewed := spec.RenewTime
	if renewed == nil {
		renewed = spec.AcquireTime
	}
	if holder != "" && q.Sightings != nil {
		// Whichever pod this check asks about, holder is seen holding the
		// Lease: evidence for a later takeover from it.
		q.Sightings.FirstSeen(holderKey(pod.Namespace, proto.lease, holder))
	}
	if pod.DeletionTimestamp == nil {
		// A process of the pod that does not hold the Lease (restarted
		// while its node was cut off) may claim it after this read; its
		// Guard refuses to write under a claim once the pod's deletion
		// has begun, so only a read made after that proves anything.
		return health.Fence{Detail: name + ": the pod's deletion has not begun, so a process of it may still claim the Lease after this read: no evidence"}, nil
	}
	switch {
	case holder == "":
		return health.Fence{Detail: name + " has no holder: no evidence of when " + proto.holder + " last held it"}, nil
	case holder != proto.holder:
		return f.takenOver(q, lease, name, holder, proto)
	case spec.LeaseDurationSeconds == nil || *spec.LeaseDurationSeconds <= 0:
		return health.Fence{Detail: name + " has no positive leaseDurationSeconds: no evidence"}, nil
	case renewed == nil || renewed.IsZero():
		return health.Fence{Detail: name + " has neither a renewTime nor an acquireTime: no evidence"}, nil
	}
	duration := time.Duration(*spec.LeaseDurationSeconds) * time.Second // an int32 of seconds fits
	wait := addSaturating(addSaturating(duration, proto.deadline), f.margin)
	if q.Sightings == nil {
		return health.Fence{Detail: name + ": no record of sightings to measure the wait on: no evidence"}, nil
	}
	record := holder + "\x00" + strconv.FormatInt(renewed.UnixNano(), 36) + "\x00" + lease.ResourceVersion + "\x00" + pod.Namespace + "/" + proto.lease
	first := q.Sightings.FirstSeen(record)
	if f.seen != nil {
		// A watch that saw this very version earlier (and not after this
		// check's time) moves the start of the wait back to then.
		if at, ok := f.seen.LeaseSeen(pod.Namespace, proto.lease, lease.ResourceVersion); ok && lease.ResourceVersion != "" && at.Before(first) && !at.After(q.Now) {
			first = at
		}
	}
	// A renewTime ahead of the clock makes unrenewed negative, which
	// lengthens the wait by as much; the arithmetic saturates.
	unrenewed := min(q.Now.Sub(first), q.Now.Sub(renewed.Time))
	left := wait - unrenewed
	if unrenewed < 0 {
		left = addSaturating(wait, -max(unrenewed, -math.MaxInt64))
	}
	if left > 0 {
		detail := fmt.Sprintf("%s held by %s fences once unrenewed for %v (duration %v + deadline %v + margin %v): %v to go",
			name, holder, wait, duration, proto.deadline, f.margin, left.Round(time.Millisecond))
		if renewed.Time.After(q.Now.Add(f.margin)) {
			detail += "; its renewTime is ahead of this clock by more than the margin"
		}
		return health.Fence{Detail: detail, RetryAfter: left}, nil
	}
	return health.Fence{
		Proves: health.PodStopped,
		Since:  q.Now.Add(left),
		By:     name,
		Detail: fmt.Sprintf("%s held by %s unrenewed for %v, past its duration %v + deadline %v + margin %v", name, holder, unrenewed.Round(time.Millisecond), duration, proto.deadline, f.margin),
	}, nil
}

// takenOver answers for a pod whose Lease another holder holds. A new
// holder takes the Lease only by a write that the old holder's next
// renewal then fails on, and the old holder stops on a failed renewal: its
// last successful renewal started before that write, which was before this
// process first saw the new holder's record. So the old holder has stopped
// writing by that first sighting plus the duration plus the deadline (plus
// the margin for the clocks' rates). The record is the new holder's
// acquisition (holder, acquireTime, leaseTransitions), not its renewals:
// the wait runs across them, and a Lease taken back and forth is a new
// acquisition that waits afresh. Its first sighting is this process's
// earliest: a check sharing the Memory, or the watch (LeaseOptions.Seen).
// Without an acquireTime an acquisition cannot be told from the next one,
// and nothing is proved. The duration is the new record's: the holders of
// one Lease must share it (docs/safety.md says so among what to check
// before annotating a workload).
//
// The argument is about the holder replaced: it proves the pod stopped
// only if the pod held the Lease. A pod never seen holding it (a replica
// that writes its own volume, annotated by mistake; a pod first asked
// about after this process started, the takeover long done) gets no
// proof, and waits for other evidence (its node gone or out of service).
func (f *LeaseFencer) takenOver(q health.FenceQuery, lease *coordinationv1.Lease, name, holder string, proto leaseProtocol) (health.Fence, error) {
	spec := &lease.Spec
	taken := name + " is held by " + strconv.Quote(holder) + ", not " + strconv.Quote(proto.holder)
	switch {
	case spec.AcquireTime == nil || spec.AcquireTime.IsZero():
		return health.Fence{Detail: taken + ", and has no acquireTime, so a takeover back and forth could not be told from this one: no evidence"}, nil
	case spec.LeaseDurationSeconds == nil || *spec.LeaseDurationSeconds <= 0:
		return health.Fence{Detail: taken + ", and has no positive leaseDurationSeconds: no evidence"}, nil
	case q.Sightings == nil:
		return health.Fence{Detail: taken + ": no record of sightings to measure the wait on: no evidence"}, nil
	case !f.sawHold(q, lease, proto):
		return health.Fence{Detail: taken + ", and " + strconv.Quote(proto.holder) + " was never seen holding it: a takeover proves only that the holder it replaced stopped: no evidence"}, nil
	}
	transitions := int32(0)
	if spec.LeaseTransitions != nil {
		transitions = *spec.LeaseTransitions
	}
	duration := time.Duration(*spec.LeaseDurationSeconds) * time.Second
	wait := addSaturating(addSaturating(duration, proto.deadline), f.margin)
	acquisition := "takeover\x00" + holder + "\x00" + strconv.FormatInt(spec.AcquireTime.UnixNano(), 36) + "\x00" + strconv.FormatInt(int64(transitions), 10) + "\x00" + lease.Namespace + "/" + lease.Name
	first := q.Sightings.FirstSeen(acquisition)
	if f.seen != nil {
		// A watch that saw this acquisition earlier (and not after this
		// check's time) moves the start of the wait back to then.
		if at, ok := f.seen.AcquisitionSeen(lease.Namespace, lease.Name, holder, spec.AcquireTime.Time, transitions); ok && at.Before(first) && !at.After(q.Now) {
			first = at
		}
	}
	if left := wait - q.Now.Sub(first); left > 0 {
		return health.Fence{
			Detail: fmt.Sprintf("%s: taken over, so %s has stopped by the takeover's first sighting + duration %v + deadline %v + margin %v: %v to go",
				taken, proto.holder, duration, proto.deadline, f.margin, left.Round(time.Millisecond)),
			RetryAfter: left,
		}, nil
	}
	return health.Fence{
		Proves: health.PodStopped,
		Since:  first.Add(wait),
		By:     name,
		Detail: fmt.Sprintf("%s, taken over and first seen so %v ago, past its duration %v + deadline %v + margin %v", taken, q.Now.Sub(first).Round(time.Millisecond), duration, proto.deadline, f.margin),
	}, nil
}

// sawHold reports whether this process saw the pod's holder hold lease:
// a check sharing the Memory read its record before this check, or the
// watch saw it. A sighting this check makes is not evidence, and is
// forgotten.
func (f *LeaseFencer) sawHold(q health.FenceQuery, lease *coordinationv1.Lease, proto leaseProtocol) bool {
	if f.seen != nil && f.seen.HolderSeen(lease.Namespace, lease.Name, proto.holder) {
		return true
	}
	key := holderKey(lease.Namespace, lease.Name, proto.holder)
	if q.Sightings.FirstSeen(key).Before(q.Now) {
		return true
	}
	q.Sightings.Forget(key)
	return false
}

// holderKey is the Memory's key of a holder seen holding a Lease.
func holderKey(namespace, lease, holder string) string {
	return "holder\x00" + namespace + "/" + lease + "\x00" + holder
}

// stated asks LeaseOptions.Protocol about pod; a panic in it is an error,
// which holds the pod and fails the check.
func (f *LeaseFencer) stated(pod *corev1.Pod) (p LeaseProtocol, follows bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, follows, err = LeaseProtocol{}, false, fmt.Errorf("LeaseOptions.Protocol panicked about pod %s/%s: %v", pod.Namespace, pod.Name, r)
		}
	}()
	p, follows = f.protocol(pod)
	return p, follows, nil
}

// check turns a protocol stated in process into the one the fencer
// measures, or says what makes it one that cannot be kept.
func (p LeaseProtocol) check(pod *corev1.Pod) (leaseProtocol, string) {
	out := leaseProtocol{lease: p.Lease, holder: p.Holder, deadline: p.Deadline}
	if out.holder == "" {
		out.holder = pod.Name
	}
	switch errs := validation.IsDNS1123Subdomain(p.Lease); {
	case len(errs) > 0:
		return out, fmt.Sprintf("LeaseOptions.Protocol's Lease %q is not a Lease name: %s", p.Lease, errs[0])
	case p.Deadline <= 0:
		return out, fmt.Sprintf("LeaseOptions.Protocol's Deadline %v is not positive", p.Deadline)
	case p.Deadline > MaxDuration:
		return out, fmt.Sprintf("LeaseOptions.Protocol's Deadline %v is longer than MaxDuration (%v)", p.Deadline, MaxDuration)
	case out.holder == "":
		return out, "the pod has no name, and LeaseOptions.Protocol's Holder is empty"
	}
	return out, ""
}

// leaseProtocol is what a pod's annotations say of its self-fencing.
type leaseProtocol struct {
	lease, holder string
	deadline      time.Duration
}

// leaseProtocolOf reads the pod's annotations, or says what is wrong with
// them.
func leaseProtocolOf(pod *corev1.Pod) (leaseProtocol, string) {
	p := leaseProtocol{lease: pod.Annotations[AnnotationLease], holder: pod.Name}
	if errs := validation.IsDNS1123Subdomain(p.lease); len(errs) > 0 {
		return p, fmt.Sprintf("annotation %s=%q is not a Lease name: %s", AnnotationLease, p.lease, errs[0])
	}
	raw, ok := pod.Annotations[AnnotationDeadline]
	if !ok {
		return p, "annotation " + AnnotationLease + " without " + AnnotationDeadline
	}
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		return p, fmt.Sprintf("annotation %s=%q is not a duration such as \"10s\"", AnnotationDeadline, raw)
	case d <= 0:
		return p, fmt.Sprintf("annotation %s=%q is not positive", AnnotationDeadline, raw)
	case d > MaxDuration:
		return p, fmt.Sprintf("annotation %s=%q is longer than %v, the longest setting of the protocol", AnnotationDeadline, raw, MaxDuration)
	}
	p.deadline = d
	if h, ok := pod.Annotations[AnnotationHolder]; ok {
		if h == "" {
			return p, "annotation " + AnnotationHolder + " is empty"
		}
		p.holder = h
	}
	if p.holder == "" {
		return p, "the pod has no name, and no " + AnnotationHolder
	}
	return p, ""
}

// addSaturating adds two Durations that are not negative, saturating at
// the longest Duration instead of wrapping around.
func addSaturating(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
