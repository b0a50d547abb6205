package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime"
)

// EnabledLabel is the namespace label that opts a namespace in, with the
// value "true"; Options.Namespaces says otherwise.
const EnabledLabel = "podhealth.io/enabled"

// barePod is the owner kind of the group of a pod without a controlling
// owner.
const barePod = "Pod"

// Options configure a Reconciler. The zero value acts in the namespaces
// labelled podhealth.io/enabled=true, with no delete budget, a Breaker with
// the library's default thresholds, no events and no extra observer.
type Options struct {
	// Namespaces selects the namespaces to act in, by their labels. Nil
	// means EnabledLabel=true. An empty selector is refused: it would
	// select every namespace.
	Namespaces labels.Selector
	// WatchNamespaces, when not empty, are the only namespaces to act in
	// (the namespaced mode): each is opted in by being named, no
	// Namespace object is read (a Role per namespace is then all the
	// access to pods the controller needs), and the manager's cache must
	// hold the pods of these namespaces only. Namespaces must then be nil:
	// a selector would do nothing.
	WatchNamespaces []string
	// DryRun reports what would be force-deleted and deletes nothing.
	DryRun bool
	// Budget, when not nil, limits the force deletes of every group
	// together.
	Budget *health.DeleteBudget
	// Breaker's thresholds; its Nodes are the cache's, a node whose Lease
	// in kube-node-lease has not been renewed within its duration counted
	// as not Ready (see StaleLeaseReason).
	Breaker health.Breaker
	// Observer, when not nil, sees every pod report (for example the
	// metrics module's Observer).
	Observer health.Observer
	// Recorder, when not nil, records an event for each force delete, each
	// failed one and each dead pod held back, regarding the pod's owner
	// (the pod is the related object), or the pod when it has none.
	Recorder events.EventRecorder
	// Memory is shared by every group's checker. Nil means a new one.
	Memory *health.Memory
	// Clock is every group's Checker's clock (its waits, the Memory's
	// TTL, the budget's window), and measures how old the node Leases are
	// for the Breaker, how long pods have been held for fencing
	// (FencingHolds) and when a hold's event repeats. Nil means the real
	// clock.
	Clock clock.PassiveClock
	// BreakerRecheck is how soon a group that the Breaker held back is
	// judged again when no event brings it back earlier (see
	// SetupWithManager: a node's state, a node's deletion, a stale Lease
	// renewed). Zero means DefaultBreakerRecheck; New refuses a negative
	// one.
	BreakerRecheck time.Duration
	// ShutdownTaints are fencing evidence beyond the out-of-service taint
	// and a node's deletion (health.Options.ShutdownTaints): typically the
	// cloud's health.TaintCloudShutdown. Empty, the default, means none.
	ShutdownTaints []health.ShutdownTaint
	// ApplyOutOfService, when true, taints a node
	// node.kubernetes.io/out-of-service=nodeshutdown:NoExecute once one of
	// ShutdownTaints fences it, as the Checker judges it, and the Breaker
	// and the budget allow; it removes the taints it applied once their
	// node is Ready and none of its pods from before the taint that the
	// taint evicts is left. Kubernetes then force-detaches the node's
	// volumes. It needs ShutdownTaints, and the cluster-wide mode (only
	// there does the cache hold every pod of a node, which removing the
	// taint must see). A dry run applies nothing and says what it would.
	// The default is false.
	ApplyOutOfService bool
	// Fencers are more authorities whose proof frees a dead pod that needs
	// fencing (health.Options.Fencers): fencing.LeaseFencer for workloads
	// that fence themselves, fencing.NetworkFenceFencer for the storage's
	// fence. They free pods only: the out-of-service taint follows
	// ShutdownTaints alone, never a fencer's proof. None by default.
	Fencers []health.Fencer
}

// DefaultBreakerRecheck is Options.BreakerRecheck's default: a hold that
// ends with the cluster's state, not with an event the controller sees,
// costs at most this long.
const DefaultBreakerRecheck = time.Minute

