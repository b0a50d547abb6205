package health_test

// Generated pod sets and delete faults, an oracle that restates the
// documented classification, and the invariant checks that the property
// tests (invariants_test.go) and the fuzz targets (fuzz_test.go) share.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// chooser picks an int in [0, n). *rand.Rand is one; byteChooser, which
// reads fuzz input, is the other.
type chooser interface {
	IntN(n int) int
}

// byteChooser decodes a byte slice deterministically: each choice takes one
// byte modulo n, and an exhausted slice answers 0, so any input, even an
// empty one, decodes to some scenario.
type byteChooser struct {
	data []byte
}

func (b *byteChooser) IntN(n int) int {
	if n <= 1 || len(b.data) == 0 {
		return 0
	}
	v := int(b.data[0])
	b.data = b.data[1:]
	return v % n
}

func pick[T any](c chooser, from []T) T { return from[c.IntN(len(from))] }

var (
	podsGR = corev1.Resource("pods")

	genConditionTypes = []corev1.PodConditionType{
		corev1.DisruptionTarget, corev1.DisruptionTarget, corev1.PodReady, corev1.PodScheduled, "Weird", "",
	}
	genStatuses = []corev1.ConditionStatus{
		corev1.ConditionTrue, corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown, "", "true",
	}
	genReasons = []string{
		health.ReasonDeletionByTaintManager, corev1.PodReasonTerminationByKubelet, "EvictionByEvictionAPI", "PreemptionByScheduler",
		"garbage", "", "deletionbytaintmanager", "DeletionByTaintManager ", "\xff\xfe",
	}
	genPhases = []corev1.PodPhase{
		corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown, "", "Exploded",
	}
	genNodes      = []string{"", "node-a", "node-lost"}
	genFinalizers = []string{"example.com/backup", "kubernetes", ""}
	genOwnerKinds = []string{"ReplicaSet", "StatefulSet", "DaemonSet", "Job", "", "Strange"}
	// genOwnerAPIVersions: a Job is batch/v1, the others apps/v1; a
	// custom resource may take any kind's name in another group.
	genOwnerAPIVersions = []string{"apps/v1", "apps/v1", "batch/v1", "db.example.com/v1"}
	genWriters          = []string{"single", "many", "Many", ""}
	genTimes            = []time.Time{deletedAt.Time, {}, time.Unix(0, 0).UTC(), time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)}
	// genNows are times around the deletion deadlines that genTimes holds,
	// and far off either way; genLateNows are after every one of them.
	genNows = []time.Time{
		deletedAt.Add(-time.Second), deletedAt.Time, deletedAt.Add(30 * time.Second),
		{}, time.Unix(0, 0).UTC(), time.Unix(-1<<62, 0).UTC(), time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	genLateNows = []time.Time{time.Date(2262, 1, 1, 0, 0, 1, 0, time.UTC), time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(1<<62, 0).UTC()}
	// genSteps are how far the clock moves between the two checks of a
	// scenario: less than the Memory's TTL, which the invariants assume.
	genSteps = []time.Duration{0, 0, time.Second, 5 * time.Minute}
)

// genOptions say which hostile inputs a generated scenario may hold.
type genOptions struct {
	maxPods int
	// invalid allows nil entries and nameless pods, which fail the check.
	invalid bool
	// cancel allows the fault that ends the check's context.
	cancel bool
	// nodes allows node evidence, with or without ReplaceUnreachable.
	nodes bool
}

// faultKind is how the API server answers one pod's force delete.
type faultKind int

const (
	noFault faultKind = iota
	faultNotFound
	faultConflict
	faultTooManyRequests
	faultInternal
	faultServerTimeout
	faultTimeout
	faultPlain
	faultCancel // the caller's context ends while the delete is in flight
	numFaultKinds
)

func (k faultKind) String() string {
	return [...]string{"none", "NotFound", "Conflict", "TooManyRequests", "Internal", "ServerTimeout", "Timeout", "plain", "cancel"}[k]
}

// err is the error the API server (or the client, for faultCancel) gives.
func (k faultKind) err(ctx context.Context, name string) error {
	switch k {
	case faultNotFound:
		return apierrors.NewNotFound(podsGR, name)
	case faultConflict:
		return apierrors.NewConflict(podsGR, name, errors.New("the UID in the precondition does not match the UID in record"))
	case faultTooManyRequests:
		return apierrors.NewTooManyRequests("too many requests, slow down", 7)
	case faultInternal:
		return apierrors.NewInternalError(errors.New("etcd leader changed"))
	case faultServerTimeout:
		return apierrors.NewServerTimeout(podsGR, "delete", 2)
	case faultTimeout:
		return apierrors.NewTimeoutError("request did not complete within the allowed duration", 3)
	case faultPlain:
		return errors.New("connection reset by peer")
	case faultCancel:
		return fmt.Errorf("Delete %q: %w", name, ctx.Err())
	}
	return nil
}

// fault is the scripted answer to a pod's deletes: kind on the first
// attempt, and on every later one too if persist. A cancel happens once per
// world, at the first delete scripted to cancel.
type fault struct {
	kind    faultKind
	persist bool
}

