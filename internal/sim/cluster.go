//go:build go1.25

package sim

import (
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/selffence"
)

// Kubernetes' times, as its components use them by default.
const (
	heartbeatEvery      = 10 * time.Second // the kubelet's nodeStatusUpdateFrequency
	nodeMonitorGrace    = 40 * time.Second // node-monitor-grace-period
	nodeMonitorPeriod   = 5 * time.Second  // node-monitor-period
	tolerationSeconds   = 300              // DefaultTolerationSeconds' unreachable toleration
	terminationGrace    = 30               // a pod's terminationGracePeriodSeconds
	kubeletSyncEvery    = time.Second      // how soon a kubelet acts on what it learns
	statefulSetEvery    = time.Second      // how soon the StatefulSet controller recreates a pod
	restartBackoffFirst = 10 * time.Second // the kubelet's container restart backoff
	restartBackoffMax   = 300 * time.Second
	namespace           = "db"
	setName             = "db"
	// replicas: db-0 and db-1 are the primary's candidates, which hold
	// the Lease in turn and write the data while they hold it; db-2 is a
	// replica, which writes its own volume without the Lease.
	replicas       = 3
	replicaOrdinal = 2
	primaryLease   = "db-primary"
)

// node is a machine with a kubelet.
type node struct {
	name        string
	powered     bool
	partitioned bool // cut off from the API server
	lostForGood bool // powered off, never to return
	kubeletUp   bool
	frozen      bool
	// known are the pods the kubelet knows it runs, by UID.
	known map[string]*podRun
}

// podRun is a pod as its node runs it: its containers' processes.
type podRun struct {
	pod        *corev1.Pod // as the kubelet learned it
	node       *node
	ordinal    int
	deleting   bool // the kubelet learned that the pod is being deleted
	containers []*container
	// answer holds the sidecar's answer whether the workload may write (a
	// func() bool); nil while nothing answers. The sidecar's goroutine
	// sets it.
	answer *atomic.Value
	// live holds the sidecar's answer to the workload's liveness probe,
	// GET /live (a func() bool); nil while nothing answers.
	live *atomic.Value
	// sidecar is the container that answers.
	sidecar *container
}

// container is one container of a pod, and its current process.
type container struct {
	name     string
	kind     containerKind
	proc     *process
	restarts int
	// startAt is when the kubelet starts it again, after a death.
	startAt time.Duration
	started time.Duration
	// canWrite reports whether the current process writes, or may write,
	// now; nil for one that never writes (the sidecar).
	canWrite func() bool
	// probeFailed: the kubelet is stopping the container for a failed
	// liveness probe.
	probeFailed bool
	// startedUp: its startup probe passed, as the kubelet remembers it
	// (in memory: a restarted kubelet probes again). Only the probes of
	// Mutations.StartupProbe have one.
	startedUp bool
	// guard is the current process's Guard (a writer's own, or the
	// sidecar's once it serves), for the oracle.
	guard atomic.Pointer[selffence.Guard]
}

// held reports whether the current process's Guard has held the Lease:
// its process is a holder, which the protocol stops by its deadline.
func (c *container) held() bool {
	g := c.guard.Load()
	if g == nil {
		return false
	}
	select {
	case <-g.Held():
		return true
	default:
		return false
	}
}

type containerKind int

const (
	// guardWriter embeds a selffence.Guard and asks it before each write.
	guardWriter containerKind = iota
	// sidecarKind runs the sidecar's logic (internal/sidecar).
	sidecarKind
	// asker asks the sidecar before each write.
	asker
	// blind waits for the sidecar's first yes, then writes until killed.
	blind
	// replica writes its own volume from its start until killed.
	replica
)

func (k containerKind) String() string {
	return [...]string{"guard-writer", "sidecar", "asker", "blind", "replica"}[k]
}

func (n *node) up() bool { return n.powered && !n.frozen }

// reachable reports whether p's requests reach the API server.
func (w *world) reachable(p *process) bool {
	n := w.nodeOf[p]
	return n == nil || (n.powered && !n.partitioned)
}

func podName(ordinal int) string { return podNames[ordinal] }

// podNames and podStoreKeys are the StatefulSet's pods' names and store
// keys by ordinal, made once: the kubelets and controllers look them up
// at every step.
var podNames, podStoreKeys = func() (names, keys [replicas]string) {
	for i := range replicas {
		names[i] = fmt.Sprintf("%s-%d", setName, i)
		keys[i] = key(namespace, names[i])
	}
	return names, keys
}()

