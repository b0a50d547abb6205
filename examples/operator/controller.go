package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
	"github.com/podhealth/podhealth/replacements"
)

// WorkloadLabel is the label key that ties a pod to its workload: the pods
// of workload w are the pods labelled WorkloadLabel=w.
const WorkloadLabel = "podhealth.example/workload"

// ReasonCreatedReplacement is the reason of the Normal event recorded on
// each replacement pod the controller creates.
const ReasonCreatedReplacement = "CreatedReplacementPod"

// config is what the flags set.
type config struct {
	Namespace string
	Workloads []string
	// Image is the container image of replacement pods.
	Image string
	// NodeSelector is the replacement pods' node selector; nil for none.
	NodeSelector map[string]string
	// TolerationSeconds is how long replacement pods tolerate a not-ready
	// or unreachable node before taint-eviction deletes them.
	TolerationSeconds int64
	DryRun            bool
	// MaxForceDeletesPerMinute limits force deletes over all workloads;
	// zero means no limit.
	MaxForceDeletesPerMinute int
	// Clock is the clock of the checkers, the queue's delays and the
	// replacements tracker; nil means the real clock.
	Clock clock.WithTicker
	// ReplaceUnreachable and UnreachableFor are the checkers'
	// health.Options of the same names (see health/evidence_unreachable.go); with
	// ReplaceUnreachable the controller also deletes surplus live pods.
	ReplaceUnreachable bool
	UnreachableFor     time.Duration
}

func (c config) validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %v", c.Namespace, msgs))
	}
	if len(c.Workloads) == 0 {
		errs = append(errs, errors.New("no workload given"))
	}
	seen := map[string]bool{}
	for _, w := range c.Workloads {
		if msgs := validation.IsDNS1123Label(w); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("workload %q: %v", w, msgs))
		}
		if seen[w] {
			errs = append(errs, fmt.Errorf("workload %q given twice", w))
		}
		seen[w] = true
	}
	if c.Image == "" && !c.DryRun {
		errs = append(errs, errors.New("no image for replacement pods"))
	}
	if c.MaxForceDeletesPerMinute < 0 {
		errs = append(errs, fmt.Errorf("negative force delete limit %d", c.MaxForceDeletesPerMinute))
	}
	if c.TolerationSeconds < 0 {
		errs = append(errs, fmt.Errorf("negative toleration seconds %d", c.TolerationSeconds))
	}
	return errors.Join(errs...)
}

// controller keeps each workload at one live pod at least: it force-deletes
// the workload's pods that died with their node and creates a replacement
// when none is alive. Its queue holds workload names.
type controller struct {
	cfg      config
	client   kubernetes.Interface
	lister   corelisters.PodLister
	recorder record.EventRecorder
	log      logr.Logger
	queue    workqueue.TypedRateLimitingInterface[string]
	checkers map[string]*health.Checker
	// deadPods enqueues a workload as soon as one of its pods dies, judged
	// by the same rules and evidence as the workloads' checkers.
	deadPods cache.ResourceEventHandler
	// expect remembers the replacements created until the lister shows
	// them (for up to replacements.DefaultTTL).
	expect *replacements.Tracker
	// surplus remembers the surplus pods deleted until the lister shows
	// them terminating or gone.
	surplus *surplusDeletes
}