// scenario is one generated input: the list a source hands out (names and
// UIDs unique, as the API server guarantees; UIDs possibly empty) and the
// faults, by pod name, and what the Checker's clock reads at its first
// check (now) and how far it moves before the second (step).
type scenario struct {
	pods   []*corev1.Pod
	faults map[string]fault
	now    time.Time
	step   time.Duration
	// ev is the Checker's node evidence and unreachable policy; nil means
	// none, the default Options.
	ev *genEvidence
}

// genEvidence is the node evidence of a scenario: the nodes a cache holds
// (no live reads, so no node is ever confirmed gone) and the
// ReplaceUnreachable policy.
type genEvidence struct {
	nodes          map[string]*corev1.Node
	replace        bool
	unreachableFor time.Duration
}

// options returns the Checker options for ev over clk.
func (ev *genEvidence) options(clk *clocktesting.FakePassiveClock) health.Options {
	opts := health.Options{Memory: smallMemory(), Clock: clk}
	if ev == nil {
		return opts
	}
	var nodes []*corev1.Node
	for _, n := range ev.nodes {
		nodes = append(nodes, n)
	}
	opts.Nodes = fake.NewNodes(nodes...)
	opts.ReplaceUnreachable = ev.replace
	opts.UnreachableFor = ev.unreachableFor
	return opts
}

func genScenario(c chooser, o genOptions) scenario {
	n := c.IntN(o.maxPods + 1)
	sc := scenario{faults: map[string]fault{}}
	for i := range n {
		if o.invalid && c.IntN(24) == 0 {
			sc.pods = append(sc.pods, nil)
			continue
		}
		p := genPod(c, i)
		if o.invalid && c.IntN(24) == 0 {
			p.Name = ""
		}
		sc.pods = append(sc.pods, p)
		kinds := numFaultKinds
		if !o.cancel {
			kinds = faultCancel
		}
		if c.IntN(2) == 0 {
			sc.faults[p.Name] = fault{kind: faultKind(c.IntN(int(kinds))), persist: c.IntN(2) == 0}
		}
	}
	// Drawn last, so that the pods decode from the same bytes as before;
	// mostly late, so that dead pods stay as common as before.
	sc.now = genNow(c, 8)
	sc.step = pick(c, genSteps)
	if o.nodes && c.IntN(3) == 1 {
		sc.ev = genNodeEvidence(c)
	}
	return sc
}

// genNodeStates are the states a node in a cache may be in: the
// node-lifecycle controller's own unreachable and not-ready states, and
// the odd ones around them.
var genNodeStates = []struct {
	ready  corev1.ConditionStatus // "" means no Ready condition
	taints []corev1.Taint
}{
	{ready: corev1.ConditionTrue},
	{ready: corev1.ConditionTrue, taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}}, // stale taint
	{ready: corev1.ConditionUnknown, taints: []corev1.Taint{
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}, {Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}},
	{ready: corev1.ConditionFalse, taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}}},
	{ready: corev1.ConditionUnknown, taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}},
	{ready: corev1.ConditionFalse, taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}},
	{ready: corev1.ConditionUnknown},
	{ready: corev1.ConditionUnknown, taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}}},
	{taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}},
	{ready: corev1.ConditionUnknown, taints: []corev1.Taint{
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}, {Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}}},
	{ready: corev1.ConditionFalse},
}

// genTransitions are the Ready conditions' lastTransitionTimes; genWaits
// the UnreachableFor values.
var (
	genTransitions = []time.Time{deletedAt.Add(-time.Minute), deletedAt.Time, {}, time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)}
	genWaits       = []time.Duration{0, 0, 30 * time.Second, 10 * time.Minute}
)

// genNodeEvidence draws a cache holding node-a and node-lost, each in any
// state or missing, and the unreachable policy.
func genNodeEvidence(c chooser) *genEvidence {
	ev := &genEvidence{nodes: map[string]*corev1.Node{}}
	for _, name := range []string{"node-a", "node-lost"} {
		i := c.IntN(len(genNodeStates) + 1)
		if i == len(genNodeStates) {
			continue // missing from the cache
		}
		st := genNodeStates[i]
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: slices.Clone(st.taints)}}
		if st.ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st.ready, LastTransitionTime: metav1.NewTime(pick(c, genTransitions))}}
		}
		ev.nodes[name] = n
	}
	ev.replace = c.IntN(4) != 0
	if ev.replace {
		ev.unreachableFor = pick(c, genWaits)
	}
	return ev
}

// genNow is the time a Checker's clock reads: in one draw of aroundOneIn
// around a deletion deadline or far off (genNows), else after every
// deadline (genLateNows), where taint-evicted pods are dead.
func genNow(c chooser, aroundOneIn int) time.Time {
	if c.IntN(aroundOneIn) == 0 {
		return pick(c, genNows)
	}
	return pick(c, genLateNows)
}