// newPod is the StatefulSet's pod of ordinal on node, as the API server
// holds it once the scheduler bound it: the default tolerations, a claim,
// the StatefulSet as its controller.
func (w *world) newPod(ordinal int, nodeName string) *corev1.Pod {
	role := "primary"
	if ordinal == replicaOrdinal {
		role = "replica"
	}
	now := metav1.NewTime(origin.Add(w.now))
	var annotations map[string]string
	if role == "primary" && len(w.annotations) > 0 {
		annotations = maps.Clone(w.annotations)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: podName(ordinal), UID: w.store.newUID("pod"),
			Labels:            map[string]string{"app": setName, "role": role},
			Annotations:       annotations,
			CreationTimestamp: now,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: setName,
				UID: "statefulset-db", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			TerminationGracePeriodSeconds: ptr.To(int64(terminationGrace)),
			Containers:                    []corev1.Container{{Name: "db", Image: "postgres"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + podName(ordinal)}}}},
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(tolerationSeconds))},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(tolerationSeconds))},
			},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// heartbeat is the kubelet's node status update.
func (w *world) heartbeat(n *node) {
	defer w.after(heartbeatEvery, func() { w.heartbeat(n) })
	if !n.up() || !n.kubeletUp || n.partitioned {
		return
	}
	node := w.store.nodes[n.name].DeepCopy()
	now := metav1.NewTime(origin.Add(w.now))
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: readyTransition(node, corev1.ConditionTrue, now)}}
	var kept []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != corev1.TaintNodeUnreachable {
			kept = append(kept, t)
		}
	}
	node.Spec.Taints = kept
	w.store.putNode(node)
}

// readyTransition is the Ready condition's lastTransitionTime once it has
// status.
func readyTransition(node *corev1.Node, status corev1.ConditionStatus, now metav1.Time) metav1.Time {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == status {
			return c.LastTransitionTime
		}
	}
	return now
}

// nodeLifecycle is the node-lifecycle controller, with the taint-eviction
// controller: a node whose heartbeat is older than the grace becomes
// Unknown and tainted unreachable; a pod whose toleration of the taint
// has run out gets DisruptionTarget and a graceful delete.
func (w *world) nodeLifecycle() {
	defer w.after(nodeMonitorPeriod, w.nodeLifecycle)
	now := origin.Add(w.now)
	for _, n := range w.nodes {
		node := w.store.nodes[n.name]
		var beat time.Time
		var unknown bool
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				beat, unknown = c.LastHeartbeatTime.Time, c.Status == corev1.ConditionUnknown
			}
		}
		if !unknown && now.Sub(beat) > nodeMonitorGrace {
			next := node.DeepCopy()
			at := metav1.NewTime(now)
			next.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusUnknown", LastHeartbeatTime: metav1.NewTime(beat), LastTransitionTime: at}}
			next.Spec.Taints = append(next.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &at})
			w.store.putNode(next)
			w.logf("node-lifecycle: %s unreachable", n.name)
		}
	}
	for _, k := range w.podKeys() {
		pod := w.store.pods[k]
		if pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" {
			continue
		}
		for _, t := range w.store.nodes[pod.Spec.NodeName].Spec.Taints {
			if t.Key != corev1.TaintNodeUnreachable || t.TimeAdded == nil || now.Sub(t.TimeAdded.Time) < tolerationSeconds*time.Second {
				continue
			}
			next := pod.DeepCopy()
			next.Status.Conditions = append(next.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
				Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager", LastTransitionTime: metav1.NewTime(now)})
			w.store.putPod(next)
			if _, err := w.store.deletePod(namespace, pod.Name, metav1.DeleteOptions{}); err == nil {
				w.logf("taint-eviction: %s (%s) deleted gracefully", pod.Name, pod.UID)
			}
		}
	}
}