// Manager is what a Reconciler uses of a controller-runtime manager:
// GetClient reads from the cache and writes to the API server,
// GetAPIReader reads from the API server.
type Manager = podhealthcr.Manager

// Reconciler reconciles one owner group per request: the request's
// namespace, and as its name the owner's kind, API group and name
// ("ReplicaSet.apps/web-7d9f") or "Pod/<name>" for a pod without an owner
// (see GroupOf). It is safe for concurrent use.
type Reconciler struct {
	cache      client.Client
	namespaces labels.Selector
	watched    map[string]bool // the namespaced mode's namespaces; nil in the cluster-wide mode
	opts       Options
	nodes      *podhealthcr.Nodes
	breaker    heartbeatNodes // the Breaker's view of nodes
	liveNodes  *podhealthcr.Nodes
	claims     *podhealthcr.Claims
	memory     *health.Memory
	held       *podsource.HeldEvents // the holds recorded as events, by every group's checker
	recheck    time.Duration
	// breakerHeld are the groups whose last check the Breaker held back:
	// the events that can close the Breaker enqueue them again (see
	// breakerHold). notEnqueued are those of them that no such event has
	// enqueued since that check ended: an event goes through these only,
	// not through every held group. inCheck are the groups being judged
	// now, which every such event enqueues again.
	heldMu      sync.Mutex
	breakerHeld map[types.NamespacedName]breakerHold
	notEnqueued map[types.NamespacedName]struct{}
	inCheck     map[types.NamespacedName]int
	// fencingHeld are, per group, the pods its last check held back for
	// fencing, with when a check first did: podhealth_fencing_held_pods
	// and the age of the oldest, which alert rules read.
	fencingHeld map[types.NamespacedName]map[types.UID]time.Time
	clock       clock.PassiveClock
	// live reads from the API server; oos is the out-of-service
	// controller's state, nil unless Options.ApplyOutOfService.
	live client.Reader
	oos  *oosState
}

// New returns a Reconciler over mgr.
func New(mgr Manager, opts Options) (*Reconciler, error) {
	if mgr == nil {
		return nil, errors.New("controller: New: nil Manager")
	}
	watched, err := watchedNamespaces(opts)
	if err != nil {
		return nil, err
	}
	namespaces := opts.Namespaces
	if namespaces == nil {
		namespaces = labels.SelectorFromSet(labels.Set{EnabledLabel: "true"})
	}
	if namespaces.Empty() {
		return nil, errors.New("controller: New: an empty namespace selector would act in every namespace; give a label")
	}
	nodes, err := podhealthcr.NewNodes(mgr.GetClient())
	if err != nil {
		return nil, err
	}
	liveNodes, err := podhealthcr.NewNodes(mgr.GetAPIReader())
	if err != nil {
		return nil, err
	}
	// Claims are read live, for the dead pods that mount one only: a
	// cluster-wide claim cache would cost more than those few reads.
	claims, err := podhealthcr.NewClaims(mgr.GetAPIReader())
	if err != nil {
		return nil, err
	}
	recheck := opts.BreakerRecheck
	switch {
	case recheck < 0:
		return nil, fmt.Errorf("controller: New: negative Options.BreakerRecheck %v", recheck)
	case recheck == 0:
		recheck = DefaultBreakerRecheck
	}
	switch {
	case opts.ApplyOutOfService && len(opts.ShutdownTaints) == 0:
		return nil, errors.New("controller: New: Options.ApplyOutOfService without Options.ShutdownTaints would never apply a taint: name the evidence it acts on")
	case opts.ApplyOutOfService && len(opts.WatchNamespaces) > 0:
		return nil, errors.New("controller: New: Options.ApplyOutOfService in the namespaced mode: the cache would not hold every pod of a node, so the controller could never see a node empty and remove its taint")
	}
	memory := opts.Memory
	if memory == nil {
		memory = health.NewMemory(health.MemoryOptions{})
	}
	now := opts.Clock
	if now == nil {
		now = clock.RealClock{}
	}
	held, err := podsource.NewHeldEvents(podsource.HeldEventsOptions{Clock: now})
	if err != nil {
		return nil, err
	}
	r := &Reconciler{cache: mgr.GetClient(), namespaces: namespaces, watched: watched, opts: opts, nodes: nodes, liveNodes: liveNodes, claims: claims, memory: memory, held: held,
		breaker: heartbeatNodes{nodes: nodes, leases: mgr.GetClient(), clock: now}, recheck: recheck,
		breakerHeld: make(map[types.NamespacedName]breakerHold), notEnqueued: make(map[types.NamespacedName]struct{}), inCheck: make(map[types.NamespacedName]int), fencingHeld: make(map[types.NamespacedName]map[types.UID]time.Time), clock: now,
		live: mgr.GetAPIReader()}
	if opts.ApplyOutOfService {
		r.oos = newOutOfService()
	}
	// Build one checker now, so that bad options fail at start.
	if _, err := r.checker(logr.Discard(), nil, nil); err != nil {
		return nil, err
	}
	return r, nil
}

