package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

// realNodesSection is TestScenarioRealNodes's section of FIGURES.md.
const realNodesSection = "real nodes"

// realNodesInotifyInstances is the fs.inotify.max_user_instances that
// TestScenarioRealNodes needs: .ci/run raises the limit to it.
const realNodesInotifyInstances = 1024

// realNodesRequiredEnv, set to 1 (as .ci/run does), makes a machine where
// real nodes cannot run fail the real-node scenarios instead of skipping
// them.
const realNodesRequiredEnv = "PODHEALTH_REAL_NODES_REQUIRED"

// realNodeBuild is the real nodes' binaries, built once per test binary by
// the first scenario that needs them.
var realNodeBuild struct {
	once sync.Once
	bins harness.RealNodeBinaries
	err  error
}

// realNodeBinaries returns the real nodes' binaries, or skips t (fails it
// with realNodesRequiredEnv) where real nodes cannot run.
func realNodeBinaries(t *testing.T) harness.RealNodeBinaries {
	t.Helper()
	if err := harness.RealNodeSupport(); err != nil {
		if os.Getenv(realNodesRequiredEnv) == "1" {
			t.Fatalf("real nodes cannot run here, and %s=1: %v", realNodesRequiredEnv, err)
		}
		t.Skipf("real nodes cannot run here: %v", err)
	}
	realNodeBuild.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		realNodeBuild.bins, realNodeBuild.err = harness.BuildRealNodeBinaries(ctx, bins.Dir)
		if realNodeBuild.err == nil {
			fmt.Fprintf(os.Stderr, "real-node binaries built in %v\n", realNodeBuild.bins.BuildTime.Round(time.Millisecond))
		}
	})
	if realNodeBuild.err != nil {
		t.Fatal(realNodeBuild.err)
	}
	return realNodeBuild.bins
}

// realWrite is one line of the writers' file.
type realWrite struct {
	who string
	uid types.UID
	seq int
	at  time.Time
}

// readRealWrites parses the writers' file; a line cut short by a writer
// killed mid-write is left out.
func readRealWrites(path string) ([]realWrite, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []realWrite
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) != 4 {
			continue
		}
		seq, err1 := strconv.Atoi(fields[2])
		ns, err2 := strconv.ParseInt(fields[3], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, realWrite{fields[0], types.UID(fields[1]), seq, time.Unix(0, ns)})
	}
	return out, s.Err()
}

// writesOf returns the first and last write of uid, and how many.
func writesOf(writes []realWrite, uid types.UID) (first, last time.Time, n int) {
	for _, w := range writes {
		if w.uid != uid {
			continue
		}
		if n == 0 {
			first = w.at
		}
		last = w.at
		n++
	}
	return first, last, n
}

// realOverlaps is the single-writer check, from the writers' file alone:
// for each identity (a StatefulSet pod's name), in time order, no
// container (UID) writes again once another has written. It returns one
// finding per container that did.
func realOverlaps(writes []realWrite) []string {
	byIdentity := map[string][]realWrite{}
	for _, w := range writes {
		byIdentity[w.who] = append(byIdentity[w.who], w)
	}
	var out []string
	for who, ws := range byIdentity {
		sort.SliceStable(ws, func(i, j int) bool { return ws[i].at.Before(ws[j].at) })
		ended := map[types.UID]bool{}
		reported := map[types.UID]bool{}
		cur := ws[0]
		for _, w := range ws[1:] {
			if w.uid != cur.uid {
				ended[cur.uid] = true
				if ended[w.uid] && !reported[w.uid] {
					reported[w.uid] = true
					out = append(out, fmt.Sprintf("%s: container %s wrote (sequence %d) at %s, after container %s had written at %s: two writers at once",
						who, w.uid, w.seq, w.at.Format(time.StampMilli), cur.uid, cur.at.Format(time.StampMilli)))
				}
			}
			cur = w
		}
	}
	sort.Strings(out)
	return out
}

// writerPodSpec is a pod of the writer image on the host's network,
// appending to volDir/writes, with the given toleration of an unreachable
// or not-ready node.
func writerPodSpec(volDir string, tolerationSeconds int64) corev1.PodSpec {
	return corev1.PodSpec{
		HostNetwork:                   true,
		TerminationGracePeriodSeconds: ptr.To(int64(5)),
		Containers: []corev1.Container{{
			Name: "writer", Image: harness.WriterImage, ImagePullPolicy: corev1.PullNever,
			Env: []corev1.EnvVar{
				{Name: "WRITES_FILE", Value: "/vol/writes"},
				{Name: "IDENTITY", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "vol", MountPath: "/vol"}},
		}},
		Volumes: []corev1.Volume{{Name: "vol", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: volDir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}},
		Tolerations: []corev1.Toleration{
			{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(tolerationSeconds)},
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(tolerationSeconds)},
		},
	}
}

// bindToPreferred binds, until ctx ends, each unscheduled pod of
// namespace to the first node of prefer that is Ready, as a scheduler
// would (the harness runs none).
func bindToPreferred(ctx context.Context, cp *harness.ControlPlane, namespace string, prefer []string) {
	c := cp.Client()
	everyTick(ctx, 200*time.Millisecond, func() {
		pods, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
		if err != nil || len(pods.Items) == 0 {
			return
		}
		var target string
		for _, name := range prefer {
			n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !nodeReady(n) {
				continue
			}
			target = name
			break
		}
		if target == "" {
			return
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				_ = cp.BindPod(ctx, namespace, p.Name, target)
			}
		}
	})
}