// genPod starts from one of the shapes the decision table cares about and
// then perturbs it with odd fields.
func genPod(c chooser, i int) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns",
		Name:      fmt.Sprintf("p%02d", i),
		UID:       types.UID(fmt.Sprintf("uid-%02d", i)),
	}}
	dt := func(reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason}
	}
	switch c.IntN(6) {
	case 0: // taint-evicted
		p.Status.Phase = corev1.PodRunning
		setDeleting(c, p)
		p.Status.Conditions = append(p.Status.Conditions, dt(health.ReasonDeletionByTaintManager))
	case 1: // terminated by the kubelet
		p.Status.Phase = corev1.PodFailed
		p.Status.Conditions = append(p.Status.Conditions, dt(corev1.PodReasonTerminationByKubelet))
	case 2: // drained or preempted
		p.Status.Phase = corev1.PodRunning
		setDeleting(c, p)
		p.Status.Conditions = append(p.Status.Conditions, dt(pick(c, []string{"EvictionByEvictionAPI", "PreemptionByScheduler"})))
	case 3: // running
		p.Status.Phase = corev1.PodRunning
	case 4: // finished
		p.Status.Phase = pick(c, []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed})
	default: // anything
		p.Status.Phase = pick(c, genPhases)
		if c.IntN(2) == 0 {
			setDeleting(c, p)
		}
	}
	// Perturbations.
	if c.IntN(6) == 0 {
		p.Status.Phase = pick(c, genPhases)
	}
	if c.IntN(8) == 0 {
		if p.DeletionTimestamp == nil {
			setDeleting(c, p)
		} else {
			p.DeletionTimestamp = nil
		}
	}
	if c.IntN(8) == 0 {
		p.UID = ""
	}
	for range c.IntN(4) {
		cond := corev1.PodCondition{
			Type:    pick(c, genConditionTypes),
			Status:  pick(c, genStatuses),
			Reason:  pick(c, genReasons),
			Message: rawString(c),
		}
		// A repeated type makes the pod malformed, and the policy holds it
		// back; keep one in four so that enough dead pods are sent.
		if slices.ContainsFunc(p.Status.Conditions, func(o corev1.PodCondition) bool { return o.Type == cond.Type }) && c.IntN(4) != 0 {
			continue
		}
		p.Status.Conditions = append(p.Status.Conditions, cond)
	}
	p.Spec.NodeName = pick(c, genNodes)
	for range c.IntN(3) {
		p.Finalizers = append(p.Finalizers, pick(c, genFinalizers))
	}
	for j := range c.IntN(3) {
		controller := c.IntN(2) == 0
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: pick(c, genOwnerAPIVersions), Kind: pick(c, genOwnerKinds), Name: fmt.Sprintf("owner-%d", j),
			UID: types.UID(fmt.Sprintf("owner-uid-%d", j)), Controller: &controller,
		})
	}
	if c.IntN(4) == 0 {
		p.Labels = map[string]string{"app": rawString(c)}
	}
	switch c.IntN(12) {
	case 0:
		p.Annotations = map[string]string{health.AnnotationForceDelete: health.ForceDeleteNever}
	case 1:
		p.Annotations = map[string]string{health.AnnotationForceDelete: rawString(c)}
	}
	if c.IntN(6) == 0 {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[health.AnnotationWriters] = pick(c, genWriters)
	}
	if c.IntN(8) == 0 {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations["podhealth.io/fence-lease"] = pick(c, []string{"db", ""})
	}
	switch c.IntN(12) {
	case 0:
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + p.Name},
		}})
	case 1:
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{},
		}})
	case 2:
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "inline", VolumeSource: pick(c, genInlineVolumes)})
	}
	return p
}

