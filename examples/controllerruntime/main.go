// Command controllerruntime is a complete controller-runtime manager on
// podhealth, for a registry-style workload: each registry is a ConfigMap
// labelled podhealth.example/registry=true whose data["image"] names the
// image of its one server pod, a single pod created with generateName and
// owned by the ConfigMap, as OLM's catalog registry pods are. The
// reconciler force-deletes the registry's pods that died with their node,
// creates a replacement when none is alive (exactly one: a
// replacements.Tracker remembers it until the cache lists it), and checks
// again after Report.RetryAfter when the delete budget held a dead pod
// back.
//
// Run it against a cluster with --kubeconfig (or $KUBECONFIG), then create
// a registry:
//
//	kubectl create configmap catalog --from-literal=image=registry.example/catalog:1
//	kubectl label configmap catalog podhealth.example/registry=true
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/recorder"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/podhealth/podhealth/health"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/replacements"
)

const (
	// RegistryLabel marks the ConfigMaps that are registries.
	RegistryLabel = "podhealth.example/registry"
	// WorkloadLabel ties a pod to its registry: the pods of registry r are
	// the pods labelled WorkloadLabel=r, as in examples/operator.
	WorkloadLabel = "podhealth.example/workload"
	// ImageKey is the key of a registry's data that names its image.
	ImageKey = "image"
	// EventRecorderName is the reporting controller of the events.
	EventRecorderName = "podhealth-registry"
	// ReasonCreatedReplacement is the reason of the Normal event recorded
	// on a registry for each pod the reconciler creates.
	ReasonCreatedReplacement = "CreatedRegistryPod"
)

func main() {
	if err := run(); err != nil {
		klog.Background().Error(err, "exiting")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run() error {
	klog.InitFlags(nil)
	opts, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		return err
	}
	ctrl.SetLogger(klog.NewKlogr())
	restConfig, err := ctrl.GetConfig() // --kubeconfig (controller-runtime's flag), $KUBECONFIG or in-cluster
	if err != nil {
		return fmt.Errorf("loading the client configuration: %w", err)
	}
	mgr, err := ctrl.NewManager(restConfig, managerOptions(opts.namespace, opts.metricsAddr))
	if err != nil {
		return fmt.Errorf("building the manager: %w", err)
	}
	r, err := NewRegistryReconciler(mgr, opts.Config)
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	log.Log.Info("starting", "namespace", opts.namespace, "resync", opts.Resync)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// flags are the command's settings.
type flags struct {
	Config
	namespace   string
	metricsAddr string
}

// parseFlags defines the command's flags on fs and parses args. The
// --kubeconfig flag is controller-runtime's own, which its config package
// defines on flag.CommandLine (ctrl.GetConfig reads it).
func parseFlags(fs *flag.FlagSet, args []string) (flags, error) {
	var f flags
	fs.StringVar(&f.namespace, "namespace", "default", "namespace of the registries; the controller acts in no other")
	fs.DurationVar(&f.Resync, "resync", 30*time.Second, "how often a healthy registry is checked again without an event (a deleted node changes none of its pods); 0 disables")
	fs.IntVar(&f.MaxForceDeletesPerMinute, "max-force-deletes-per-minute", 0, "limit of force deletes per minute over all registries; 0 means no limit")
	fs.Int64Var(&f.TolerationSeconds, "toleration-seconds", 30, "tolerationSeconds of the registry pods for the not-ready and unreachable NoExecute taints")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "0", `address of the metrics endpoint, such as 127.0.0.1:8080; "0" disables it`)
	if err := fs.Parse(args); err != nil {
		return flags{}, err
	}
	if msgs := validation.IsDNS1123Label(f.namespace); len(msgs) > 0 {
		return flags{}, fmt.Errorf("--namespace %q: %v", f.namespace, msgs)
	}
	if f.Resync < 0 || f.MaxForceDeletesPerMinute < 0 || f.TolerationSeconds < 0 {
		return flags{}, errors.New("--resync, --max-force-deletes-per-minute and --toleration-seconds must not be negative")
	}
	return f, nil
}

// managerOptions restricts the manager's cache to the namespace, to the
// registries' ConfigMaps and to the pods that belong to a registry. Nodes,
// read for node evidence and watched for their deletion and readiness, are
// cluster-scoped and cached whole.
func managerOptions(namespace, metricsAddr string) ctrl.Options {
	registries := labels.SelectorFromSet(labels.Set{RegistryLabel: "true"})
	ofARegistry, _ := labels.NewRequirement(WorkloadLabel, selection.Exists, nil)
	return ctrl.Options{
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&corev1.ConfigMap{}: {Label: registries},
				&corev1.Pod{}:       {Label: labels.NewSelector().Add(*ofARegistry)},
			},
		},
		Metrics: metricsserver.Options{BindAddress: metricsAddr},
	}
}

// Config is what the flags set.
type Config struct {
	// Resync is how soon a healthy registry is checked again without an
	// event; zero means only on events.
	Resync time.Duration
	// MaxForceDeletesPerMinute limits the force deletes of all registries;
	// zero means no limit.
	MaxForceDeletesPerMinute int
	// TolerationSeconds is how long registry pods tolerate a not-ready or
	// unreachable node.
	TolerationSeconds int64
}

// RegistryReconciler keeps each registry at one live pod. It is safe for
// concurrent use: its checkers come from one Checkers (one Memory, one
// budget) and its Tracker serves every registry.
type RegistryReconciler struct {
	mgr          Manager
	cfg          Config
	checkers     *crh.Checkers
	replacements *replacements.Tracker
}