// nodeReady: its Ready condition is True. Taints are not asked: a new
// node carries not-ready:NoSchedule for a moment after it is Ready, and a
// binding is no scheduling.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestScenarioRealNodes runs podhealth against real kubelets, containerd
// and runc (harness.RealNode): twenty-six real nodes on one control plane, with
// --node-monitor-grace-period of harness.RealNodeMonitorGracePeriod, the
// real node-lifecycle, taint-eviction, ReplicaSet and StatefulSet
// controllers, k8s.io/cloud-provider's node-lifecycle controller over a
// model cloud, and podhealth-controller. Its scenarios run at once, each
// on a victim and a spare in a zone of their own:
//   - a partition, a freeze (SIGSTOP of the kubelet and containerd) and a
//     kubelet crash on a ReplicaSet pod's node: the pod is wedged
//     Terminating, podhealth's Checker force-deletes it, the replacement
//     runs on the spare, the old container keeps writing, and once the
//     fault ends the node's kubelet kills it;
//   - a partition of a StatefulSet pod's node: the pod is wedged too, but
//     the Checker holds it while its container runs, and on heal the
//     kubelet ends it and the StatefulSet's new pod is the only writer;
//   - a power-off of a StatefulSet pod's node that the cloud reports shut
//     down: podhealth-controller applies the out-of-service taint, the pod
//     goes, its successor runs on the spare, and on power-on the taint is
//     removed;
//   - a self-fencing database, a primary and a standby sharing a Lease
//     through selffence.Guard (selffence_realnodes_linux_test.go), its
//     primary's node partitioned, frozen whole, powered off or left
//     without its kubelet, and a primary that ignores its Guard;
//   - a seeded soak of overlapping faults on four more nodes.
func TestScenarioRealNodes(t *testing.T) {
	t.Parallel()
	rb := realNodeBinaries(t)
	// Every kubelet and containerd holds inotify instances (cAdvisor, the
	// plugin and configuration watchers); the default limit of 128 per
	// user runs out near fifteen nodes beside the rest of the suite, and a
	// kubelet that meets it never registers its node.
	if limit, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(limit))); err == nil && n < realNodesInotifyInstances {
			msg := fmt.Sprintf("fs.inotify.max_user_instances is %d; the real nodes need %d or more (.ci/run raises it)", n, realNodesInotifyInstances)
			if os.Getenv(realNodesRequiredEnv) == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	setup, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	// Volumes: the PV binder, attach-detach and StatefulSet controllers
	// too.
	cp := harness.Start(t, bins, harness.Options{AuditPodDeletes: true, Volumes: true, ExtraControllerManagerArgs: []string{
		"--node-monitor-grace-period=" + harness.RealNodeMonitorGracePeriod.String(),
		// The scenarios' nodes fail at once: at the default rate (one
		// node tainted per 10 s) the second would wait for the first.
		"--node-eviction-rate=100",
	}})
	c := cp.Client()
	// Each scenario has a victim and a spare in a zone of their own: the
	// node-lifecycle controller counts disruption per zone, and a zone
	// with two nodes never enters PartialDisruption.
	scenarios := []string{"partition", "stateful", "freeze", "crash", "poweroff", "nofencing", "selffence", "selffencemutant", "selffencefreeze", "selffencecrash", "selffencepoweroff"}
	var names []string
	var zones []string
	for _, sc := range scenarios {
		names = append(names, "real-"+sc+"-victim", "real-"+sc+"-spare")
		zones = append(zones, sc, sc)
	}
	// The soak's nodes: realSoakZones zones of two.
	for z := range realSoakZones {
		for i := range 2 {
			names = append(names, fmt.Sprintf("real-soak-%d%c", z, 'a'+i))
			zones = append(zones, fmt.Sprintf("soak-%d", z))
		}
	}
	nodes := make([]*harness.RealNode, len(names))
	errs := make([]error, len(names))
	var start sync.WaitGroup
	begin := time.Now()
	for i, name := range names {
		start.Go(func() {
			nodes[i], errs[i] = cp.StartRealNode(setup, t, rb, name, harness.RealNodeOptions{Index: i, Labels: map[string]string{corev1.LabelTopologyZone: zones[i]}})
		})
	}
	start.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		if _, err := harness.WaitForNode(setup, c, name, harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatalf("%v; %s", err, nodes[i].Diagnosis())
		}
	}
	ready := time.Since(begin)
	t.Logf("%d real nodes started and Ready in %v", len(names), ready.Round(time.Millisecond))
	requireKubeletThatKeepsExitingIsReported(setup, t, cp, rb, len(names))

	var mu sync.Mutex
	rows := map[string]string{}
	record := func(key, row string) {
		mu.Lock()
		defer mu.Unlock()
		rows[key] = row
	}
	t.Cleanup(func() {
		if os.Getenv(figWriteEnv) != "1" || t.Failed() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if err := figWriteSection(figFiguresFile, realNodesSection, realNodesFigures(len(names), ready, rows)); err != nil {
			t.Error(err)
		}
	})
	// The power-off's cloud: k8s.io/cloud-provider's node-lifecycle
	// controller over a cloud that reports the instance shut down, and
	// podhealth-controller applying the out-of-service taint.
	// It and the attacher below run until the test's cleanup stops them,
	// not until setup's deadline: a subtest may wait for a slot of
	// -parallel longer than setup lasts.
	cloud := newShutdownCloud()
	startCloudNodeLifecycle(context.Background(), t, c, cloud)
	// Its volume: a ReadWriteOnce CSI volume through the real
	// attach-detach controller, the harness's model of the
	// external-attacher, and the harness's CSI node plugin on the two
	// nodes of the scenario.
	if err := cp.CreateCSIDriver(setup); err != nil {
		t.Fatal(err)
	}
	attacher := cp.StartAttacher(context.Background())
	volumesDir := t.TempDir()
	for _, n := range nodes[8:10] {
		if _, err := n.StartCSIDriver(volumesDir); err != nil {
			t.Fatal(err)
		}
	}
	manifests := append(controllerManifests(t), kustomizationObjects(t, controllerConfigDir+"/out-of-service")...)
	applyObjects(setup, t, cp, append(manifests, kustomizationObjects(t, controllerConfigDir+"/fence-lease")...), false)
	startControllerReplica(t, cp, "podhealth-controller", controllerKubeconfig(setup, t, cp),
		"--shutdown-taint="+health.TaintCloudShutdown+"=2s", "--apply-out-of-service", "--fence-lease", "--breaker-min-unhealthy=10")

	// Each subtest waits for a slot of -parallel: its deadline runs from
	// when it starts.
	sub := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	t.Run("a partition of a ReplicaSet pod's node: the wedge, podhealth's recovery, and the orphan killed on heal", func(t *testing.T) {
		t.Parallel()
		record("1", runRealStatelessFault(sub(t), t, cp, nodes[0], nodes[1], realPartition, realChecker{on: true}))
	})
	t.Run("a partition of a StatefulSet pod's node: held while its container runs, one writer after the heal", func(t *testing.T) {
		t.Parallel()
		record("2", runRealStatefulPartition(sub(t), t, cp, nodes[2], nodes[3]))
	})
	t.Run("a frozen kubelet and containerd: the same recovery, the orphan killed on thaw", func(t *testing.T) {
		t.Parallel()
		record("3", runRealStatelessFault(sub(t), t, cp, nodes[4], nodes[5], realFreeze, realChecker{on: true}))
	})
	// podhealth-controller, not the library's Checker, recovers this one:
	// both on real nodes, without a pair of nodes more.
	t.Run("a kubelet crash: the same wedge, recovered by podhealth-controller, the orphan killed by the restarted kubelet", func(t *testing.T) {
		t.Parallel()
		record("4", runRealStatelessFault(sub(t), t, cp, nodes[6], nodes[7], realCrash, realChecker{}))
	})
	t.Run("a power-off on the cloud's word: the StatefulSet pod runs elsewhere after the out-of-service taint", func(t *testing.T) {
		t.Parallel()
		record("5", runRealPowerOff(sub(t), t, cp, cloud, attacher, volumesDir, nodes[8], nodes[9]))
	})
	t.Run("a seeded soak of overlapping faults: no identity has two writers, and every workload comes back", func(t *testing.T) {
		t.Parallel()
		record("6", runRealSoak(sub(t), t, cp, nodes[2*len(scenarios):]))
	})
	t.Run("the mutation: a policy without fencing, and the writers' file shows two writers", func(t *testing.T) {
		t.Parallel()
		record("2b", runRealStatefulWithoutFencing(sub(t), t, cp, nodes[10], nodes[11]))
	})
	// The self-fencing database: a primary and a standby sharing one
	// Lease through selffence.Guard. The library's Checker and
	// podhealth-controller each recover two faults, and both watch the
	// kubelet crash, which they must hold.
	t.Run("a self-fencing primary's node partitioned: it stops by its Lease's expiry, the standby takes over, podhealth frees the old pod on the takeover", func(t *testing.T) {
		t.Parallel()
		record("7", runRealSelfFencing(sub(t), t, cp, nodes[12], nodes[13], selfFencing{fault: realPartition, checker: realChecker{on: true, fenceLease: true}}))
	})
	t.Run("the mutation: a primary that ignores its Guard, and the writers' file shows two writers of the Lease", func(t *testing.T) {
		t.Parallel()
		record("7e", runRealSelfFencing(sub(t), t, cp, nodes[14], nodes[15], selfFencing{fault: realPartition, mutant: true}))
	})
	t.Run("a self-fencing primary's node frozen whole past the wait: the standby takes over, podhealth-controller frees the old pod, which writes nothing on thaw", func(t *testing.T) {
		t.Parallel()
		record("7b", runRealSelfFencing(sub(t), t, cp, nodes[16], nodes[17], selfFencing{fault: realFreezeAll}))
	})
	t.Run("a self-fencing primary whose kubelet crashed renews on: podhealth holds it, and the standby takes over once the restarted kubelet ends it", func(t *testing.T) {
		t.Parallel()
		record("7c", runRealSelfFencing(sub(t), t, cp, nodes[18], nodes[19], selfFencing{fault: realCrash, holds: true,
			checker: realChecker{on: true, fenceLease: true, alsoController: true}}))
	})
	t.Run("a self-fencing primary's node powered off, no cloud to say so: the standby takes over, podhealth frees the old pod on the takeover", func(t *testing.T) {
		t.Parallel()
		record("7d", runRealSelfFencing(sub(t), t, cp, nodes[20], nodes[21], selfFencing{fault: realPowerOff, checker: realChecker{on: true, fenceLease: true}}))
	})
}

