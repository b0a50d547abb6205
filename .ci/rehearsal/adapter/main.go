// Command adapter is what a user of the controller-runtime adapter writes,
// built by the release rehearsal outside the repository, at the adapter's
// floors (controller-runtime v0.19.0): a reconciler that checks the pods
// of a ConfigMap's app with the checkers of one Checkers built at setup,
// recording events through the core recorder that controller-runtime
// managers before v0.23 offer.
package main

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime"
)

type reconciler struct {
	mgr      ctrl.Manager
	checkers *podhealthcr.Checkers
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var app corev1.ConfigMap
	if err := r.mgr.GetClient().Get(ctx, req.NamespacedName, &app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	checker, err := r.checkers.For(app.Namespace, labels.SelectorFromSet(labels.Set{"app": app.Name}), podhealthcr.CheckOptions{EventObject: &app})
	if err != nil {
		return ctrl.Result{}, err
	}
	report, err := checker.CheckReport(ctx)
	return ctrl.Result{RequeueAfter: report.RetryAfter}, err
}

func main() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	var checkers *podhealthcr.Checkers
	if err == nil {
		checkers, err = podhealthcr.NewCheckers(mgr, podhealthcr.CheckersOptions{CoreEventRecorder: mgr.GetEventRecorderFor("podhealth")})
	}
	if err == nil {
		err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Owns(&corev1.Pod{}).Complete(&reconciler{mgr: mgr, checkers: checkers})
	}
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		os.Exit(1)
	}
}
