package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/stretchr/testify/require"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/health"
)

// The cloud soak's fault kinds, beside the node faults of every soak. In
// a cloud soak a partition is one the cloud reports running through: only
// these two make the cloud report the instance shut down.
const (
	// A node's power fails, and the cloud reports the instance shut down
	// CloudAfter later; it powers on again For after the failure.
	faultCloudShutdown soakFaultKind = "cloud shutdown"
	// As faultCloudShutdown, but the node starts again soon after the
	// report, so that its restart meets the shutdown taint, and perhaps
	// podhealth's out-of-service taint, still on it.
	faultShutdownRestart soakFaultKind = "cloud shutdown, then a restart"
)

// soakCloudShutdownAfter is the cloud soak's --shutdown-taint wait, the
// component's.
const soakCloudShutdownAfter = 2 * time.Second

// soakTaintRemovalBound is invariant 7's bound: podhealth removes a taint
// it applied this long after its node is back at the latest (the node's
// Ready, then its old pods' deletion, each a watch event away).
const soakTaintRemovalBound = time.Minute

// soakTaintSpan is a span during which a node carried a taint: the
// out-of-service taint (ByPodhealth when it carried podhealth's mark), or
// the cloud's shutdown taint. Until is zero while it still does.
type soakTaintSpan struct {
	Node        string
	Key         string
	ByPodhealth bool
	From, Until time.Time
}

// watchTaints records, from a node informer, the spans of the
// out-of-service and shutdown taints of every node; the ones that are
// fencing evidence (the out-of-service taint, and the shutdown taint once
// seen for its wait) also go into the fences that invariant 2 reads. An
// out-of-service taint with a timeAdded (podhealth-controller sets it)
// starts then, if that is earlier than its sighting: the checker may act
// on the taint before this informer's handler runs.
func (e *soakEnv) watchTaints(ctx context.Context) {
	open := map[string]int{} // node + key → index in e.taints
	record := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		now := time.Now()
		seen := map[string]bool{}
		e.mu.Lock()
		defer e.mu.Unlock()
		ready := "none"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = string(c.Status)
			}
		}
		if last, ok := e.readyNow[n.Name]; !ok || last != ready {
			e.readyNow[n.Name] = ready
			e.readiness = append(e.readiness, soakReadiness{Node: n.Name, At: now, Ready: ready})
		}
		for _, t := range n.Spec.Taints {
			if t.Key != corev1.TaintNodeOutOfService && t.Key != health.TaintCloudShutdown {
				continue
			}
			id := n.Name + "\x00" + t.Key
			seen[id] = true
			if _, ok := open[id]; ok {
				continue
			}
			from := now
			if t.TimeAdded != nil && t.TimeAdded.Time.Before(from) {
				from = t.TimeAdded.Time
			}
			open[id] = len(e.taints)
			e.taints = append(e.taints, soakTaintSpan{Node: n.Name, Key: t.Key, From: from,
				ByPodhealth: t.Key == corev1.TaintNodeOutOfService && n.Annotations["podhealth.io/out-of-service-applied"] != ""})
		}
		for id, i := range open {
			if strings.HasPrefix(id, n.Name+"\x00") && !seen[id] {
				e.taints[i].Until = now
				delete(open, id)
			}
		}
	}
	factory := informers.NewSharedInformerFactory(e.c, 0)
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		e.t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
}

// taintFences are the fences of the recorded taint spans: the
// out-of-service taint from its first sighting, the shutdown taint from
// its first sighting plus the checker's wait.
func taintFences(spans []soakTaintSpan) []soakFenceSpan {
	var out []soakFenceSpan
	for _, s := range spans {
		from := s.From
		if s.Key == health.TaintCloudShutdown {
			from = from.Add(soakCloudShutdownAfter)
			if !s.Until.IsZero() && !s.Until.After(from) {
				continue
			}
		}
		out = append(out, soakFenceSpan{Node: s.Node, From: from, Until: s.Until})
	}
	return out
}

