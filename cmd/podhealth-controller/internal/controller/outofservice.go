package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/podhealth/podhealth/health"
)

// AnnotationOutOfServiceApplied marks a node that podhealth-controller
// tainted out-of-service, with the time it did (RFC 3339). It removes only
// the taints of the nodes it marked, and removes the mark with the taint.
const AnnotationOutOfServiceApplied = "podhealth.io/out-of-service-applied"

// cacheLagRetry is how soon a node whose live object disagrees with the
// cache is judged again, should no event of it come first.
const cacheLagRetry = time.Second

// outOfServiceValue is the value of the taint the controller applies, the
// one KEP-2268 and the Kubernetes documentation give.
const outOfServiceValue = "nodeshutdown"

// Event reasons on a Node, from the out-of-service controller.
const (
	ReasonOutOfServiceApplied      = "OutOfServiceTaintApplied"
	ReasonOutOfServiceWouldApply   = "OutOfServiceTaintWouldApply"
	ReasonOutOfServiceHeld         = "OutOfServiceTaintHeld"
	ReasonOutOfServiceRemoved      = "OutOfServiceTaintRemoved"
	ReasonOutOfServiceRemovedByOne = "OutOfServiceTaintRemovedByOther"
)

// oosState is the state of the controller that applies and removes the
// out-of-service taint (Options.ApplyOutOfService). It is safe for
// concurrent use.
type oosState struct {
	mu sync.Mutex
	// sighted is when this controller first saw each node with a shutdown
	// taint that may fence it (health.ShutdownTaintOf), by node and key:
	// the taint's After is measured from it, as a Checker measures it.
	sighted map[string]sighting
	// applied are the nodes carrying a taint this controller applied, with
	// when it did, as the nodes' marks say (podhealth_out_of_service_*).
	applied map[string]time.Time
	// told are the nodes whose last hold (or dry run) was already sent as
	// an event, with its words, so that a hold that lasts sends one.
	told            map[string]string
	appliedTotal    uint64
	removedTotal    uint64
	wouldApplyTotal uint64
	removedAgeTotal time.Duration
	maxAgeAtRemoval time.Duration
}

func newOutOfService() *oosState {
	return &oosState{sighted: map[string]sighting{}, applied: map[string]time.Time{}, told: map[string]string{}}
}

// sighting is a node's first sighting with a shutdown taint, under one
// Ready transition.
type sighting struct {
	key        string
	transition time.Time
	first      time.Time
}

// OutOfServiceStats are what the out-of-service controller did since the
// start, for podhealth_out_of_service_* metrics.
type OutOfServiceStats struct {
	// Applied and Removed count the taints applied and removed;
	// WouldApply the taints a dry run would have applied.
	Applied, Removed, WouldApply uint64
	// Tainted is how many nodes carry a taint this controller applied, and
	// OldestAge how long the oldest of them has (0 when none does).
	Tainted   int
	OldestAge time.Duration
	// RemovedAge is the total age of the taints at their removal, for a
	// mean; MaxRemovedAge the oldest.
	RemovedAge, MaxRemovedAge time.Duration
}

// OutOfServiceStats returns the out-of-service controller's counts; all
// zero when Options.ApplyOutOfService is off.
func (r *Reconciler) OutOfServiceStats() OutOfServiceStats {
	o := r.oos
	if o == nil {
		return OutOfServiceStats{}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s := OutOfServiceStats{Applied: o.appliedTotal, Removed: o.removedTotal, WouldApply: o.wouldApplyTotal, Tainted: len(o.applied),
		RemovedAge: o.removedAgeTotal, MaxRemovedAge: o.maxAgeAtRemoval}
	now := r.clock.Now()
	for _, at := range o.applied {
		s.OldestAge = max(s.OldestAge, now.Sub(at))
	}
	return s
}

// setupOutOfService registers the controller that applies and removes the
// out-of-service taint: node events enqueue their node, and the deletion
// of a pod bound to a node this controller tainted enqueues that node,
// since the taint comes off only once its old pods are gone.
func (r *Reconciler) setupOutOfService(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("podhealth-out-of-service").
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: 1}).
		Watches(&corev1.Node{}, &handler.EnqueueRequestForObject{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podNode), builder.WithPredicates(r.podLeftTaintedNode())).
		Complete(reconcile.Func(r.reconcileOutOfService))
}

func podNode(_ context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: pod.Spec.NodeName}}}
}

