// Command clientgo is the smallest complete controller built on podhealth
// and client-go, the one README.md shows: it keeps the pods labelled
// app=<workload> in one namespace at one live pod at least, force-deleting
// the pods that died with their node and creating a replacement when none
// is alive. examples/operator is the same loop with more: events, node
// evidence, a delete budget, several workloads.
//
//	go run ./examples/clientgo --kubeconfig ~/.kube/config --namespace default --workload registry --image registry:2
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
	"github.com/podhealth/podhealth/replacements"
)

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file; empty means the in-cluster configuration")
	ns := flag.String("namespace", "default", "namespace of the workload")
	app := flag.String("workload", "", "the workload: the pods labelled app=<workload> (required)")
	image := flag.String("image", "", "container image of replacement pods (required)")
	flag.Parse()
	if err := start(*kubeconfig, *ns, *app, *image); err != nil {
		klog.Background().Error(err, "exiting")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func start(kubeconfig, ns, app, image string) error {
	if app == "" || image == "" {
		return fmt.Errorf("--workload and --image are required")
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig) // empty: in-cluster
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	newPod := func() *corev1.Pod { return replacement(ns, app, image) }
	return run(ctx, client, ns, app, newPod, health.Options{Logger: klog.Background()})
}

// replacement returns the pod to create when workload app has no live pod.
func replacement(ns, app, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: app + "-", Namespace: ns, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: app, Image: image}}},
	}
}

// readme:begin clientgo
// run keeps the pods labelled app=<app> in ns at one live pod at least,
// until ctx ends. newPod returns the replacement to create.
func run(ctx context.Context, client kubernetes.Interface, ns, app string, newPod func() *corev1.Pod, opts health.Options) error {
	// readme:begin clientgo-wiring
	selector := labels.SelectorFromSet(labels.Set{"app": app})
	factory := informers.NewSharedInformerFactoryWithOptions(client, 30*time.Second, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector.String() }))
	pods := factory.Core().V1().Pods()
	// Events; for metrics, opts.Observer is the metrics module's Observer.
	recorder, stopEvents := eventRecorder(client, ns, app)
	defer stopEvents()
	checker, err := kube.NewChecker(client, pods.Lister(), ns, selector, kube.CheckerOptions{Health: opts, Recorder: recorder})
	if err != nil {
		return err
	}
	// readme:end clientgo-wiring
	tracker := replacements.New(replacements.Options{Clock: opts.Clock}) // the replacements not yet in the cache
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(any) { queue.Add(app) } // on every change of one of its pods
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		return ctx.Err()
	}
	go func() { <-ctx.Done(); queue.ShutDown() }()
	queue.Add(app) // at start: a workload without pods has no pod event
	for {
		key, quit := queue.Get()
		if quit {
			return nil
		}
		report, err := checker.CheckReport(ctx)
		pending := tracker.PendingReport(key, report) // after every check: forgets what the cache lists
		switch {
		case err != nil: // errors.Is/As reach the API error
			opts.Logger.Error(err, "check failed; retrying", "workload", key)
			queue.AddRateLimited(key)
		case report.Healthy:
			queue.Forget(key)
		case pending > 0: // created earlier, not in the cache yet: create no other
			queue.AddAfter(key, tracker.Wait(key))
		default: // (false, nil): no live pod
			pod, err := client.CoreV1().Pods(ns).Create(ctx, newPod(), metav1.CreateOptions{})
			if err != nil {
				opts.Logger.Error(err, "creating a replacement failed; retrying", "workload", key)
				queue.AddRateLimited(key)
			} else {
				tracker.Created(key, pod)
			}
		}
		if report.RetryAfter > 0 { // a verdict that changes with time: a deadline, a wait, the budget's window
			queue.AddAfter(key, report.RetryAfter)
		}
		queue.Done(key)
	}
}

// readme:end clientgo

// eventRecorder returns a core/v1 event recorder that writes to ns, and
// the function that stops it.
func eventRecorder(client kubernetes.Interface, ns, app string) (record.EventRecorder, func()) {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events(ns)})
	return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: app + "-operator"}), broadcaster.Shutdown
}
