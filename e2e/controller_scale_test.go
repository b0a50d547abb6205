package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
)

// scaleEnv selects the size of TestControllerAtScale: unset, the reduced
// size CI runs; "1000" (or "full"), "2500" or "5000", that many nodes with
// 30 pods each, 100 pods to a namespace. They are run by hand, not in CI.
const scaleEnv = "PODHEALTH_CONTROLLER_SCALE"

// scaleSize is one size of the scale test.
type scaleSize struct {
	name                    string
	nodes, pods, namespaces int
	// heartbeat and grace are the nodes' heartbeat interval and the
	// node-lifecycle controller's grace period: thousands of nodes renewing
	// each second would cost the control plane more than the controller
	// does. The stretch slows only how soon a failed node is marked
	// unreachable (grace), and so how long each fault takes to show; the
	// controller reads the node's conditions and taints, which the
	// node-lifecycle controller writes as it would with a kubelet's 10 s.
	heartbeat, grace time.Duration
	// timeout bounds the whole run: the pods alone take a minute per
	// 10,000 or so to create.
	timeout time.Duration
}

var (
	scaleReduced = scaleSize{name: "reduced (CI)", nodes: 40, pods: 1200, namespaces: 12, heartbeat: time.Second, grace: harness.NodeMonitorGracePeriod, timeout: 40 * time.Minute}
	// Each heartbeat is two requests: the nodes renew about 80 times a
	// second at each size (1,000 every 25 s, 2,500 every 60 s, 5,000 every
	// 120 s), which leaves the API server room for the test, and a node is
	// unreachable after three heartbeats missed.
	scaleSizes = map[string]scaleSize{
		"1000": {name: "1000", nodes: 1000, pods: 30000, namespaces: 300, heartbeat: 25 * time.Second, grace: 75 * time.Second, timeout: 60 * time.Minute},
		"2500": {name: "2500", nodes: 2500, pods: 75000, namespaces: 750, heartbeat: 60 * time.Second, grace: 180 * time.Second, timeout: 120 * time.Minute},
		"5000": {name: "5000", nodes: 5000, pods: 150000, namespaces: 1500, heartbeat: 120 * time.Second, grace: 360 * time.Second, timeout: 240 * time.Minute},
	}
)

// scaleSizeFromEnv is the size scaleEnv names.
func scaleSizeFromEnv(t *testing.T) scaleSize {
	switch v := os.Getenv(scaleEnv); v {
	case "":
		return scaleReduced
	case "full":
		return scaleSizes["1000"]
	default:
		size, ok := scaleSizes[v]
		if !ok {
			t.Fatalf("%s=%q: want 1000 (or full), 2500 or 5000", scaleEnv, v)
		}
		return size
	}
}

// scaleMemoryBound is the resident memory past which the scale test fails
// at a size: 300 MiB at the reduced size and 1,000 nodes, and twice the
// goal's line (1.5 GiB at 150,000 pods, 10.5 KiB a pod) above that, so
// that only a cost that grows faster than the pods fails it.
func scaleMemoryBound(pods int) int64 {
	return max(300<<20, 2*int64(pods)*1536<<20/150000)
}

// heapProfileEnv names a file for TestControllerAtScale to write the
// controller's heap profile to at steady state (go tool pprof reads it).
const heapProfileEnv = "PODHEALTH_CONTROLLER_HEAP_PROFILE"

// cpuProfileEnv names a directory for TestControllerAtScale to write the
// controller's CPU profiles to, each over the 20 s from the start of a
// phase: one-node.pprof (one node fails) and recovery.pprof (the partial
// recovery).
const cpuProfileEnv = "PODHEALTH_CONTROLLER_CPU_PROFILES"

// scaleCPUProfile starts the controller's CPU profile of the phase, when
// cpuProfileEnv asks for it; the returned func waits for it and writes it.
func scaleCPUProfile(ctx context.Context, t *testing.T, replica controllerReplica, phase string) (wait func()) {
	dir := os.Getenv(cpuProfileEnv)
	if dir == "" {
		return func() {}
	}
	done := make(chan string, 1)
	go func() {
		profile, ok := httpGet(ctx, replica.pprofURL+"profile?seconds=20")
		if !ok {
			profile = ""
		}
		done <- profile
	}()
	return func() {
		profile := <-done
		if profile == "" {
			t.Errorf("reading the controller's CPU profile of %s from %s failed", phase, replica.pprofURL)
			return
		}
		if err := os.WriteFile(filepath.Join(dir, phase+".pprof"), []byte(profile), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// scalePodsPerOwner is how many pods share a (ReplicaSet) owner.
const scalePodsPerOwner = 3

// scalePod is a pod as a Deployment's ReplicaSet leaves it in a real
// cluster: labels and annotations, a container with environment, ports,
// probes, resources and mounts, the projected service-account volume, the
// default tolerations (2 s here, so the test need not wait 300 s).

// scaleStillDown is how many of the failed nodes stay down when the others
// recover (4 of 12 at the reduced size, as an admin's partial zone
// recovery leaves them).
const scaleStillDown = 4

// scaleNodesWithMostDeadPods returns the names of the want nodes among
// failed that hold the most pods the taint-eviction controller has
// deleted, and those pods.
func scaleNodesWithMostDeadPods(ctx context.Context, t *testing.T, c kubernetes.Interface, failed []*harness.Node, want int) (map[string]bool, []corev1.Pod) {
	t.Helper()
	evicted := harness.PodHasCondition(corev1.DisruptionTarget, corev1.ConditionTrue, "DeletionByTaintManager")
	byNode := map[string][]corev1.Pod{}
	for _, n := range failed {
		pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name()})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil && evicted(&p) {
				byNode[n.Name()] = append(byNode[n.Name()], p)
			}
		}
	}
	names := make([]string, 0, len(failed))
	for _, n := range failed {
		names = append(names, n.Name())
	}
	sort.SliceStable(names, func(i, j int) bool { return len(byNode[names[i]]) > len(byNode[names[j]]) })
	keep := map[string]bool{}
	var dead []corev1.Pod
	for _, name := range names[:min(want, len(names))] {
		keep[name] = true
		dead = append(dead, byNode[name]...)
	}
	return keep, dead
}

