// Command adapter is what a user of the controller-runtime adapter writes,
// built by the release rehearsal outside the repository, at the adapter's
// floors (controller-runtime v0.19.0): a reconciler that checks the pods
// of a ConfigMap's app with NewChecker, recording events through the core
// recorder that controller-runtime managers before v0.23 offer.
package main

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podhealth/podhealth/health"
	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/kube"
)

type reconciler struct {
	mgr    ctrl.Manager
	memory health.Memory
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var app corev1.ConfigMap
	if err := r.mgr.GetClient().Get(ctx, req.NamespacedName, &app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	events, err := kube.NewEventObserver(r.mgr.GetEventRecorderFor("podhealth"), kube.EventObserverOptions{Object: &app})
	if err != nil {
		return ctrl.Result{}, err
	}
	checker, err := podhealthcr.NewChecker(r.mgr, app.Namespace, labels.SelectorFromSet(labels.Set{"app": app.Name}), podhealthcr.Options{
		Health: health.Options{Memory: &r.memory, Observer: events},
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	report, err := checker.CheckReport(ctx)
	return ctrl.Result{RequeueAfter: report.RetryAfter}, err
}

func main() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err == nil {
		err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Owns(&corev1.Pod{}).Complete(&reconciler{mgr: mgr})
	}
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		os.Exit(1)
	}
}