// podLeftTaintedNode lets through the deletion of a pod, or its move to a
// terminal phase, on a node this controller tainted.
func (r *Reconciler) podLeftTaintedNode() predicate.Funcs {
	tainted := func(obj client.Object) bool {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return false
		}
		r.oos.mu.Lock()
		defer r.oos.mu.Unlock()
		_, ok = r.oos.applied[pod.Spec.NodeName]
		return ok
	}
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			pod, ok := e.ObjectNew.(*corev1.Pod)
			return ok && isTerminal(pod) && tainted(pod)
		},
		DeleteFunc:  func(e event.DeleteEvent) bool { return tainted(e.Object) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// reconcileOutOfService applies the out-of-service taint to a node whose
// shutdown taint has fenced it for its After, when the Breaker and the
// budget allow; and removes a taint it applied once the node is Ready and
// none of the pods bound to it from before the taint, that the taint
// evicts, is left. Every write is checked against a live read of the node
// and sent with its resourceVersion, so that a change in between fails
// it (Conflict) and the node is judged again.
func (r *Reconciler) reconcileOutOfService(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("node", req.Name)
	var node corev1.Node
	if err := r.cache.Get(ctx, req.NamespacedName, &node); err != nil {
		if apierrors.IsNotFound(err) {
			r.oos.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if at, ok := appliedAt(&node, r.clock.Now()); ok {
		return r.maybeRemoveOutOfService(ctx, logger, &node, at)
	}
	r.oos.untainted(req.Name)
	if hasOutOfService(&node) {
		r.oos.forgetSighting(req.Name) // someone else's taint: theirs to remove
		return ctrl.Result{}, nil
	}
	taint, ok := health.ShutdownTaintOf(&node, r.opts.ShutdownTaints)
	if !ok {
		r.oos.forgetSighting(req.Name)
		return ctrl.Result{}, nil
	}
	now := r.clock.Now()
	// As a Checker measures it: from this controller's first sighting
	// under the node's current Ready transition, and from the transition,
	// so that a node that came back and failed again unseen waits afresh.
	first := r.oos.sight(req.Name, taint.Key, readyTransition(&node), now)
	if left := health.ShutdownWaitLeft(&node, taint, first, now); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	seen := now.Sub(first)
	breaker := r.opts.Breaker
	breaker.Nodes = r.breaker
	if why := breaker.Tripped(ctx, node.Name); why != "" {
		// Keyed by the hold's kind, not its words, which carry counts that
		// change as an outage grows: one event per hold.
		r.tellOnce(&node, corev1.EventTypeWarning, ReasonOutOfServiceHeld, "HoldOutOfServiceTaint", "breaker", "not applying "+corev1.TaintNodeOutOfService+": "+why)
		return ctrl.Result{RequeueAfter: r.recheck}, nil
	}
	note := fmt.Sprintf("not Ready and tainted %s for %v", taint.Key, seen.Round(time.Second))
	if r.opts.DryRun {
		if r.tellOnce(&node, corev1.EventTypeNormal, ReasonOutOfServiceWouldApply, "ApplyOutOfServiceTaint", taint.Key, "dry run: would apply "+corev1.TaintNodeOutOfService+"="+outOfServiceValue+":NoExecute: "+note) {
			r.oos.count(func(o *oosState) { o.wouldApplyTotal++ })
			logger.Info("dry run: would apply the out-of-service taint", "evidence", note)
		}
		return ctrl.Result{}, nil
	}
	// Judged again on the live node about to be written, not on the cache
	// that led here: the taint, the Ready transition the wait was measured
	// under, and the wait itself.
	live, err := r.liveNode(ctx, node.Name)
	if err != nil || live == nil {
		return ctrl.Result{}, err
	}
	if liveTaint, ok := health.ShutdownTaintOf(live, r.opts.ShutdownTaints); !ok || liveTaint.Key != taint.Key || hasOutOfService(live) ||
		!readyTransition(live).Equal(readyTransition(&node)) {
		// The cache lagged: judge the live object on its next event.
		return ctrl.Result{RequeueAfter: cacheLagRetry}, nil
	}
	if left := health.ShutdownWaitLeft(live, taint, first, now); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	// A kubelet that renewed its Lease since the node went Unknown runs
	// (a boot, before it posts its status), whatever the cloud's taint
	// still says.
	if why, err := r.leaseShowsRunning(ctx, live); err != nil || why != "" {
		if why != "" {
			r.tellOnce(&node, corev1.EventTypeWarning, ReasonOutOfServiceHeld, "HoldOutOfServiceTaint", "lease", "not applying "+corev1.TaintNodeOutOfService+": "+why)
		}
		return ctrl.Result{RequeueAfter: r.recheck}, err
	}
	// The budget is spent only on a taint about to be written.
	if ok, retry := r.opts.Budget.Take(now); !ok {
		r.tellOnce(&node, corev1.EventTypeWarning, ReasonOutOfServiceHeld, "HoldOutOfServiceTaint", "budget", "not applying "+corev1.TaintNodeOutOfService+": force-delete budget used up")
		return ctrl.Result{RequeueAfter: retry}, nil
	}
	patched := live.DeepCopy()
	patched.Spec.Taints = append(patched.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: outOfServiceValue, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: now}})
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[AnnotationOutOfServiceApplied] = now.UTC().Format(time.RFC3339)
	if err := r.cache.Patch(ctx, patched, client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, fmt.Errorf("applying %s to node %s: %w", corev1.TaintNodeOutOfService, node.Name, err)
	}
	r.oos.count(func(o *oosState) {
		o.appliedTotal++
		o.applied[node.Name] = now.Truncate(time.Second)
		delete(o.told, node.Name)
	})
	r.event(patched, corev1.EventTypeNormal, ReasonOutOfServiceApplied, "ApplyOutOfServiceTaint",
		"applied "+corev1.TaintNodeOutOfService+"="+outOfServiceValue+":NoExecute: "+note+"; Kubernetes now force-detaches its volumes, and its stateful pods may go")
	logger.Info("applied the out-of-service taint", "evidence", note)
	return ctrl.Result{}, nil
}

// maybeRemoveOutOfService removes the taint this controller applied at
// to node once node is Ready and no pod it must evict is left on it; a
// mark whose taint someone else removed goes too.
func (r *Reconciler) maybeRemoveOutOfService(ctx context.Context, logger logr.Logger, node *corev1.Node, at time.Time) (ctrl.Result, error) {
	r.oos.tainted(node.Name, at)
	if hasOurOutOfService(node) {
		if health.NodeStateOf(node) != health.NodeReady {
			return ctrl.Result{}, nil // still down: the node's Ready ends the wait
		}
		left, err := r.podsFromBefore(ctx, node.Name, at)
		if err != nil || left != "" {
			return ctrl.Result{}, err // each such pod's deletion ends the wait
		}
	}
	live, err := r.liveNode(ctx, node.Name)
	if err != nil || live == nil {
		return ctrl.Result{}, err
	}
	liveAt, marked := appliedAt(live, r.clock.Now())
	if !marked {
		r.oos.untainted(node.Name)
		return ctrl.Result{}, nil
	}
	had := hasOurOutOfService(live)
	if had && health.NodeStateOf(live) != health.NodeReady {
		return ctrl.Result{RequeueAfter: cacheLagRetry}, nil // the cache lagged
	}
	patched := live.DeepCopy()
	// Exactly the taint this controller applies: Kubernetes keeps one
	// taint per key and effect, and an admin's out-of-service taint of
	// another effect or value is theirs to remove.
	patched.Spec.Taints = slices.DeleteFunc(patched.Spec.Taints, isOurOutOfService)
	delete(patched.Annotations, AnnotationOutOfServiceApplied)
	if err := r.cache.Patch(ctx, patched, client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, fmt.Errorf("removing %s from node %s: %w", corev1.TaintNodeOutOfService, node.Name, err)
	}
	age := r.clock.Now().Sub(liveAt)
	r.oos.count(func(o *oosState) {
		delete(o.applied, node.Name)
		delete(o.sighted, node.Name)
		if had {
			o.removedTotal++
			o.removedAgeTotal += age
			o.maxAgeAtRemoval = max(o.maxAgeAtRemoval, age)
		}
	})
	if !had {
		r.event(patched, corev1.EventTypeNormal, ReasonOutOfServiceRemovedByOne, "RemoveOutOfServiceMark", "the "+corev1.TaintNodeOutOfService+" taint podhealth applied was removed by someone else; removed its mark")
		return ctrl.Result{}, nil
	}
	r.event(patched, corev1.EventTypeNormal, ReasonOutOfServiceRemoved, "RemoveOutOfServiceTaint",
		fmt.Sprintf("removed %s after %v: the node is Ready and none of its pods from before the taint is left", corev1.TaintNodeOutOfService, age.Round(time.Second)))
	logger.Info("removed the out-of-service taint", "age", age.Round(time.Second).String())
	return ctrl.Result{}, nil
}

// podsFromBefore names a pod bound to node, created before the taint was
// applied at at, that the taint evicts (one that does not tolerate it), or
// "" when none is left.
func (r *Reconciler) podsFromBefore(ctx context.Context, node string, at time.Time) (string, error) {
	var list corev1.PodList
	if err := r.cache.List(ctx, &list, client.MatchingFields{nodeField: node}, client.UnsafeDisableDeepCopy); err != nil {
		return "", fmt.Errorf("listing the cached pods of node %s: %w", node, err)
	}
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.Spec.NodeName != node || isTerminal(pod) || !pod.CreationTimestamp.Time.Before(at) || toleratesOutOfService(pod.Spec.Tolerations) {
			continue
		}
		return pod.Namespace + "/" + pod.Name, nil
	}
	return "", nil
}

