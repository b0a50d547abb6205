package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

// The soak's environment: PODHEALTH_SOAK_SEED replays a schedule (the test
// prints its seed), PODHEALTH_SOAK_NODE_FAULTS runs a longer one.
const (
	soakSeedEnv   = "PODHEALTH_SOAK_SEED"
	soakFaultsEnv = "PODHEALTH_SOAK_NODE_FAULTS"
)

// soakCheckerAgent is the user agent of the soak's StatefulSet checker.
const soakCheckerAgent = "podhealth-soak-checker"

// soakStatefulLabel marks the pods of the soak's StatefulSets, which its
// StatefulSet checker watches.
const soakStatefulLabel = "podhealth.example/statefulset"

// soakRecoveryBound is invariant 4's bound: every workload has a live pod
// again this long after a fault ends at the latest.
const soakRecoveryBound = 90 * time.Second

// Processes a restart or an informer lag can hit.
const (
	soakOperator           = "operator"
	soakOperatorReplace    = "operator --replace-unreachable"
	soakControllerRuntime  = "controllerruntime"
	soakStatefulSetChecker = "StatefulSet checker"
)

// soakTargets are the processes a schedule draws restarts and lags from:
// the same list whatever runs, so that a seed gives the same schedule with
// the library on and off. A fault on a process that does not run does
// nothing.
var soakTargets = []string{soakControllerRuntime, soakOperator, soakOperatorReplace, soakStatefulSetChecker}

// soakConfig is one soak run.
type soakConfig struct {
	seed int64
	// schedule, when not nil, is used instead of one drawn from seed; it
	// is called once the workloads run, with the node each StatefulSet pod
	// runs on.
	schedule func(podNodes map[string]string) []soakFault
	// nodeFaults and controlFaults size a drawn schedule.
	nodeFaults, controlFaults int
	// fencing is the StatefulSet checker's policy: the default, or a
	// mutation.
	fencing health.Fencing
	// operators adds the example operators' workloads (examples/operator
	// with and without --replace-unreachable, examples/controllerruntime);
	// without it there are only the StatefulSets.
	operators bool
	// libraryOff runs no StatefulSet checker: Kubernetes alone (the
	// StatefulSet controller, PodGC, the kubelets) recovers the
	// StatefulSet pods.
	libraryOff bool
	// cloud runs the cloud soak (soak_cloud_test.go): the volume path, the
	// cloud node-lifecycle controller, podhealth-controller's
	// out-of-service taint, the cloud's fault kinds, and the shutdown taint
	// as the StatefulSet checker's fencing evidence.
	cloud bool
	// silenceTainter, with cloud, replaces podhealth-controller by a
	// mutant that taints a node out-of-service on its silence alone.
	silenceTainter bool
	// database adds the self-fencing database (soak_database_test.go);
	// databaseIgnoresDeadline is its mutation: a primary that writes on
	// once it cannot renew its Lease.
	database, databaseIgnoresDeadline bool
}

// soakEnv is the cluster a soak runs on and what it records.
type soakEnv struct {
	t   *testing.T
	cp  *harness.ControlPlane
	c   kubernetes.Interface
	log *harness.ContainerLog
	cfg soakConfig

	// api is held for writing while the API server restarts, and for
	// reading by the admin's writes (fencing, a replacement node, removing
	// the out-of-service taint), which wait for the API server to answer
	// again, as an admin would, instead of failing.
	api sync.RWMutex

	mu        sync.Mutex
	kubelets  map[string]*harness.Kubelet
	fenced    map[string]bool // fenced or deleted: nothing is bound there
	fences    []soakFenceSpan
	pods      map[types.UID]soakPod
	injected  []soakInjected
	workloads []string
	procs     map[string]*soakProcess

	// volume is the self-fencing database's, with cfg.database, and
	// primaries are the primaries that wrote to it.
	volume      *volume
	primariesMu sync.Mutex
	primaries   []*primary

	// The cloud soak's: its attacher, its cloud, and the taint spans;
	// podhealth-controller, and the nodes' Ready changes, which explain
	// a failure.
	attacher   *harness.Attacher
	cloud      *shutdownCloud
	controller *harness.Operator
	readyNow   map[string]string
	readiness  []soakReadiness
	taints     []soakTaintSpan
}

