package controller

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
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

// The cache's pod indexes: a reconcile reads its group's pods, and a node
// event the pods on that node, without copying every pod of a namespace
// or of the cluster.
const (
	groupField = "podhealth.io/group" // GroupOf(pod).Name
	nodeField  = "spec.nodeName"
)

// groupIndex and nodeIndex are the indexes' client.IndexerFunc.
func groupIndex(obj client.Object) []string {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	return []string{GroupOf(pod).Name}
}

func nodeIndex(obj client.Object) []string {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil
	}
	return []string{pod.Spec.NodeName}
}

// SetupWithManager registers the cache's pod indexes and the controller,
// judging up to workers groups at once: pod events enqueue their group
// (podMayBeDead, and the deletion of a pod held for fencing), node events
// the groups on that node (nodeChanged), and a namespace that opts in or
// out all of its groups. Every event that can change
// the Breaker's count (a node's state or deletion, a stale node Lease
// renewed) also enqueues the groups that the Breaker held back, so that
// they are judged again as soon as it may let them go; Reconcile's
// re-check interval bounds the wait when no such event comes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(context.Background(), &corev1.Pod{}, groupField, groupIndex); err != nil {
		return fmt.Errorf("indexing the cached pods by group: %w", err)
	}
	if err := indexer.IndexField(context.Background(), &corev1.Pod{}, nodeField, nodeIndex); err != nil {
		return fmt.Errorf("indexing the cached pods by node: %w", err)
	}
	// The Breaker reads the node Leases: start their informer now, so
	// that /readyz waits for it and the first check need not.
	leases, err := mgr.GetCache().GetInformer(context.Background(), &coordinationv1.Lease{})
	if err != nil {
		return fmt.Errorf("caching the node Leases: %w", err)
	}
	r.breaker.synced = leases.HasSynced
	// The Breaker's view of the nodes reads the informer's store, with no
	// copy (informerNodes), and is kept while the informers report no
	// change that it shows (viewMemo).
	nodes, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Node{})
	if err != nil {
		return fmt.Errorf("caching the nodes: %w", err)
	}
	r.breaker.nodes = breakerNodesOf(nodes, r.breaker.nodes)
	memo := r.newViewMemo()
	if _, err := nodes.AddEventHandler(memo.nodeHandler()); err != nil {
		return fmt.Errorf("watching the nodes for the Breaker: %w", err)
	}
	if _, err := leases.AddEventHandler(memo.leaseHandler()); err != nil {
		return fmt.Errorf("watching the node Leases for the Breaker: %w", err)
	}
	r.breaker.memo = memo
	b := ctrl.NewControllerManagedBy(mgr).
		Named("podhealth").
		// The priority queue (controller-runtime's default, asked for here
		// as enqueueHeldFirst needs it) judges first what it adds first.
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: workers, UsePriorityQueue: new(true)}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podGroup), builder.WithPredicates(predicate.Or(podMayBeDead, r.fencingHeldPodDeleted()))).
		Watches(&corev1.Node{}, r.mapNewObject(r.groupsOnNodeAndBreakerHeld), builder.WithPredicates(nodeChangedFor(r.opts.ShutdownTaints))).
		Watches(&coordinationv1.Lease{}, r.mapNewObject(r.breakerHeldOnLease), builder.WithPredicates(r.leaseRenewedAfterStale())).
		WatchesRawSource(r.breakerWatch(breakerWatchInterval))
	if r.watched == nil {
		// The namespaced mode reads no Namespace: its namespaces are
		// opted in by name, and it has no right to watch them.
		b = b.Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.groupsInNamespace), builder.WithPredicates(r.namespaceOptedIn()))
	}
	if err := b.Complete(r); err != nil {
		return err
	}
	if r.oos != nil {
		return r.setupOutOfService(mgr)
	}
	return nil
}

// mapNewObject is handler.EnqueueRequestsFromMapFunc(mapFunc) but for an
// update, which it maps by its new object only, for map funcs that read
// only what an update cannot change (a node's name) or nothing of the
// object at all; and it enqueues first the groups that judgedFirst picks
// (enqueueHeldFirst).
//
// Why: EnqueueRequestsFromMapFunc maps an update's old object and its new
// one, so each node or Lease event ran breakerHeldGroups twice, and each
// run ends the Breaker's shared view and may list the nodes afresh: as a
// mass failure's 1,000 nodes came back, those listings were 38 % of the
// controller's CPU, half of them second runs.
func (r *Reconciler) mapNewObject(mapFunc handler.MapFunc) handler.EventHandler {
	enqueue := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		r.enqueueHeldFirst(ctx, q, mapFunc(ctx, obj))
	}
	// handler.Funcs gives the initial listing's events the priority queue's
	// low priority, as EnqueueRequestsFromMapFunc does.
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
	}
}

func podGroup(_ context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: GroupOf(pod)}}
}

// mayBeDead is true of a pod that a rule could call dead without a node
// event: one being deleted, or one that failed.
func mayBeDead(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed
}

