package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	fakecloud "k8s.io/cloud-provider/fake"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/health"
)

// shutdownCloud is k8s.io/cloud-provider's fake cloud with a power state
// per instance: the cloud node-lifecycle controller asks it about each node
// that is not Ready, and taints the node shut down when it says so. Every
// instance exists (none of its Nodes is deleted).
type shutdownCloud struct {
	*fakecloud.Cloud
	mu  sync.Mutex
	off map[string]bool
}

func newShutdownCloud() *shutdownCloud {
	return &shutdownCloud{Cloud: &fakecloud.Cloud{}, off: map[string]bool{}}
}

func (c *shutdownCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

func (c *shutdownCloud) InstanceExists(context.Context, *corev1.Node) (bool, error) {
	return true, nil
}

func (c *shutdownCloud) InstanceShutdown(_ context.Context, node *corev1.Node) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off[node.Name], nil
}

// setOff makes the cloud report node's instance shut down (true) or
// running.
func (c *shutdownCloud) setOff(node string, off bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off[node] = off
}

// cloudMonitorPeriod is the cloud node-lifecycle controller's
// --node-monitor-period in these tests: the harness's own 1 s, where a
// cloud-controller-manager's default is 5 s.
const cloudMonitorPeriod = time.Second

// startCloudNodeLifecycle runs k8s.io/cloud-provider's node-lifecycle
// controller over cloud, in the test's process, as a
// cloud-controller-manager does.
func startCloudNodeLifecycle(ctx context.Context, t *testing.T, c kubernetes.Interface, cloud cloudprovider.Interface) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(c, 0)
	controller, err := nodelifecycle.NewCloudNodeLifecycleController(factory.Core().V1().Nodes(), c, cloud, cloudMonitorPeriod, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var done sync.WaitGroup
	factory.Start(ctx.Done())
	done.Go(func() { controller.Run(ctx, controllersmetrics.NewControllerManagerMetrics("podhealth-e2e")) })
	t.Cleanup(func() {
		cancel()
		done.Wait()
		factory.Shutdown()
	})
}

// volumePath is one way a StatefulSet pod with a ReadWriteOnce volume gets
// back from a node that was powered off.
type volumePath struct {
	name string
	// podhealth: podhealth-controller acts in the path's namespace.
	podhealth bool
	// adminTaintAfter: an admin taints the node out-of-service this long
	// after the power-off (0: no admin).
	adminTaintAfter time.Duration
	// cloud: the cloud reports the instance shut down at the power-off,
	// and podhealth-controller applies the out-of-service taint.
	cloud bool
	// deleteNode: the node's object is deleted at the power-off.
	deleteNode bool
}

// volumeRun is what one path measured.
type volumeRun struct {
	path volumePath
	// trigger is the evidence the path acts on: the admin's taint, the
	// cloud's shutdown taint as first seen, or the node's deletion.
	powerOff, trigger, oosTaint, oldGone, detached, attached, running time.Time
	multiAttach                                                       int
	// taintRemoved: podhealth-controller removed the taint it applied
	// once the node was back (zero when it applied none).
	taintRemoved time.Duration
}

// adminDelay is how long after a power-off the tests' admin applies the
// out-of-service taint: far sooner than a human, so that the figures from
// the taint on are what they compare.
const adminDelay = 15 * time.Second

// volumeEnv is one control plane with the volume path, the cloud
// node-lifecycle controller, the model attacher and podhealth-controller
// with --apply-out-of-service.
type volumeEnv struct {
	cp       *harness.ControlPlane
	c        kubernetes.Interface
	cloud    *shutdownCloud
	attacher *harness.Attacher
	log      *harness.ContainerLog
	targets  sync.Map // namespace → *atomic.Value of the node to bind its pods to
}