// genInlineVolumes are inline volumes of either kind: one node writes the
// first ones, the others live on the node or take many writers.
var genInlineVolumes = []corev1.VolumeSource{
	{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "10.0.0.1:3260", IQN: "iqn.2026-01.io.example:disk"}},
	{CSI: &corev1.CSIVolumeSource{Driver: "disk.csi.example.com"}},
	{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-0abc"}},
	{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}},
	{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/export"}},
	{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
}

func setDeleting(c chooser, p *corev1.Pod) {
	ts := metav1.NewTime(pick(c, genTimes))
	p.DeletionTimestamp = &ts
	switch c.IntN(4) {
	case 1:
		p.DeletionGracePeriodSeconds = ptr(int64(0))
	case 2:
		p.DeletionGracePeriodSeconds = ptr(int64(30))
	case 3:
		p.DeletionGracePeriodSeconds = ptr(int64(-1))
	}
}

// rawString is up to 7 arbitrary bytes, valid UTF-8 or not.
func rawString(c chooser) string {
	b := make([]byte, c.IntN(8))
	for i := range b {
		b[i] = byte(c.IntN(256))
	}
	return string(b)
}

func ptr[T any](v T) *T { return &v }

// wantState restates the documented default rules (README, "Which pods are
// dead") without using package health, for a Checker without node evidence
// whose clock reads now (see oracle).
func wantState(p *corev1.Pod, now time.Time) health.State {
	return oracle{now: now}.state(p)
}

// oracle restates, without using package health, what a Checker with the
// default rules and policy decides at the time now: with no node evidence
// (ev nil), or with the node cache and unreachable policy of ev and no
// live reads. seen is when the Checker's Memory first saw, on its clock,
// what TerminatingTooLong and UnreachableFor measure from (the first check
// of a scenario over a valid list), when saw is true; else now. The zero
// time is a time the clock can read (genNows holds it), so it cannot stand
// for "not seen yet".
type oracle struct {
	now  time.Time
	ev   *genEvidence
	seen time.Time
	saw  bool
}

// node returns the cached node of pod, or nil: none is configured, the pod
// is not bound, or the cache does not hold it (and no live read could
// confirm it gone).
func (o oracle) node(p *corev1.Pod) *corev1.Node {
	if o.ev == nil || p.Spec.NodeName == "" {
		return nil
	}
	return o.ev.nodes[p.Spec.NodeName]
}

// firstSeen is when a pod with a UID (or a node) was first seen.
func (o oracle) firstSeen(uid types.UID) time.Time {
	if !o.saw || uid == "" {
		return o.now
	}
	return o.seen
}

// state is the verdict of the default rules, in their documented order,
// then the ReplaceUnreachable policy, with a node's state as wantNodeState
// reads it:
//   - TaintEvicted: deletionTimestamp and DisruptionTarget=True reason
//     DeletionByTaintManager: Dead when the node is down (NotReady,
//     Unreachable or OutOfService); no opinion when it is Ready (whatever
//     its taints); when it is unknown (no node evidence, not cached, no
//     Ready condition), Dead once the deletionTimestamp is not after now;
//   - TerminatedByKubelet: phase Failed and DisruptionTarget=True reason
//     TerminationByKubelet: Dead;
//   - NodeGone never matches: no live read confirms a node gone;
//   - OutOfService: deletionTimestamp, node OutOfService: Dead;
//   - TerminatingTooLong: deletionTimestamp, node down, 5 minutes past
//     the deletionTimestamp and the grace period plus 5 minutes past the
//     first sighting: Dead;
//   - GracefulDeletion: any other deletionTimestamp: Terminating;
//   - FinishedPod: phase Succeeded or Failed: Finished;
//   - otherwise Alive, or Unreachable under ReplaceUnreachable when the pod
//     needs no fencing and is bound to a node that is Unreachable or
//     OutOfService, for UnreachableFor both since the Ready condition's
//     lastTransitionTime and since the first sighting (an UnreachableFor of
//     zero reads no clock).
func (o oracle) state(p *corev1.Pod) health.State {
	disruptedFor := func(reason string) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == reason {
				return true
			}
		}
		return false
	}
	node := wantNodeState(o.node(p))
	down := node == notReadyNode || node == unreachableNode || node == outOfServiceNode
	deleting := p.DeletionTimestamp != nil
	switch {
	case deleting && disruptedFor(health.ReasonDeletionByTaintManager) &&
		(down || node == unknownNode && !o.now.Before(p.DeletionTimestamp.Time)):
		return health.Dead
	case p.Status.Phase == corev1.PodFailed && disruptedFor(corev1.PodReasonTerminationByKubelet):
		return health.Dead
	case deleting && node == outOfServiceNode:
		return health.Dead
	case deleting && down &&
		!o.now.Before(p.DeletionTimestamp.Add(5*time.Minute)) && !o.now.Before(o.firstSeen(p.UID).Add(wantGrace(p)+5*time.Minute)):
		return health.Dead
	case deleting:
		return health.Terminating
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		return health.Finished
	case o.ev != nil && o.ev.replace && (node == unreachableNode || node == outOfServiceNode) &&
		(o.ev.unreachableFor == 0 ||
			!o.now.Before(readyTransition(o.node(p)).Add(o.ev.unreachableFor)) && !o.now.Before(o.firstSeen("node").Add(o.ev.unreachableFor))) &&
		!wantNeedsFencing(p):
		return health.Unreachable
	default:
		return health.Alive
	}
}

// heldBack restates when the Checker holds a dead pod back (README, "When
// is it safe to force-delete?", rows D8 and D9), in this order:
//   - it opted out by annotation;
//   - it is malformed: two of its conditions share a type, whatever the type;
//   - otherwise, if its verdict is fenced, it goes: the kubelet terminated
//     it (its containers stopped), or its node is not Ready and out of
//     service (OutOfService, or TaintEvicted there); so does a pod in a
//     terminal phase (the built-in kubelet fencer). (A pod that the
//     kubelet terminated and that another rule also matches carries two
//     DisruptionTarget conditions, so it is malformed already.)
//   - otherwise it waits for fencing evidence if it needs it
//     (wantNeedsFencing) and its node is not out of service.
func (o oracle) heldBack(p *corev1.Pod) bool {
	if p.Annotations[health.AnnotationForceDelete] == health.ForceDeleteNever {
		return true
	}
	seen := map[corev1.PodConditionType]bool{}
	for _, c := range p.Status.Conditions {
		if seen[c.Type] {
			return true
		}
		seen[c.Type] = true
	}
	if killedByKubelet(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false // the kubelet reported the containers stopped: a terminal phase is final
	}
	if wantNodeState(o.node(p)) == outOfServiceNode {
		return false
	}
	return wantNeedsFencing(p)
}