// podKeys are the store's pods' keys, in order.
func (w *world) podKeys() []string {
	keys := make([]string, 0, replicas)
	for _, k := range podStoreKeys {
		if _, ok := w.store.pods[k]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// statefulSet recreates a pod of an ordinal that has none, on a node
// that is Ready and untainted, as the StatefulSet controller and the
// scheduler do.
func (w *world) statefulSet() {
	defer w.after(statefulSetEvery, w.statefulSet)
	for i := range replicas {
		if _, ok := w.store.pods[key(namespace, podName(i))]; ok {
			continue
		}
		var fit []string
		for _, n := range w.nodes {
			node := w.store.nodes[n.name]
			ready := false
			for _, c := range node.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if ready && len(node.Spec.Taints) == 0 && !w.hostsOtherCandidate(n.name, i) {
				fit = append(fit, n.name)
			}
		}
		if len(fit) == 0 {
			continue
		}
		pod := w.newPod(i, fit[w.rng.IntN(len(fit))])
		for _, l := range w.lost {
			if l.holder != nil && l.holder.Name == podName(i) {
				if _, done := w.replaced[string(l.holder.UID)]; !done {
					w.replaced[string(l.holder.UID)] = w.now
				}
			}
		}
		w.store.putPod(pod)
		w.logf("statefulset: created %s (%s) on %s", pod.Name, pod.UID, pod.Spec.NodeName)
	}
}

// hostsOtherCandidate reports whether the other candidate's pod is bound
// to node: the candidates' anti-affinity, so that one node lost takes at
// most one of them.
func (w *world) hostsOtherCandidate(node string, ordinal int) bool {
	if ordinal == replicaOrdinal {
		return false
	}
	other, ok := w.store.pods[key(namespace, podName(1-ordinal))]
	return ok && other.Spec.NodeName == node
}

// kubeletSync is one pass of a kubelet: it learns its pods from the API
// server when it reaches it, starts them, stops those being deleted (and
// confirms their deletion once stopped), stops those the API server no
// longer has, and restarts containers that died.
func (w *world) kubeletSync(n *node) {
	defer w.after(kubeletSyncEvery, func() { w.kubeletSync(n) })
	if !n.up() || !n.kubeletUp {
		return
	}
	if !n.partitioned {
		seen := map[string]bool{}
		for _, k := range w.podKeys() {
			pod := w.store.pods[k]
			if pod.Spec.NodeName != n.name {
				continue
			}
			uid := string(pod.UID)
			seen[uid] = true
			run, ok := n.known[uid]
			switch {
			case !ok && pod.DeletionTimestamp != nil:
				// Nothing of it runs here (the node restarted): the
				// deletion is confirmed at once.
				w.store.removePod(namespace, pod.Name)
				w.logf("kubelet %s: %s (%s) not running; its deletion confirmed", n.name, pod.Name, pod.UID)
				continue
			case !ok:
				run = w.startPod(n, pod.DeepCopy())
			}
			if pod.DeletionTimestamp != nil && !run.deleting {
				run.deleting = true
				w.logf("kubelet %s: stopping %s (%s), being deleted", n.name, pod.Name, pod.UID)
				w.stopPod(run)
			}
			if run.deleting && run.stopped() {
				w.store.removePod(namespace, pod.Name)
				delete(n.known, uid)
				w.logf("kubelet %s: %s (%s) stopped; its deletion confirmed", n.name, pod.Name, pod.UID)
			}
		}
		for _, uid := range sortedKeys(n.known) {
			if run := n.known[uid]; !seen[uid] {
				w.logf("kubelet %s: %s (%s) is gone from the API server; stopping it", n.name, run.pod.Name, uid)
				w.stopPod(run)
				delete(n.known, uid)
			}
		}
	}
	for _, uid := range sortedKeys(n.known) {
		run := n.known[uid]
		if run.deleting {
			continue
		}
		for _, c := range run.containers {
			switch {
			case (c.proc == nil || c.proc.dead) && c.startAt <= w.now:
				w.startContainer(run, c)
			case c.kind == blind && c.proc != nil && !c.proc.dead && !c.probeFailed && w.livenessFails(run, c):
				// The workload's liveness probe of the sidecar, every
				// second, failed (false, no answer within its timeout of
				// 1 s, or no sidecar): the kubelet stops the container,
				// which ignores SIGTERM, and kills it at the end of the
				// probe's grace period of 1 s.
				c.probeFailed = true
				p := c.proc
				w.after(2*time.Second, func() {
					c.probeFailed = false
					w.kill(p, "its liveness probe of the sidecar failed")
				})
			}
		}
	}
}

// livenessFails reports whether the liveness probe of a blind workload's
// container c fails now. As docs/safety.md prescribes it, it reads the
// sidecar's GET /live, with no startup probe before it. With
// Mutations.StartupProbe, as it prescribed before: a startup probe of GET
// /may-write holds the liveness probe, also of /may-write, until it
// passes, which it does again after each restart of the kubelet.
func (w *world) livenessFails(run *podRun, c *container) bool {
	switch {
	case w.mutations.NoLivenessProbe:
		return false
	case !w.mutations.StartupProbe:
		return !run.alive()
	case !c.startedUp:
		c.startedUp = run.mayWrite()
		if c.startedUp {
			w.logf("kubelet %s: the startup probe of %s passed", run.node.name, c.proc.name)
		}
		return false
	default:
		return !run.mayWrite()
	}
}

// sortedKeys are m's keys in order: a map's own order would vary the
// history from run to run.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// stopped reports whether every process of the pod has died.
func (r *podRun) stopped() bool {
	for _, c := range r.containers {
		if c.proc != nil && !c.proc.dead {
			return false
		}
	}
	return true
}

// stopPod kills the pod's processes, as the kubelet does at the end of
// the grace period (the simulation's workloads do not stop on SIGTERM).
func (w *world) stopPod(run *podRun) {
	for _, c := range run.containers {
		if c.proc != nil {
			w.kill(c.proc, "the kubelet stopped its pod")
		}
	}
}

// kill ends a process.
func (w *world) kill(p *process, why string) {
	if p.dead {
		return
	}
	w.logf("%s: killed: %s", p.name, why)
	p.die()
}

// died is called when a container's process died by itself or was
// killed: the kubelet restarts it after its backoff.
func (w *world) died(c *container) {
	backoff := restartBackoffFirst
	if w.now-c.started > 10*time.Minute {
		c.restarts = 0
	}
	for range c.restarts {
		backoff *= 2
		if backoff >= restartBackoffMax {
			backoff = restartBackoffMax
			break
		}
	}
	c.restarts++
	c.startAt = w.now + backoff
}