// soakProcess is a process a fault can restart, with or without a lagging
// watch.
type soakProcess struct {
	start func(kubeconfig string)
	stop  func()
}

// TestSoakFaults injects a seeded schedule of overlapping faults (power
// offs, partitions, kubelet stops, API server and operator restarts,
// lagging informers) into one control plane running StatefulSets (with and
// without a ReadWriteOnce claim, and one annotated never), registry
// workloads of examples/controllerruntime and examples/operator workloads
// with and without --replace-unreachable, and checks the recorded history
// against the four invariants of soakCheck. It prints its seed; set
// PODHEALTH_SOAK_SEED to replay a schedule and PODHEALTH_SOAK_NODE_FAULTS
// to run a longer one.
func TestSoakFaults(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	if s := os.Getenv(soakSeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", soakSeedEnv, s, err)
		}
	}
	nodeFaults := 8
	if s := os.Getenv(soakFaultsEnv); s != "" {
		var err error
		if nodeFaults, err = strconv.Atoi(s); err != nil || nodeFaults < 1 {
			t.Fatalf("%s=%q: want a positive number", soakFaultsEnv, s)
		}
	}
	t.Logf("soak seed %d (replay: %s=%d)", seed, soakSeedEnv, seed)
	cfg := soakConfig{seed: seed, nodeFaults: nodeFaults, controlFaults: (nodeFaults + 1) / 2, operators: true, database: true}
	h, env := runSoak(t, cfg)
	res := soakCheck(h, soakRecoveryBound)
	for _, v := range res.Violations {
		t.Errorf("seed %d: %s", seed, v)
	}
	if len(res.Violations) > 0 {
		t.Log("\n" + env.explain(h, res.Violations))
	}
	if res.ForceDeleted == 0 {
		t.Errorf("seed %d: the library force-deleted nothing: the schedule tested no recovery", seed)
	}
	writers := map[string]int{}
	for _, w := range h.Writes {
		writers[w.who]++
	}
	t.Logf("the self-fencing database had %d primaries over the soak (writes by each: %v)", len(writers), writers)
	if len(writers) == 0 {
		t.Errorf("seed %d: the self-fencing database never wrote; its primaries:\n%s", seed, strings.Join(env.describePrimaries(), "\n"))
	}
	writing := os.Getenv(figWriteEnv) == "1"
	var alone *soakResult
	if writing && !t.Failed() {
		// The same schedule with the library off, for the figures: how
		// Kubernetes alone recovers the StatefulSet pods. Its history must
		// keep invariants 1 to 3 too; invariant 4 may fail, and is the
		// comparison.
		cfg.libraryOff = true
		offHistory, _ := runSoak(t, cfg)
		off := soakCheck(offHistory, soakRecoveryBound)
		for _, v := range off.Violations {
			if v.Invariant != 4 {
				t.Errorf("seed %d, library off: %s", seed, v)
			}
		}
		alone = &off
	}
	body := soakFigures(res, soakStatefulRecovery(h), alone, env, seed)
	t.Log("\n" + body)
	if !writing {
		t.Logf("%s left as it is; set %s=1 to rewrite its section", figFiguresFile, figWriteEnv)
		return
	}
	if t.Failed() {
		return
	}
	if err := figWriteSection(figFiguresFile, soakSection, body); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote the %q section of %s", soakSection, figFiguresFile)
}

// TestSoakCheckerCatchesAPolicyWithoutFencing: with the StatefulSet
// checker's policy mutated to force-delete StatefulSet pods without
// fencing (health.FenceNever), one long partition of the node of pod db-0
// gets the pod force-deleted while its container still runs, the
// StatefulSet controller creates it again on another node, and the history
// checker finds the two writers (invariant 1) and the force DELETE the
// default policy would have held back (invariant 2).
func TestSoakCheckerCatchesAPolicyWithoutFencing(t *testing.T) {
	t.Parallel()
	h, _ := runSoak(t, soakConfig{
		fencing: health.FenceNever,
		schedule: func(podNodes map[string]string) []soakFault {
			return []soakFault{{Kind: faultPartition, At: time.Second, For: 25 * time.Second, Node: podNodes["db-0"]}}
		},
	})
	res := soakCheck(h, soakRecoveryBound)
	found := map[int]bool{}
	for _, v := range res.Violations {
		found[v.Invariant] = true
		t.Logf("found, as it must: %s", v)
	}
	if !found[1] || !found[2] {
		t.Fatalf("the checker missed the mutation: violations of invariants %v, want 1 and 2", found)
	}
}