// requireKubeletThatKeepsExitingIsReported starts a real node whose
// kubelet exits at once, as one that cannot run does: the harness starts
// it again as a service manager would, then gives up with how it exited
// and the last error it logged, the reason a failed run needs.
func requireKubeletThatKeepsExitingIsReported(ctx context.Context, t *testing.T, cp *harness.ControlPlane, rb harness.RealNodeBinaries, index int) {
	t.Helper()
	const fatal = "F1204 17:00:00.000000       1 server.go:1] \"Failed to run kubelet\" err=\"a reason of its own\""
	broken := rb
	broken.Kubelet = filepath.Join(t.TempDir(), "kubelet")
	script := "#!/bin/sh\necho '" + fatal + "' >&2\nexit 1\n"
	if err := os.WriteFile(broken.Kubelet, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := cp.StartRealNode(ctx, t, broken, "real-exiting-kubelet", harness.RealNodeOptions{Index: index})
	if err == nil {
		t.Fatal("a node whose kubelet exits at once started")
	}
	for _, want := range []string{"exited 3 times", "exit status 1", "a reason of its own"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error of a node whose kubelet exits at once does not say %q:\n%v", want, err)
		}
	}
}

// realWorkload is one scenario's namespace on real nodes: a binder of its
// new pods to its nodes, the writers' file, a watch of its pods, and
// podhealth's Checker of the pods that selector selects (the default
// policy, every 500 ms), as an operator would run it.
type realWorkload struct {
	ns     string
	writes string
	watch  *harness.PodWatch
	loop   *stsLoop
}

// realChecker says whether a scenario runs podhealth's Checker in the
// test, and with which fencing policy (the zero value: the default).
type realChecker struct {
	on      bool
	fencing health.Fencing
	// fenceLease adds the Lease fencer (kube.CheckerOptions.FenceLease,
	// with a Lease informer of the namespace).
	fenceLease bool
	// alsoController labels the namespace for podhealth-controller too,
	// so that both check it.
	alsoController bool
}