// fencingHeldPodDeleted lets through the deletion of a pod that its
// group's last check held back for fencing: deleted by someone else (a
// human's force delete, PodGC), it would else stay in FencingHolds, and
// in the alert that reads them, until its group's next check.
func (r *Reconciler) fencingHeldPodDeleted() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(event.UpdateEvent) bool { return false },
		DeleteFunc: func(e event.DeleteEvent) bool {
			pod, ok := e.Object.(*corev1.Pod)
			return ok && r.heldForFencingNow(GroupOf(pod), pod.UID)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// podMayBeDead lets through the pod events after which a verdict can have
// changed: a pod that is being deleted or failed, and, when the cache first
// lists it (at start), every bound pod, so that the pods of a node that
// was deleted while the controller was down are found. The status updates
// of healthy pods, which are most events of a cluster, cost nothing.
var podMayBeDead = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool {
		pod, ok := e.Object.(*corev1.Pod)
		return ok && (mayBeDead(pod) || pod.Spec.NodeName != "")
	},
	UpdateFunc: func(e event.UpdateEvent) bool {
		pod, ok := e.ObjectNew.(*corev1.Pod)
		return ok && mayBeDead(pod)
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// nodeChanged lets through a node's deletion and a change of what it says
// (health.NodeStateOf: Ready, NotReady, Unreachable, OutOfService...), or
// of whether it is being stopped on purpose (health.InMaintenance), which
// moves the Breaker's count and ends early replacement's wait.
var nodeChanged = nodeChangedFor(nil)

// nodeChangedFor is nodeChanged that also lets through a change of which
// of shutdownTaints may fence the node (health.ShutdownTaintOf): the
// cloud's shutdown taint coming or going is fencing evidence for the pods
// held there, though the node's state stays what it was.
func nodeChangedFor(shutdownTaints []health.ShutdownTaint) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.Node)
			node, okNew := e.ObjectNew.(*corev1.Node)
			if !okOld || !okNew {
				return false
			}
			_, wasStopping := health.InMaintenance(old)
			_, stopping := health.InMaintenance(node)
			wasShutdown, _ := health.ShutdownTaintOf(old, shutdownTaints)
			shutdown, _ := health.ShutdownTaintOf(node, shutdownTaints)
			return health.NodeStateOf(old) != health.NodeStateOf(node) || wasStopping != stopping || wasShutdown != shutdown
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// namespaceOptedIn lets through a namespace that matches the selector when
// it is created, and one that starts or stops matching it: a namespace that
// opts out brings its groups back too, so that their checks forget what
// they held (podhealth_fencing_held_pods and its alert must not name a
// namespace the controller no longer acts in).
func (r *Reconciler) namespaceOptedIn() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return r.namespaces.Matches(labels.Set(e.Object.GetLabels())) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return r.namespaces.Matches(labels.Set(e.ObjectOld.GetLabels())) != r.namespaces.Matches(labels.Set(e.ObjectNew.GetLabels()))
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// groupsOnNodeAndBreakerHeld returns the groups with a cached pod bound to
// node, and the groups that the Breaker held back: a node's change of state
// changes the Breaker's count.
func (r *Reconciler) groupsOnNodeAndBreakerHeld(ctx context.Context, node client.Object) []reconcile.Request {
	out := r.groupsOnNode(ctx, node)
	seen := make(map[reconcile.Request]bool, len(out))
	for _, req := range out {
		seen[req] = true
	}
	for _, req := range r.breakerHeldGroups(ctx) {
		if !seen[req] {
			out = append(out, req)
		}
	}
	return out
}

// breakerHeldOnLease returns the groups that the Breaker held back, for a
// node Lease renewed after it had gone stale: the Breaker counts that node
// Ready again.
func (r *Reconciler) breakerHeldOnLease(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.breakerHeldGroups(ctx)
}

// leaseRenewedAfterStale lets through a node Lease's update from stale to
// fresh on the Breaker's clock: a node whose Ready condition never changed
// (the node-lifecycle controller had not marked it yet) comes back to the
// Breaker so. Renewals of fresh Leases, most of the Lease events, cost
// nothing.
func (r *Reconciler) leaseRenewedAfterStale() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*coordinationv1.Lease)
			lease, okNew := e.ObjectNew.(*coordinationv1.Lease)
			if !okOld || !okNew || lease.Namespace != corev1.NamespaceNodeLease {
				return false
			}
			now := r.breaker.clock.Now()
			_, wasStale := leaseStale(old, now)
			_, stale := leaseStale(lease, now)
			return wasStale && !stale
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// groupsOnNode returns the groups with a cached pod bound to node.
func (r *Reconciler) groupsOnNode(ctx context.Context, node client.Object) []reconcile.Request {
	return r.groups(ctx, "node", node.GetName(), client.MatchingFields{nodeField: node.GetName()})
}

// groupsInNamespace returns the groups of the namespace's cached pods.
func (r *Reconciler) groupsInNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	return r.groups(ctx, "namespace", ns.GetName(), client.InNamespace(ns.GetName()))
}

// groups returns the groups of the cached pods that opts select.
func (r *Reconciler) groups(ctx context.Context, what, name string, opts ...client.ListOption) []reconcile.Request {
	var pods corev1.PodList
	if err := r.cache.List(ctx, &pods, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		log.FromContext(ctx).Error(err, "listing cached pods to find the groups of a changed "+what, what, name)
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for i := range pods.Items {
		if key := GroupOf(&pods.Items[i]); !seen[key] {
			seen[key] = true
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}