// TestSoakCheckerCatchesAPrimaryThatIgnoresItsDeadline: with the
// self-fencing database's primary mutated to write on once it cannot renew
// its Lease, one long partition of its node gets it force-deleted (its
// Lease expired for the wait) while it still writes, its replacement takes
// the Lease and writes too, and the history checker finds the two writers
// (invariant 5) from the volume alone.
func TestSoakCheckerCatchesAPrimaryThatIgnoresItsDeadline(t *testing.T) {
	t.Parallel()
	h, _ := runSoak(t, soakConfig{
		database: true, databaseIgnoresDeadline: true,
		schedule: func(podNodes map[string]string) []soakFault {
			for pod, node := range podNodes {
				if strings.HasPrefix(pod, soakDatabase+"-") {
					return []soakFault{{Kind: faultPartition, At: time.Second, For: 35 * time.Second, Node: node}}
				}
			}
			t.Fatal("the database's instance runs nowhere")
			return nil
		},
	})
	res := soakCheck(h, soakRecoveryBound)
	found := false
	for _, v := range res.Violations {
		if v.Invariant == 5 {
			found = true
			t.Logf("found, as it must: %s", v)
		}
	}
	if !found {
		t.Fatalf("the checker missed the primary that ignored its deadline: violations %v", res.Violations)
	}
}

// runSoak starts the cluster and workloads of cfg, injects its faults,
// waits for the workloads to recover, and returns the history.
func runSoak(t *testing.T, cfg soakConfig) (soakHistory, *soakEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	opts := harness.Options{AuditPodDeletes: true, Volumes: cfg.cloud}
	if !cfg.cloud {
		// The StatefulSet controller recreates a StatefulSet pod once it
		// is gone, as in a real cluster (Volumes runs it too).
		opts.ExtraControllerManagerArgs = []string{"--controllers=statefulset-controller"}
	}
	cp := harness.Start(t, bins, opts)
	env := &soakEnv{t: t, cp: cp, c: cp.Client(), log: &harness.ContainerLog{}, cfg: cfg,
		kubelets: map[string]*harness.Kubelet{}, fenced: map[string]bool{}, pods: map[types.UID]soakPod{}, procs: map[string]*soakProcess{}, readyNow: map[string]string{}}
	nodes := []string{"node-1", "node-2", "node-3", "node-4"}
	for _, name := range nodes {
		env.addNode(ctx, name)
	}
	for _, name := range nodes {
		if _, err := harness.WaitForNode(ctx, env.c, name, harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatal(err)
		}
	}
	env.watchPods(ctx)
	go env.bind(ctx)
	if cfg.cloud {
		env.startCloud(ctx)
	}
	env.startWorkloads(ctx)
	if cfg.database && !cfg.libraryOff {
		env.startDatabase(ctx)
	}

	if err := pollUntil(ctx, func() bool { return env.allLive() }); err != nil {
		t.Fatalf("the workloads never all ran: %v\n%s", err, strings.Join(env.describeLive(), "\n"))
	}
	var faults []soakFault
	if cfg.schedule != nil {
		faults = cfg.schedule(env.statefulPodNodes())
	} else {
		faults = soakSchedule(cfg.seed, soakScheduleOptions{NodeFaults: cfg.nodeFaults, ControlFaults: cfg.controlFaults, Nodes: nodes, Targets: soakTargets, Cloud: cfg.cloud})
	}
	var lines []string
	for _, f := range faults {
		lines = append(lines, f.String())
	}
	t.Logf("schedule (%d faults):\n%s", len(faults), strings.Join(lines, "\n"))

	env.inject(ctx, faults)
	// Every fault has ended; wait (at most the bound) until every workload
	// has been live for the stability window of the last recovery and a
	// second more, so that the last deletes reach the audit log: a
	// workload live for a moment (a container a healed partition's kubelet
	// is about to stop) does not end the wait.
	wctx, wcancel := context.WithTimeout(ctx, soakRecoveryBound)
	liveSince := time.Time{}
	_ = pollUntil(wctx, func() bool {
		switch {
		case !env.allLive():
			liveSince = time.Time{}
		case liveSince.IsZero():
			liveSince = time.Now()
		}
		return !liveSince.IsZero() && time.Since(liveSince) >= soakStable+time.Second
	})
	wcancel()

	deletes, err := cp.PodDeletes()
	if err != nil {
		t.Fatal(err)
	}
	env.mu.Lock()
	h := soakHistory{
		Containers: env.log.Events(),
		Deletes:    deletes,
		Pods:       env.pods,
		Fences:     append(append([]soakFenceSpan(nil), env.fences...), taintFences(env.taints)...),
		Faults:     append([]soakInjected(nil), env.injected...),
		Workloads:  append([]string(nil), env.workloads...),
		Taints:     append([]soakTaintSpan(nil), env.taints...),
		Writes:     env.volume.all(),
		End:        time.Now(),
	}
	if env.attacher != nil {
		h.Attaches = env.attacher.Events()
	}
	env.mu.Unlock()
	return h, env
}