func startVolumeEnv(ctx context.Context, t *testing.T) *volumeEnv {
	t.Helper()
	cp := harness.Start(t, bins, harness.Options{Volumes: true})
	e := &volumeEnv{cp: cp, c: cp.Client(), cloud: newShutdownCloud(), log: &harness.ContainerLog{}}
	if err := cp.CreateCSIDriver(ctx); err != nil {
		t.Fatal(err)
	}
	e.attacher = cp.StartAttacher(ctx)
	startCloudNodeLifecycle(ctx, t, e.c, e.cloud)
	applyObjects(ctx, t, cp, append(controllerManifests(t), kustomizationObjects(t, controllerConfigDir+"/out-of-service")...), false)
	kubeconfig := controllerKubeconfig(ctx, t, cp)
	startControllerReplica(t, cp, "podhealth-controller", kubeconfig,
		"--shutdown-taint="+health.TaintCloudShutdown+"=2s", "--apply-out-of-service", "--breaker-min-unhealthy=10")
	// The model scheduler: each namespace's pods go to its path's target.
	go everyTick(ctx, 100*time.Millisecond, func() {
		e.targets.Range(func(k, v any) bool {
			ns := k.(string)
			pods, err := e.c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return true
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
					_ = cp.BindPod(ctx, ns, p.Name, v.(*atomic.Value).Load().(string))
				}
			}
			return true
		})
	})
	return e
}

