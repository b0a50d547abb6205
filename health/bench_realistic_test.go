package health_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// This file measures a check over pods as a kubelet leaves them, next to
// the loop an operator writes by hand, and next to the least any check can
// do. It uses as little of package health as it can: New, Options{}, Check,
// and the PodSource and Deleter interfaces.

// realisticSizes are the pod counts of BenchmarkRealistic.
var realisticSizes = []int{10, 1_000, 10_000, 100_000}

// realisticNodes is how many nodes the pods are spread over. With 1% dead,
// the dead pods are those of one node, the one that failed.
const realisticNodes = 100

// realisticSeed fixes the pods' names, UIDs and order.
const realisticSeed = 14

// BenchmarkRealistic times, in every iteration and on the same pods, three
// loops:
//
//   - check: Checker.Check with the default Options (evidence=off), or with
//     node evidence and a Breaker (evidence=on, see realisticOptions);
//   - baseline: the loop an operator writes by hand (isPodDead below): a pod
//     without a deletionTimestamp is alive, one with it is dead when a
//     DisruptionTarget=True condition says the taint manager or the kubelet
//     removed it; dead pods go to the same Deleter, every time, since that
//     loop remembers nothing;
//   - one-field: one pass that reads each pod's deletionTimestamp and
//     nothing else, the least a check can read.
//
// The order of the three loops changes every iteration (all six orders in
// turn), so that each one follows each other one as often, and each loop's
// time is summed on its own. Each loop's time is the CPU time of the
// benchmark's thread (see cpuClock), so that other processes on a busy
// machine add little; wall-check/baseline is the same ratio on the wall
// clock, for comparison. The metrics are check-ns/pod, baseline-ns/pod,
// one-field-ns/pod, the ratios check/baseline and check/one-field, and the
// allocations of one Check (check-allocs/op, measured after the timed loop,
// over repeated checks; the baseline's are baseline-allocs/op). ns/op is the
// wall time of one iteration of all three loops and means little on its
// own.
//
// Small lists are repeated within an iteration (see realisticReps), so that
// reading the clock costs little next to what it measures.
//
// The pods are built once per size (see realisticPodSet) and listed, as a
// lister would, from a slice built before the check. With 1% dead, one check
// before the timed loop force-deletes them and every timed check finds them
// in the Checker's Memory, as with a lagging informer.
func BenchmarkRealistic(b *testing.B) {
	for _, evidence := range []bool{false, true} {
		for _, n := range realisticSizes {
			for _, deadPercent := range []int{0, 1} {
				b.Run(fmt.Sprintf("evidence=%s/dead=%d%%/pods=%d", onOff(evidence), deadPercent, n), func(b *testing.B) {
					benchmarkRealistic(b, n, deadPercent, evidence)
				})
			}
		}
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func benchmarkRealistic(b *testing.B, n, deadPercent int, evidence bool) {
	set := realisticPodSet(b, n)
	pods, dead := set.alive, 0
	if deadPercent > 0 {
		pods, dead = set.withDead, set.dead
	}
	deleter := &okDeleter{}
	checker, err := health.New(&sliceSource{pods: pods}, deleter, realisticOptions(evidence, deadPercent > 0))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	check := func() {
		if healthy, err := checker.Check(ctx); err != nil || !healthy {
			b.Fatalf("Check() = %v, %v; want true, nil", healthy, err)
		}
	}
	baseline := func() {
		if alive, err := isPodDeadLoop(ctx, pods, deleter); err != nil || alive != n-dead {
			b.Fatalf("baseline: %d alive, %v; want %d, nil", alive, err, n-dead)
		}
	}
	oneField := func() {
		if notDeleting := readDeletionTimestamps(pods); notDeleting != n-dead {
			b.Fatalf("one-field: %d pods without deletionTimestamp, want %d", notDeleting, n-dead)
		}
	}

	check() // deletes the dead pods; from now on the Memory knows them
	if got := deleter.deletes.Load(); got != int64(dead) {
		b.Fatalf("the first check force-deleted %d pods, want %d", got, dead)
	}

	reps := realisticReps(n)
	loops := [3]func(){check, baseline, oneField}
	var spent, wall [3]time.Duration
	iterations := 0
	runtime.LockOSThread() // for cpuClock
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for range b.N {
		for _, l := range realisticOrders[iterations%len(realisticOrders)] {
			start, startWall := cpuClock(), time.Now()
			for range reps {
				loops[l]()
			}
			spent[l] += cpuClock() - start
			wall[l] += time.Since(startWall)
		}
		iterations++
	}

	perPod := func(d time.Duration) float64 {
		return float64(d.Nanoseconds()) / float64(iterations*reps*n)
	}
	b.ReportMetric(perPod(spent[0]), "check-ns/pod")
	b.ReportMetric(perPod(spent[1]), "baseline-ns/pod")
	b.ReportMetric(perPod(spent[2]), "one-field-ns/pod")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "check/baseline")
	b.ReportMetric(float64(spent[0])/float64(spent[2]), "check/one-field")
	b.ReportMetric(float64(wall[0])/float64(wall[1]), "wall-check/baseline")
	b.ReportMetric(allocsPerCall(reps, check), "check-allocs/op")
	b.ReportMetric(allocsPerCall(reps, baseline), "baseline-allocs/op")
}

// realisticOrders are the six orders of check (0), baseline (1) and
// one-field (2).
var realisticOrders = [][3]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}}

