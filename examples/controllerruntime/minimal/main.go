// Command minimal is the smallest controller-runtime operator on podhealth,
// the one README.md shows whole: each ConfigMap labelled
// podhealth.example/app=true keeps one live pod, labelled app=<its name>,
// running data["image"]. examples/controllerruntime is the same loop with
// more (flags, a delete budget, node watches, metrics).
package main

// readme:begin minimal
import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime" // aliased: controller-runtime's package has the same name
	"github.com/podhealth/podhealth/replacements"
)

// Reconciler keeps each app at one live pod.
type Reconciler struct {
	Manager  podhealthcr.Manager   // a ctrl.Manager
	Checkers *podhealthcr.Checkers // what its checks share, built at setup
	Created  replacements.Tracker  // the pods it created that the cache does not list yet
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := r.Manager.GetClient()
	var app corev1.ConfigMap
	if err := c.Get(ctx, req.NamespacedName, &app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pods := labels.Set{"app": app.Name}
	// Check force-deletes the pods that died with their node.
	report, err := r.Checkers.Check(ctx, app.Namespace, labels.SelectorFromSet(pods), podhealthcr.CheckOptions{})
	pending := r.Created.PendingReport(req.String(), report)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case report.Healthy:
	case pending > 0: // created earlier, not in the cache yet
		return ctrl.Result{RequeueAfter: r.Created.Wait(req.String())}, nil
	default: // (false, nil): no live pod
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, GenerateName: app.Name + "-", Labels: pods},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: app.Data["image"]}}},
		}
		if err := controllerutil.SetControllerReference(&app, pod, c.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := c.Create(ctx, pod); err != nil {
			return ctrl.Result{}, err
		}
		r.Created.Created(req.String(), pod)
	}
	return ctrl.Result{RequeueAfter: report.RetryAfter}, nil // a deadline or a wait that ends
}

func main() {
	if err := run(); err != nil {
		log.Log.Error(err, "exiting")
		os.Exit(1)
	}
}

func run() error {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		return err
	}
	apps, err := predicate.LabelSelectorPredicate(metav1.LabelSelector{MatchLabels: map[string]string{"podhealth.example/app": "true"}})
	if err != nil {
		return err
	}
	// Events, from v0.23 on: EventRecorder: mgr.GetEventRecorder("podhealth"), and CheckOptions.EventObject.
	checkers, err := podhealthcr.NewCheckers(mgr, podhealthcr.CheckersOptions{})
	if err != nil {
		return err
	}
	r := &Reconciler{Manager: mgr, Checkers: checkers}
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}, builder.WithPredicates(apps)).Owns(&corev1.Pod{}).Complete(r)
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// readme:end minimal