// run takes one path from a running db-0 with its volume on node lost to
// the replacement running with the volume attached on node healthy, and
// back: the lost node powered on, its taint removed.
func (e *volumeEnv) run(ctx context.Context, t *testing.T, i int, p volumePath) volumeRun {
	t.Helper()
	ns := fmt.Sprintf("vol-%d", i)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if p.podhealth {
		nsObj.Labels = map[string]string{"podhealth.io/enabled": "true"}
	}
	if _, err := e.c.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lostNode, healthyNode := e.cp.AddNode(ctx, ns+"-lost"), e.cp.AddNode(ctx, ns+"-healthy")
	lost, healthy := e.cp.StartKubelet(lostNode, e.log), e.cp.StartKubelet(healthyNode, e.log)
	for _, n := range []*harness.Node{lostNode, healthyNode} {
		if _, err := harness.WaitForNode(ctx, e.c, n.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatal(err)
		}
	}
	var target atomic.Value
	target.Store(lostNode.Name())
	e.targets.Store(ns, &target)
	if err := e.cp.CreateVolume(ctx, ns, "data-db-0"); err != nil {
		t.Fatal(err)
	}
	template := soakPodTemplate("db", nil)
	template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}}
	if _, err := e.c.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: template,
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
	defer wcancel()
	first, err := e.waitRunning(wctx, ns, lostNode.Name(), "")
	if err != nil {
		t.Fatalf("%s: db-0 never ran on %s with its volume: %v", p.name, lostNode.Name(), err)
	}
	e.checkModels(ctx, t, ns, lostNode.Name(), first)
	target.Store(healthyNode.Name())
	pods, err := e.cp.WatchPods(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer pods.Stop()

	run := volumeRun{path: p, powerOff: time.Now()}
	lost.PowerOff("powered off")
	if p.cloud {
		e.cloud.setOff(lostNode.Name(), true)
	}
	if p.deleteNode {
		if err := e.c.CoreV1().Nodes().Delete(ctx, lostNode.Name(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		run.trigger = time.Now()
	}
	if p.adminTaintAfter > 0 {
		sleepCtx(ctx, time.Until(run.powerOff.Add(p.adminTaintAfter)))
		if err := e.cp.AddNodeTaint(ctx, lostNode.Name(), corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}); err != nil {
			t.Fatal(err)
		}
		run.trigger = time.Now()
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watched sync.WaitGroup
	watched.Go(func() { e.watchNode(watchCtx, lostNode.Name(), &run) })

	limit := 3 * time.Minute
	if p.deleteNode {
		limit = 10 * time.Minute
	}
	rctx, rcancel := context.WithTimeout(ctx, limit)
	defer rcancel()
	second, err := e.waitRunning(rctx, ns, healthyNode.Name(), first.UID)
	stopWatch()
	watched.Wait()
	if err != nil {
		t.Fatalf("%s: the replacement of db-0 never ran on %s with its volume: %v; attacher log %v", p.name, healthyNode.Name(), err, e.attacher.Events())
	}
	run.running = second.At
	e.fillFromLogs(ctx, t, ns, pods, &run, first, second, lostNode.Name(), healthyNode.Name())

	if !p.deleteNode {
		e.recover(ctx, t, lost, lostNode, &run)
	}
	e.targets.Delete(ns)
	// The path's healthy node leaves the cluster's work (its kubelet stops
	// syncing), and counts as not Ready from then on, one more each path:
	// the controller's Breaker needs ten.
	healthy.Partition("the path is over")
	return run
}

// checkModels checks, once db-0 runs on node, what the harness's models
// of the external-attacher and the kubelet must have done, as the real
// ones do: the VolumeAttachment that the attach-detach controller created
// carries the attacher's finalizer and status.attached, and the node lists
// the volume both as attached (the attach-detach controller's report) and
// as in use (the kubelet's, made before the container started).
func (e *volumeEnv) checkModels(ctx context.Context, t *testing.T, ns, node string, started harness.ContainerEvent) {
	t.Helper()
	vas, err := e.c.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := "pv-" + ns + "-data-db-0"
	found := false
	for _, va := range vas.Items {
		if ptr.Deref(va.Spec.Source.PersistentVolumeName, "") != pv || va.Spec.NodeName != node {
			continue
		}
		found = true
		if va.Spec.Attacher != harness.CSIDriverName || !va.Status.Attached || !slices.Contains(va.Finalizers, "external-attacher/csi-e2e-podhealth-io") {
			t.Errorf("VolumeAttachment %s: attacher %q, attached %v, finalizers %v; want the driver's, true, and the attacher's finalizer", va.Name, va.Spec.Attacher, va.Status.Attached, va.Finalizers)
		}
	}
	if !found {
		t.Errorf("no VolumeAttachment of %s to %s, though db-0 runs there", pv, node)
	}
	n, err := e.c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unique := harness.UniqueVolumeName("vol-" + ns + "-data-db-0")
	if !slices.Contains(n.Status.VolumesInUse, unique) || !slices.ContainsFunc(n.Status.VolumesAttached, func(a corev1.AttachedVolume) bool { return a.Name == unique }) {
		t.Errorf("node %s lists in use %v and attached %v, want %s in both", node, n.Status.VolumesInUse, n.Status.VolumesAttached, unique)
	}
	if !slices.Equal(started.Volumes, []corev1.UniqueVolumeName{unique}) {
		t.Errorf("db-0 started with volumes %v, want %s", started.Volumes, unique)
	}
}

// waitRunning waits for a container of a db-0 other than notUID to start
// on node, which the kubelet model does only with the pod's volume
// attached there, and returns its start.
func (e *volumeEnv) waitRunning(ctx context.Context, ns, node string, notUID types.UID) (harness.ContainerEvent, error) {
	var found harness.ContainerEvent
	err := pollUntil(ctx, func() bool {
		for _, ev := range e.log.Events() {
			if ev.Kind == harness.ContainerStarted && ev.Namespace == ns && ev.Pod == "db-0" && ev.Node == node && ev.UID != notUID && len(ev.Volumes) == 1 {
				found = ev
				return true
			}
		}
		return false
	})
	return found, err
}

// watchNode records when the node first carried the cloud's shutdown
// taint and the out-of-service taint.
func (e *volumeEnv) watchNode(ctx context.Context, name string, run *volumeRun) {
	for ctx.Err() == nil && (run.oosTaint.IsZero() || (run.path.cloud && run.trigger.IsZero())) {
		if n, err := e.c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			now := time.Now()
			for _, tt := range n.Spec.Taints {
				switch {
				case tt.Key == health.TaintCloudShutdown && run.path.cloud && run.trigger.IsZero():
					run.trigger = now
				case tt.Key == corev1.TaintNodeOutOfService && run.oosTaint.IsZero():
					run.oosTaint = now
				}
			}
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

// fillFromLogs reads when the old pod was gone, when the volume was
// detached from the lost node and attached to the healthy one, and how
// many Multi-Attach errors the replacement met.
func (e *volumeEnv) fillFromLogs(ctx context.Context, t *testing.T, ns string, pods *harness.PodWatch, run *volumeRun, first, second harness.ContainerEvent, lost, healthy string) {
	t.Helper()
	pv := "pv-" + ns + "-data-db-0"
	for _, a := range e.attacher.Events() {
		switch {
		case a.Volume == pv && a.Node == lost && a.Kind == harness.VolumeDetached && run.detached.IsZero():
			run.detached = a.At
		case a.Volume == pv && a.Node == healthy && a.Kind == harness.VolumeAttached && run.attached.IsZero():
			run.attached = a.At
		}
	}
	if run.attached.Before(run.detached) {
		t.Errorf("%s: %s attached to %s at %v, before its detach from %s at %v", run.path.name, pv, healthy, run.attached, lost, run.detached)
	}
	if _, err := e.c.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{}); err != nil {
		t.Errorf("%s: the replacement db-0: %v", run.path.name, err)
	}
	events, err := e.c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		// The attach-detach controller's FailedAttachVolume of a volume
		// attached elsewhere: "Multi-Attach error" while a pod there uses
		// it, "Waiting for detach" once none does (Kubernetes 1.37).
		if ev.InvolvedObject.UID == second.UID && ev.Reason == "FailedAttachVolume" && (strings.Contains(ev.Message, "Multi-Attach") || strings.Contains(ev.Message, "Waiting for detach")) {
			run.multiAttach += int(max(ev.Count, 1))
		}
	}
	if h, ok := pods.Pod(first.UID); ok {
		run.oldGone = h.Deleted
	}
}

// recover powers the lost node on again (the cloud reports it running) and
// waits until the out-of-service taint is off: removed by
// podhealth-controller when it applied it, else by the admin.
func (e *volumeEnv) recover(ctx context.Context, t *testing.T, lost *harness.Kubelet, node *harness.Node, run *volumeRun) {
	t.Helper()
	back := time.Now()
	e.cloud.setOff(node.Name(), false)
	lost.Connect("powered on")
	n, err := harness.WaitForNode(ctx, e.c, node.Name(), harness.NodeReadyIs(corev1.ConditionTrue))
	if err != nil {
		t.Fatal(err)
	}
	if run.path.cloud {
		if n.Annotations["podhealth.io/out-of-service-applied"] == "" && !hasNodeTaint(n, corev1.TaintNodeOutOfService) {
			if !run.oosTaint.IsZero() {
				run.taintRemoved = time.Since(back) // gone by the time the node was seen Ready
			}
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if _, err := harness.WaitForNode(rctx, e.c, node.Name(), func(n *corev1.Node) bool {
			return n != nil && !hasNodeTaint(n, corev1.TaintNodeOutOfService) && n.Annotations["podhealth.io/out-of-service-applied"] == ""
		}); err != nil {
			t.Errorf("%s: podhealth-controller did not remove the out-of-service taint it applied once %s was Ready and empty: %v", run.path.name, node.Name(), err)
			return
		}
		run.taintRemoved = time.Since(back)
		return
	}
	if run.path.adminTaintAfter > 0 {
		n, err := e.c.CoreV1().Nodes().Get(ctx, node.Name(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasNodeTaint(n, corev1.TaintNodeOutOfService) {
			t.Errorf("%s: the admin's out-of-service taint on %s is gone: podhealth removed a taint it did not apply", run.path.name, node.Name())
		}
	}
}

func hasNodeTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// cloudPathRuns is how many times the cloud path runs.
const cloudPathRuns = 5

// volumePaths are the paths TestStatefulRecoveryToTheVolume measures; the
// deleted Node, which waits out the attach-detach controller's 6 minutes,
// only with PODHEALTH_E2E_SLOW=1.
func volumePaths() []volumePath {
	paths := []volumePath{
		{name: "Kubernetes alone, an admin's out-of-service taint 15 s after the power-off", adminTaintAfter: adminDelay},
		{name: "podhealth-controller, an admin's out-of-service taint 15 s after the power-off", podhealth: true, adminTaintAfter: adminDelay},
	}
	// The new path, several times, for its p50 and max.
	for range cloudPathRuns {
		paths = append(paths, volumePath{name: "podhealth-controller --apply-out-of-service on the cloud's shutdown taint", podhealth: true, cloud: true})
	}
	if os.Getenv("PODHEALTH_E2E_SLOW") == "1" {
		paths = append(paths, volumePath{name: "podhealth-controller, the Node deleted at the power-off", podhealth: true, deleteNode: true})
	}
	return paths
}

// TestStatefulRecoveryToTheVolume: a StatefulSet pod with a ReadWriteOnce
// CSI volume, on a node that is powered off, runs again on another node
// with its volume attached there, on each path: Kubernetes alone with an
// admin's taint, podhealth-controller with the same taint, and
// podhealth-controller applying the taint itself on the cloud's word. The
// volume is never attached to the new node before it is detached from the
// old one. The cloud path needs no human, and podhealth-controller takes
// its taint off again once the node is back.
func TestStatefulRecoveryToTheVolume(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := startVolumeEnv(ctx, t)
	var runs []volumeRun
	for i, p := range volumePaths() {
		run := e.run(ctx, t, i, p)
		runs = append(runs, run)
		t.Logf("%s: %s", p.name, run.summary())
	}
	for _, r := range runs {
		switch {
		case r.path.cloud && r.oosTaint.IsZero():
			t.Errorf("%s: no out-of-service taint was applied", r.path.name)
		case r.path.cloud && r.trigger.IsZero():
			t.Errorf("%s: the cloud's shutdown taint was never seen", r.path.name)
		case r.path.cloud && r.taintRemoved == 0:
			t.Errorf("%s: the taint podhealth applied was not seen removed", r.path.name)
		}
	}
	writeVolumeFigures(t, runs)
}

func (r volumeRun) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trigger %v after the power-off", figSince(r.powerOff, r.trigger))
	if !r.oosTaint.IsZero() {
		fmt.Fprintf(&b, ", out-of-service %v after", figSince(r.powerOff, r.oosTaint))
	}
	fmt.Fprintf(&b, ", detached %v, attached elsewhere %v, running %v after; from the trigger to running %v; %d Multi-Attach or waiting-for-detach events",
		figSince(r.powerOff, r.detached), figSince(r.powerOff, r.attached), figSince(r.powerOff, r.running), figSince(r.trigger, r.running), r.multiAttach)
	if r.taintRemoved > 0 {
		fmt.Fprintf(&b, "; taint removed %v after the node was powered on", r.taintRemoved.Round(time.Millisecond))
	}
	return b.String()
}

func figSince(from, to time.Time) string {
	if from.IsZero() || to.IsZero() {
		return "—"
	}
	return figSec(to.Sub(from))
}

// volumeSection is TestStatefulRecoveryToTheVolume's section of FIGURES.md.
const volumeSection = "stateful recovery to the volume"

func writeVolumeFigures(t *testing.T, runs []volumeRun) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "## Stateful recovery, to the volume\n\n")
	fmt.Fprintf(&b, "Measured by `TestStatefulRecoveryToTheVolume` (`cd e2e && PODHEALTH_WRITE_FIGURES=1 go test -count=1 -run TestStatefulRecoveryToTheVolume -v .`; "+
		"`PODHEALTH_E2E_SLOW=1` adds the deleted Node) on %s: %s. One StatefulSet pod, db-0, with a ReadWriteOnce CSI volume (a CSIDriver with `attachRequired`; "+
		"the PV binder, attach-detach and StatefulSet controllers of kube-controller-manager; the harness's models of the external-attacher and of the kubelet, which lists a pod's volume in "+
		"the node's `volumesInUse` and starts the pod only once the volume is in its `volumesAttached`), on a node that is powered off. Node monitor grace period %v; the cloud node-lifecycle controller of "+
		"k8s.io/cloud-provider, in the test's process, every %v; podhealth-controller with `--shutdown-taint=%s=2s --apply-out-of-service --breaker-min-unhealthy=10` (each path leaves its healthy node behind, not Ready). Times are from the power-off; "+
		"the last column from the trigger (the admin's taint, the cloud's shutdown taint as first seen, the Node's deletion) to the replacement running with its volume.\n\n",
		time.Now().UTC().Format("2006-01-02"), fmt.Sprintf("%d CPUs, %s/%s, %s; 1-minute load average %s at the end", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), figLoadAverage()), harness.NodeMonitorGracePeriod, cloudMonitorPeriod, health.TaintCloudShutdown)
	fmt.Fprintf(&b, "| path | runs | trigger | out-of-service taint | old pod gone | detached | attached elsewhere | running | trigger → running: p50 | max | Multi-Attach / waiting-for-detach events |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	var order []string
	byPath := map[string][]volumeRun{}
	for _, r := range runs {
		if _, ok := byPath[r.path.name]; !ok {
			order = append(order, r.path.name)
		}
		byPath[r.path.name] = append(byPath[r.path.name], r)
	}
	for _, name := range order {
		rs := byPath[name]
		median := func(to func(volumeRun) time.Time, from func(volumeRun) time.Time) string {
			var ds []time.Duration
			for _, r := range rs {
				if !from(r).IsZero() && !to(r).IsZero() {
					ds = append(ds, to(r).Sub(from(r)))
				}
			}
			if len(ds) == 0 {
				return "—"
			}
			sorted, _, _ := harness.Durations(ds)
			return figSec(soakPercentile(sorted, 0.5))
		}
		off := func(r volumeRun) time.Time { return r.powerOff }
		var toRunning []time.Duration
		multi := 0
		for _, r := range rs {
			toRunning = append(toRunning, r.running.Sub(r.trigger))
			multi += r.multiAttach
		}
		sorted, _, worst := harness.Durations(toRunning)
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", name, len(rs),
			median(func(r volumeRun) time.Time { return r.trigger }, off), median(func(r volumeRun) time.Time { return r.oosTaint }, off),
			median(func(r volumeRun) time.Time { return r.oldGone }, off), median(func(r volumeRun) time.Time { return r.detached }, off),
			median(func(r volumeRun) time.Time { return r.attached }, off), median(func(r volumeRun) time.Time { return r.running }, off),
			figSec(soakPercentile(sorted, 0.5)), figSec(worst), multi)
	}
	var removed []time.Duration
	for _, r := range runs {
		if r.taintRemoved > 0 {
			removed = append(removed, r.taintRemoved)
		}
	}
	if len(removed) > 0 {
		sorted, _, worst := harness.Durations(removed)
		fmt.Fprintf(&b, "\nFor a path run more than once, each time from the power-off is the median over its runs. On the cloud path podhealth-controller removed each taint it applied once the node was powered on again and Ready: p50 %s, max %s after the power-on, over %d runs.\n", figSec(soakPercentile(sorted, 0.5)), figSec(worst), len(removed))
	}
	body := b.String()
	t.Log("\n" + body)
	if os.Getenv(figWriteEnv) != "1" || t.Failed() {
		return
	}
	if err := figWriteSection(figFiguresFile, volumeSection, body); err != nil {
		t.Fatal(err)
	}
}