// realisticReps is how many times one iteration runs each loop over n pods:
// enough for about 16,384 pods per timed stretch.
func realisticReps(n int) int {
	return max(1, (16384+n-1)/n)
}

// allocsPerCall returns the heap allocations of one call of f, on average
// over calls calls.
func allocsPerCall(calls int, f func()) float64 {
	calls = max(calls, 10)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(calls)
}

// isPodDeadLoop is the loop an operator writes by hand, as OLM's registry
// reconciler does: per pod, a list of checks that each say whether the pod
// is dead; a pod no check calls dead is alive; dead pods are force-deleted,
// and the workload is healthy if one pod is alive. It returns how many pods
// are alive.
func isPodDeadLoop(ctx context.Context, pods []*corev1.Pod, deleter *okDeleter) (alive int, err error) {
	var errs []error
	for _, pod := range pods {
		if !isPodDead(pod) {
			alive++
			continue
		}
		if err := deleter.forceDelete(ctx, pod); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return alive, fmt.Errorf("deleting dead pods: %v", errs)
	}
	return alive, nil
}

// deadPodChecks are the baseline's checks; each one first asks whether the
// pod has a deletionTimestamp.
var deadPodChecks = []func(*corev1.Pod) bool{isPodDeletedByTaintManager, isPodTerminatedByKubelet}

func isPodDead(pod *corev1.Pod) bool {
	for _, dead := range deadPodChecks {
		if dead(pod) {
			return true
		}
	}
	return false
}

func isPodDeletedByTaintManager(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	return hasDisruptionTargetWithReason(pod, "DeletionByTaintManager")
}

func isPodTerminatedByKubelet(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	return hasDisruptionTargetWithReason(pod, "TerminationByKubelet")
}

func hasDisruptionTargetWithReason(pod *corev1.Pod, reason string) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