// Bounds of the scale test's timing figures: ten times or more their quiet
// values (0.017 cores; p99 104 ms at the full size, 9 ms at the reduced
// one), so that only a broken controller fails them. On a machine busy
// with a second CI run, the one-node p99 measured 1.45 s.
const (
	scaleCPUBound      = 0.5
	scaleGoneBound     = 10 * time.Second
	scaleRecoveryBound = 45 * time.Second
)

func scalePod(ns, name, owner, node string) *corev1.Pod {
	env := make([]corev1.EnvVar, 0, 12)
	for i := 0; i < 10; i++ {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", i), Value: fmt.Sprintf("value-%d-of-a-realistic-length", i)})
	}
	env = append(env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels:      map[string]string{"app.kubernetes.io/name": owner, "app.kubernetes.io/part-of": "shop", "pod-template-hash": "7d9f8c6b5"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080", "kubectl.kubernetes.io/restartedAt": "2026-11-30T10:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner + "-7d9f8c6b5",
				UID: types.UID("rs-" + ns + "-" + owner), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: "default",
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/shop/" + owner + ":v1.42.0",
				Args:  []string{"--listen=:8080", "--log-format=json"},
				Env:   env,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
				LivenessProbe: probe, ReadinessProbe: probe,
				VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				},
			}}}},
			Tolerations: harness.BoundPod(ns, name, node, 2).Spec.Tolerations,
		},
	}
	return pod
}