// soakStatefulRecovery is the recovery per fault kind of the StatefulSet
// pods alone, to compare with Kubernetes alone.
func soakStatefulRecovery(h soakHistory) map[soakFaultKind][]time.Duration {
	var stateful []string
	for _, w := range h.Workloads {
		if strings.HasPrefix(w, "StatefulSet pod ") {
			stateful = append(stateful, w)
		}
	}
	h.Workloads = stateful
	recovery, _ := soakCheckRecovery(h, soakRecoveryBound, time.Time{})
	return recovery
}

// addNode adds a node with its simulated kubelet.
func (e *soakEnv) addNode(ctx context.Context, name string) {
	node := e.cp.AddNode(ctx, name)
	k := e.cp.StartKubelet(node, e.log)
	e.mu.Lock()
	e.kubelets[name] = k
	e.mu.Unlock()
}

func (e *soakEnv) kubelet(name string) *harness.Kubelet {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kubelets[name]
}

// watchPods records the facts of every pod of the namespace that the
// history checker needs, from an informer started before any workload.
func (e *soakEnv) watchPods(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(e.c, 0, informers.WithNamespace(ns))
	record := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		facts := soakPod{Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName,
			Never: pod.Annotations[health.AnnotationForceDelete] == "never"}
		if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "StatefulSet" {
			facts.Stateful = true
		}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
				facts.Stateful = true
			}
		}
		e.mu.Lock()
		e.pods[pod.UID] = facts
		e.mu.Unlock()
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		e.t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
}

// bind binds every unscheduled pod to the up node with the fewest pods, as
// a scheduler would: a node is up when it is Ready, has no NoExecute or
// NoSchedule taint, its kubelet reaches the API server, and it is not
// fenced.
func (e *soakEnv) bind(ctx context.Context) {
	everyTick(ctx, harness.PollInterval, func() {
		pods, err := e.c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		nodes, err := e.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		load := map[string]int{}
		for _, n := range nodes.Items {
			if e.nodeUp(&n) {
				load[n.Name] = 0
			}
		}
		for _, p := range pods.Items {
			if _, ok := load[p.Spec.NodeName]; ok {
				load[p.Spec.NodeName]++
			}
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || len(load) == 0 {
				continue
			}
			best := ""
			for name, n := range load {
				if best == "" || n < load[best] || (n == load[best] && name < best) {
					best = name
				}
			}
			if err := e.cp.BindPod(ctx, ns, p.Name, best); err == nil {
				load[best]++
			}
		}
	})
}

func (e *soakEnv) nodeUp(n *corev1.Node) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Effect == corev1.TaintEffectNoExecute || taint.Effect == corev1.TaintEffectNoSchedule {
			return false
		}
	}
	if health.NodeStateOf(n) != health.NodeReady {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k := e.kubelets[n.Name]
	return k != nil && k.Connected() && !e.fenced[n.Name]
}

// soakPodTemplate is the pod template of the soak's StatefulSets: it
// tolerates a lost node for 2 s, as the operators' replacements do.
func soakPodTemplate(name string, annotations map[string]string) corev1.PodTemplateSpec {
	pod := harness.BoundPod(ns, name, "", 2)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, soakStatefulLabel: "true"}, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: pod.Spec.Containers, Tolerations: pod.Spec.Tolerations},
	}
}