// wantNeedsFencing restates FenceStateful without a ClaimGetter: a pod
// that carries podhealth.io/fence-lease (whatever its value) needs it; the
// writers annotation decides when it is there ("many": no; anything else:
// yes); else owned by a StatefulSet, mounting an inline volume that one
// node at a time writes, or mounting any claim (the modes are unknown);
// a pod whose controller is not an apps/v1 ReplicaSet or DaemonSet or a
// batch/v1 Job also by mounting an ephemeral volume or a shared file
// system; a vouched-for one by an ephemeral volume whose claim template
// asks for ReadWriteOnce or ReadWriteOncePod or for no mode.
func wantNeedsFencing(p *corev1.Pod) bool {
	if _, ok := p.Annotations["podhealth.io/fence-lease"]; ok {
		return true
	}
	if w, ok := p.Annotations[health.AnnotationWriters]; ok {
		return w != "many"
	}
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "StatefulSet" {
			return true
		}
	}
	vouched := false
	for _, ref := range p.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			vouched = (ref.Kind == "ReplicaSet" || ref.Kind == "DaemonSet") && ref.APIVersion == "apps/v1" || ref.Kind == "Job" && ref.APIVersion == "batch/v1"
			break
		}
	}
	for _, v := range p.Spec.Volumes {
		switch s := v.VolumeSource; {
		case s.PersistentVolumeClaim != nil:
			return true
		case s.Ephemeral != nil && (!vouched || s.Ephemeral.VolumeClaimTemplate == nil || len(s.Ephemeral.VolumeClaimTemplate.Spec.AccessModes) == 0 ||
			slices.ContainsFunc(s.Ephemeral.VolumeClaimTemplate.Spec.AccessModes, func(m corev1.PersistentVolumeAccessMode) bool {
				return m == corev1.ReadWriteOnce || m == corev1.ReadWriteOncePod
			})):
			return true
		case s.ISCSI != nil, s.FC != nil, s.RBD != nil, s.Cinder != nil, s.AWSElasticBlockStore != nil,
			s.GCEPersistentDisk != nil, s.AzureDisk != nil, s.VsphereVolume != nil, s.PortworxVolume != nil,
			s.CSI != nil, s.FlexVolume != nil, s.PhotonPersistentDisk != nil, s.ScaleIO != nil, s.StorageOS != nil, s.Flocker != nil:
			return true
		case !vouched && (s.NFS != nil || s.CephFS != nil || s.Glusterfs != nil || s.AzureFile != nil || s.Quobyte != nil):
			return true
		}
	}
	return false
}

// wantGrace is the pod's grace period: deletionGracePeriodSeconds, else
// terminationGracePeriodSeconds, else 30 s; below zero counts as zero.
func wantGrace(p *corev1.Pod) time.Duration {
	secs := int64(30)
	switch {
	case p.DeletionGracePeriodSeconds != nil:
		secs = *p.DeletionGracePeriodSeconds
	case p.Spec.TerminationGracePeriodSeconds != nil:
		secs = *p.Spec.TerminationGracePeriodSeconds
	}
	return time.Duration(max(secs, 0)) * time.Second
}

// readyIs returns the status of the node's Ready condition, "" without one.
func readyIs(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// readyTransition returns the lastTransitionTime of the node's Ready
// condition.
func readyTransition(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func nodeHasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == key && (effect == "" || t.Effect == effect)
	})
}

// The node states of the documentation, restated for the oracle.
const (
	unknownNode = iota
	readyNode
	notReadyNode
	unreachableNode
	outOfServiceNode
)

// wantNodeState restates NodeStateOf: unknown for no node, no Ready
// condition or a status other than True, False and Unknown; ready when
// Ready is True, whatever the taints; otherwise out of service with the
// out-of-service taint (any effect), unreachable with the unreachable or
// not-ready taint with effect NoExecute, and not ready without either.
func wantNodeState(n *corev1.Node) int {
	if n == nil {
		return unknownNode
	}
	switch readyIs(n) {
	case corev1.ConditionTrue:
		return readyNode
	case corev1.ConditionFalse, corev1.ConditionUnknown:
	default:
		return unknownNode
	}
	switch {
	case nodeHasTaint(n, corev1.TaintNodeOutOfService, ""):
		return outOfServiceNode
	case nodeHasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute), nodeHasTaint(n, corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute):
		return unreachableNode
	}
	return notReadyNode
}

// countsAsDeleted is the Deleter contract: success, NotFound and a failed
// UID precondition (Conflict) all count as deleted.
func countsAsDeleted(err error) bool {
	return err == nil || apierrors.IsNotFound(err) ||
		(apierrors.IsConflict(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded))
}

// wantOutcome is the Outcome a dead pod's report must show for the answer
// to its delete.
func wantOutcome(err error) health.Outcome {
	switch {
	case err == nil:
		return health.ForceDeleted
	case apierrors.IsNotFound(err):
		return health.WasAlreadyGone
	case countsAsDeleted(err):
		return health.NameReused
	default:
		return health.DeleteFailed
	}
}