// GroupOf is the request of pod's group: its namespace, and its
// controlling owner's kind, API group and name ("ReplicaSet.apps/web-7d9f";
// a kind of the core group has none), or "Pod/<name>" when it has none, so
// that owners of one kind and name in two API groups make two groups.
func GroupOf(pod *corev1.Pod) types.NamespacedName {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		kind := ref.Kind
		if group := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).Group; group != "" {
			kind += "." + group
		}
		return types.NamespacedName{Namespace: pod.Namespace, Name: kind + "/" + ref.Name}
	}
	return types.NamespacedName{Namespace: pod.Namespace, Name: barePod + "/" + pod.Name}
}

// Reconcile judges the group's pods and force-deletes the dead ones that
// the policy lets go. A namespace that is not opted in is never written
// to.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.checking(req.NamespacedName)()
	if r.firstNoLonger(ctx, req.NamespacedName) {
		return ctrl.Result{RequeueAfter: putBackAfter, Priority: new(0)}, nil
	}
	enabled, err := r.enabled(ctx, req.Namespace)
	if err != nil || !enabled {
		r.forgetHolds(req.NamespacedName)
		return ctrl.Result{}, err
	}
	var list corev1.PodList
	if err := r.cache.List(ctx, &list, client.InNamespace(req.Namespace), client.MatchingFields{groupField: req.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the cached pods of group %s: %w", req, err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if pod := &list.Items[i]; GroupOf(pod) == req.NamespacedName {
			pods = append(pods, pod)
		}
	}
	if len(pods) == 0 {
		r.forgetHolds(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	deleter, err := podhealthcr.NewDeleter(r.cache, req.Namespace, podsource.WholeNamespace())
	if err != nil {
		return ctrl.Result{}, err
	}
	checker, err := r.checker(log.FromContext(ctx), pods, deleter)
	if err != nil {
		return ctrl.Result{}, err
	}
	report, err := checker.CheckReport(ctx)
	return ctrl.Result{RequeueAfter: r.retryAfter(req.NamespacedName, report)}, err
}

// retryAfter records whether the Breaker held back a pod of the group, and
// returns when to judge the group again: when the report says a pod's
// verdict or outcome changes with time alone (a deadline, the budget's
// window), and, after a Breaker hold, within the re-check interval at the
// latest.
func (r *Reconciler) retryAfter(group types.NamespacedName, report health.Report) time.Duration {
	held := false
	var heldOn []string
	var fencing []types.UID
	for i := range report.Pods {
		switch p := &report.Pods[i]; p.HeldBack.Reason {
		case health.HeldByBreaker:
			held = true
			if p.Pod != nil && p.Pod.Spec.NodeName != "" && !slices.Contains(heldOn, p.Pod.Spec.NodeName) {
				heldOn = append(heldOn, p.Pod.Spec.NodeName)
			}
		case health.HeldForFencing:
			if p.Pod != nil {
				fencing = append(fencing, p.Pod.UID)
			}
		}
	}
	r.heldByBreaker(group, held, heldOn...)
	r.heldForFencing(group, fencing)
	after := report.RetryAfter
	if held && (after == 0 || r.recheck < after) {
		after = r.recheck
	}
	return after
}

// breakerHold is a group whose last check the Breaker held back.
type breakerHold struct {
	// nodes are the nodes of the pods it held back: once the Breaker lets
	// go, the group is judged first if one of them is down (judgedFirst).
	nodes []string
	// first is true from the group's enqueueing at deadPodPriority to the
	// start of its check (firstNoLonger).
	first bool
}

// heldByBreaker records whether the group's last check was held back by
// the Breaker, and the nodes of the pods it held.
func (r *Reconciler) heldByBreaker(group types.NamespacedName, held bool, onNodes ...string) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	if held {
		r.breakerHeld[group] = breakerHold{nodes: onNodes}
		r.notEnqueued[group] = struct{}{}
	} else {
		delete(r.breakerHeld, group)
		delete(r.notEnqueued, group)
	}
}