// newController builds a controller over lister, which must list the pods
// of cfg.Namespace (an informer's, filtered or not by WorkloadLabel). nodes,
// when not nil, is a node informer's lister: the checkers then have node
// evidence, from it and from a live GET through client that confirms a node
// missing from it is gone. Nil means no node evidence.
func newController(cfg config, client kubernetes.Interface, lister corelisters.PodLister, nodes coreinformers.NodeInformer, recorder record.EventRecorder, log logr.Logger) (*controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	observer, err := kube.NewEventObserver(recorder, kube.EventObserverOptions{})
	if err != nil {
		return nil, err
	}
	cachedNodes, liveNodes, err := nodeEvidence(client, nodes)
	if err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	var budget *health.DeleteBudget
	if cfg.MaxForceDeletesPerMinute > 0 {
		if budget, err = health.NewDeleteBudget(cfg.MaxForceDeletesPerMinute, time.Minute); err != nil {
			return nil, err
		}
	}
	c := &controller{
		cfg:      cfg,
		client:   client,
		lister:   lister,
		recorder: recorder,
		log:      log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "podhealth-workloads", Clock: cfg.Clock},
		),
		checkers: make(map[string]*health.Checker, len(cfg.Workloads)),
		expect:   replacements.New(replacements.Options{Clock: cfg.Clock}),
		surplus:  newSurplusDeletes(cfg.Clock),
	}
	memory := health.NewMemory(health.MemoryOptions{})
	for _, w := range cfg.Workloads {
		selector := workloadSelector(w)
		source, err := kube.NewListerSource(lister, cfg.Namespace, selector)
		if err != nil {
			return nil, err
		}
		deleter, err := kube.NewDeleter(client.CoreV1(), cfg.Namespace, kube.DeleterOptions{Selector: selector})
		if err != nil {
			return nil, err
		}
		checker, err := health.New(source, deleter, health.Options{
			DryRun:   cfg.DryRun,
			Logger:   log.WithValues("workload", w),
			Clock:    cfg.Clock,
			Budget:   budget,
			Memory:   memory,
			Observer: observer,

			Nodes:     cachedNodes,
			LiveNodes: liveNodes,

			ReplaceUnreachable: cfg.ReplaceUnreachable,
			UnreachableFor:     cfg.UnreachableFor,
		})
		if err != nil {
			return nil, err
		}
		c.checkers[w] = checker
		if c.deadPods == nil {
			// Every workload's checker has the same rules and evidence.
			c.deadPods, err = kube.DeadPodHandler(checker, func(pod *corev1.Pod) {
				if w, ok := c.workloadOf(pod); ok {
					c.log.Info("pod died with its node", "workload", w, "pod", klog.KObj(pod), "node", klog.KRef("", pod.Spec.NodeName))
					c.queue.Add(w)
				}
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// nodeEvidence returns the checkers' node evidence: the node cache of the
// informer nodes, and a live GET of a node the cache does not hold, so that a
// node only missing from a lagging cache is never taken for gone. A nil
// nodes means no node evidence.
func nodeEvidence(client kubernetes.Interface, nodes coreinformers.NodeInformer) (cached, live health.NodeGetter, err error) {
	if nodes == nil {
		return nil, nil, nil
	}
	source, err := kube.NewNodeSource(nodes)
	if err != nil {
		return nil, nil, err
	}
	liveNodes, err := kube.NewLiveNodes(client.CoreV1())
	if err != nil {
		return nil, nil, err
	}
	return source, liveNodes, nil
}

func workloadSelector(workload string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{WorkloadLabel: workload})
}

// eventHandlers returns the handlers to add to the pod informer: one that
// enqueues a workload at once when one of its pods dies, and one that
// enqueues it on any change to its pods.
func (c *controller) eventHandlers() []cache.ResourceEventHandler {
	return []cache.ResourceEventHandler{
		c.deadPods,
		cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				pod, ok := kube.PodFromObject(obj)
				if !ok {
					return
				}
				if w, ok := c.workloadOf(pod); ok {
					c.queue.Add(w)
				}
			},
			UpdateFunc: func(_, obj any) { c.enqueueObject(obj) },
			DeleteFunc: c.enqueueObject,
		},
	}
}

// nodeEventHandler returns the handler to add to the node informer when
// the checkers have node evidence. A pod's own object does not change when
// its node is deleted, or when its node stops or starts being Ready: the
// handler enqueues the workloads with a pod on the node then, so that they
// are checked at once rather than at the next resync.
func (c *controller) nodeEventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Node)
			node, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && (nodeReady(old) != nodeReady(node) || nodeMarkedUnreachable(old) != nodeMarkedUnreachable(node)) {
				c.enqueueWorkloadsOn(node.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if node, ok := obj.(*corev1.Node); ok && node != nil {
				c.enqueueWorkloadsOn(node.Name)
			}
		},
	}
}

// enqueueWorkloadsOn adds to the queue every managed workload with a pod,
// in the cache, bound to the named node.
func (c *controller) enqueueWorkloadsOn(nodeName string) {
	pods, err := c.lister.Pods(c.cfg.Namespace).List(labels.Everything())
	if err != nil {
		c.log.Error(err, "listing cached pods to find those on a changed node", "node", nodeName)
		c.enqueueAll()
		return
	}
	for _, pod := range pods {
		if pod.Spec.NodeName != nodeName {
			continue
		}
		if w, ok := c.workloadOf(pod); ok {
			c.queue.Add(w)
		}
	}
}