// readDeletionTimestamps is the least a check can read: one field per pod.
// It returns how many pods have no deletionTimestamp.
func readDeletionTimestamps(pods []*corev1.Pod) int {
	n := 0
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// sliceSource lists a slice built beforehand, as a lister lists its cache.
type sliceSource struct{ pods []*corev1.Pod }

func (s *sliceSource) ListPods(context.Context) ([]*corev1.Pod, error) { return s.pods, nil }

// okDeleter accepts every force delete and counts them.
type okDeleter struct{ deletes atomic.Int64 }

func (d *okDeleter) ForceDelete(ctx context.Context, pod *corev1.Pod) error {
	return d.forceDelete(ctx, pod)
}

func (d *okDeleter) forceDelete(context.Context, *corev1.Pod) error {
	d.deletes.Add(1)
	return nil
}

// podSet is n pods in shuffled order, all alive, and the same list with the
// pods of one node (1%, at least one pod) taint-evicted.
type podSet struct {
	n        int
	alive    []*corev1.Pod
	withDead []*corev1.Pod
	dead     int
}

// lastPodSet keeps the pods of the size measured last: the sub-benchmarks
// of one size share them, and only one size is kept at a time.
var lastPodSet *podSet

// realisticPodSet returns n pods as a kubelet leaves them: each decoded from
// testdata/real-cluster (pod-alive.json, and pod-taint-evicted.json for the
// dead ones), deep-copied into an object of its own, and completed as the
// ReplicaSet controller, the scheduler and the kubelet complete a running
// pod. Pod i runs on node i%100; the pods of node 0 are the dead ones. The
// list is shuffled with a fixed seed, as an informer's cache returns pods in
// no particular order.
func realisticPodSet(tb testing.TB, n int) *podSet {
	tb.Helper()
	if lastPodSet != nil && lastPodSet.n == n {
		return lastPodSet
	}
	lastPodSet = nil
	runtime.GC() // the previous size's pods

	alive := decodeRealClusterPod(tb, "pod-alive.json")
	evicted := decodeRealClusterPod(tb, "pod-taint-evicted.json")
	rng := rand.New(rand.NewPCG(realisticSeed, uint64(n)))
	set := &podSet{n: n, alive: make([]*corev1.Pod, n), withDead: make([]*corev1.Pod, n)}
	for i := range n {
		pod := alive.DeepCopy()
		completeAsKubelet(pod, i, rng)
		set.alive[i], set.withDead[i] = pod, pod
		if i%realisticNodes == 0 {
			dead := evicted.DeepCopy()
			completeAsKubelet(dead, i, rng)
			markTaintEvicted(dead)
			set.withDead[i] = dead
			set.dead++
		}
	}
	// The same order for both lists.
	rng.Shuffle(n, func(i, j int) {
		set.alive[i], set.alive[j] = set.alive[j], set.alive[i]
		set.withDead[i], set.withDead[j] = set.withDead[j], set.withDead[i]
	})
	lastPodSet = set
	return set
}

func decodeRealClusterPod(tb testing.TB, file string) *corev1.Pod {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "real-cluster", file))
	if err != nil {
		tb.Fatal(err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(data, &pod); err != nil {
		tb.Fatal(err)
	}
	return &pod
}

const (
	replicaSetName   = "registry-6d8f7b9c5d"
	podTemplateHash  = "6d8f7b9c5d"
	registryImageID  = "quay.io/example/registry@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
	nameSuffixLetter = "bcdfghjklmnpqrstvwxz2456789" // the letters of generated names
)

// completeAsKubelet turns the i-th copy of a pod that the API server
// returned bound and untouched into a running pod of a Deployment, as the
// ReplicaSet controller and the kubelet leave it: a unique name and UID, an
// owner reference, five conditions, IPs, a start time and a running
// container's status.
func completeAsKubelet(pod *corev1.Pod, i int, rng *rand.Rand) {
	node := i % realisticNodes
	created := pod.CreationTimestamp.Add(time.Duration(i) * 37 * time.Millisecond).Truncate(time.Second)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(created.Add(d)) }

	suffix := make([]byte, 5) // unique for up to 27^5 pods
	for k, x := 0, i; k < len(suffix); k, x = k+1, x/len(nameSuffixLetter) {
		suffix[k] = nameSuffixLetter[x%len(nameSuffixLetter)]
	}
	pod.Name = replicaSetName + "-" + string(suffix)
	pod.GenerateName = replicaSetName + "-"
	pod.UID = types.UID(fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x",
		rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xfff, rng.Uint32()&0x3fff|0x8000, rng.Uint64()&0xffffffffffff))
	pod.ResourceVersion = fmt.Sprint(1000 + 3*i)
	pod.CreationTimestamp = at(0)
	pod.Labels["pod-template-hash"] = podTemplateHash
	pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: replicaSetName,
		UID:        "8a1c6e2f-3b7d-4c59-9e0a-52f6d1b4c7e8",
		Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
	}}
	pod.Spec.NodeName = fmt.Sprintf("worker-%02d", node)

	hostIP := fmt.Sprintf("192.168.%d.%d", node/200, 10+node%200)
	podIP := fmt.Sprintf("10.%d.%d.%d", 128+node, (i/realisticNodes)/250, 2+(i/realisticNodes)%250)
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: at(3 * time.Second)},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at(time.Second)},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(6 * time.Second)},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at(6 * time.Second)},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(0)},
		},
		HostIP:    hostIP,
		HostIPs:   []corev1.HostIP{{IP: hostIP}},
		PodIP:     podIP,
		PodIPs:    []corev1.PodIP{{IP: podIP}},
		StartTime: ptrTo(at(time.Second)),
		ContainerStatuses: []corev1.ContainerStatus{{
			Name:         "registry",
			State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(5 * time.Second)}},
			Ready:        true,
			Image:        "quay.io/example/registry:v1",
			ImageID:      registryImageID,
			ContainerID:  fmt.Sprintf("containerd://%016x%016x%016x%016x", rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64()),
			Started:      ptrTo(true),
			RestartCount: 0,
		}},
		QOSClass: corev1.PodQOSBestEffort,
	}
}