// heldForFencing records the pods of the group that its last check held
// back for fencing; a pod held before keeps the time it was first held.
func (r *Reconciler) heldForFencing(group types.NamespacedName, uids []types.UID) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	if len(uids) == 0 {
		delete(r.fencingHeld, group)
		return
	}
	before, now := r.fencingHeld[group], r.clock.Now()
	held := make(map[types.UID]time.Time, len(uids))
	for _, uid := range uids {
		since, ok := before[uid]
		if !ok {
			since = now
		}
		held[uid] = since
	}
	r.fencingHeld[group] = held
}

// heldForFencingNow reports whether the group's last check held the pod
// of that UID back for fencing.
func (r *Reconciler) heldForFencingNow(group types.NamespacedName, uid types.UID) bool {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	_, held := r.fencingHeld[group][uid]
	return held
}

// forgetHolds drops what the group's last check held back: it has no pods
// left, or its namespace is no longer opted in.
func (r *Reconciler) forgetHolds(group types.NamespacedName) {
	r.heldByBreaker(group, false)
	r.heldForFencing(group, nil)
}

// FencingHolds returns how many pods the last checks of their groups held
// back for fencing, and how long the one held longest has been (0 for
// none). It is safe for concurrent use.
func (r *Reconciler) FencingHolds() (pods int, oldest time.Duration) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	now := r.clock.Now()
	for _, held := range r.fencingHeld {
		for _, since := range held {
			pods++
			if age := now.Sub(since); age > oldest {
				oldest = age
			}
		}
	}
	return pods, oldest
}

// BreakerNodes is the Breaker's view of the nodes (the cached nodes, a node
// whose Lease is stale counted not Ready), for a gauge of the Breaker's
// state (metrics.Options.Breaker) that reads it as the checks do. It is
// safe for concurrent use.
func (r *Reconciler) BreakerNodes() health.NodeLister { return breakerView{r} }

type breakerView struct{ r *Reconciler }

// ListNodes reads r.breaker when called: SetupWithManager completes it.
func (v breakerView) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	return v.r.breaker.ListNodes(ctx)
}