// startCloud starts what a cloud soak adds to a soak: the CSI driver and
// its model attacher, the ReadWriteOnce volumes of the db StatefulSet, the
// cloud node-lifecycle controller, the taint recorder, and the tainter:
// podhealth-controller with --apply-out-of-service acting in no namespace
// (the StatefulSet checker force-deletes), or, for the mutation, a tainter
// that taints a node out-of-service on its silence alone.
func (e *soakEnv) startCloud(ctx context.Context) {
	t := e.t
	if err := e.cp.CreateCSIDriver(ctx); err != nil {
		t.Fatal(err)
	}
	e.attacher = e.cp.StartAttacher(ctx)
	for i := range 2 {
		if err := e.cp.CreateVolume(ctx, ns, fmt.Sprintf("data-db-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	e.cloud = newShutdownCloud()
	startCloudNodeLifecycle(ctx, t, e.c, e.cloud)
	e.watchTaints(ctx)
	if e.cfg.silenceTainter {
		go e.taintOnSilence(ctx)
		return
	}
	applyObjects(ctx, t, e.cp, append(controllerManifests(t), kustomizationObjects(t, controllerConfigDir+"/out-of-service")...), false)
	e.controller = startControllerReplica(t, e.cp, "podhealth-controller", controllerKubeconfig(ctx, t, e.cp),
		"--namespace-selector=podhealth.example/acts-in=none",
		"--shutdown-taint="+health.TaintCloudShutdown+"="+soakCloudShutdownAfter.String(), "--apply-out-of-service").op
}

// soakReadiness is a change of a node's Ready condition as the soak's node
// informer saw it: the node's report, as the API server holds it.
type soakReadiness struct {
	Node  string
	At    time.Time
	Ready string // True, False, Unknown, or none
}

// explain says, for a failed soak, what a reader needs to tell a harness
// stall from a controller that stayed down, without the run's logs: the
// controller's exits (when, how, its last lines before each), its restarts
// and leadership changes, its last log lines; and, for each node a
// violation names, its faults, its kubelet's connects and disconnects,
// its Ready condition as the API server held it, and its taints' writes
// as the node informer saw them.
func (e *soakEnv) explain(h soakHistory, violations []soakViolation) string {
	var b strings.Builder
	var t0 time.Time
	if len(h.Containers) > 0 {
		t0 = h.Containers[0].At
	}
	at := func(t time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(t0).Seconds()) }
	if op := e.controller; op != nil {
		exits := op.Exits()
		fmt.Fprintf(&b, "podhealth-controller: %d exits of its own, %d restarts\n", len(exits), op.Restarts())
		for _, x := range exits {
			fmt.Fprintf(&b, "  exit at %s (%s), restarted %v; its last lines:\n    %s\n", at(x.At), x.Status, x.Restarted, strings.Join(x.LastLines, "\n    "))
		}
		fmt.Fprintf(&b, "  leadership:\n    %s\n", strings.Join(op.Leadership(), "\n    "))
		fmt.Fprintf(&b, "  its last %d lines:\n    %s\n", soakExplainLines, strings.Join(op.LastLines(soakExplainLines), "\n    "))
	}
	for _, f := range h.Faults {
		if f.Fault.Node == "" {
			fmt.Fprintf(&b, "fault %s from %s to %s\n", f.Fault.Kind, at(f.Began), at(f.Ended))
		}
	}
	nodes := map[string]bool{}
	for _, v := range violations {
		if v.Node != "" {
			nodes[v.Node] = true
		}
	}
	e.mu.Lock()
	readiness := append([]soakReadiness(nil), e.readiness...)
	e.mu.Unlock()
	for _, node := range slices.Sorted(maps.Keys(nodes)) {
		fmt.Fprintf(&b, "node %s:\n", node)
		for _, f := range h.Faults {
			if f.Fault.Node == node {
				fmt.Fprintf(&b, "  fault %s from %s to %s\n", f.Fault.Kind, at(f.Began), at(f.Ended))
			}
		}
		for _, c := range h.Containers {
			if c.Node == node && (c.Kind == harness.NodeConnected || c.Kind == harness.NodeDisconnected) {
				fmt.Fprintf(&b, "  %s at %s (%s)\n", c.Kind, at(c.At), c.Why)
			}
		}
		for _, r := range readiness {
			if r.Node == node {
				fmt.Fprintf(&b, "  Ready=%s seen at %s\n", r.Ready, at(r.At))
			}
		}
		for _, s := range h.Taints {
			if s.Node == node {
				until := "the end"
				if !s.Until.IsZero() {
					until = at(s.Until)
				}
				fmt.Fprintf(&b, "  taint %s (podhealth's: %v) from %s to %s\n", s.Key, s.ByPodhealth, at(s.From), until)
			}
		}
	}
	return b.String()
}

// soakExplainLines is how many of the controller's last lines explain
// carries.
const soakExplainLines = 40

// taintOnSilence is the mutation of TestSoakCheckerCatchesATaintOnSilence:
// a tainter that applies the out-of-service taint, with podhealth's mark,
// to every node unreachable for 2 s, whatever the cloud says.
func (e *soakEnv) taintOnSilence(ctx context.Context) {
	since := map[string]time.Time{}
	everyTick(ctx, 200*time.Millisecond, func() {
		nodes, err := e.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, n := range nodes.Items {
			if health.NodeStateOf(&n) != health.NodeUnreachable {
				delete(since, n.Name)
				continue
			}
			if since[n.Name].IsZero() {
				since[n.Name] = time.Now()
			}
			if time.Since(since[n.Name]) < 2*time.Second {
				continue
			}
			patch, _ := json.Marshal(map[string]any{
				"metadata": map[string]any{"annotations": map[string]string{"podhealth.io/out-of-service-applied": time.Now().UTC().Format(time.RFC3339)}, "resourceVersion": n.ResourceVersion},
				"spec":     map[string]any{"taints": append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})},
			})
			_, _ = e.c.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			since[n.Name] = time.Now().Add(time.Hour) // once
		}
	})
}

