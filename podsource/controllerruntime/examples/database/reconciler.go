package database

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	// podhealth:begin imports
	"github.com/podhealth/podhealth/fencing"
	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime"
	// podhealth:end
)

// readme:begin database-operator
// podhealth:begin rbac
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// podhealth:end

// Reconciler reconciles Clusters.
type Reconciler struct {
	client.Client
	Events record.EventRecorder
	// Failover makes a Cluster that has no running instance run one again
	// (the operator's own: promote a replica, or create an instance).
	// Required.
	Failover func(context.Context, *Cluster) error
	// podhealth:begin field
	Pods *podhealthcr.Checkers // what every reconcile's check shares
	// podhealth:end
}

// SetupWithManager registers the Reconciler with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	// podhealth:begin setup
	if err := r.SetupPods(mgr); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podhealthcr.ControllerIndex, podhealthcr.ControllerName); err != nil {
		return err
	}
	// podhealth:end
	return ctrl.NewControllerManagedBy(mgr).For(&Cluster{}).
		Owns(&corev1.Pod{}). // podhealth: a pod's change reconciles its Cluster
		Complete(r)
}

// SetupPods builds what every reconcile's check shares, from the manager
// (its cache, its live reader, and its Lease informer, whose watch starts
// with the manager).
// podhealth:begin setup-pods
func (r *Reconciler) SetupPods(mgr podhealthcr.Manager) (err error) {
	r.Pods, err = podhealthcr.NewCheckers(mgr, podhealthcr.CheckersOptions{CoreEventRecorder: r.Events, FenceLease: true})
	return err
}

// podhealth:end

// Reconcile checks a Cluster's instances.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cluster Cluster
	if err := r.Get(ctx, req.NamespacedName, &cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// podhealth:begin check
	// The instances that died with their node are force-deleted once the
	// primary Lease proves them stopped; a dead one still held back makes
	// the check come back when podhealth says the hold may end. Only a
	// primary writes nothing outside the Lease: a replica writes its own
	// volume, so the protocol is not stated for it (a takeover proves
	// nothing about it), and it waits for node evidence.
	report, err := r.Pods.CheckOwner(ctx, &cluster, podhealthcr.ControllerIndex, podhealthcr.CheckOptions{EventObject: &cluster,
		LeaseProtocol: func(pod *corev1.Pod) (fencing.LeaseProtocol, bool) {
			return fencing.LeaseProtocol{Lease: cluster.Name + "-primary", Deadline: cluster.Spec.StopDeadline.Duration}, pod.Labels[RoleLabel] == RolePrimary
		},
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	if !report.Healthy { // no instance runs
		err = r.Failover(ctx, &cluster)
	}
	return ctrl.Result{RequeueAfter: report.RetryAfter}, err
	// podhealth:end
}

// readme:end database-operator