// breakerHeldGroups returns, for an event that can close the Breaker, the
// groups to judge again, in no order: those whose last check the Breaker
// held back, unless an event has enqueued them since that check ended
// (they wait in the queue, and their check will read what this event
// changed: an informer's handler runs after its cache has the change),
// and those being judged now, whose check may have read the cache
// before the change (the queue runs them again once they are done).
// None while the Breaker, read after the change, stops force deletes on
// every node: no check could let a pod go, and the event that lifts it
// (or, failing one, breakerClosedGroups) brings them all. It is read only
// when the last listing of the shared view did not find it closed on some
// node, as after a mass failure's first checks: once it is, every event
// enqueues the held groups with no listing, at the cost of one round of
// checks should the Breaker open everywhere again.
//
// Why: when the nodes of a mass failure come back, each of hundreds of
// node events would enqueue every held group again, tens of thousands,
// each time: the queue's work grew with the nodes times the groups. And
// as the node-lifecycle controller marks the failed nodes one by one,
// each mark judged every held group again, to hold it again. And each
// event went through every held group to find the few not enqueued
// (notEnqueued): a lookup per group per node, 0.73 ms an event at 27,000
// groups.
//
// It first ends the Breaker's shared view (viewMemo): the view's own
// informer handlers may hear of the change only after these checks run,
// and a check that read the view from before it would be held again with
// no event left to bring it back.
func (r *Reconciler) breakerHeldGroups(ctx context.Context) []reconcile.Request {
	if r.breaker.memo != nil {
		r.breaker.memo.changed()
	}
	r.heldMu.Lock()
	none := len(r.notEnqueued) == 0 && len(r.inCheck) == 0
	r.heldMu.Unlock()
	if none {
		return nil
	}
	// A Breaker last listed as closed somewhere is not read again: should
	// it be open everywhere now, the checks enqueued cost work only, and
	// their own listings record it for the events after them.
	if memo := r.breaker.memo; (memo == nil || !memo.closedSomewhereWhenLastListed()) && r.breakerOpenEverywhere(ctx) {
		return nil
	}
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	var out []reconcile.Request
	for group := range r.notEnqueued {
		if _, now := r.inCheck[group]; !now {
			out = append(out, reconcile.Request{NamespacedName: group})
			delete(r.notEnqueued, group)
		}
	}
	for group := range r.inCheck {
		out = append(out, reconcile.Request{NamespacedName: group})
	}
	return out
}

// breakerOpenEverywhere reports whether the Breaker, read now, stops
// force deletes on every node: the whole cluster is disrupted, or the
// nodes cannot be read. Only then does it stop them on a node that is
// in no zone it counts, such as the name no node has ("").
func (r *Reconciler) breakerOpenEverywhere(ctx context.Context) bool {
	return r.openEverywhereOver(ctx, r.breaker)
}

// openEverywhereOver is breakerOpenEverywhere over nodes.
func (r *Reconciler) openEverywhereOver(ctx context.Context, nodes health.NodeLister) bool {
	breaker := r.opts.Breaker
	breaker.Nodes = nodes
	return breaker.Tripped(ctx, "") != ""
}

// newViewMemo returns a shared view for r.breaker that reads each of its
// listings as r's Breaker would (viewMemo.openEverywhere).
func (r *Reconciler) newViewMemo() *viewMemo {
	return &viewMemo{clock: r.breaker.clock, openEverywhere: func(ctx context.Context, nodes []*corev1.Node) bool {
		return r.openEverywhereOver(ctx, listedNodes(nodes))
	}}
}

// listedNodes is a health.NodeLister of nodes already listed.
type listedNodes []*corev1.Node

func (l listedNodes) ListNodes(context.Context) ([]*corev1.Node, error) { return l, nil }

// checking records that group is being judged, until the returned func
// is called.
func (r *Reconciler) checking(group types.NamespacedName) (done func()) {
	r.heldMu.Lock()
	r.inCheck[group]++
	r.heldMu.Unlock()
	return func() {
		r.heldMu.Lock()
		defer r.heldMu.Unlock()
		if r.inCheck[group]--; r.inCheck[group] == 0 {
			delete(r.inCheck, group)
		}
	}
}