// soakCheckCloud checks the cloud soak's invariants over the volumes'
// attachments and the taints:
//
//  5. no ReadWriteOnce volume is attached to a node while a container
//     that mounts it runs on another (detached from under it or not);
//  6. no node whose containers or kubelet run ever gets the out-of-service
//     taint from podhealth: none runs there when the taint comes (nor is
//     the node connected: a booting node runs, though no container has
//     started yet), none starts while it stays;
//  7. every out-of-service taint podhealth applied is removed within
//     soakTaintRemovalBound of its node coming back.
func soakCheckCloud(h soakHistory) []soakViolation {
	var t0 time.Time
	if len(h.Containers) > 0 {
		t0 = h.Containers[0].At
	}
	var out []soakViolation
	runningAt := func(node string, at time.Time, volume corev1.UniqueVolumeName) []harness.ContainerEvent {
		running := map[types.UID]harness.ContainerEvent{}
		for _, e := range h.Containers {
			if e.At.After(at) {
				break
			}
			if e.Node != node || (volume != "" && !containsVolume(e.Volumes, volume)) {
				continue
			}
			switch e.Kind {
			case harness.ContainerStarted:
				running[e.UID] = e
			case harness.ContainerStopped:
				delete(running, e.UID)
			}
		}
		var list []harness.ContainerEvent
		for _, e := range running {
			list = append(list, e)
		}
		return list
	}
	// 5: at each attach, no container that mounts the volume runs on
	// another node (whether or not the volume was detached from it first:
	// a detach under a running container is a second writer all the same).
	nodes := map[string]bool{}
	for _, e := range h.Containers {
		nodes[e.Node] = true
	}
	for _, a := range h.Attaches {
		if a.Kind != harness.VolumeAttached {
			continue
		}
		unique := harness.UniqueVolumeName("vol-" + strings.TrimPrefix(a.Volume, "pv-"))
		for other := range nodes {
			if other == a.Node {
				continue
			}
			if users := runningAt(other, a.At, unique); len(users) > 0 {
				out = append(out, soakViolation{Invariant: 5,
					What:    fmt.Sprintf("volume %s attached to %s at %.3fs while %s/%s runs with it on %s", a.Volume, a.Node, a.At.Sub(t0).Seconds(), users[0].Namespace, users[0].Pod, other),
					History: soakSliceOf(h.Containers, t0, users[0].At, a.At, other, a.Node)})
			}
		}
	}
	for _, s := range h.Taints {
		if !s.ByPodhealth {
			continue
		}
		// 6: nothing runs there when the taint comes, nothing starts while
		// it stays.
		if running := runningAt(s.Node, s.From, ""); len(running) > 0 {
			out = append(out, soakViolation{Invariant: 6, Node: s.Node,
				What:    fmt.Sprintf("podhealth tainted %s out-of-service at %.3fs while %s/%s ran there", s.Node, s.From.Sub(t0).Seconds(), running[0].Namespace, running[0].Pod),
				History: soakSliceOf(h.Containers, t0, running[0].At, s.From, s.Node)})
		}
		connected := true // a node is connected until it is disconnected
		for _, e := range h.Containers {
			if e.At.After(s.From) {
				break
			}
			if e.Node == s.Node && (e.Kind == harness.NodeConnected || e.Kind == harness.NodeDisconnected) {
				connected = e.Kind == harness.NodeConnected
			}
		}
		if connected {
			out = append(out, soakViolation{Invariant: 6, Node: s.Node,
				What: fmt.Sprintf("podhealth tainted %s out-of-service at %.3fs while its kubelet ran (connected, or booting)", s.Node, s.From.Sub(t0).Seconds())})
		}
		for _, e := range h.Containers {
			if e.Kind == harness.ContainerStarted && e.Node == s.Node && e.At.After(s.From) && (s.Until.IsZero() || e.At.Before(s.Until)) {
				out = append(out, soakViolation{Invariant: 6, Node: s.Node,
					What: fmt.Sprintf("%s/%s started on %s at %.3fs under podhealth's out-of-service taint", e.Namespace, e.Pod, s.Node, e.At.Sub(t0).Seconds())})
			}
		}
		// 7: removed within the bound of the node's return.
		var back time.Time
		for _, e := range h.Containers {
			if e.Kind == harness.NodeConnected && e.Node == s.Node && e.At.After(s.From) {
				back = e.At
				break
			}
		}
		switch {
		case back.IsZero():
		case s.Until.IsZero() && h.End.Sub(back) > soakTaintRemovalBound:
			out = append(out, soakViolation{Invariant: 7, Node: s.Node, What: fmt.Sprintf("podhealth's out-of-service taint on %s was still there at the end, %v after the node came back at %.3fs", s.Node, h.End.Sub(back).Round(time.Millisecond), back.Sub(t0).Seconds())})
		case !s.Until.IsZero() && s.Until.Sub(back) > soakTaintRemovalBound:
			out = append(out, soakViolation{Invariant: 7, Node: s.Node, What: fmt.Sprintf("podhealth's out-of-service taint on %s was removed %v after the node came back", s.Node, s.Until.Sub(back).Round(time.Millisecond))})
		}
	}
	return out
}