// world is a fake API server holding a scenario's pods. Its source hands out
// exactly the scenario's list, in the order given, for every check, like a
// cache that never catches up; its deleter is the fake's, with the
// scenario's faults injected.
type world struct {
	sc    scenario
	store *fake.Pods

	mu       sync.Mutex
	listed   []*corev1.Pod
	attempts map[string]int
	cancel   context.CancelFunc
	// cancelledAt is the index in store.Deletes() of the delete during
	// which the context was cancelled, or -1.
	cancelledAt int
	// cancelledOnce: the context of a world ends at most once, so that the
	// second check shows the retries.
	cancelledOnce bool
}

func newWorld(t testing.TB, sc scenario, listed []*corev1.Pod) *world {
	w := &world{sc: sc, listed: listed, attempts: map[string]int{}, cancelledAt: -1}
	w.store = fake.New(fake.Options{Interceptor: fake.Interceptor{
		ListPods: func(context.Context, health.PodSourceFunc) ([]*corev1.Pod, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			return slices.Clone(w.listed), nil
		},
		Delete: w.delete,
	}})
	seen := map[string]bool{}
	for _, p := range sc.pods {
		if p == nil || seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		require.NoError(t, w.store.Add(p))
	}
	return w
}

func (w *world) delete(ctx context.Context, ns, name string, opts metav1.DeleteOptions, next fake.DeleteFunc) error {
	w.mu.Lock()
	f := w.sc.faults[name]
	attempt := w.attempts[name]
	w.attempts[name]++
	cancel, once := w.cancel, w.cancelledOnce
	w.mu.Unlock()
	switch {
	case f.kind == noFault:
	case f.kind == faultCancel && attempt == 0 && cancel != nil && !once:
		cancel()
		w.mu.Lock()
		w.cancelledAt = len(w.store.Deletes())
		w.cancelledOnce = true
		w.mu.Unlock()
		return f.kind.err(ctx, name)
	case f.kind != faultCancel && (attempt == 0 || f.persist):
		return f.kind.err(ctx, name)
	}
	return next(ctx, ns, name, opts)
}

// outcome is what one check did.
type outcome struct {
	healthy bool
	err     error
	report  health.Report
	calls   []fake.DeleteCall // the deletes this check sent
	// cancelled says the context ended during one of calls.
	cancelled bool
}

// check runs one CheckReport (or Check) over the world with a context the
// scenario may cancel, and returns what it did.
func (w *world) check(checker *health.Checker, withReport bool) outcome {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.mu.Lock()
	w.cancel, w.cancelledAt = cancel, -1
	w.mu.Unlock()
	before := len(w.store.Deletes())

	var o outcome
	if withReport {
		o.report, o.err = checker.CheckReport(ctx)
		o.healthy = o.report.Healthy
	} else {
		o.healthy, o.err = checker.Check(ctx)
	}
	o.calls = w.store.Deletes()[before:]
	w.mu.Lock()
	o.cancelled = w.cancelledAt >= 0
	w.cancel = nil
	w.mu.Unlock()
	return o
}

// snapshot is a deep copy and the JSON of a list, to prove it unchanged.
type snapshot struct {
	pods []*corev1.Pod
	json []byte
}

func takeSnapshot(t testing.TB, pods []*corev1.Pod) snapshot {
	var s snapshot
	if pods != nil {
		s.pods = make([]*corev1.Pod, len(pods))
	}
	for i, p := range pods {
		s.pods[i] = p.DeepCopy()
	}
	var err error
	s.json, err = json.Marshal(pods)
	require.NoError(t, err)
	return s
}

func (s snapshot) requireUnchanged(t testing.TB, pods []*corev1.Pod) {
	t.Helper()
	// reflect.DeepEqual decides; cmp.Diff, much slower, only explains.
	if !reflect.DeepEqual(s.pods, pods) {
		require.Empty(t, cmp.Diff(s.pods, pods), "the check mutated the pods it listed")
		require.Fail(t, "the check mutated the pods it listed")
	}
}

func (s snapshot) requireSameJSON(t testing.TB, pods []*corev1.Pod) {
	t.Helper()
	after, err := json.Marshal(pods)
	require.NoError(t, err)
	require.True(t, bytes.Equal(s.json, after), "the JSON of the listed pods changed:\nbefore %s\nafter  %s", s.json, after)
}

// validList reports whether a check may judge the list: no nil pod.
// Nameless and UID-less pods are judged like any other.
func validList(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if p == nil {
			return false
		}
	}
	return true
}