// realCheckerAgent is the user agent of the real-node scenarios' Checker.
const realCheckerAgent = "podhealth-real-nodes-checker"

// startRealWorkload creates namespace ns and starts its binder (to the
// first Ready node of prefer) and, with checker.on, its Checker. Without
// checker.on the namespace is labelled podhealth.io/enabled=true instead,
// and podhealth-controller is its checker.
func startRealWorkload(ctx context.Context, t *testing.T, cp *harness.ControlPlane, ns string, selector labels.Selector, checker realChecker, prefer ...string) *realWorkload {
	t.Helper()
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if !checker.on || checker.alsoController {
		namespace.Labels = map[string]string{"podhealth.io/enabled": "true"}
	}
	if _, err := cp.Client().CoreV1().Namespaces().Create(ctx, namespace, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &realWorkload{ns: ns, writes: filepath.Join(t.TempDir(), "writes")}
	// The Checker's own user agent: its DELETEs are told from the
	// kubelet's, which deletes with grace 0 once its containers stopped.
	config := cp.RESTConfig()
	config.UserAgent = realCheckerAgent
	c, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	if w.watch, err = cp.WatchPods(ctx, ns); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	t.Cleanup(func() { stop(); running.Wait() })
	if len(prefer) > 0 {
		running.Go(func() { bindToPreferred(runCtx, cp, ns, prefer) })
	}
	if !checker.on {
		return w
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	nodeFactory := informers.NewSharedInformerFactory(c, 0)
	opts := kube.CheckerOptions{
		Health: health.Options{Logger: testr.New(t), Fencing: checker.fencing},
		Nodes:  nodeFactory.Core().V1().Nodes(),
	}
	if checker.fenceLease {
		opts.FenceLease, opts.Leases = true, factory.Coordination().V1().Leases().Informer()
	}
	hc, err := kube.NewChecker(c, factory.Core().V1().Pods().Lister(), ns, selector, opts)
	if err != nil {
		t.Fatal(err)
	}
	// It checks every 500 ms and on each change, as an operator would.
	w.loop = newStsLoop()
	w.loop.pokeOnUpdates(t, factory.Core().V1().Pods().Informer(), nodeFactory.Core().V1().Nodes().Informer())
	factory.Start(runCtx.Done())
	nodeFactory.Start(runCtx.Done())
	t.Cleanup(func() { stop(); factory.Shutdown(); nodeFactory.Shutdown() })
	factory.WaitForCacheSync(ctx.Done())
	nodeFactory.WaitForCacheSync(ctx.Done())
	running.Go(func() { w.loop.run(runCtx, hc, 500*time.Millisecond) })
	return w
}

// realWrites reads the workload's writers' file, failing t if it cannot.
func (w *realWorkload) realWrites(t *testing.T) []realWrite {
	t.Helper()
	ws, err := readRealWrites(w.writes)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// firstWriter waits for a pod of the workload on node whose container
// has written, and returns it.
func (w *realWorkload) firstWriter(ctx context.Context, t *testing.T, node string) harness.PodHistory {
	t.Helper()
	var found harness.PodHistory
	if err := pollUntil(ctx, func() bool {
		ws := w.realWrites(t)
		for _, p := range w.watch.Pods() {
			if _, _, n := writesOf(ws, p.UID); n > 0 && p.NodeName == node {
				found = p
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no writer wrote on %s: %v (%d writes; pods %v)", node, err, len(w.realWrites(t)), w.watch.Pods())
	}
	return found
}

// createStatefulSet creates StatefulSet db of one replica of spec, with
// podLabels and claims.
func (w *realWorkload) createStatefulSet(ctx context.Context, t *testing.T, c kubernetes.Interface, podLabels map[string]string, spec corev1.PodSpec, claims []corev1.PersistentVolumeClaim) {
	t.Helper()
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To(int32(1)),
			Selector:             &metav1.LabelSelector{MatchLabels: podLabels},
			Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: spec},
			VolumeClaimTemplates: claims,
		},
	}
	if _, err := c.AppsV1().StatefulSets(w.ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// successor waits for a pod other than old whose container has written,
// and returns it.
func (w *realWorkload) successor(ctx context.Context, t *testing.T, old types.UID) harness.PodHistory {
	t.Helper()
	var next harness.PodHistory
	if err := pollUntil(ctx, func() bool {
		ws := w.realWrites(t)
		for _, p := range w.watch.Pods() {
			if _, _, n := writesOf(ws, p.UID); n > 0 && p.UID != old {
				next = p
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no pod but %s ever wrote: %v", old, err)
	}
	return next
}

// pod returns the watch's history of uid.
func (w *realWorkload) pod(uid types.UID) harness.PodHistory {
	p, _ := w.watch.Pod(uid)
	return p
}

// faultUntilEvicted injects fault on victim and waits until its node is
// Unknown and then until pod is evicted; it returns when each happened.
func faultUntilEvicted(ctx context.Context, t *testing.T, cp *harness.ControlPlane, w *realWorkload, victim *harness.RealNode, pod types.UID, fault realFault) (partition, unknown time.Time) {
	t.Helper()
	partition = time.Now()
	if err := fault.inject(victim); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.WaitForNode(ctx, cp.Client(), victim.Name(), harness.NodeReadyIs(corev1.ConditionUnknown)); err != nil {
		t.Fatal(err)
	}
	unknown = time.Now()
	if _, err := w.watch.WaitFor(ctx, "the pod evicted", func([]harness.PodHistory) bool {
		return !w.pod(pod).Evicted.IsZero()
	}); err != nil {
		t.Fatal(err)
	}
	return partition, unknown
}

// waitGone waits until no process of victim runs with the pod's UID, and
// returns when that was seen (polled every 50 ms).
func waitGone(ctx context.Context, t *testing.T, victim *harness.RealNode, uid types.UID, within time.Duration) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for victim.RunningWith("UID=" + string(uid)) {
		select {
		case <-ctx.Done():
			t.Fatalf("the container of pod %s still ran on %s after %v", uid, victim.Name(), within)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return time.Now()
}

// realFault is a fault of a real node that leaves its containers
// running, and its way back.
type realFault struct {
	name, heal string
	inject     func(*harness.RealNode) error
	undo       func(*harness.RealNode) error
}

var (
	realPartition = realFault{"partitioned", "the heal",
		func(n *harness.RealNode) error { n.Partition(); return nil },
		func(n *harness.RealNode) error { n.Heal(); return nil }}
	realFreeze = realFault{"frozen (SIGSTOP of the kubelet and containerd)", "the thaw",
		(*harness.RealNode).Freeze, (*harness.RealNode).Thaw}
	realCrash = realFault{"left without its kubelet (SIGKILL; containerd and the containers run on)", "the kubelet's restart",
		(*harness.RealNode).CrashKubelet, (*harness.RealNode).RestartKubelet}
	// realFreezeAll freezes the containers too, for longer than any wait.
	realFreezeAll = realFault{"frozen whole (its freezer cgroup: the kubelet, containerd and the containers)", "the thaw",
		(*harness.RealNode).FreezeAll, (*harness.RealNode).ThawAll}
	// realPowerOff is a power-off that no cloud reports.
	realPowerOff = realFault{"powered off (every process of it killed; no cloud reports it)", "the power-on",
		(*harness.RealNode).PowerOff, func(n *harness.RealNode) error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return n.PowerOn(ctx)
		}}
)

// runRealStatelessFault injects fault on the node of a ReplicaSet's pod
// (bound to victim, its replacement to spare), recovered by checker (the
// library's Checker in the test, or podhealth-controller), and returns its
// row of FIGURES.md.
func runRealStatelessFault(ctx context.Context, t *testing.T, cp *harness.ControlPlane, victim, spare *harness.RealNode, fault realFault, checker realChecker) string {
	c := cp.Client()
	podLabels := map[string]string{"app": "writer"}
	selector := labels.SelectorFromSet(podLabels)
	w := startRealWorkload(ctx, t, cp, "real-"+strings.TrimPrefix(victim.Name(), "real-"), selector, checker, victim.Name(), spare.Name())
	recoverer, agent := "podhealth-controller", controllerAgent
	if checker.on {
		recoverer, agent = "podhealth's Checker", realCheckerAgent
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "writer"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       writerPodSpec(filepath.Dir(w.writes), 2),
			},
		},
	}
	if _, err := c.AppsV1().ReplicaSets(w.ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := w.firstWriter(ctx, t, victim.Name())
	resident := victim.ResidentBytes()
	t.Logf("%s with one pod: %d MB resident", victim.Name(), resident>>20)
	partition, unknown := faultUntilEvicted(ctx, t, cp, w, victim, old.UID, fault)
	if _, err := w.watch.WaitFor(ctx, "the old pod force-deleted", func([]harness.PodHistory) bool {
		return !w.pod(old.UID).Deleted.IsZero()
	}); err != nil {
		t.Fatal(err)
	}
	old = w.pod(old.UID)
	repl := w.firstWriter(ctx, t, spare.Name())
	replFirst, _, _ := writesOf(w.realWrites(t), repl.UID)

	// A real partition leaves the container running: it writes on for as
	// long as the node is cut off.
	const cutOff = 10 * time.Second
	time.Sleep(time.Until(old.Deleted.Add(cutOff)))
	if !victim.RunningWith("UID=" + string(old.UID)) {
		t.Errorf("the old container stopped on the node %s, which no kubelet could have told to", fault.name)
	}
	_, orphanLast, _ := writesOf(w.realWrites(t), old.UID)
	if !orphanLast.After(old.Deleted.Add(cutOff - time.Second)) {
		t.Errorf("the old container's last write was at %s, %v after its pod was force-deleted: it did not write on",
			orphanLast.Format(time.StampMilli), orphanLast.Sub(old.Deleted))
	}
	heal := time.Now()
	if err := fault.undo(victim); err != nil {
		t.Fatal(err)
	}
	killed := waitGone(ctx, t, victim, old.UID, 2*time.Minute)
	if _, last, _ := writesOf(w.realWrites(t), old.UID); last.After(killed) {
		t.Errorf("the old container wrote at %s, after it was seen gone at %s", last.Format(time.StampMilli), killed.Format(time.StampMilli))
	}
	if _, err := harness.WaitForNode(ctx, c, victim.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
		t.Fatal(err)
	}
	if w.loop != nil {
		for _, err := range w.loop.errors() {
			t.Errorf("check failed: %v", err)
		}
	}
	// The one force DELETE of the old pod: the recoverer's, with its UID.
	deletes, err := cp.PodDeletes()
	if err != nil {
		t.Fatal(err)
	}
	var forced []harness.PodDelete
	for _, d := range deletes {
		if d.Namespace == w.ns && d.Name == old.Name && d.Force() && d.PreconditionUID == old.UID {
			forced = append(forced, d)
		}
	}
	if len(forced) != 1 || !strings.HasPrefix(forced[0].UserAgent, agent) {
		t.Errorf("the old pod's force DELETEs with its UID: %+v; want one, by %s (user agent %s…)", forced, recoverer, agent)
	}
	since := func(at time.Time) string { return figSec(at.Sub(partition)) }
	t.Logf("%s, %s: Unknown %s, evicted %s, force-deleted %s, replacement writing %s; the orphan wrote on for %s; killed %s after %s",
		fault.name, recoverer, since(unknown), since(old.Evicted), since(old.Deleted), since(replFirst), figSec(orphanLast.Sub(old.Deleted)), figSec(killed.Sub(heal)), fault.heal)
	return fmt.Sprintf("| a ReplicaSet pod's node %s, recovered by %s (toleration 2 s; the node with its one pod: %d MB resident) | node Unknown %s, the pod evicted %s and Terminating; %s force-deleted it %s, and the replacement wrote on the spare node %s after the fault. The old container kept writing (%s after its force delete, until %s) | its kubelet killed the container %s after %s |",
		fault.name, recoverer, resident>>20, since(unknown), since(old.Evicted), recoverer, since(old.Deleted), since(replFirst), figSec(orphanLast.Sub(old.Deleted)), fault.heal, figSec(killed.Sub(heal)), fault.heal)
}

// runRealStatefulPartition partitions the node of a StatefulSet's pod
// (bound to victim; after the heal, to victim or spare) and returns its
// row of FIGURES.md.
func runRealStatefulPartition(ctx context.Context, t *testing.T, cp *harness.ControlPlane, victim, spare *harness.RealNode) string {
	c := cp.Client()
	podLabels := map[string]string{"app": "db"}
	selector := labels.SelectorFromSet(podLabels)
	w := startRealWorkload(ctx, t, cp, "real-stateful", selector, realChecker{on: true}, victim.Name(), spare.Name())
	w.createStatefulSet(ctx, t, c, podLabels, writerPodSpec(filepath.Dir(w.writes), 2), nil)
	old := w.firstWriter(ctx, t, victim.Name())
	partition, unknown := faultUntilEvicted(ctx, t, cp, w, victim, old.UID, realPartition)
	// Held: for as long as the node is cut off, its container runs, so
	// the pod must stay.
	const cutOff = 20 * time.Second
	evicted := w.pod(old.UID).Evicted
	time.Sleep(time.Until(evicted.Add(cutOff)))
	if p := w.pod(old.UID); !p.Deleted.IsZero() {
		t.Fatalf("the StatefulSet pod was deleted at %s while its node was cut off and its container ran", p.Deleted.Format(time.StampMilli))
	}
	if !victim.RunningWith("UID=" + string(old.UID)) {
		t.Errorf("the StatefulSet pod's container stopped on the cut-off node")
	}
	_, reports := w.loop.reportsOf(old.UID)
	held := 0
	for _, pr := range reports {
		if pr.Outcome == health.HeldBack {
			held++
		}
	}
	if held == 0 {
		t.Errorf("the Checker never reported the StatefulSet pod held back; its outcomes %v", stsOutcomes(reports))
	}
	heal := time.Now()
	victim.Heal()
	killed := waitGone(ctx, t, victim, old.UID, 2*time.Minute)
	if _, err := w.watch.WaitFor(ctx, "the old pod gone", func([]harness.PodHistory) bool {
		return !w.pod(old.UID).Deleted.IsZero()
	}); err != nil {
		t.Fatal(err)
	}
	gone := w.pod(old.UID).Deleted
	next := w.successor(ctx, t, old.UID)
	time.Sleep(time.Second) // the new pod writes a while
	ws := w.realWrites(t)
	nextFirst, _, _ := writesOf(ws, next.UID)
	for _, o := range realOverlaps(ws) {
		t.Errorf("the writers' file shows %s", o)
	}
	deletes, err := cp.PodDeletes()
	if err != nil {
		t.Fatal(err)
	}
	// After the heal, the kubelet reports the pod's phase terminal once
	// it has stopped its containers: that is evidence, and podhealth may
	// then force-delete it before the kubelet does. Before the heal the
	// container ran.
	for _, d := range deletes {
		if d.Namespace == w.ns && d.Force() && d.UserAgent == realCheckerAgent && d.At.Before(heal) {
			t.Errorf("%s received a force DELETE from podhealth's Checker at %s, before the heal, while its container ran", d.Name, d.At.Format(time.StampMilli))
		}
	}
	for _, err := range w.loop.errors() {
		t.Errorf("check failed: %v", err)
	}
	since := func(at time.Time) string { return figSec(at.Sub(partition)) }
	t.Logf("stateful partition: Unknown %s, evicted %s, held %d checks over %v; on heal the container ended %s later, the pod was gone %s later, its successor writing %s later",
		since(unknown), since(evicted), held, cutOff, figSec(killed.Sub(heal)), figSec(gone.Sub(heal)), figSec(nextFirst.Sub(heal)))
	return fmt.Sprintf("| a StatefulSet pod's node partitioned (toleration 2 s) | node Unknown %s, the pod evicted %s and Terminating; podhealth held it (its container wrote on, %v cut off) | its kubelet ended the container %s after the heal and the pod was gone %s after it; the StatefulSet's new pod wrote %s after the heal, after the old one's last write |",
		since(unknown), since(evicted), cutOff, figSec(killed.Sub(heal)), figSec(gone.Sub(heal)), figSec(nextFirst.Sub(heal)))
}

// runRealStatefulWithoutFencing is the mutation of
// runRealStatefulPartition: the Checker's policy lets a StatefulSet pod
// go without fencing (health.FenceNever), so the partitioned pod is
// force-deleted while its container runs, the StatefulSet starts db-0
// again on the spare, and the writers' file alone must show the two
// writers. It returns its row of FIGURES.md.
func runRealStatefulWithoutFencing(ctx context.Context, t *testing.T, cp *harness.ControlPlane, victim, spare *harness.RealNode) string {
	c := cp.Client()
	podLabels := map[string]string{"app": "db"}
	w := startRealWorkload(ctx, t, cp, "real-nofencing", labels.SelectorFromSet(podLabels), realChecker{on: true, fencing: health.FenceNever}, victim.Name(), spare.Name())
	w.createStatefulSet(ctx, t, c, podLabels, writerPodSpec(filepath.Dir(w.writes), 2), nil)
	old := w.firstWriter(ctx, t, victim.Name())
	partition, _ := faultUntilEvicted(ctx, t, cp, w, victim, old.UID, realPartition)
	if _, err := w.watch.WaitFor(ctx, "the old pod force-deleted", func([]harness.PodHistory) bool {
		return !w.pod(old.UID).Deleted.IsZero()
	}); err != nil {
		t.Fatal(err)
	}
	next := w.firstWriter(ctx, t, spare.Name())
	time.Sleep(3 * time.Second) // both write a while
	overlaps := realOverlaps(w.realWrites(t))
	victim.Heal()
	waitGone(ctx, t, victim, old.UID, 2*time.Minute)
	if len(overlaps) == 0 {
		t.Fatalf("the writers' file shows no two writers, though %s was force-deleted while its container ran and %s wrote on the spare", old.UID, next.UID)
	}
	t.Logf("found, as it must: %s", overlaps[0])
	nextFirst, _, _ := writesOf(w.realWrites(t), next.UID)
	return fmt.Sprintf("| the mutation: the same with the Checker's policy `health.FenceNever` | force-deleted %s after the partition, while its container ran; the StatefulSet's new db-0 wrote on the spare %s after it, beside the old one: the writers' file shows two writers of db-0 | |",
		figSec(w.pod(old.UID).Deleted.Sub(partition)), figSec(nextFirst.Sub(partition)))
}

// runRealPowerOff powers off the node of a StatefulSet's pod (bound to
// victim, its successor to spare) with the cloud reporting the instance
// shut down, podhealth-controller as the namespace's checker, and
// returns its row of FIGURES.md.
func runRealPowerOff(ctx context.Context, t *testing.T, cp *harness.ControlPlane, cloud *shutdownCloud, attacher *harness.Attacher, volumesDir string, victim, spare *harness.RealNode) string {
	c := cp.Client()
	podLabels := map[string]string{"app": "db"}
	w := startRealWorkload(ctx, t, cp, "real-poweroff", labels.SelectorFromSet(podLabels), realChecker{}, victim.Name(), spare.Name())
	// db-0's claim vol-db-0, bound to a CSI volume whose directory the
	// writers' file is in.
	const claim = "vol-db-0"
	if err := cp.CreateVolume(ctx, w.ns, claim); err != nil {
		t.Fatal(err)
	}
	w.writes = filepath.Join(volumesDir, "vol-"+w.ns+"-"+claim, "writes")
	spec := writerPodSpec("", 2)
	spec.Volumes = nil
	w.createStatefulSet(ctx, t, c, podLabels, spec, []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "vol"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}})
	old := w.firstWriter(ctx, t, victim.Name())
	// When the cloud's shutdown taint and the out-of-service taint are
	// first seen on the victim.
	var mu sync.Mutex
	var shutdown, oos time.Time
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go everyTick(watchCtx, 100*time.Millisecond, func() {
		n, err := c.CoreV1().Nodes().Get(watchCtx, victim.Name(), metav1.GetOptions{})
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if shutdown.IsZero() && hasNodeTaint(n, health.TaintCloudShutdown) {
			shutdown = time.Now()
		}
		if oos.IsZero() && hasNodeTaint(n, corev1.TaintNodeOutOfService) {
			oos = time.Now()
		}
	})
	powerOff := time.Now()
	if err := victim.PowerOff(); err != nil {
		t.Fatal(err)
	}
	cloud.setOff(victim.Name(), true)
	if victim.RunningWith("UID=" + string(old.UID)) {
		t.Fatal("the container ran on after the power-off")
	}
	if _, err := w.watch.WaitFor(ctx, "the old pod gone", func([]harness.PodHistory) bool {
		return !w.pod(old.UID).Deleted.IsZero()
	}); err != nil {
		t.Fatal(err)
	}
	gone := w.pod(old.UID).Deleted
	// The cloud's shutdown taint is the evidence (--shutdown-taint, after
	// 2 s); the out-of-service taint follows it, for the attach-detach
	// controller.
	if err := pollUntil(ctx, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !oos.IsZero()
	}); err != nil {
		t.Errorf("podhealth-controller never applied the out-of-service taint: %v", err)
	}
	mu.Lock()
	shutdownAt, taintAt := shutdown, oos
	mu.Unlock()
	if shutdownAt.IsZero() || gone.Before(shutdownAt) {
		t.Errorf("the StatefulSet pod went at %s, before the cloud's shutdown taint (seen at %s)", gone.Format(time.StampMilli), shutdownAt.Format(time.StampMilli))
	}
	next := w.successor(ctx, t, old.UID)
	ws := w.realWrites(t)
	_, oldLast, _ := writesOf(ws, old.UID)
	nextFirst, _, _ := writesOf(ws, next.UID)
	if next.NodeName != spare.Name() || !oldLast.Before(nextFirst) {
		t.Errorf("the new pod ran on %s from %s; the old one wrote until %s", next.NodeName, nextFirst.Format(time.StampMilli), oldLast.Format(time.StampMilli))
	}
	// The volume went from the victim to the spare: detached, then
	// attached, never on both.
	var detached, attached time.Time
	for _, e := range attacher.Events() {
		switch {
		case e.Kind == harness.VolumeDetached && e.Node == victim.Name() && detached.IsZero():
			detached = e.At
		case e.Kind == harness.VolumeAttached && e.Node == spare.Name() && attached.IsZero():
			attached = e.At
		}
	}
	if detached.IsZero() || attached.IsZero() || attached.Before(detached) {
		t.Errorf("the volume: detached from %s at %s, attached to %s at %s; want a detach, then the attach (attacher log %v)",
			victim.Name(), detached.Format(time.StampMilli), spare.Name(), attached.Format(time.StampMilli), attacher.Events())
	}
	deletes, err := cp.PodDeletes()
	if err != nil {
		t.Fatal(err)
	}
	by := "no one"
	for _, d := range deletes {
		if d.Namespace == w.ns && d.Name == old.Name && d.Force() && !d.At.After(gone) {
			by = strings.Fields(d.UserAgent + " ?")[0]
		}
	}

	// Powered on: the kubelet finds its pod gone, and podhealth-controller
	// removes the taint it applied once the node is Ready.
	on := time.Now()
	cloud.setOff(victim.Name(), false)
	if err := victim.PowerOn(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.WaitForNode(ctx, c, victim.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
		t.Fatal(err)
	}
	ready := time.Since(on)
	if _, err := harness.WaitForNode(ctx, c, victim.Name(), func(n *corev1.Node) bool {
		return n != nil && !hasNodeTaint(n, corev1.TaintNodeOutOfService)
	}); err != nil {
		t.Errorf("podhealth-controller did not remove the out-of-service taint it applied: %v", err)
	}
	untainted := time.Since(on)
	if victim.RunningWith("UID=" + string(old.UID)) {
		t.Error("the old pod's container runs again on the powered-on node")
	}
	since := func(at time.Time) string { return figSec(at.Sub(powerOff)) }
	t.Logf("power-off: the cloud's shutdown taint %s, old pod gone %s (force DELETE by %s), out-of-service %s, volume detached %s, attached to the spare %s, its successor writing there %s; powered on: Ready %s, untainted %s",
		since(shutdownAt), since(gone), by, since(taintAt), since(detached), since(attached), since(nextFirst), figSec(ready), figSec(untainted))
	return fmt.Sprintf("| a StatefulSet pod with a ReadWriteOnce CSI volume, its node powered off (every process of it killed), the cloud reporting the instance shut down (podhealth-controller `--shutdown-taint=%s=2s --apply-out-of-service`) | the cloud's shutdown taint %s after the power-off, the pod gone %s (force DELETE by %s), the out-of-service taint %s; the volume detached %s and attached to the spare %s; its successor writing on it there %s | powered on: Ready %s later, the taint removed %s later |",
		health.TaintCloudShutdown, since(shutdownAt), since(gone), by, since(taintAt), since(detached), since(attached), since(nextFirst), figSec(ready), figSec(untainted))
}

// realNodesFigures is the section of FIGURES.md.
func realNodesFigures(nodes int, ready time.Duration, rows map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Real nodes\n\n")
	fmt.Fprintf(&b, "Measured by `TestScenarioRealNodes` (`cd e2e && PODHEALTH_WRITE_FIGURES=1 go test -count=1 -run TestScenarioRealNodes -v .`) on %s: %d CPUs, %s/%s, %s; 1-minute load average %s at the end. "+
		"Every node is a real kubelet (the control plane's release), containerd v2 and runc in network, mount and cgroup namespaces of its own; its containers are real processes that append to a file on the host that stands for their volume. "+
		"A partition stops the node's relay, its only path to the API server: the kubelet and the containers keep running. "+
		"Node monitor grace period %v; the real node-lifecycle, taint-eviction, ReplicaSet and StatefulSet controllers; podhealth's Checker (`kube.NewChecker`, default policy) every 500 ms, or podhealth-controller where a row says so. "+
		"%d nodes started and Ready in %s (built in %s, this run).\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), figLoadAverage(), harness.RealNodeMonitorGracePeriod,
		nodes, figSec(ready), figSec(realNodeBuild.bins.BuildTime))
	b.WriteString("| fault | what happened | on heal |\n|---|---|---|\n")
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(rows[k] + "\n")
	}
	return b.String()
}

// TestRealOverlapsFindsASecondWriterFromTheFileAlone: the real nodes'
// single-writer check reports a container of one identity that writes
// again after another wrote, and nothing for a clean hand-over or for two
// identities that write at once.
func TestRealOverlapsFindsASecondWriterFromTheFileAlone(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	tests := []struct {
		name   string
		writes []realWrite
		want   int
	}{
		{"a hand-over: the old container's last write before the new one's first", []realWrite{
			{"db-0", "a", 1, at(1)}, {"db-0", "a", 2, at(2)}, {"db-0", "b", 1, at(3)}, {"db-0", "b", 2, at(4)}}, 0},
		{"two identities at once", []realWrite{
			{"db-0", "a", 1, at(1)}, {"db-1", "c", 1, at(1.5)}, {"db-0", "a", 2, at(2)}, {"db-1", "c", 2, at(2.5)}}, 0},
		{"the old container writes again after the new one did", []realWrite{
			{"db-0", "a", 1, at(1)}, {"db-0", "b", 1, at(2)}, {"db-0", "a", 2, at(3)}, {"db-0", "b", 2, at(4)}}, 2},
		{"out of order in the file, in order in time", []realWrite{
			{"db-0", "b", 1, at(3)}, {"db-0", "a", 1, at(1)}, {"db-0", "a", 2, at(2)}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := realOverlaps(tt.writes); len(got) != tt.want {
				t.Errorf("realOverlaps = %q, want %d findings", got, tt.want)
			}
		})
	}
}

// TestPrimaryOverlapsFindsTwoHoldersOfTheLeaseWritingAtOnce: invariant 5
// counts every writer of the one Lease, whatever its identity: a
// failover from db-0 to db-1 is clean, and so is a restarted container of
// db-0 taking the Lease back once db-1 stopped; db-0's process writing
// again after db-1 wrote is found, as is a container of db-0, new or
// restarted, writing while db-1 does.
func TestPrimaryOverlapsFindsTwoHoldersOfTheLeaseWritingAtOnce(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	tests := []struct {
		name   string
		writes []realWrite
		want   int
	}{
		{"a failover: the primary's last write before the standby's first", []realWrite{
			{"db-0", "a", 1, at(1)}, {"db-0", "a", 2, at(2)}, {"db-1", "c", 1, at(9)}, {"db-1", "c", 2, at(10)}}, 0},
		{"the old primary writes after the standby took over", []realWrite{
			{"db-0", "a", 1, at(1)}, {"db-1", "c", 1, at(9)}, {"db-0", "a", 2, at(9.5)}, {"db-1", "c", 2, at(10)}}, 2},
		{"the recreated db-0 writes while db-1 holds the Lease", []realWrite{
			{"db-0", "a", 1, at(1)}, {"db-1", "c", 1, at(9)}, {"db-0", "b", 1, at(20)}, {"db-1", "c", 2, at(21)}}, 1},
		{"db-0's restarted container takes the Lease back after db-1 stopped", []realWrite{
			{"db-0", "a", 1, at(1)}, {"db-0", "a", 2, at(2)}, {"db-1", "c", 1, at(9)}, {"db-1", "c", 2, at(10)}, {"db-0", "a", 1, at(19)}, {"db-0", "a", 2, at(20)}}, 0},
		{"db-0's restarted container writes while db-1 holds the Lease", []realWrite{
			{"db-0", "a", 1, at(1)}, {"db-1", "c", 1, at(9)}, {"db-0", "a", 1, at(19)}, {"db-1", "c", 2, at(20)}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := primaryOverlaps(tt.writes); len(got) != tt.want {
				t.Errorf("primaryOverlaps = %q, want %d findings", got, tt.want)
			}
		})
	}
}