func containsVolume(vs []corev1.UniqueVolumeName, v corev1.UniqueVolumeName) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// TestSoakCloudFaults is the soak of the stateful recovery on the cloud's
// word: StatefulSets with and without ReadWriteOnce CSI volumes (the PV
// binder and attach-detach controllers, the model attacher, kubelets that
// run a pod only with its volume attached), the cloud node-lifecycle
// controller over a cloud that reports a powered-off instance shut down,
// podhealth-controller applying and removing the out-of-service taint, and
// the StatefulSet checker taking the shutdown taint as fencing evidence.
// Its seeded schedule adds cloud shutdowns, shutdowns followed by a
// restart, and partitions the cloud reports running through, to power
// offs fenced by an admin's taint or by no one and kubelet stops; the
// history must keep invariants 1 to 4 and the cloud's 5 to 7.
func TestSoakCloudFaults(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	if s := os.Getenv(soakSeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", soakSeedEnv, s, err)
		}
	}
	t.Logf("cloud soak seed %d (replay: %s=%d)", seed, soakSeedEnv, seed)
	cfg := soakConfig{seed: seed, nodeFaults: 8, controlFaults: 2, cloud: true}
	h, env := runSoak(t, cfg)
	res := soakCheck(h, soakRecoveryBound)
	cloud := soakCheckCloud(h)
	for _, v := range append(res.Violations, cloud...) {
		t.Errorf("seed %d: %s", seed, v)
	}
	if all := append(res.Violations, cloud...); len(all) > 0 {
		t.Log("\n" + env.explain(h, all))
	}
	applied := 0
	for _, s := range h.Taints {
		if s.ByPodhealth {
			applied++
		}
	}
	cloudFaults := 0
	for _, f := range h.Faults {
		if f.Fault.Kind == faultCloudShutdown || f.Fault.Kind == faultShutdownRestart {
			cloudFaults++
		}
	}
	if cloudFaults > 0 && applied == 0 {
		t.Errorf("seed %d: %d cloud shutdowns and no out-of-service taint from podhealth: the schedule tested nothing new", seed, cloudFaults)
	}
	body := soakCloudFigures(res, cloud, h, env, seed, applied)
	t.Log("\n" + body)
	if os.Getenv(figWriteEnv) != "1" || t.Failed() {
		return
	}
	if err := figWriteSection(figFiguresFile, soakCloudSection, body); err != nil {
		t.Fatal(err)
	}
}