// toleratesOutOfService reports whether a pod with tolerations stays on a
// node tainted out-of-service=nodeshutdown:NoExecute: the taint never
// evicts such a pod, so its presence says nothing of whether the node is
// empty of the pods the taint was for.
func toleratesOutOfService(tolerations []corev1.Toleration) bool {
	for i := range tolerations {
		if toleratesOutOfServiceTaint(&tolerations[i]) {
			return true
		}
	}
	return false
}

// toleratesOutOfServiceTaint reports whether one toleration tolerates the
// taint this controller applies.
func toleratesOutOfServiceTaint(t *corev1.Toleration) bool {
	if t.Effect != "" && t.Effect != corev1.TaintEffectNoExecute {
		return false
	}
	switch {
	case t.Key == "" && t.Operator == corev1.TolerationOpExists:
		return true
	case t.Key == corev1.TaintNodeOutOfService:
		return t.Operator == corev1.TolerationOpExists || ((t.Operator == "" || t.Operator == corev1.TolerationOpEqual) && t.Value == outOfServiceValue)
	}
	return false
}

// liveNode reads the node from the API server; nil, nil when it is gone.
func (r *Reconciler) liveNode(ctx context.Context, name string) (*corev1.Node, error) {
	var node corev1.Node
	if err := r.live.Get(ctx, types.NamespacedName{Name: name}, &node); err != nil {
		if apierrors.IsNotFound(err) {
			r.oos.forget(name)
			return nil, nil
		}
		return nil, fmt.Errorf("reading node %s: %w", name, err)
	}
	return &node, nil
}