// startWorkloads creates the StatefulSets and starts their checker, and
// with cfg.operators the example operators and their workloads.
func (e *soakEnv) startWorkloads(ctx context.Context) {
	sets := []struct {
		name     string
		replicas int32
		claim    bool
		never    bool
	}{
		{"db", 2, true, false},     // a ReadWriteOnce claim per pod
		{"cache", 2, false, false}, // stateful by its owner alone
		{"pinned", 1, false, true}, // annotated podhealth.io/force-delete=never
	}
	for _, s := range sets {
		var annotations map[string]string
		if s.never {
			annotations = map[string]string{health.AnnotationForceDelete: "never"}
		}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name},
			Spec: appsv1.StatefulSetSpec{
				Replicas:            ptr.To(s.replicas),
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": s.name}},
				Template:            soakPodTemplate(s.name, annotations),
			},
		}
		if s.claim {
			sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}}
			sts.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}
		if _, err := e.c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		for i := int32(0); i < s.replicas; i++ {
			e.workloads = append(e.workloads, fmt.Sprintf("StatefulSet pod %s-%d", s.name, i))
		}
	}
	if !e.cfg.libraryOff {
		e.procs[soakStatefulSetChecker] = e.statefulSetChecker()
		e.procs[soakStatefulSetChecker].start(e.cp.KubeconfigPath())
	}

	if !e.cfg.operators || e.cfg.libraryOff {
		return
	}
	e.procs[soakOperator] = e.example(soakOperator, "pod cache synced", operatorArgs("a1,a2"))
	e.procs[soakOperatorReplace] = e.example(soakOperatorReplace, "pod cache synced", operatorArgs("b1,b2", "--replace-unreachable"))
	e.procs[soakControllerRuntime] = e.example(soakControllerRuntime, "Starting workers", crArgs(2*time.Second))
	for _, name := range []string{soakOperator, soakOperatorReplace, soakControllerRuntime} {
		e.procs[name].start(e.cp.KubeconfigPath())
	}
	e.workloads = append(e.workloads, "a1", "a2", "b1", "b2")
	for _, r := range []string{"r1", "r2"} {
		crRegistry(ctx, e.t, e.cp, r)
		e.workloads = append(e.workloads, r)
	}
	sort.Strings(e.workloads)
}

// example is a restartable example operator; start waits until its log
// says ready.
func (e *soakEnv) example(name, ready string, args []string) *soakProcess {
	var op *harness.Operator
	return &soakProcess{
		start: func(kubeconfig string) {
			all := append(append([]string(nil), args...), "--kubeconfig="+kubeconfig)
			if name == soakControllerRuntime {
				op = e.cp.StartControllerRuntime(e.t, bins, all...)
			} else {
				op = e.cp.StartOperator(e.t, bins, all...)
			}
			before := len(op.LogLines(ready))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = pollUntil(ctx, func() bool { return len(op.LogLines(ready)) > before })
		},
		stop: func() { _ = op.Stop() },
	}
}

// statefulSetChecker is the StatefulSets' operator, in the test: a
// podhealth Checker from kube.NewChecker over informers, run every 500 ms.
// The StatefulSet controller recreates what it force-deletes. A restart
// drops its informers and its Memory.
func (e *soakEnv) statefulSetChecker() *soakProcess {
	var cancel context.CancelFunc
	var done chan struct{}
	return &soakProcess{
		start: func(kubeconfig string) {
			config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				e.t.Errorf("StatefulSet checker: %v", err)
				return
			}
			config.UserAgent = soakCheckerAgent
			config.QPS, config.Burst = 100, 200
			client, err := kubernetes.NewForConfig(config)
			if err != nil {
				e.t.Errorf("StatefulSet checker: %v", err)
				return
			}
			var ctx context.Context
			ctx, cancel = context.WithCancel(context.Background())
			done = make(chan struct{})
			selector := labels.SelectorFromSet(labels.Set{soakStatefulLabel: "true"})
			pods := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
				informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector.String() }))
			nodes := informers.NewSharedInformerFactory(client, 0)
			podLister := pods.Core().V1().Pods().Lister()
			nodeInformer := nodes.Core().V1().Nodes()
			var shutdown []health.ShutdownTaint
			if e.cfg.cloud {
				shutdown = []health.ShutdownTaint{{Key: health.TaintCloudShutdown, After: soakCloudShutdownAfter}}
			}
			checker, err := kube.NewChecker(client, podLister, ns, selector, kube.CheckerOptions{
				Health: health.Options{Fencing: e.cfg.fencing, ShutdownTaints: shutdown},
				Nodes:  nodeInformer,
			})
			if err != nil {
				e.t.Errorf("StatefulSet checker: %v", err)
				cancel()
				close(done)
				return
			}
			pods.Start(ctx.Done())
			nodes.Start(ctx.Done())
			go func() {
				defer close(done)
				pods.WaitForCacheSync(ctx.Done())
				nodes.WaitForCacheSync(ctx.Done())
				tick := time.NewTicker(500 * time.Millisecond)
				defer tick.Stop()
				for {
					_, _ = checker.CheckReport(ctx)
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
				}
			}()
			e.t.Cleanup(func() { cancel(); <-done })
		},
		stop: func() {
			if cancel != nil {
				cancel()
				<-done
			}
		},
	}
}