// TestSoakCheckerCatchesATaintOnSilence: with the tainter mutated to taint
// a node out-of-service on its silence alone, one long partition of the
// node of db-0 (which the cloud reports running) gets the taint while the
// node's containers run, Kubernetes force-detaches the volume of db-0 and
// the StatefulSet checker lets the pod go on the taint; the history
// checker finds the taint on a running node (invariant 6), the volume
// attached beside its running writer (invariant 5) and the second writer
// (invariant 1).
func TestSoakCheckerCatchesATaintOnSilence(t *testing.T) {
	t.Parallel()
	h, _ := runSoak(t, soakConfig{
		cloud: true, silenceTainter: true,
		schedule: func(podNodes map[string]string) []soakFault {
			return []soakFault{{Kind: faultPartition, At: time.Second, For: 25 * time.Second, Node: podNodes["db-0"]}}
		},
	})
	found := map[int]bool{}
	for _, v := range append(soakCheck(h, soakRecoveryBound).Violations, soakCheckCloud(h)...) {
		found[v.Invariant] = true
		t.Logf("found, as it must: %s", v)
	}
	if !found[6] || !found[5] || !found[1] {
		t.Fatalf("the checker missed the mutation: violations of invariants %v, want 1, 5 and 6", found)
	}
}

// soakCloudSection is TestSoakCloudFaults' section of FIGURES.md.
const soakCloudSection = "soak, cloud"

func soakCloudFigures(res soakResult, cloud []soakViolation, h soakHistory, env *soakEnv, seed int64, applied int) string {
	var b strings.Builder
	env.mu.Lock()
	injected := append([]soakInjected(nil), env.injected...)
	env.mu.Unlock()
	fmt.Fprintf(&b, "## Fault soak, on the cloud's word and to the volume\n\n")
	fmt.Fprintf(&b, "`TestSoakCloudFaults`, seed %d (replay with `%s=%d`), on %s: %d faults on one control plane with four simulated nodes, the volume path (ReadWriteOnce CSI volumes for db-0 and db-1, the attach-detach controller, the model attacher), the cloud node-lifecycle controller, podhealth-controller `--shutdown-taint=%s=%v --apply-out-of-service`, and the StatefulSet checker with the same shutdown taint as fencing evidence. Out-of-service taints podhealth applied: %d; volume attaches: %d.\n\n",
		seed, soakSeedEnv, seed, time.Now().UTC().Format("2006-01-02"), len(injected), health.TaintCloudShutdown, soakCloudShutdownAfter, applied, countAttaches(h.Attaches))
	fmt.Fprintf(&b, "| fault kind | injected | recovery p50 | max |\n|---|---|---|---|\n")
	for _, k := range []soakFaultKind{faultPowerOff, faultPartition, faultKubeletStop, faultCloudShutdown, faultShutdownRestart, faultAPIServerRestart, faultOperatorRestart, faultInformerLag} {
		n := 0
		for _, f := range injected {
			if f.Fault.Kind == k {
				n++
			}
		}
		if n == 0 {
			continue
		}
		sorted, _, worst := harness.Durations(res.Recovery[k])
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", k, n, figSec(soakPercentile(sorted, 0.5)), figSec(worst))
	}
	per := map[int]int{}
	for _, v := range append(res.Violations, cloud...) {
		per[v.Invariant]++
	}
	fmt.Fprintf(&b, "\n| invariant | violations |\n|---|---|\n")
	for i, what := range []string{
		"a stateful identity never runs on two nodes at once",
		"every force DELETE has a UID precondition; none is for a pod the policy holds back",
		"no pod receives more than one force DELETE",
		"every workload has a live pod again within the bound after each fault",
		"no ReadWriteOnce volume is attached to a node while a container that mounts it runs on another",
		"no node whose containers run gets the out-of-service taint from podhealth",
		"every out-of-service taint podhealth applied is removed once its node is back (within " + soakTaintRemovalBound.String() + ")",
	} {
		fmt.Fprintf(&b, "| %d. %s | %d |\n", i+1, what, per[i+1])
	}
	return b.String()
}