// markTaintEvicted gives a completed pod what its node's failure gave the
// pod in pod-taint-evicted.json: the node-lifecycle controller marks it not
// Ready, and the taint-eviction controller appends DisruptionTarget=True
// reason DeletionByTaintManager and deletes it gracefully.
func markTaintEvicted(pod *corev1.Pod) {
	evictedAt := metav1.NewTime(pod.CreationTimestamp.Add(20 * time.Minute))
	deleting := metav1.NewTime(evictedAt.Add(2 * time.Second))
	grace := int64(30)
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &deleting, &grace
	pod.Generation = 2
	for k := range pod.Status.Conditions {
		if pod.Status.Conditions[k].Type == corev1.PodReady {
			pod.Status.Conditions[k].Status = corev1.ConditionFalse
			pod.Status.Conditions[k].LastTransitionTime = evictedAt
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		LastTransitionTime: evictedAt, Reason: "DeletionByTaintManager",
		Message: "Taint manager: deleting due to NoExecute taint",
	})
}

func ptrTo[T any](v T) *T { return &v }

// realisticOptions are the Options of BenchmarkRealistic's checker: the
// defaults, or with evidence node evidence as an operator wires it, a node
// cache (Options.Nodes) and a live client (Options.LiveNodes) over the
// pods' 100 nodes, and a Breaker listing them. All nodes are Ready, except,
// when failed, worker-00, the node of the dead pods, which the
// node-lifecycle controller marked not Ready and unreachable.
func realisticOptions(evidence, failed bool) health.Options {
	if !evidence {
		return health.Options{}
	}
	nodes := make([]*corev1.Node, realisticNodes)
	for i := range nodes {
		ready := corev1.ConditionTrue
		var taints []corev1.Taint
		if failed && i == 0 {
			ready = corev1.ConditionUnknown
			taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
		}
		nodes[i] = &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("worker-%02d", i),
				Labels: map[string]string{corev1.LabelTopologyZone: fmt.Sprintf("zone-%c", 'a'+i%3)},
			},
			Spec:   corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
		}
	}
	cache, live := fake.NewNodes(nodes...), fake.NewNodes(nodes...)
	return health.Options{Nodes: cache, LiveNodes: live, Breaker: health.Breaker{Nodes: cache}}
}