// requireInvariants checks one check's outcome against the listed pods.
// removedBefore holds the UIDs whose deletes counted as deleted in earlier
// checks of the same Memory; on return it also holds this check's.
func requireInvariants(t testing.TB, listed []*corev1.Pod, or oracle, o outcome, withReport bool, removedBefore map[types.UID]bool) {
	t.Helper()
	byUID := map[types.UID]*corev1.Pod{}
	for _, p := range listed {
		if p != nil && p.UID != "" {
			byUID[p.UID] = p
		}
	}

	if !validList(listed) {
		require.False(t, o.healthy, "a list with a nil pod is never healthy")
		var invalid *health.ListError
		require.ErrorAs(t, o.err, &invalid)
		require.Empty(t, o.calls, "nothing is deleted when the list is invalid")
		return
	}

	// Every delete: a listed dead pod, grace period 0, its own UID as the
	// precondition, never a UID already removed, at most once per check.
	sentNow := map[types.UID]error{}
	for _, call := range o.calls {
		require.NotEmpty(t, call.UID, "delete of %s without a UID precondition", call.Name)
		require.NotNil(t, call.GracePeriodSeconds, "delete of %s without a grace period", call.Name)
		require.Zero(t, *call.GracePeriodSeconds, "delete of %s with grace period %d", call.Name, *call.GracePeriodSeconds)
		pod, ok := byUID[call.UID]
		require.True(t, ok, "delete with precondition UID %q that no listed pod has", call.UID)
		require.Equal(t, pod.Name, call.Name, "the delete names another pod than the UID's")
		require.Equal(t, pod.Namespace, call.Namespace)
		require.True(t, pod.DeletionTimestamp != nil || killedByKubelet(pod),
			"pod %s has no deletionTimestamp and was not terminated by the kubelet, yet it was force-deleted", pod.Name)
		require.Equal(t, health.Dead, or.state(pod), "pod %s is %v, yet it was force-deleted", pod.Name, or.state(pod))
		require.False(t, or.heldBack(pod), "pod %s must be held back, yet it was force-deleted", pod.Name)
		require.False(t, removedBefore[call.UID], "UID %s was deleted again although the Memory remembers it", call.UID)
		_, twice := sentNow[call.UID]
		require.False(t, twice, "UID %s deleted twice in one check", call.UID)
		sentNow[call.UID] = call.Err
	}

	// The verdicts and outcomes, in list order: each dead pod with a UID
	// was sent unless remembered or held back, until the context ended; the
	// dead pods after that were not attempted. A held-back pod counts in
	// neither column (rows D8 and D9), except one without a name or UID,
	// which fails the check (its source is wrong).
	alive, allRemoved, stopped := 0, true, false
	unidentified := make([]bool, len(listed))
	for i, p := range listed {
		state := or.state(p)
		want := health.NoAction
		if state == health.Alive {
			alive++
		}
		if state == health.Dead {
			callErr, sent := sentNow[p.UID]
			switch {
			case stopped:
				want = health.NotAttempted
				require.False(t, sent, "pod %s was deleted after the context ended", p.Name)
			case p.UID == "" || p.Name == "":
				want = health.HeldBack // unidentified: held back, and an error
				unidentified[i] = true
				allRemoved = false
				require.False(t, sent, "pod %q without a name or UID was deleted", p.Name)
			case removedBefore[p.UID]:
				want = health.DeletedEarlier
				if len(p.Finalizers) > 0 {
					want = health.BlockedByFinalizers
				}
			case or.heldBack(p):
				want = health.HeldBack
				require.False(t, sent, "held-back pod %s was deleted", p.Name)
			default:
				require.True(t, sent, "dead pod %s (uid %s) was neither deleted nor remembered", p.Name, p.UID)
				want = wantOutcome(callErr)
				stopped = errors.Is(callErr, context.Canceled)
			}
			if !want.Removed() && want != health.HeldBack {
				allRemoved = false
			}
		}
		if withReport {
			require.Len(t, o.report.Pods, len(listed))
			got := o.report.Pods[i]
			require.Same(t, p, got.Pod, "the report holds the listed pod itself")
			require.Equal(t, state, got.Verdict.State, "verdict of pod %s: %+v", p.Name, got.Verdict)
			require.Equal(t, want, got.Outcome, "outcome of pod %s (%v)", p.Name, state)
			require.Equal(t, want == health.DeleteFailed || unidentified[i], got.Err != nil, "pod %s: outcome %v with error %v", p.Name, got.Outcome, got.Err)
			if unidentified[i] {
				require.ErrorIs(t, got.Err, health.ErrUnidentifiedPod)
				require.ErrorIs(t, o.err, health.ErrUnidentifiedPod)
			}
			require.Equal(t, want == health.HeldBack, got.HeldBack.Reason != health.NotHeld, "pod %s: outcome %v held back for %q", p.Name, got.Outcome, got.HeldBack)
		}
	}
	require.Equal(t, o.cancelled, stopped, "the context ended during a delete: %v; the oracle saw it: %v", o.cancelled, stopped)
	require.Equal(t, allRemoved && !o.cancelled, o.err == nil, "err = %v; every dead pod removed: %v; context cancelled: %v", o.err, allRemoved, o.cancelled)
	require.Equal(t, alive > 0 && o.err == nil, o.healthy, "healthy with %d alive pods and err %v", alive, o.err)
	if o.cancelled {
		require.ErrorIs(t, o.err, context.Canceled, "D7: the error wraps the context's")
	}

	for uid, err := range sentNow {
		if countsAsDeleted(err) {
			removedBefore[uid] = true
		}
	}
}

// killedByKubelet is the one case in which a pod without deletionTimestamp
// may be force-deleted.
func killedByKubelet(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodFailed {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonTerminationByKubelet {
			return true
		}
	}
	return false
}