func countAttaches(events []harness.AttachEvent) int {
	n := 0
	for _, e := range events {
		if e.Kind == harness.VolumeAttached {
			n++
		}
	}
	return n
}

// TestSoakCheckCloudFindsEachBrokenInvariant runs the cloud invariants over
// a made-up history of a cloud shutdown handled right (db-0's node off,
// tainted by podhealth, the volume attached elsewhere once the old
// container stopped, the taint removed after the node came back), then
// over copies each broken in one way.
func TestSoakCheckCloudFindsEachBrokenInvariant(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	vol := harness.UniqueVolumeName("vol-default-data-db-0")
	db := func(kind harness.ContainerEventKind, s float64, node string, uid types.UID) harness.ContainerEvent {
		return harness.ContainerEvent{At: at(s), Kind: kind, Node: node, Namespace: ns, Pod: "db-0", UID: uid, Owner: "StatefulSet/db", Claims: []string{"data-db-0"}, Volumes: []corev1.UniqueVolumeName{vol}}
	}
	clean := soakHistory{
		Containers: []harness.ContainerEvent{
			db(harness.ContainerStarted, 0, "node-a", "u1"),
			{At: at(5), Kind: harness.NodeDisconnected, Node: "node-a"},
			db(harness.ContainerStopped, 5, "node-a", "u1"),
			db(harness.ContainerStarted, 15, "node-b", "u2"),
			{At: at(30), Kind: harness.NodeConnected, Node: "node-a"},
		},
		Attaches: []harness.AttachEvent{
			{At: at(0), Kind: harness.VolumeAttached, Volume: "pv-default-data-db-0", Node: "node-a"},
			{At: at(14), Kind: harness.VolumeDetached, Volume: "pv-default-data-db-0", Node: "node-a"},
			{At: at(14.5), Kind: harness.VolumeAttached, Volume: "pv-default-data-db-0", Node: "node-b"},
		},
		Taints: []soakTaintSpan{
			{Node: "node-a", Key: health.TaintCloudShutdown, From: at(12), Until: at(31)},
			{Node: "node-a", Key: corev1.TaintNodeOutOfService, ByPodhealth: true, From: at(14), Until: at(31)},
		},
		End: at(120),
	}
	require.Empty(t, soakCheckCloud(clean), "a clean history")
	for _, tt := range []struct {
		name      string
		break_    func(h *soakHistory)
		invariant int
	}{
		{"the volume attached elsewhere while the old container runs (a partition)", func(h *soakHistory) {
			h.Containers = slices.Delete(slices.Clone(h.Containers), 2, 3) // db-0 never stopped on node-a
			h.Taints = h.Taints[:1]                                        // and no taint of podhealth's
		}, 5},
		{"podhealth's taint on a node whose container runs", func(h *soakHistory) {
			h.Taints = slices.Clone(h.Taints)
			h.Taints[1].From = at(3)
		}, 6},
		{"podhealth's taint on a booting node: its kubelet is back, no container has started", func(h *soakHistory) {
			h.Containers = slices.Insert(slices.Clone(h.Containers), 3, harness.ContainerEvent{At: at(13), Kind: harness.NodeConnected, Node: "node-a", Why: "cloud shutdown, then a restart ended (booting)"})
		}, 6},
		{"a container started under podhealth's taint", func(h *soakHistory) {
			h.Containers = append(slices.Clone(h.Containers), harness.ContainerEvent{At: at(30.5), Kind: harness.ContainerStarted, Node: "node-a", Namespace: ns, Pod: "cache-1", UID: "u3"})
		}, 6},
		{"the taint left on long after the node came back", func(h *soakHistory) {
			h.Taints = slices.Clone(h.Taints)
			h.Taints[1].Until = time.Time{}
		}, 7},
		{"the taint removed late", func(h *soakHistory) {
			h.Taints = slices.Clone(h.Taints)
			h.Taints[1].Until = at(30).Add(soakTaintRemovalBound + time.Second)
		}, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := clean
			tt.break_(&h)
			got := soakCheckCloud(h)
			require.NotEmpty(t, got)
			for _, v := range got {
				require.Equal(t, tt.invariant, v.Invariant, "%s", v)
			}
		})
	}
	t.Run("an admin's taint is not podhealth's", func(t *testing.T) {
		h := clean
		h.Taints = slices.Clone(h.Taints)
		h.Taints[1].ByPodhealth, h.Taints[1].Until = false, time.Time{}
		require.Empty(t, soakCheckCloud(h))
	})
}