// nodeReady reports whether node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	if node == nil {
		return false
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *controller) enqueueObject(obj any) {
	if pod, ok := kube.PodFromObject(obj); ok {
		if w, ok := c.workloadOf(pod); ok {
			c.queue.Add(w)
		}
	}
}

// workloadOf returns the workload of pod when it is one the controller
// manages.
func (c *controller) workloadOf(pod *corev1.Pod) (string, bool) {
	if pod.Namespace != c.cfg.Namespace {
		return "", false
	}
	w, ok := pod.Labels[WorkloadLabel]
	if !ok || c.checkers[w] == nil {
		return "", false
	}
	return w, true
}

// enqueueAll adds every workload to the queue.
func (c *controller) enqueueAll() {
	for _, w := range c.cfg.Workloads {
		c.queue.Add(w)
	}
}

// run processes the queue with the given number of workers, enqueueing
// every workload now and then every resync, until ctx ends; then it shuts
// the queue down and waits for the workers to finish their current item.
func (c *controller) run(ctx context.Context, workers int, resync time.Duration) {
	c.log.Info("starting", "namespace", c.cfg.Namespace, "workloads", c.cfg.Workloads, "dryRun", c.cfg.DryRun, "workers", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	c.enqueueAll()
	if resync > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(resync)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					c.enqueueAll()
				}
			}
		}()
	}
	<-ctx.Done()
	c.log.Info("shutting down")
	c.queue.ShutDown()
	wg.Wait()
	c.log.Info("stopped")
}

// processNext syncs one workload from the queue. It returns false when the
// queue was shut down.
func (c *controller) processNext(ctx context.Context) bool {
	w, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(w)
	if err := c.sync(ctx, w); err != nil {
		if ctx.Err() != nil {
			return true // shutting down; the error is the context's
		}
		c.log.Error(err, "sync failed; requeueing with backoff", "workload", w, "retries", c.queue.NumRequeues(w))
		c.queue.AddRateLimited(w)
		return true
	}
	c.queue.Forget(w)
	return true
}

// sync checks one workload: it force-deletes its dead pods and, when no pod
// is alive, creates one replacement, unless a replacement it created is
// not yet in the lister.
func (c *controller) sync(ctx context.Context, w string) error {
	checker := c.checkers[w]
	if checker == nil {
		return nil // not ours
	}
	log := c.log.WithValues("workload", w)
	report, err := checker.CheckReport(ctx)
	if err != nil {
		return fmt.Errorf("checking workload %s: %w", w, err)
	}
	if report.RetryAfter > 0 {
		// A dead pod was held back by the delete budget: look again when
		// it allows another delete.
		c.queue.AddAfter(w, report.RetryAfter)
	}
	// Asked after every check, with the pods of the check's own list: a
	// replacement is forgotten once listed, and a cache that catches up
	// after the list cannot confirm one the check did not count.
	pending := c.expect.PendingReport(w, report)
	if report.Healthy {
		if c.cfg.ReplaceUnreachable {
			return c.removeSurplus(ctx, w, report)
		}
		return nil
	}
	if pending > 0 {
		log.Info("the replacement created earlier is not in the cache yet; waiting for it before checking again", "pending", pending)
		c.queue.AddAfter(w, c.expect.Wait(w))
		return nil
	}
	if c.cfg.DryRun {
		log.Info("would create replacement pod (dry run)", "namespace", c.cfg.Namespace)
		return nil
	}
	pod, err := c.client.CoreV1().Pods(c.cfg.Namespace).Create(ctx, c.replacement(w), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating replacement pod for workload %s: %w", w, err)
	}
	c.expect.Created(w, pod)
	log.Info("created replacement pod", "namespace", pod.Namespace, "name", pod.Name, "uid", string(pod.UID))
	c.recorder.Eventf(podsource.PodReference(pod), corev1.EventTypeNormal, ReasonCreatedReplacement,
		"Created replacement pod %s/%s for workload %s, which had no live pod", pod.Namespace, pod.Name, w)
	return nil
}

// replacement returns the pod to create for workload w.
func (c *controller) replacement(w string) *corev1.Pod {
	seconds := c.cfg.TolerationSeconds
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: w + "-",
			Namespace:    c.cfg.Namespace,
			Labels:       map[string]string{WorkloadLabel: w},
		},
		Spec: corev1.PodSpec{
			Containers:    []corev1.Container{{Name: "workload", Image: c.cfg.Image}},
			RestartPolicy: corev1.RestartPolicyAlways,
			NodeSelector:  c.cfg.NodeSelector,
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
			},
		},
	}
}