// tellOnce records an event on node unless the last one for it had the
// same reason and key (what changes its meaning, not the ages in its
// note), and reports whether it did.
func (r *Reconciler) tellOnce(node *corev1.Node, eventType, reason, action, key, note string) bool {
	r.oos.mu.Lock()
	if r.oos.told[node.Name] == reason+"\x00"+key {
		r.oos.mu.Unlock()
		return false
	}
	r.oos.told[node.Name] = reason + "\x00" + key
	r.oos.mu.Unlock()
	r.event(node, eventType, reason, action, note)
	return true
}

func (r *Reconciler) event(node *corev1.Node, eventType, reason, action, note string) {
	if r.opts.Recorder != nil {
		r.opts.Recorder.Eventf(node, nil, eventType, reason, action, "%s", note)
	}
}

// appliedAt returns when this controller applied node's taint, by its
// mark. A mark that cannot be read is still this controller's, dated now:
// the taint then comes off once the node is Ready and empty of every pod
// created before now, which includes every pod from before the taint.
func appliedAt(node *corev1.Node, now time.Time) (time.Time, bool) {
	v, ok := node.Annotations[AnnotationOutOfServiceApplied]
	if !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		at = now
	}
	return at, true
}

// isOurOutOfService reports whether t is the taint this controller
// applies: its key, value and effect.
func isOurOutOfService(t corev1.Taint) bool {
	return t.Key == corev1.TaintNodeOutOfService && t.Value == outOfServiceValue && t.Effect == corev1.TaintEffectNoExecute
}

func hasOurOutOfService(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, isOurOutOfService)
}

// readyTransition returns the lastTransitionTime of node's Ready
// condition, or the zero time.
func readyTransition(node *corev1.Node) time.Time {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func hasOutOfService(node *corev1.Node) bool {
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].Key == corev1.TaintNodeOutOfService {
			return true
		}
	}
	return false
}

func (o *oosState) count(f func(*oosState)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f(o)
}

// sight records the first sighting of node with the shutdown taint key
// under the Ready transition, a sighting of another key or under another
// transition starting afresh (the node came back and failed again), and
// returns it.
func (o *oosState) sight(node, key string, transition, now time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.sighted[node]
	if !ok || s.key != key || !s.transition.Equal(transition) {
		s = sighting{key: key, transition: transition, first: now}
		o.sighted[node] = s
	}
	return s.first
}

func (o *oosState) forgetSighting(node string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.sighted, node)
	delete(o.told, node)
}

func (o *oosState) tainted(node string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applied[node] = at
}

func (o *oosState) untainted(node string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.applied, node)
}

func (o *oosState) forget(node string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.sighted, node)
	delete(o.applied, node)
	delete(o.told, node)
}