// A cloud soak's schedule meets every node fault kind, its cloud faults
// come with a report delay, and no power off is fenced by deleting its node
// (whose volume would wait out the 6-minute unmount timeout); the same
// seed draws the same schedule.
func TestSoakCloudScheduleMeetsEveryFaultKind(t *testing.T) {
	opts := soakScheduleOptions{NodeFaults: 8, ControlFaults: 2, Nodes: []string{"node-1", "node-2", "node-3", "node-4"}, Targets: soakTargets, Cloud: true}
	for seed := int64(1); seed <= 50; seed++ {
		faults := soakSchedule(seed, opts)
		require.Equal(t, faults, soakSchedule(seed, opts), "seed %d", seed)
		kinds := map[soakFaultKind]int{}
		for _, f := range faults {
			kinds[f.Kind]++
			require.NotEqual(t, fenceDeletion, f.Fence, "seed %d: %s", seed, f)
			if f.Kind == faultCloudShutdown || f.Kind == faultShutdownRestart {
				require.Less(t, f.CloudAfter, f.For, "seed %d: %s reports the shutdown after the node is back", seed, f)
			}
		}
		for _, k := range []soakFaultKind{faultPowerOff, faultPartition, faultKubeletStop, faultCloudShutdown, faultShutdownRestart} {
			require.Positive(t, kinds[k], "seed %d: no %s in %v", seed, k, faults)
		}
	}
}

// A soak failure carries what explains it afterwards: for invariant 7's
// node, its fault, its kubelet's connects and disconnects, its Ready
// condition as the API server held it and its taints' spans, each at its
// time in the run.
func TestASoakFailureCarriesWhatExplainsIt(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	h := soakHistory{
		Containers: []harness.ContainerEvent{
			{At: at(0), Kind: harness.ContainerStarted, Node: "node-b", Pod: "db-1"},
			{At: at(5), Kind: harness.NodeDisconnected, Node: "node-a", Why: "cloud shutdown"},
			{At: at(30), Kind: harness.NodeConnected, Node: "node-a", Why: "cloud shutdown ended"},
		},
		Faults: []soakInjected{
			{Fault: soakFault{Kind: faultCloudShutdown, Node: "node-a"}, Began: at(5), Ended: at(30)},
			{Fault: soakFault{Kind: faultAPIServerRestart}, Began: at(28), Ended: at(40)},
		},
		Taints: []soakTaintSpan{{Node: "node-a", Key: corev1.TaintNodeOutOfService, ByPodhealth: true, From: at(14)}},
		End:    at(120),
	}
	violations := soakCheckCloud(h)
	require.Len(t, violations, 1)
	require.Equal(t, 7, violations[0].Invariant)
	require.Equal(t, "node-a", violations[0].Node)
	env := &soakEnv{readiness: []soakReadiness{{Node: "node-a", At: at(9), Ready: "Unknown"}, {Node: "node-a", At: at(31), Ready: "True"}, {Node: "node-b", At: at(31), Ready: "True"}}}
	got := env.explain(h, violations)
	for _, want := range []string{
		"fault API server restart from 28.000s to 40.000s",
		"node node-a:",
		"fault cloud shutdown from 5.000s to 30.000s",
		"connect at 30.000s (cloud shutdown ended)",
		"Ready=Unknown seen at 9.000s",
		"Ready=True seen at 31.000s",
		"taint node.kubernetes.io/out-of-service (podhealth's: true) from 14.000s to the end",
	} {
		require.Contains(t, got, want)
	}
	require.NotContains(t, got, "node node-b", "only the nodes the violations name")
}