// summary is what must not depend on the order of the list or of the
// conditions.
type summary struct {
	Healthy bool
	Failed  bool
	Sent    []types.UID
	// Pods holds "name/uid: state outcome" per pod, sorted: pods may share
	// a name and a UID (both empty), so a map would keep only one.
	Pods []string
}

func summarize(o outcome) summary {
	s := summary{Healthy: o.healthy, Failed: o.err != nil}
	for _, c := range o.calls {
		s.Sent = append(s.Sent, c.UID)
	}
	slices.Sort(s.Sent)
	for _, p := range o.report.Pods {
		s.Pods = append(s.Pods, fmt.Sprintf("%s/%s: %v %v", p.Pod.Name, p.Pod.UID, p.Verdict.State, p.Outcome))
	}
	slices.Sort(s.Pods)
	return s
}

// permuted returns the list in another order, each pod's conditions in
// another order too (as copies: the originals are left alone).
func permuted(r *rand.Rand, pods []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		if p != nil {
			p = p.DeepCopy()
			r.Shuffle(len(p.Status.Conditions), func(a, b int) {
				p.Status.Conditions[a], p.Status.Conditions[b] = p.Status.Conditions[b], p.Status.Conditions[a]
			})
		}
		out[i] = p
	}
	r.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

// smallMemory is a Memory large enough for any generated scenario; the
// default one allocates its 4,096-slot ring on the first delete.
func smallMemory() *health.Memory { return health.NewMemory(health.MemoryOptions{Capacity: 64}) }

// requireChecks runs two checks over a scenario with one Checker, its clock
// moved on by the scenario's step between them, and checks the invariants
// of each: the second check sees the same stale list, so the UIDs the first
// removed must not be sent again and every other pod dead by then must be
// sent. withReport picks CheckReport or Check.
func requireChecks(t testing.TB, sc scenario, withReport bool) {
	t.Helper()
	w := newWorld(t, sc, sc.pods)
	clk := clocktesting.NewFakePassiveClock(sc.now)
	checker, err := health.New(w.store, w.store, sc.ev.options(clk))
	require.NoError(t, err)
	snap := takeSnapshot(t, sc.pods)
	removed := map[types.UID]bool{}

	first := w.check(checker, withReport)
	snap.requireUnchanged(t, sc.pods)
	requireInvariants(t, sc.pods, oracle{now: sc.now, ev: sc.ev}, first, withReport, removed)

	// The first check saw the pods (and their nodes) unless the list was
	// invalid: then it classified nothing.
	later := sc.now.Add(sc.step)
	or := oracle{now: later, ev: sc.ev}
	if validList(sc.pods) {
		or.seen, or.saw = sc.now, true
	}
	clk.SetTime(later)
	second := w.check(checker, withReport)
	snap.requireUnchanged(t, sc.pods)
	snap.requireSameJSON(t, sc.pods)
	requireInvariants(t, sc.pods, or, second, withReport, removed)
	if !validList(sc.pods) || second.cancelled {
		// A pod that died between the checks may cancel the second one
		// (row D7), which requireInvariants has checked.
		return
	}
	var wantRetried, gotRetried []types.UID
	for _, p := range sc.pods {
		if p.UID != "" && p.Name != "" && or.state(p) == health.Dead && !or.heldBack(p) && !slices.ContainsFunc(first.calls, func(c fake.DeleteCall) bool {
			return c.UID == p.UID && countsAsDeleted(c.Err)
		}) {
			wantRetried = append(wantRetried, p.UID)
		}
	}
	for _, c := range second.calls {
		gotRetried = append(gotRetried, c.UID)
	}
	slices.Sort(wantRetried)
	slices.Sort(gotRetried)
	require.Empty(t, cmp.Diff(wantRetried, gotRetried), "the second check must send exactly the dead pods that the first did not remove")
}

// requireOrderIndependent checks a scenario as listed and again with its
// pods and their conditions in another order, each on a fresh fake and
// Checker, and requires the same summary. A scenario whose context gets
// cancelled is skipped: the cancellation cuts the check at whichever dead
// pod comes first, so there the order matters by design (row D7).
func requireOrderIndependent(t testing.TB, sc scenario, r *rand.Rand) {
	t.Helper()
	run := func(listed []*corev1.Pod) outcome {
		w := newWorld(t, sc, listed)
		clk := clocktesting.NewFakePassiveClock(sc.now)
		checker, err := health.New(w.store, w.store, sc.ev.options(clk))
		require.NoError(t, err)
		o := w.check(checker, true)
		requireInvariants(t, listed, oracle{now: sc.now, ev: sc.ev}, o, true, map[types.UID]bool{})
		return o
	}
	first := run(sc.pods)
	if first.cancelled {
		return
	}
	for range 2 {
		shuffled := permuted(r, sc.pods)
		again := run(shuffled)
		require.False(t, again.cancelled)
		if want, got := summarize(first), summarize(again); !reflect.DeepEqual(want, got) {
			require.Empty(t, cmp.Diff(want, got), "the result depends on the order of pods or conditions")
		}
	}
}