// TestRealisticPodsAreAsTheBenchmarkSays checks the pods and the loops of
// BenchmarkRealistic on 1,000 pods: their shape, and that Check, the
// baseline and the one-field loop agree on which are alive.
func TestRealisticPodsAreAsTheBenchmarkSays(t *testing.T) {
	const n = 1_000
	set := realisticPodSet(t, n)
	if set.dead != n/realisticNodes {
		t.Fatalf("%d dead pods, want %d", set.dead, n/realisticNodes)
	}
	names, uids, nodes := map[string]bool{}, map[types.UID]bool{}, map[string]bool{}
	for i, pod := range set.withDead {
		names[pod.Name], uids[pod.UID], nodes[pod.Spec.NodeName] = true, true, true
		if pod == set.alive[i] {
			if pod.Status.Phase != corev1.PodRunning || len(pod.Status.Conditions) != 5 || pod.DeletionTimestamp != nil {
				t.Fatalf("live pod %s: phase %s, %d conditions, deletionTimestamp %v", pod.Name, pod.Status.Phase, len(pod.Status.Conditions), pod.DeletionTimestamp)
			}
		} else if pod.DeletionTimestamp == nil || len(pod.Status.Conditions) != 6 || pod.Spec.NodeName != "worker-00" {
			t.Fatalf("dead pod %s: deletionTimestamp %v, %d conditions, node %s", pod.Name, pod.DeletionTimestamp, len(pod.Status.Conditions), pod.Spec.NodeName)
		}
		if len(pod.OwnerReferences) != 1 || len(pod.Status.ContainerStatuses) != 1 || pod.Status.PodIP == "" || pod.Status.StartTime == nil {
			t.Fatalf("pod %s is not completed as a kubelet completes it", pod.Name)
		}
	}
	if len(names) != n || len(uids) != n || len(nodes) != realisticNodes {
		t.Fatalf("%d names, %d UIDs, %d nodes; want %d, %d, %d", len(names), len(uids), len(nodes), n, n, realisticNodes)
	}

	ctx := context.Background()
	for _, evidence := range []bool{false, true} {
		// The dead pods' deadline is in the past on the real clock, so they
		// are dead without node evidence too; with it, their node is down.
		for _, pod := range set.withDead {
			if pod.DeletionTimestamp != nil && !pod.DeletionTimestamp.Time.Before(time.Now()) {
				t.Fatalf("dead pod %s is deleted at %v, not yet past", pod.Name, pod.DeletionTimestamp)
			}
		}
		deleter := &okDeleter{}
		checker, err := health.New(&sliceSource{pods: set.withDead}, deleter, realisticOptions(evidence, true))
		if err != nil {
			t.Fatal(err)
		}
		r, err := checker.CheckReport(ctx)
		if err != nil || !r.Healthy {
			t.Fatalf("evidence %v: CheckReport() = %v, %v", evidence, r.Healthy, err)
		}
		if got, want := r.Count(health.Dead), set.dead; got != want {
			t.Fatalf("evidence %v: %d pods dead, want %d", evidence, got, want)
		}
		if got, want := r.CountOutcome(health.ForceDeleted), set.dead; got != want {
			t.Fatalf("evidence %v: %d pods force-deleted, want %d", evidence, got, want)
		}
		for range 2 {
			if healthy, err := checker.Check(ctx); err != nil || !healthy {
				t.Fatalf("evidence %v: Check() = %v, %v", evidence, healthy, err)
			}
		}
		if got := deleter.deletes.Load(); got != int64(set.dead) {
			t.Fatalf("evidence %v: three checks force-deleted %d pods, want %d once", evidence, got, set.dead)
		}
		alive, err := health.New(&sliceSource{pods: set.alive}, &okDeleter{}, realisticOptions(evidence, false))
		if err != nil {
			t.Fatal(err)
		}
		if r, err := alive.CheckReport(ctx); err != nil || r.Count(health.Alive) != n {
			t.Fatalf("evidence %v: %d of %d pods alive, %v", evidence, r.Count(health.Alive), n, err)
		}
	}
	baselineDeleter := &okDeleter{}
	if alive, err := isPodDeadLoop(ctx, set.withDead, baselineDeleter); err != nil || alive != n-set.dead || baselineDeleter.deletes.Load() != int64(set.dead) {
		t.Fatalf("baseline: %d alive, %d deleted, %v", alive, baselineDeleter.deletes.Load(), err)
	}
	if got := readDeletionTimestamps(set.withDead); got != n-set.dead {
		t.Fatalf("one-field: %d", got)
	}
}