// proc is the process of that name, or one that does nothing if it does
// not run.
func (e *soakEnv) proc(name string) *soakProcess {
	if p, ok := e.procs[name]; ok {
		return p
	}
	return &soakProcess{start: func(string) {}, stop: func() {}}
}

// statefulPodNodes is the node each StatefulSet pod's container runs on.
func (e *soakEnv) statefulPodNodes() map[string]string {
	out := map[string]string{}
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, k := range e.kubelets {
		for _, uid := range k.Running() {
			if p, ok := e.pods[uid]; ok {
				out[p.Name] = name
			}
		}
	}
	return out
}

// liveWorkloads are the workloads with a running container on a node that
// reaches the API server.
func (e *soakEnv) liveWorkloads() map[string]bool {
	timeline := soakTimeline(e.log.Events())
	if len(timeline) == 0 {
		return nil
	}
	return timeline[len(timeline)-1].Live
}

func (e *soakEnv) allLive() bool {
	live := e.liveWorkloads()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.workloads {
		if !live[w] {
			return false
		}
	}
	return true
}

func (e *soakEnv) describeLive() []string {
	live := e.liveWorkloads()
	var out []string
	for _, w := range e.workloads {
		out = append(out, fmt.Sprintf("%s live=%v", w, live[w]))
	}
	return out
}

// inject runs the schedule: each fault begins at its offset from now, and
// its end, fencing and recovery follow at theirs. Node faults and restarts
// run in the test's goroutine in time order; an API server restart, which
// takes seconds, runs beside them (after the one before it, if they
// overlap: RestartAPIServer runs one at a time).
func (e *soakEnv) inject(ctx context.Context, faults []soakFault) {
	type action struct {
		at    time.Duration
		fault int
		run   func(i int)
	}
	var actions []action
	start := time.Now()
	for i, f := range faults {
		f := f
		actions = append(actions, action{f.At, i, func(i int) { e.begin(ctx, i, f) }})
		switch f.Kind {
		case faultCloudShutdown, faultShutdownRestart:
			actions = append(actions, action{f.At + f.CloudAfter, i, func(int) { e.cloud.setOff(f.Node, true) }})
			actions = append(actions, action{f.At + f.For, i, func(i int) { e.endNodeFault(ctx, i, f) }})
		case faultPowerOff, faultPartition, faultKubeletStop:
			if f.Fence != fenceNone && f.FenceAfter < f.For {
				actions = append(actions, action{f.At + f.FenceAfter, i, func(i int) { e.fence(ctx, i, f) }})
			}
			actions = append(actions, action{f.At + f.For, i, func(i int) { e.endNodeFault(ctx, i, f) }})
		case faultInformerLag:
			actions = append(actions, action{f.At + f.For, i, func(i int) {
				e.proc(f.Target).stop()
				e.proc(f.Target).start(e.cp.KubeconfigPath())
				e.ended(i, time.Now())
			}})
		}
	}
	sort.SliceStable(actions, func(i, j int) bool { return actions[i].at < actions[j].at })
	e.mu.Lock()
	for _, f := range faults {
		e.injected = append(e.injected, soakInjected{Fault: f})
	}
	e.mu.Unlock()
	var background sync.WaitGroup
	for _, a := range actions {
		if d := time.Until(start.Add(a.at)); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		if faults[a.fault].Kind == faultAPIServerRestart {
			background.Add(1)
			go func(a action) { defer background.Done(); a.run(a.fault) }(a)
			continue
		}
		a.run(a.fault)
	}
	background.Wait()
}