// Manager is what the reconciler uses of a controller-runtime manager: the
// clients that crh.NewCheckers needs, and the events.k8s.io recorder.
type Manager interface {
	crh.Manager
	GetEventRecorder(name string) recorder.EventRecorder
}

// NewRegistryReconciler returns a reconciler over mgr (in tests, any
// Manager).
func NewRegistryReconciler(mgr Manager, cfg Config) (*RegistryReconciler, error) {
	r := &RegistryReconciler{
		mgr:          mgr,
		cfg:          cfg,
		replacements: replacements.New(replacements.Options{}),
	}
	opts := crh.CheckersOptions{EventRecorder: mgr.GetEventRecorder(EventRecorderName)}
	if cfg.MaxForceDeletesPerMinute > 0 {
		budget, err := health.NewDeleteBudget(cfg.MaxForceDeletesPerMinute, time.Minute)
		if err != nil {
			return nil, err
		}
		opts.Health.Budget = budget
	}
	checkers, err := crh.NewCheckers(mgr, opts)
	if err != nil {
		return nil, err
	}
	r.checkers = checkers
	return r, nil
}

// SetupWithManager reconciles the registries' ConfigMaps; a registry
// again on every change of one of its pods (their deaths included); and
// the registries with a pod on a node that was deleted or whose readiness
// changed, since neither changes the pod itself.
func (r *RegistryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	isRegistry := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[RegistryLabel] == "true" })
	return ctrl.NewControllerManagedBy(mgr).
		Named("registry").
		For(&corev1.ConfigMap{}, builder.WithPredicates(isRegistry)).
		Owns(&corev1.Pod{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.registriesOnNode), builder.WithPredicates(nodeChanged)).
		Complete(r)
}

// nodeChanged lets through the node events that can change a verdict on
// its pods: a deletion, and a change of its Ready condition.
var nodeChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Node)
		node, okNew := e.ObjectNew.(*corev1.Node)
		return okOld && okNew && nodeReady(old) != nodeReady(node)
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// nodeReady reports whether node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// registriesOnNode returns the registries that own a pod, in the cache,
// bound to node.
func (r *RegistryReconciler) registriesOnNode(ctx context.Context, node client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := r.mgr.GetClient().List(ctx, &pods); err != nil {
		log.FromContext(ctx).Error(err, "listing cached pods to find those on a changed node", "node", node.GetName())
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for i := range pods.Items {
		pod := &pods.Items[i]
		owner := metav1.GetControllerOf(pod)
		if pod.Spec.NodeName != node.GetName() || owner == nil || owner.Kind != "ConfigMap" || owner.APIVersion != "v1" {
			continue
		}
		key := types.NamespacedName{Namespace: pod.Namespace, Name: owner.Name}
		if !seen[key] {
			seen[key] = true
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// readme:begin controllerruntime
// Reconcile keeps one live pod for the registry req names.
func (r *RegistryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := r.mgr.GetClient()
	var registry corev1.ConfigMap
	if err := c.Get(ctx, req.NamespacedName, &registry); err != nil {
		if apierrors.IsNotFound(err) {
			r.replacements.Forget(req.String())
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	selector := labels.SelectorFromSet(labels.Set{WorkloadLabel: registry.Name})
	checker, err := r.checkers.For(registry.Namespace, selector, crh.CheckOptions{
		EventObject: &registry, // the events regard the registry
	})
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	report, err := checker.CheckReport(ctx)
	pending := r.replacements.PendingReport(req.String(), report) // after every check
	if err != nil {
		return ctrl.Result{}, err // requeued with backoff; errors.Is/As reach the API error
	}
	again := report.RetryAfter // non-zero: the delete budget held a dead pod back
	switch {
	case report.Healthy:
		again = soonest(again, r.cfg.Resync)
	case pending > 0: // created earlier, not in the cache yet: create no other
		again = soonest(again, r.replacements.Wait(req.String()))
	default: // (false, nil): no live pod
		pod, err := r.newPod(&registry)
		if err != nil {
			return ctrl.Result{}, reconcile.TerminalError(err)
		}
		if err := c.Create(ctx, pod); err != nil {
			return ctrl.Result{}, err
		}
		r.replacements.Created(req.String(), pod)
		log.FromContext(ctx).Info("created registry pod", "pod", klog.KObj(pod), "uid", pod.UID)
		r.mgr.GetEventRecorder(EventRecorderName).Eventf(&registry, pod, corev1.EventTypeNormal,
			ReasonCreatedReplacement, "Create", "Created pod %s for registry %s, which had no live pod", pod.Name, registry.Name)
	}
	return ctrl.Result{RequeueAfter: again}, nil
}

// readme:end controllerruntime

// soonest returns the shorter of two delays, where zero means none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// newPod returns the pod to create for registry: generateName, the
// registry's label, owned by the registry, tolerating a lost node for
// cfg.TolerationSeconds.
func (r *RegistryReconciler) newPod(registry *corev1.ConfigMap) (*corev1.Pod, error) {
	image := registry.Data[ImageKey]
	if image == "" {
		return nil, fmt.Errorf("registry %s/%s has no data[%q]", registry.Namespace, registry.Name, ImageKey)
	}
	seconds := r.cfg.TolerationSeconds
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: registry.Name + "-",
			Namespace:    registry.Namespace,
			Labels:       map[string]string{WorkloadLabel: registry.Name},
		},
		Spec: corev1.PodSpec{
			Containers:    []corev1.Container{{Name: "registry", Image: image}},
			RestartPolicy: corev1.RestartPolicyAlways,
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
			},
		},
	}
	if err := controllerutil.SetControllerReference(registry, pod, r.mgr.GetClient().Scheme()); err != nil {
		return nil, err
	}
	return pod, nil
}