// TestControllerAtScale measures podhealth-controller on a real control
// plane with many nodes and pods (the reduced size in CI, 1,000, 2,500 or
// 5,000 nodes with PODHEALTH_CONTROLLER_SCALE): its start-up, and its CPU,
// resident memory and API writes with everything healthy; the namespaced
// mode's memory and start-up over a tenth of the namespaces; how soon the
// dead pods of one failed node are gone after DisruptionTarget; and that no
// force delete goes out while 30 % of the nodes are down, with the breaker
// metric saying so.
func TestControllerAtScale(t *testing.T) {
	t.Parallel()
	size := scaleSizeFromEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), size.timeout)
	defer cancel()
	account := "system:serviceaccount:" + controllerNamespace + ":" + controllerAccount
	cp := harness.Start(t, bins, harness.Options{
		AuditWritesBy:              []string{account},
		AuditRequestsBy:            []string{account},
		HeartbeatInterval:          size.heartbeat,
		NodeLeaseDuration:          size.grace,
		ExtraControllerManagerArgs: []string{"--node-monitor-grace-period=" + size.grace.String()},
	})
	c := cp.Client()
	start := time.Now()
	nodes := make([]*harness.Node, size.nodes)
	for i := range nodes {
		nodes[i] = cp.AddNode(ctx, fmt.Sprintf("node-%04d", i))
	}
	if err := pollUntil(ctx, func() bool { return scaleReadyNodes(ctx, c) == size.nodes }); err != nil {
		t.Fatalf("the nodes did not all become Ready: %v", err)
	}
	applyControllerManifests(ctx, t, cp, false)
	// A client of its own for the pods, so that the API server, not a
	// client-side rate limit, sets the pace.
	creator := cp.RESTConfig()
	creator.QPS, creator.Burst = 1000, 2000
	fast, err := kubernetes.NewForConfig(creator)
	if err != nil {
		t.Fatal(err)
	}
	createScalePods(ctx, t, fast, size)
	t.Logf("%d nodes and %d pods in %d namespaces ready in %v", size.nodes, size.pods, size.namespaces, time.Since(start).Round(time.Second))

	watch, err := cp.WatchPods(ctx, metav1.NamespaceAll)
	if err != nil {
		t.Fatal(err)
	}
	// One replica, measured: it renews its Lease as in production (every
	// 2 s), but keeps it through a minute of an API server too busy to
	// answer, as the suite's other scenarios beside it make this one; a
	// lost Lease would end the process, and the measurement with it.
	kubeconfig := controllerKubeconfig(ctx, t, cp)
	startedAt := time.Now()
	replica := startControllerReplica(t, cp, "a", kubeconfig,
		"--breaker-unhealthy-share=0.3", "--breaker-min-unhealthy=3", "--max-force-deletes=0", "--breaker-recheck-interval=10m",
		"--leader-election-lease-duration=75s", "--leader-election-renew-deadline=60s")
	if err := pollUntil(ctx, func() bool {
		_, ok := httpGet(ctx, replica.probeURL+"/readyz")
		return ok && logLinesWith(replica.op, "Successfully acquired lease") == 1
	}); err != nil {
		t.Fatalf("the controller did not become ready and leader: %v\n%s", err, replica.op.Log())
	}
	startup := measureStartUp(ctx, t, cp, replica, startedAt, size.pods/scalePodsPerOwner)
	t.Logf("start-up: %s", startup)
	// Let the start-up pass's last events settle.
	time.Sleep(15 * time.Second)

	// Steady state: everything healthy.
	const window = 30 * time.Second
	pid := replica.op.Pid()
	cpu0, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	writes0 := scaleWrites(t, cp)
	time.Sleep(window)
	cpu1, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	rss, err := procStatus(pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	peak, err := procStatus(pid, "VmHWM") // the peak, at the first list
	if err != nil {
		t.Fatal(err)
	}
	writes1 := scaleWrites(t, cp)
	// The Go heap that a collection found live, which the resident memory
	// holds about twice of (GOGC=100) besides the runtime's own.
	liveHeap, profile := scaleLiveHeap(ctx, t, replica)
	if path := os.Getenv(heapProfileEnv); path != "" {
		if err := os.WriteFile(path, []byte(profile), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cores := (cpu1 - cpu0).Seconds() / window.Seconds()
	steadyWrites := scaleDiff(writes1, writes0)
	t.Logf("steady state over %v: %.4f cores, RSS %d MiB (peak %d MiB, live heap %d MiB), writes %v", window, cores, rss>>20, peak>>20, liveHeap>>20, steadyWrites)
	// The goals (0.05 cores, 250 ms) are figures, written in FIGURES.md;
	// the test fails only past bounds ten times (or more) the quiet
	// figures, so that a busy machine passes and a broken controller (one
	// that polls, or misses the DELETE and waits for a resync) does not.
	if cores > scaleCPUBound {
		t.Errorf("steady state: %.4f cores, past the bound %v (goal 0.05, quiet 0.017)", cores, scaleCPUBound)
	}
	if bound := scaleMemoryBound(size.pods); rss > bound {
		t.Errorf("steady state: RSS %d MiB, past the bound %d MiB (goal: linear in the pods, 1.5 GiB at 150,000)", rss>>20, bound>>20)
	}
	for what, n := range steadyWrites {
		if !strings.HasPrefix(what, "leases ") {
			t.Errorf("steady state: %d writes %s, want none but leader election's", n, what)
		}
	}

	// The namespaced mode over a tenth of the namespaces.
	watched := make([]string, max(size.namespaces/10, 1))
	for i := range watched {
		watched[i] = fmt.Sprintf("shop-%03d", i)
	}
	nsRSS, nsHeap, nsStartup := scaleNamespacedMode(ctx, t, cp, watched, len(watched)*size.pods/size.namespaces/scalePodsPerOwner)
	unreadableNamespaceIsAReasonAndNoHold(ctx, t, cp, metav1.NamespaceSystem)

	// One node fails.
	failed := nodes[0]
	oneNodeBefore, _ := httpGet(ctx, replica.metricsURL)
	// The taint-eviction controller's DELETEs come a grace period after
	// the failure: profile from just before.
	var oneNodeProfile func()
	profileStarted := make(chan struct{})
	time.AfterFunc(size.grace-5*time.Second, func() {
		oneNodeProfile = scaleCPUProfile(ctx, t, replica, "one-node")
		close(profileStarted)
	})
	failed.Fail()
	var onFailed []types.UID
	pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + failed.Name()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		onFailed = append(onFailed, p.UID)
	}
	histories, err := watch.WaitFor(ctx, "the failed node's pods gone", func(ps []harness.PodHistory) bool {
		gone := 0
		for _, p := range ps {
			if p.NodeName == failed.Name() && !p.Deleted.IsZero() {
				gone++
			}
		}
		return gone == len(onFailed)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Two spans per dead pod: from DisruptionTarget, and from the
	// taint-eviction controller's DELETE (the pod's deletionTimestamp,
	// when the rules first call it dead). Between the two, the
	// controller-manager waits for its own client's rate limit (20
	// requests a second by default, shared by a condition PATCH and a
	// DELETE per pod), which no controller of the pods can shorten.
	var fromCondition, fromDeletion []time.Duration
	for _, p := range histories {
		if p.NodeName == failed.Name() && !p.Deleted.IsZero() && !p.Evicted.IsZero() && !p.Terminating.IsZero() {
			fromCondition = append(fromCondition, p.Deleted.Sub(p.Evicted))
			fromDeletion = append(fromDeletion, p.Deleted.Sub(p.Terminating))
		}
	}
	// The same span as the API server answered it (audit log): from the
	// taint-eviction controller's DELETE answered to the force DELETE
	// answered, the pod gone. The test's watch, an API client under the
	// same load, sees both later, each by its own delay.
	onFailedNode := map[string]bool{}
	for _, p := range histories {
		if p.NodeName == failed.Name() {
			onFailedNode[p.Name] = true
		}
	}
	var graceful map[string]time.Time
	var force map[string]harness.PodDelete
	_, err = cp.PodDeletesWhen(ctx, func(podDeletes []harness.PodDelete) bool {
		graceful, force = map[string]time.Time{}, map[string]harness.PodDelete{}
		for _, d := range podDeletes {
			switch {
			case !onFailedNode[d.Name] || d.Code != 200:
			case d.GracePeriodSeconds != nil && *d.GracePeriodSeconds == 0:
				force[d.Name] = d
			case graceful[d.Name].IsZero():
				graceful[d.Name] = d.Answered
			}
		}
		return len(graceful) == len(onFailed) && len(force) == len(onFailed)
	})
	if err != nil {
		t.Fatal(err)
	}
	// And the controller's own share of it: from the DELETE answered (the
	// pod's deletion, which its watch then brings) to its force DELETE
	// received. The test's watch, timed against the same force DELETE,
	// saw the deletion later than the controller did: a negative "share".
	var answered, share []time.Duration
	for name, d := range force {
		if from, ok := graceful[name]; ok {
			answered = append(answered, d.Answered.Sub(from))
			share = append(share, d.At.Sub(from))
		}
	}
	sortedShare, medianShare, _ := harness.Durations(share)
	p99Share := soakPercentile(sortedShare, 0.99)
	t.Logf("the controller's share (the DELETE answered -> its force DELETE received, audit): p50 %v, p99 %v of %d", medianShare, p99Share, len(share))
	sortedAnswered, medianAnswered, _ := harness.Durations(answered)
	p99Answered := soakPercentile(sortedAnswered, 0.99)
	t.Logf("as the API server answered them (audit): the DELETE answered -> the force DELETE answered: p50 %v, p99 %v of %d", medianAnswered, p99Answered, len(answered))
	if len(answered) != len(onFailed) {
		t.Errorf("the audit log holds a graceful and a force DELETE for %d of the failed node's %d pods", len(answered), len(onFailed))
	}
	sortedCondition, medianCondition, _ := harness.Durations(fromCondition)
	p99Condition := soakPercentile(sortedCondition, 0.99)
	sorted, median, _ := harness.Durations(fromDeletion)
	p99 := soakPercentile(sorted, 0.99)
	t.Logf("one node of %d failed: %d dead pods gone after DisruptionTarget p50 %v, p99 %v; after their deletion p50 %v, p99 %v",
		size.nodes, len(fromDeletion), medianCondition, p99Condition, median, p99)
	if len(fromDeletion) != len(onFailed) {
		t.Errorf("%d of the failed node's %d pods were seen with DisruptionTarget and deleting before they were gone", len(fromDeletion), len(onFailed))
	}
	if p99 > scaleGoneBound {
		t.Errorf("one failed node: deletion -> gone p99 %v, past the bound %v (goal 250 ms, quiet 9 ms at the reduced size)", p99, scaleGoneBound)
	}
	oneNodeAfter, _ := httpGet(ctx, replica.metricsURL)
	scaleWhereTheTimeWent(t, "one node failed", oneNodeBefore, oneNodeAfter)
	<-profileStarted
	oneNodeProfile()
	failed.Recover()
	if err := pollUntil(ctx, func() bool { return scaleReadyNodes(ctx, c) == size.nodes }); err != nil {
		t.Fatal(err)
	}

	// 30 % of the nodes fail at once: the Breaker opens, nothing is
	// force-deleted, and the metric says so.
	down := size.nodes * 3 / 10
	deletes0 := scaleWrites(t, cp)["pods delete"]
	for _, n := range nodes[1 : 1+down] {
		n.Fail()
	}
	if err := pollUntil(ctx, func() bool { return scaleReadyNodes(ctx, c) <= size.nodes-down }); err != nil {
		t.Fatal(err)
	}
	// The node controller marks the failed nodes not Ready one request at
	// a time, and taints and evicts the first ones before it has marked
	// them all; the Breaker counts the nodes whose Leases are stale too.
	var text string
	var openedAt time.Time
	if err := pollUntil(ctx, func() bool {
		var ok bool
		text, ok = httpGet(ctx, replica.metricsURL)
		return ok && metricValue(t, text, "podhealth_breaker_open", nil) == 1 &&
			metricValue(t, text, "podhealth_held_back_total", map[string]string{"reason": "HeldByBreaker"}) > 0
	}); err != nil {
		t.Fatalf("the breaker metric never said open: %v", err)
	}
	openedAt = time.Now()
	time.Sleep(20 * time.Second) // more nodes are tainted, at the node controller's rate
	text, _ = httpGet(ctx, replica.metricsURL)
	heldByBreaker := metricValue(t, text, "podhealth_held_back_total", map[string]string{"reason": "HeldByBreaker"})
	writes, err := cp.Writes()
	if err != nil {
		t.Fatal(err)
	}
	before, after := 0, 0
	for _, w := range writes {
		if w.Resource == "pods" && w.Verb == "delete" {
			switch {
			case !w.At.After(openedAt):
				before++
			default:
				after++
			}
		}
	}
	before -= deletes0
	t.Logf("%d of %d nodes down: %d force deletes before the breaker opened, %d after; breaker open %v; %v pod checks held back by the breaker",
		down, size.nodes, before, after, metricValue(t, text, "podhealth_breaker_open", nil), heldByBreaker)
	if after != 0 {
		t.Errorf("%d force deletes while the breaker was open, want 0", after)
	}
	// The failed nodes' Leases stopped together, so the Breaker opens
	// before the node-lifecycle controller has marked them all, and before
	// the first eviction.
	if before != 0 {
		t.Errorf("%d force deletes after %d nodes failed, before the breaker metric said open; want 0", before, down)
	}
	breakerDeletes := after

	// A partial recovery: all but the failed nodes with the most dead pods
	// come back, the Breaker may let go, and the dead pods of the nodes
	// still down must go at once, not at the cache's resync (hours).
	stillDown, dead := scaleNodesWithMostDeadPods(ctx, t, c, nodes[1:1+down], scaleStillDown)
	if len(dead) == 0 {
		t.Fatalf("no dead pod on the %d failed nodes to recover", down)
	}
	// The Breaker may close as soon as the first of them is back: the
	// recovery is timed from then.
	recoveryProfile := scaleCPUProfile(ctx, t, replica, "recovery")
	reconcilesText, _ := httpGet(ctx, replica.metricsURL)
	reconcilesBefore := metricValue(t, reconcilesText, "controller_runtime_reconcile_total", map[string]string{"controller": "podhealth"})

	recoveredAt := time.Now()
	for _, n := range nodes[1 : 1+down] {
		if !stillDown[n.Name()] {
			n.Recover()
		}
	}
	var closedAt time.Time
	if err := pollUntil(ctx, func() bool {
		text, ok := httpGet(ctx, replica.metricsURL)
		if !ok || metricValue(t, text, "podhealth_breaker_open", nil) == 1 {
			return false
		}
		closedAt = time.Now()
		return true
	}); err != nil {
		t.Fatalf("the breaker metric never returned to 0 after %d of %d failed nodes recovered: %v", down-len(stillDown), down, err)
	}
	// Until a recovered node has reported, nothing tells it from the nodes
	// still down: its taint-evicted pods are dead to the rules, and a
	// kubelet reports only at its next status update (within 10 s). So the
	// recovery that measures the controller starts once the last of them
	// has reported and the Breaker has let go.
	var lastReported time.Time
	if err := pollUntil(ctx, func() bool {
		lastReported = time.Time{}
		for _, n := range nodes[1 : 1+down] {
			if stillDown[n.Name()] {
				continue
			}
			at := n.ReportedAt()
			if at.IsZero() {
				return false
			}
			if at.After(lastReported) {
				lastReported = at
			}
		}
		return true
	}); err != nil {
		t.Fatalf("the %d recovered nodes did not all report: %v", down-len(stillDown), err)
	}
	settledAt := lastReported
	if closedAt.After(settledAt) {
		settledAt = closedAt
	}
	// When each was gone, from the pod watch: a GET per pod and poll
	// through the test's rate-limited client would time the client.
	var goneAt time.Time
	if _, err := watch.WaitFor(ctx, "the dead pods of the nodes still down gone", func([]harness.PodHistory) bool {
		goneAt = time.Time{}
		for _, p := range dead {
			h, ok := watch.Pod(p.UID)
			if !ok || h.Deleted.IsZero() {
				return false
			}
			if h.Deleted.After(goneAt) {
				goneAt = h.Deleted
			}
		}
		return true
	}); err != nil {
		t.Fatalf("the dead pods of the %d nodes still down were not removed after the Breaker closed: %v", len(stillDown), err)
	}
	// closedAt is when a scrape first saw 0, which may come after the last
	// pod was gone: then the pods were gone "0 ms" after it; the same for
	// the last report.
	recoveryGone, recoveryAfterClose := goneAt.Sub(recoveredAt), max(goneAt.Sub(closedAt), 0)
	recoveryAfterSettled := max(goneAt.Sub(settledAt), 0)
	recoveryProfile()
	recoveryText, _ := httpGet(ctx, replica.metricsURL)
	scaleWhereTheTimeWent(t, "the recovery", reconcilesText, recoveryText)
	// Where the time went: the controller's force DELETEs of those pods as
	// the API server received them (audit log), against the test's watch,
	// and the groups it judged since the recovery began.
	if recoveryWrites, err := cp.Writes(); err == nil {
		var lastDelete time.Time
		deleted := 0
		for _, w := range recoveryWrites {
			for _, p := range dead {
				if w.Resource == "pods" && w.Verb == "delete" && w.Name == p.Name && w.At.After(recoveredAt) {
					deleted++
					if w.At.After(lastDelete) {
						lastDelete = w.At
					}
				}
			}
		}
		text, _ := httpGet(ctx, replica.metricsURL)
		t.Logf("recovery: %d force DELETEs of those pods received, the last %v after the recovery began (the watch saw the last gone %v after); %v groups judged since it began, %v still queued",
			deleted, lastDelete.Sub(recoveredAt).Round(time.Millisecond), recoveryGone.Round(time.Millisecond),
			metricValue(t, text, "controller_runtime_reconcile_total", map[string]string{"controller": "podhealth"})-reconcilesBefore, metricValue(t, text, "workqueue_depth", map[string]string{"name": "podhealth"}))
	}
	t.Logf("%d of %d failed nodes recovering: the Breaker metric 0 after %v, the last of them reported after %v; the %d dead pods of the %d nodes still down gone %v after the recovery began, %v after the metric said 0, %v after both",
		down-len(stillDown), down, closedAt.Sub(recoveredAt).Round(time.Millisecond), lastReported.Sub(recoveredAt).Round(time.Millisecond),
		len(dead), len(stillDown), recoveryGone.Round(time.Millisecond), recoveryAfterClose.Round(time.Millisecond), recoveryAfterSettled.Round(time.Millisecond))
	// The goal, 5 s, is a figure (quiet: 1.3 s for 109 pods); on a machine
	// busy with a second CI run it measured 13.4 s. The bound proves the
	// way back: it is below the re-check interval (raised to 10 minutes
	// for this test), so only the node and Lease events can meet it.
	if recoveryAfterSettled > scaleRecoveryBound {
		t.Errorf("the dead pods of the nodes still down were gone %v after podhealth_breaker_open returned to 0 and the recovered nodes had reported, past the bound %v (goal 5 s)", recoveryAfterSettled, scaleRecoveryBound)
	}
	if err := pollUntil(ctx, func() bool { return scaleReadyNodes(ctx, c) == size.nodes-len(stillDown) }); err != nil {
		t.Fatal(err)
	}
	writes, err = cp.Writes()
	if err != nil {
		t.Fatal(err)
	}
	whileOpen := 0
	for _, w := range writes {
		if w.Resource == "pods" && w.Verb == "delete" && w.At.After(openedAt) && w.At.Before(recoveredAt) {
			whileOpen++
		}
	}
	if whileOpen != 0 {
		t.Errorf("%d force deletes while %d of %d nodes were down and the Breaker open, want 0", whileOpen, down, size.nodes)
	}

	// A replica that lost its leader election was started again: the
	// figures after that are the new process's, and say so.
	if n := replica.op.Restarts(); n > 0 {
		t.Logf("the controller lost its leader election and was started again %d times: its CPU and memory figures are the last process's", n)
	}

	body := fmt.Sprintf("## podhealth-controller at scale\n\n"+
		"`TestControllerAtScale`, size %s (`%s=1000`, `2500` or `5000` run the larger ones), %s: %d nodes (harness nodes, heartbeat every %v, unreachable after %v), %d pods as a Deployment leaves them in %d namespaces, all labelled, %d pods per owner; %s.\n\n"+
		"| measured | value | goal |\n|---|---|---|\n"+
		"| start-up: caches synced; every group (%d) judged once (the CPU it used until then) | %s; %s (%s) | |\n"+
		"| start-up: the API requests it sent until then | %s | |\n"+
		"| steady state: CPU over %v | %.4f cores | 0.05 |\n"+
		"| steady state: resident memory (its peak, at the first list of every pod; the live Go heap) | %d MiB (peak %d MiB; heap %d MiB) | %s |\n"+
		"| steady state: API writes (leader election's Lease renewals left out) | %d | 0 |\n"+
		"| the namespaced mode (`--watch-namespaces`, a Role in each of %d namespaces of %d, %d pods): resident memory (the live Go heap); start-up to every group judged once (the CPU it used until then) | %d MiB (heap %d MiB); %s (%s) | |\n"+
		"| one node fails: its %d dead pods gone after the taint-eviction controller's DELETE | p50 %s, p99 %s | p99 250 ms |\n"+
		"| the same, as the API server answered them (audit log: the DELETE answered to the force DELETE answered; the test's watch sees each later, by its own delay) | p50 %s, p99 %s | |\n"+
		"| the controller's share of it: the DELETE answered to its force DELETE received (audit log) | p50 %s, p99 %s | |\n"+
		"| the same pods, gone after DisruptionTarget (the controller-manager's 20 requests/s come between) | p50 %s, p99 %s | |\n"+
		"| %d of %d nodes fail: force deletes while the breaker is open | %d (podhealth_breaker_open 1, %v checks held back; %d before it opened) | 0 |\n"+
		"| then all but %d recover: the %d dead pods of the nodes still down gone after the recovery began; after podhealth_breaker_open returned to 0; after that and the last recovered node's report (%s after the recovery began) | %s; %s; %s | within 5 s of both |\n",
		size.name, scaleEnv, time.Now().UTC().Format("2006-01-02"), size.nodes, size.heartbeat, size.grace, size.pods, size.namespaces, scalePodsPerOwner, "1-minute load average "+figLoadAverage()+" at the end",
		startup.groups, scaleSeconds(startup.synced), scaleSeconds(startup.judged), scaleSeconds(startup.cpu), startup.requests,
		window, cores, rss>>20, peak>>20, liveHeap>>20, scaleMemoryGoal(size.pods), scaleNonLease(steadyWrites), len(watched), size.namespaces, len(watched)*size.pods/size.namespaces, nsRSS>>20, nsHeap>>20, scaleSeconds(nsStartup.judged), scaleSeconds(nsStartup.cpu), len(fromDeletion), figMs(median), figMs(p99), figMs(medianAnswered), figMs(p99Answered), figMs(medianShare), figMs(p99Share), figMs(medianCondition), figMs(p99Condition),
		down, size.nodes, breakerDeletes, heldByBreaker, before,
		len(stillDown), len(dead), scaleSeconds(lastReported.Sub(recoveredAt)), figMs(recoveryGone), figMs(recoveryAfterClose), figMs(recoveryAfterSettled))
	t.Log("\n" + body)
	if os.Getenv(figWriteEnv) == "1" && !t.Failed() {
		section := "controller-scale-" + strings.Fields(size.name)[0]
		if err := figWriteSection(figFiguresFile, section, body); err != nil {
			t.Fatal(err)
		}
	}
}

// scaleNamespacedMode runs a second podhealth-controller in the namespaced
// mode over namespaces, installed as docs/controller.md's overlay installs
// it (prefixed "ns-", so that it sits next to the first): a RoleBinding in
// each of namespaces only and a ClusterRole that reads nodes. It must get
// ready (its caches synced) with those rights alone, which a cache of
// every pod or a watch of Namespaces would not, and without one
// "forbidden" in its log. It runs in dry run and without leader election,
// so that it never acts for the first; it returns its resident memory and
// live Go heap once settled, and how soon its groups (that many) were all
// judged once, and stops.
// scaleLiveHeap returns the Go heap that a collection run now found live
// in replica, and replica's heap profile. The profile's gc=1 runs that
// collection: at steady state the last one may be minutes old, and its
// figure that of a busier moment (a 5,000-node run read 534 MiB from it,
// 402 MiB after a collection).
func scaleLiveHeap(ctx context.Context, t *testing.T, replica controllerReplica) (int64, string) {
	t.Helper()
	profile, ok := httpGet(ctx, replica.pprofURL+"heap?gc=1")
	if !ok {
		t.Fatalf("reading the controller's heap profile from %s failed", replica.pprofURL)
	}
	text, _ := httpGet(ctx, replica.metricsURL)
	return int64(metricValue(t, text, "go_gc_heap_live_bytes", nil)), profile
}

func scaleNamespacedMode(ctx context.Context, t *testing.T, cp *harness.ControlPlane, namespaces []string, groups int) (rss, liveHeap int64, startup scaleStartUp) {
	t.Helper()
	applyObjects(ctx, t, cp, namespacedManifests(t, "ns-", namespaces), false)
	kubeconfig := accountKubeconfig(ctx, t, cp, "ns-"+controllerAccount)
	startedAt := time.Now()
	replica := startControllerReplica(t, cp, "namespaced", kubeconfig,
		"--watch-namespaces="+strings.Join(namespaces, ","), "--leader-elect=false", "--dry-run")
	defer func() {
		if err := replica.op.Stop(); err != nil {
			t.Errorf("stopping the namespaced controller: %v", err)
		}
	}()
	// Its caches sync in seconds, or never (a request its RBAC refuses):
	// two minutes tell.
	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := pollUntil(readyCtx, func() bool {
		_, ok := httpGet(readyCtx, replica.probeURL+"/readyz")
		return ok
	}); err != nil {
		t.Fatalf("the namespaced controller did not get ready with a Role in %d namespaces and a read-only ClusterRole: %v\n%s", len(namespaces), err, replica.op.Log())
	}
	startup = measureStartUp(ctx, t, nil, replica, startedAt, groups)
	time.Sleep(15 * time.Second)
	if lines := replica.op.LogLines("forbidden"); len(lines) > 0 {
		t.Errorf("the namespaced controller was refused requests its RBAC does not grant:\n%s", strings.Join(lines, "\n"))
	}
	rss, err := procStatus(replica.op.Pid(), "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	liveHeap, _ = scaleLiveHeap(ctx, t, replica)
	t.Logf("the namespaced mode, %d namespaces: RSS %d MiB, live heap %d MiB; start-up %s", len(namespaces), rss>>20, liveHeap>>20, startup)
	return rss, liveHeap, startup
}

// scaleStartUp is how a replica started: when its caches had synced
// (/readyz), when it had judged every group once, and what it asked of
// the API server until then.
type scaleStartUp struct {
	groups         int
	synced, judged time.Duration
	// cpu is the CPU time the replica used until it had judged every
	// group: far below judged, the wait was the API server's.
	cpu      time.Duration
	requests string // by verb and resource; empty without the audit
}

func (s scaleStartUp) String() string {
	out := fmt.Sprintf("caches synced after %v, %d groups judged once after %v, using %v of CPU", s.synced.Round(time.Millisecond), s.groups, s.judged.Round(time.Millisecond), s.cpu.Round(time.Millisecond))
	if s.requests != "" {
		out += "; requests: " + s.requests
	}
	return out
}

// measureStartUp waits until replica, started at startedAt, has judged
// each of groups once: every group is queued once its pod cache has
// listed (the start-up pass), so once /readyz says the caches synced and
// the queue is empty, with no reconcile running and at least groups done,
// each has been judged. With cp (whose AuditRequestsBy names the
// replica's user), it also counts the replica's requests until then.
func measureStartUp(ctx context.Context, t *testing.T, cp *harness.ControlPlane, replica controllerReplica, startedAt time.Time, groups int) scaleStartUp {
	t.Helper()
	s := scaleStartUp{groups: groups}
	if err := pollUntil(ctx, func() bool {
		_, ok := httpGet(ctx, replica.probeURL+"/readyz")
		return ok
	}); err != nil {
		t.Fatalf("the controller never got ready: %v", err)
	}
	s.synced = time.Since(startedAt)
	controller := map[string]string{"controller": "podhealth"}
	if err := pollUntil(ctx, func() bool {
		text, ok := httpGet(ctx, replica.metricsURL)
		return ok && metricValue(t, text, "controller_runtime_reconcile_total", controller) >= float64(groups) &&
			metricValue(t, text, "workqueue_depth", map[string]string{"name": "podhealth"}) == 0 &&
			metricValue(t, text, "controller_runtime_active_workers", controller) == 0
	}); err != nil {
		t.Fatalf("the controller did not judge its %d groups: %v", groups, err)
	}
	s.judged = time.Since(startedAt)
	cpu, err := procCPU(replica.op.Pid())
	if err != nil {
		t.Fatal(err)
	}
	s.cpu = cpu
	if cp == nil {
		return s
	}
	requests, err := cp.AuditedRequests()
	if err != nil {
		t.Fatal(err)
	}
	judgedAt := startedAt.Add(s.judged)
	count := map[string]int{}
	total := 0
	for _, r := range requests {
		if !r.At.Before(startedAt) && !r.At.After(judgedAt) {
			resource := r.Resource
			if resource == "" {
				resource = "(discovery)" // /api, /apis, /version
			}
			count[r.Verb+" "+resource]++
			total++
		}
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, count[k])
	}
	s.requests = fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
	return s
}

func scaleSeconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// scaleMemoryGoal is the goal for resident memory at a size: linear in the
// pods, 1.5 GiB at 150,000.
func scaleMemoryGoal(pods int) string {
	if pods <= 30000 {
		return "300 MiB"
	}
	return fmt.Sprintf("%d MiB", int64(pods)*1536/150000)
}

// unreadableNamespaceIsAReasonAndNoHold runs the namespaced mode's
// replica of scaleNamespacedMode (its RoleBinding in one namespace only)
// told to watch namespace, whose pods it may not list: its pod cache never
// syncs. It must say so, with the API server's refusal, at /readyz/caches;
// log the refusal that client-go retries every few seconds once, without
// a stack trace; and end within the harness' 10 s of SIGTERM, with status
// 0 (controller-runtime's manager alone does not return from Start while
// a cache has not synced).
func unreadableNamespaceIsAReasonAndNoHold(ctx context.Context, t *testing.T, cp *harness.ControlPlane, namespace string) {
	t.Helper()
	replica := startControllerReplica(t, cp, "namespaced-unreadable", accountKubeconfig(ctx, t, cp, "ns-"+controllerAccount),
		"--watch-namespaces="+namespace, "--leader-elect=false", "--dry-run")
	reasonCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var reason string
	if err := pollUntil(reasonCtx, func() bool {
		reason = httpGetAny(reasonCtx, replica.probeURL+"/readyz/caches")
		return strings.Contains(reason, "forbidden")
	}); err != nil {
		t.Fatalf("/readyz/caches of a controller that may not list the pods of %s does not say why it is not ready: %q\n%s", namespace, reason, replica.op.Log())
	}
	if !strings.Contains(reason, `in the namespace "`+namespace+`"`) {
		t.Errorf("the readiness reason does not name the namespace %s: %q", namespace, reason)
	}
	t.Logf("an unreadable namespace's readiness reason: %s", strings.TrimSpace(reason))
	// client-go retries the list with a backoff of about a second at
	// first: 15 s bring several refusals.
	time.Sleep(15 * time.Second)
	refusals := replica.op.LogLines("Failed to watch")
	if len(refusals) != 1 {
		t.Errorf("the repeated refusal was logged %d times in 15 s, want once:\n%s", len(refusals), strings.Join(refusals, "\n"))
	}
	if lines := replica.op.LogLines("stacktrace"); len(lines) > 0 {
		t.Errorf("log lines with stack traces:\n%s", strings.Join(lines, "\n"))
	}
	stopped := time.Now()
	if err := replica.op.Stop(); err != nil {
		t.Errorf("a controller whose cache never synced did not end cleanly within 10 s of SIGTERM: %v\n%s", err, replica.op.Log())
	}
	t.Logf("an unsynced controller ended %s after SIGTERM", time.Since(stopped).Round(time.Millisecond))
}

func scaleReadyNodes(ctx context.Context, c kubernetes.Interface) int {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return -1
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready
}

// createScalePods creates the namespaces (labelled) and their pods, spread
// over the nodes, reported Running and Ready as a kubelet would.
func createScalePods(ctx context.Context, t *testing.T, c kubernetes.Interface, size scaleSize) {
	t.Helper()
	for i := 0; i < size.namespaces; i++ {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("shop-%03d", i), Labels: map[string]string{"podhealth.io/enabled": "true"}}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				ns := fmt.Sprintf("shop-%03d", i%size.namespaces)
				owner := fmt.Sprintf("svc-%d", i/size.namespaces/scalePodsPerOwner)
				pod := scalePod(ns, fmt.Sprintf("%s-%d", owner, i), owner, fmt.Sprintf("node-%04d", i%size.nodes))
				created, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				if err == nil {
					now := metav1.Now()
					created.Status.Phase = corev1.PodRunning
					created.Status.StartTime = &now
					created.Status.PodIP = "10.1." + strconv.Itoa(i/250%250) + "." + strconv.Itoa(i%250+1)
					created.Status.Conditions = []corev1.PodCondition{
						{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
						{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
						{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
					}
					created.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, Image: pod.Spec.Containers[0].Image,
						ImageID: "registry.example/shop@sha256:0123456789abcdef", ContainerID: "containerd://" + strconv.Itoa(i),
						State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
					_, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < size.pods; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("creating the pods: %v", firstErr)
	}
}

// scaleWrites counts the controller's writes by resource and verb.
func scaleWrites(t *testing.T, cp *harness.ControlPlane) map[string]int {
	t.Helper()
	writes, err := cp.Writes()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, w := range writes {
		out[w.Resource+" "+w.Verb]++
	}
	return out
}

func scaleDiff(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func scaleNonLease(writes map[string]int) int {
	n := 0
	for k, v := range writes {
		if !strings.HasPrefix(k, "leases ") {
			n += v
		}
	}
	return n
}

// procCPU is the CPU time (user and system) of process pid so far.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields after
	// its closing parenthesis start with the state (field 3).
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %v %v", pid, err1, err2)
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}

// procStatus is a memory figure of process pid's /proc status (VmRSS,
// the resident memory; VmHWM, its peak), in bytes.
func procStatus(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// scaleHistogram is what a histogram of the controller's metrics counted
// between two scrapes: the samples, their sum, and the cumulative count
// at each bucket's upper bound.
type scaleHistogram struct {
	count, sum float64
	buckets    map[float64]float64
}

// scaleHistogramBetween reads the histogram family of the samples that
// match labels in the scrapes before and after.
func scaleHistogramBetween(t *testing.T, before, after, family string, labels map[string]string) scaleHistogram {
	t.Helper()
	read := func(text string) scaleHistogram {
		h := scaleHistogram{buckets: map[float64]float64{}}
		for _, m := range metricsMatching(t, text, family, labels) {
			hist := m.GetHistogram()
			h.count += float64(hist.GetSampleCount())
			h.sum += hist.GetSampleSum()
			for _, b := range hist.GetBucket() {
				h.buckets[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
		return h
	}
	b, a := read(before), read(after)
	out := scaleHistogram{count: a.count - b.count, sum: a.sum - b.sum, buckets: map[float64]float64{}}
	for upper, n := range a.buckets {
		out.buckets[upper] = n - b.buckets[upper]
	}
	return out
}

// String gives the samples, their mean, and the bucket bound that holds
// 99 % of them.
func (h scaleHistogram) String() string {
	if h.count == 0 {
		return "none"
	}
	bounds := make([]float64, 0, len(h.buckets))
	for upper := range h.buckets {
		bounds = append(bounds, upper)
	}
	slices.Sort(bounds)
	p99 := math.Inf(1)
	for _, upper := range bounds {
		if h.buckets[upper] >= 0.99*h.count {
			p99 = upper
			break
		}
	}
	return fmt.Sprintf("%.0f, mean %v, p99 at most %gs", h.count, time.Duration(h.sum/h.count*float64(time.Second)).Round(time.Microsecond), p99)
}

// scaleWhereTheTimeWent logs, between two scrapes of the controller's
// metrics, how long its groups waited in its queue and how long judging
// them took.
func scaleWhereTheTimeWent(t *testing.T, phase, before, after string) {
	t.Helper()
	queue := map[string]string{"name": "podhealth"}
	t.Logf("%s: groups waiting in the queue: %v; judging them: %v", phase,
		scaleHistogramBetween(t, before, after, "workqueue_queue_duration_seconds", queue),
		scaleHistogramBetween(t, before, after, "workqueue_work_duration_seconds", queue))
}
