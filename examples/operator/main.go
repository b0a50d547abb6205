// Command operator is a small controller built on podhealth: it keeps each
// of its workloads (the pods labelled podhealth.example/workload=<name>) at
// one live pod at least. It force-deletes the pods that died with their
// node (taint-evicted, stuck Terminating for ever without a kubelet) and,
// when a workload has no live pod left, creates a replacement.
//
// See README.md for the flags and the RBAC it needs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// defaultTolerationSeconds is how long replacement pods tolerate a
// not-ready or unreachable node by default: 30 s instead of the 300 s the
// DefaultTolerationSeconds admission plugin would add, so that a pod on a
// lost node is taint-evicted, and then replaced, within a minute or so.
const defaultTolerationSeconds = 30

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
	var (
		kubeconfig   = flag.String("kubeconfig", "", "path to a kubeconfig file; empty means the in-cluster configuration")
		namespace    = flag.String("namespace", "default", "namespace of the workloads; the controller acts in no other")
		workloads    = flag.String("workloads", "", "comma-separated workload names; workload w is the pods labelled "+WorkloadLabel+"=w (required)")
		image        = flag.String("image", "", "container image of replacement pods (required unless --dry-run)")
		nodeSelector = flag.String("node-selector", "", "node selector of replacement pods, as comma-separated key=value pairs")
		toleration   = flag.Int64("toleration-seconds", defaultTolerationSeconds, "tolerationSeconds of replacement pods for the not-ready and unreachable NoExecute taints")
		dryRun       = flag.Bool("dry-run", false, "report what would be force-deleted and created, and change nothing (events are still recorded)")
		resync       = flag.Duration("resync", 30*time.Second, "how often every workload is checked even without a pod event; 0 disables")
		workers      = flag.Int("workers", 2, "how many workloads are synced at once")
		maxDeletes   = flag.Int("max-force-deletes-per-minute", 0, "limit of force deletes per minute over all workloads; 0 means no limit")
		withNodes    = flag.Bool("node-evidence", true, "watch nodes (cluster-wide list and watch) and GET a node missing from that cache, so that the checks know whether a pod's node is Ready, out of service or gone; needs the ClusterRole in rbac.yaml")
		replaceUnr   = flag.Bool("replace-unreachable", false, "create a replacement as soon as the node-lifecycle controller marks the node of a workload's only live pod unreachable, without waiting for taint eviction, and delete surplus live pods gracefully when the node comes back; needs --node-evidence")
		unreachFor   = flag.Duration("unreachable-for", 0, "with --replace-unreachable, how long a node must have been unreachable before its pods are replaced, beyond the node controller's grace period; 0 means no extra wait")
	)
	flag.Parse()
	log := klog.Background().WithName("podhealth-operator")

	cfg := config{
		Namespace:         *namespace,
		Workloads:         splitList(*workloads),
		Image:             *image,
		TolerationSeconds: *toleration,
		DryRun:            *dryRun,

		MaxForceDeletesPerMinute: *maxDeletes,

		ReplaceUnreachable: *replaceUnr,
		UnreachableFor:     *unreachFor,
	}
	sel, err := parseNodeSelector(*nodeSelector)
	if err != nil {
		return err
	}
	cfg.NodeSelector = sel
	if *workers < 1 {
		return fmt.Errorf("--workers must be at least 1, not %d", *workers)
	}
	if *resync < 0 {
		return fmt.Errorf("--resync must not be negative, not %v", *resync)
	}
	if *replaceUnr && !*withNodes {
		return errors.New("--replace-unreachable needs --node-evidence: only a node's state tells that it is unreachable")
	}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("invalid flags: %w", err)
	}

	restConfig, err := loadConfig(*kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("building client: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	broadcaster := record.NewBroadcaster() // not tied to ctx, so that events recorded at shutdown are still sent
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events(cfg.Namespace)})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "podhealth-operator"})

	factory := informers.NewSharedInformerFactoryWithOptions(client, *resync,
		informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = WorkloadLabel }),
	)
	pods := factory.Core().V1().Pods()
	synced := []cache.InformerSynced{pods.Informer().HasSynced}
	// Nodes are cluster-scoped: they come from a factory of their own,
	// without the pod factory's namespace and label selector.
	var nodeFactory informers.SharedInformerFactory
	var nodes coreinformers.NodeInformer
	if *withNodes {
		nodeFactory = informers.NewSharedInformerFactory(client, 0)
		nodes = nodeFactory.Core().V1().Nodes()
		synced = append(synced, nodes.Informer().HasSynced)
	}
	c, err := newController(cfg, client, pods.Lister(), nodes, recorder, log)
	if err != nil {
		return err
	}
	for _, h := range c.eventHandlers() {
		if _, err := pods.Informer().AddEventHandler(h); err != nil {
			return fmt.Errorf("adding pod event handler: %w", err)
		}
	}
	if nodeFactory != nil {
		if _, err := nodeFactory.Core().V1().Nodes().Informer().AddEventHandler(c.nodeEventHandler()); err != nil {
			return fmt.Errorf("adding node event handler: %w", err)
		}
		nodeFactory.Start(ctx.Done())
		defer nodeFactory.Shutdown()
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		if ctx.Err() != nil {
			log.Info("stopped before the caches synced")
			return nil
		}
		return errors.New("pod or node cache did not sync")
	}
	log.Info("pod cache synced", "nodeEvidence", *withNodes)
	c.run(ctx, *workers, *resync)
	return nil
}

func loadConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig and no in-cluster configuration: %w", err)
	}
	return cfg, nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseNodeSelector parses "k=v,k2=v2"; empty means none.
func parseNodeSelector(s string) (map[string]string, error) {
	items := splitList(s)
	if len(items) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(items))
	for _, kv := range items {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--node-selector: %q is not key=value", kv)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}