// watchedNamespaces checks Options.WatchNamespaces and returns them as a
// set, nil when the mode is cluster-wide.
func watchedNamespaces(opts Options) (map[string]bool, error) {
	if len(opts.WatchNamespaces) == 0 {
		return nil, nil
	}
	if opts.Namespaces != nil {
		return nil, errors.New("controller: New: Options.Namespaces with Options.WatchNamespaces: the selector would do nothing, since the namespaces named are the ones acted in")
	}
	watched := make(map[string]bool, len(opts.WatchNamespaces))
	for _, ns := range opts.WatchNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return nil, fmt.Errorf("controller: New: Options.WatchNamespaces: %q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
		}
		if watched[ns] {
			return nil, fmt.Errorf("controller: New: Options.WatchNamespaces: %q is named twice", ns)
		}
		watched[ns] = true
	}
	return watched, nil
}

// enabled reports whether the namespace is opted in: named, in the
// namespaced mode; else by its labels, from the cache.
func (r *Reconciler) enabled(ctx context.Context, namespace string) (bool, error) {
	if r.watched != nil {
		return r.watched[namespace], nil
	}
	var ns corev1.Namespace
	if err := r.cache.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading namespace %s from the cache: %w", namespace, err)
	}
	// A labelled namespace that is being deleted stays opted in: the
	// namespace controller deletes its pods gracefully, and a pod on a
	// failed node then blocks the namespace's deletion for ever, which is
	// what the rules (TerminatingTooLong, NodeGone) end.
	return r.namespaces.Matches(labels.Set(ns.Labels)), nil
}

// checker builds the Checker of one group's pods.
func (r *Reconciler) checker(logger logr.Logger, pods []*corev1.Pod, deleter health.Deleter) (*health.Checker, error) {
	source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return pods, nil })
	breaker := r.opts.Breaker
	breaker.Nodes = r.breaker
	var events health.Observer
	if r.opts.Recorder != nil {
		events = ownerEvents{recorder: r.opts.Recorder, held: r.held}
	}
	var nodes health.NodeGetter = r.nodes
	if len(r.opts.ShutdownTaints) > 0 {
		nodes = runningNodes{nodes: r.nodes, leases: r.cache, shutdownTaints: r.opts.ShutdownTaints}
	}
	opts := health.Options{
		Nodes:     nodes,
		LiveNodes: r.liveNodes,
		Claims:    r.claims,
		Budget:    r.opts.Budget,
		Breaker:   breaker,
		Memory:    r.memory,
		Clock:     r.clock,
		DryRun:    r.opts.DryRun,
		Logger:    logger,
		Observer:  health.MultiObserver(r.opts.Observer, events),

		ShutdownTaints: r.opts.ShutdownTaints,
		Fencers:        r.opts.Fencers,
	}
	if deleter == nil {
		// Validation only: a dry run needs no deleter.
		opts.DryRun = true
	}
	return health.New(source, deleter, opts)
}

// ownerEvents records each pod's events regarding the pod's own controlling
// owner, with its UID (the pod is the related object), or the pod when it
// has none: the pods of one group may have owners that differ in UID (an
// owner deleted and created again), and each event names the right one.
type ownerEvents struct {
	recorder events.EventRecorder
	held     *podsource.HeldEvents
}

var _ health.Observer = ownerEvents{}

func (o ownerEvents) Observe(ctx context.Context, r health.PodReport) {
	if _, ok := podsource.EventFor(r); !ok || r.Pod == nil {
		o.held.Record(r) // a hold that ended is forgotten
		return           // most reports: nothing to record, so no observer to build
	}
	opts := podhealthcr.EventObserverOptions{HeldEvents: o.held}
	if ref := metav1.GetControllerOf(r.Pod); ref != nil {
		opts.Object = &corev1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: r.Pod.Namespace, Name: ref.Name, UID: ref.UID}
	}
	events, err := podhealthcr.NewEventObserver(o.recorder, opts)
	if err != nil {
		return // a nil recorder, which New does not let through
	}
	events.Observe(ctx, r)
}