func (e *soakEnv) began(i int, t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.injected[i].Began = t
}

// ended records when fault i's effect could end, the first time only.
func (e *soakEnv) ended(i int, t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.injected[i].Ended.IsZero() {
		e.injected[i].Ended = t
	}
}

func (e *soakEnv) begin(ctx context.Context, i int, f soakFault) {
	e.began(i, time.Now())
	why := f.Kind.String()
	switch f.Kind {
	case faultPowerOff, faultCloudShutdown, faultShutdownRestart:
		e.kubelet(f.Node).PowerOff(why)
	case faultPartition, faultKubeletStop:
		e.kubelet(f.Node).Partition(why)
	case faultAPIServerRestart:
		e.api.Lock()
		err := e.cp.RestartAPIServer(ctx)
		e.api.Unlock()
		if err != nil {
			e.t.Errorf("restarting the API server: %v", err)
		}
		e.ended(i, time.Now())
	case faultOperatorRestart:
		e.proc(f.Target).stop()
		e.proc(f.Target).start(e.cp.KubeconfigPath())
		e.ended(i, time.Now())
	case faultInformerLag:
		proxy, err := e.cp.StartWatchDelayProxy(f.Lag)
		if err != nil {
			e.t.Errorf("informer lag: %v", err)
			return
		}
		e.proc(f.Target).stop()
		e.proc(f.Target).start(proxy.KubeconfigPath())
	}
}

// fence fences a powered-off node as an admin would: the out-of-service
// taint, or deleting the node of a machine that is replaced.
func (e *soakEnv) fence(ctx context.Context, i int, f soakFault) {
	e.mu.Lock()
	e.fenced[f.Node] = true
	e.mu.Unlock()
	var err error
	e.api.RLock()
	switch f.Fence {
	case fenceTaint:
		err = e.cp.AddNodeTaint(ctx, f.Node, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	case fenceDeletion:
		err = e.kubelet(f.Node).Node().Delete(ctx)
	}
	e.api.RUnlock()
	now := time.Now()
	if err != nil {
		e.t.Errorf("fencing %s: %v", f.Node, err)
	}
	e.mu.Lock()
	e.fences = append(e.fences, soakFenceSpan{Node: f.Node, From: now})
	e.mu.Unlock()
	e.ended(i, now)
}

// endNodeFault brings the node back, or a replacement for a deleted one.
// Once a fenced node is Ready again, the admin removes its out-of-service
// taint.
func (e *soakEnv) endNodeFault(ctx context.Context, i int, f soakFault) {
	if f.Fence == fenceDeletion && f.FenceAfter < f.For {
		e.api.RLock()
		e.addNode(ctx, f.Replacement)
		e.api.RUnlock()
		return
	}
	if e.cloud != nil {
		e.cloud.setOff(f.Node, false) // the instance runs again
	}
	if f.Boot > 0 {
		e.kubelet(f.Node).Boot(fmt.Sprintf("%s ended", f.Kind), f.Boot)
	} else {
		e.kubelet(f.Node).Connect(fmt.Sprintf("%s ended", f.Kind))
	}
	e.ended(i, time.Now())
	e.mu.Lock()
	fenced := e.fenced[f.Node]
	e.mu.Unlock()
	if !fenced {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := harness.WaitForNode(wctx, e.c, f.Node, harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
		e.t.Errorf("node %s did not come back: %v", f.Node, err)
		return
	}
	e.api.RLock()
	err := e.removeOutOfService(ctx, f.Node)
	e.api.RUnlock()
	if err != nil {
		e.t.Errorf("removing the out-of-service taint of %s: %v", f.Node, err)
		return
	}
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.fenced, f.Node)
	for j := range e.fences {
		if e.fences[j].Node == f.Node && e.fences[j].Until.IsZero() {
			e.fences[j].Until = now
		}
	}
}

func (e *soakEnv) removeOutOfService(ctx context.Context, node string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := e.c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var kept []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != corev1.TaintNodeOutOfService {
				kept = append(kept, t)
			}
		}
		n.Spec.Taints = kept
		_, err = e.c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func (k soakFaultKind) String() string { return string(k) }

// soakSection is the soak's section of FIGURES.md.
const soakSection = "soak"

// soakPercentile is the nearest-rank percentile p of sorted durations.
func soakPercentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// soakFigures renders what a soak found, as FIGURES.md's soak section:
// res over every workload, stateful over the StatefulSet pods alone, and,
// when not nil, alone: the same schedule with the library off.
func soakFigures(res soakResult, stateful map[soakFaultKind][]time.Duration, alone *soakResult, env *soakEnv, seed int64) string {
	var b strings.Builder
	env.mu.Lock()
	injected := append([]soakInjected(nil), env.injected...)
	workloads := append([]string(nil), env.workloads...)
	env.mu.Unlock()
	fmt.Fprintf(&b, "## Fault soak\n\n")
	fmt.Fprintf(&b, "`TestSoakFaults`, seed %d (replay with `%s=%d`), on %s: %d faults on one control plane with four simulated nodes whose kubelets run a model of their containers. %d workloads at once: %s. Invariant 4's bound is %v.\n\n",
		seed, soakSeedEnv, seed, time.Now().UTC().Format("2006-01-02"), len(injected), len(workloads), strings.Join(workloads, ", "), soakRecoveryBound)
	fmt.Fprintf(&b, "Recovery is how long after a fault ends (the node comes back or is fenced, the restart completes, the lag ends) every workload that had no live pod then has one again, for good (%v, or until it loses it while another fault is underway, which that fault then counts). The last columns are the worst case of the StatefulSet pods alone, with podhealth and, on the same schedule with the library off, with Kubernetes alone (the StatefulSet controller, PodGC, the kubelets)%s.\n\n",
		soakStable, map[bool]string{true: "", false: ": not measured in this run, set " + figWriteEnv + "=1"}[alone != nil])
	fmt.Fprintf(&b, "| fault kind | injected | recovery p50 | p99 | max | StatefulSet pods: max with podhealth | with Kubernetes alone |\n|---|---|---|---|---|---|---|\n")
	kinds := append(append([]soakFaultKind(nil), soakNodeFaults...), faultAPIServerRestart, faultOperatorRestart, faultInformerLag)
	for _, k := range kinds {
		n := 0
		for _, f := range injected {
			if f.Fault.Kind == k {
				n++
			}
		}
		sorted, _, max := harness.Durations(res.Recovery[k])
		_, _, statefulMax := harness.Durations(stateful[k])
		aloneMax := "-"
		if alone != nil {
			_, _, m := harness.Durations(alone.Recovery[k])
			aloneMax = figSec(m)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", k, n, figSec(soakPercentile(sorted, 0.5)), figSec(soakPercentile(sorted, 0.99)), figSec(max), figSec(statefulMax), aloneMax)
	}
	perInvariant := map[int]int{}
	for _, v := range res.Violations {
		perInvariant[v.Invariant]++
	}
	perPod := 0.0
	if res.ForceDeleted > 0 {
		perPod = float64(res.ForceDeletes) / float64(res.ForceDeleted)
	}
	fmt.Fprintf(&b, "\n| invariant | violations |\n|---|---|\n")
	for i, what := range []string{
		"a stateful identity never runs on two nodes at once",
		"every force DELETE has a UID precondition; none is for a pod the policy holds back",
		"no pod receives more than one force DELETE",
		"every workload has a live pod again within the bound after each fault",
		"the self-fencing database never has two writers at once",
	} {
		fmt.Fprintf(&b, "| %d. %s | %d |\n", i+1, what, perInvariant[i+1])
	}
	fmt.Fprintf(&b, "\nForce DELETEs by podhealth: %d, for %d pods: %.2f per dead pod.\n", res.ForceDeletes, res.ForceDeleted, perPod)
	if alone != nil {
		missed := 0
		for _, v := range alone.Violations {
			if v.Invariant == 4 {
				missed++
			}
		}
		fmt.Fprintf(&b, "With the library off, a StatefulSet pod was not back within the bound after %d (fault, pod) pairs.\n", missed)
	}
	return b.String()
}
