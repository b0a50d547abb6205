package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

// The self-fencing database's protocol: its primary holds a Lease of
// selfFenceLease, renews it every selfFenceRenew, writes only while it
// holds it, and its watchdog stops it selfFenceDeadline after the Lease
// expires.
const (
	selfFenceLease    = 10 * time.Second
	selfFenceDeadline = 5 * time.Second
	selfFenceRenew    = 500 * time.Millisecond
	selfFenceTick     = 100 * time.Millisecond
)

// fencersSection is TestScenarioFencingEvidenceOfTheWorkloadAndTheStorage's
// section of FIGURES.md.
const fencersSection = "fencers"

// TestScenarioFencingEvidenceOfTheWorkloadAndTheStorage runs, on one
// control plane, the fencing evidence that does not come from the node:
//   - a "database" whose primary fences itself with a Lease is partitioned
//     off: podhealth force-deletes it only once its Lease has been
//     unrenewed for its duration plus the deadline, its replacement on
//     another node takes the Lease and writes, and the writes on the
//     "volume" show that no two primaries ever wrote at once;
//   - the same with a primary that ignores its deadline (the mutation):
//     the volume shows the two writers, so the invariant check can fail;
//   - a StatefulSet pod on a node that the storage fenced (a csi-addons
//     NetworkFence that reports a fence operation succeeded) is
//     force-deleted, and one whose fence was withdrawn is held.
func TestScenarioFencingEvidenceOfTheWorkloadAndTheStorage(t *testing.T) {
	t.Parallel()
	// The subtests wait for a slot of -parallel: each has a deadline of
	// its own, from when it runs (sub), and this one is the setup's.
	setup, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	ctx := setup
	sub := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	// The scenarios' nodes fail at once: at the node-lifecycle
	// controller's default rate (one node tainted per 10 s) they would
	// queue, and the figures would measure the queue.
	cp := harness.Start(t, bins, harness.Options{ExtraControllerManagerArgs: []string{"--node-eviction-rate=100"}})
	// Five of the scenarios' nodes fail, possibly at once; with more than
	// 55 % of a zone's nodes down the node-lifecycle controller stops
	// evicting (PartialDisruption), so healthy nodes keep the share lower.
	for i := range 4 {
		spare := cp.AddNode(ctx, fmt.Sprintf("fencers-spare-%d", i))
		if _, err := harness.WaitForNode(ctx, cp.Client(), spare.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	var rows []string
	record := func(row string) {
		mu.Lock()
		defer mu.Unlock()
		rows = append(rows, row)
	}
	t.Cleanup(func() {
		if os.Getenv(figWriteEnv) != "1" || t.Failed() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if err := figWriteSection(figFiguresFile, fencersSection, fencersFigures(rows)); err != nil {
			t.Error(err)
		}
	})

	t.Run("a database that fences itself", func(t *testing.T) {
		t.Parallel()
		r := runSelfFence(sub(t), t, cp, "pg", selfFence{namespace: ns})
		if err := r.singleWriter(); err != nil {
			t.Errorf("two primaries wrote at once: %v", err)
		}
		record(r.row())
	})
	t.Run("a primary that ignores its deadline is caught writing twice", func(t *testing.T) {
		t.Parallel()
		r := runSelfFence(sub(t), t, cp, "pgbad", selfFence{namespace: ns, ignoreDeadline: true})
		if err := r.singleWriter(); err == nil {
			t.Error("the invariant check found no second writer, though the old primary ignored its deadline and kept writing")
		} else {
			t.Logf("caught, as it must be: %v", err)
		}
	})
	t.Run("podhealth-controller --fence-lease", func(t *testing.T) {
		t.Parallel()
		r := runSelfFence(sub(t), t, cp, "pgctl", selfFence{namespace: "fencers-controller", controller: true})
		if err := r.singleWriter(); err != nil {
			t.Errorf("two primaries wrote at once: %v", err)
		}
		record(r.row())
	})
	t.Run("the storage's network fence", func(t *testing.T) {
		t.Parallel()
		record(runNetworkFence(sub(t), t, cp, networkFence{namespace: ns, prefix: "nf"}))
	})
	t.Run("podhealth-controller --network-fence-driver", func(t *testing.T) {
		t.Parallel()
		record(runNetworkFence(sub(t), t, cp, networkFence{namespace: "fencers-nf-controller", prefix: "nfc", controller: true}))
	})
}

// volumeWrite is one write of a primary to the volume.
type volumeWrite struct {
	who string
	at  time.Time
}

// volume is what every primary of one database writes to: it stands for
// the shared data directory.
type volume struct {
	mu     sync.Mutex
	writes []volumeWrite
}

func (v *volume) write(who string, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.writes = append(v.writes, volumeWrite{who, at})
}

// spans returns each writer's first and last write, by writer.
func (v *volume) spans() map[string][2]time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string][2]time.Time{}
	for _, w := range v.writes {
		s, ok := out[w.who]
		if !ok {
			s[0] = w.at
		}
		s[1] = w.at
		out[w.who] = s
	}
	return out
}

// primary is the model of a database container that fences itself: it
// runs while the node's kubelet runs its pod, reaches the API server only
// while the node is connected, renews its Lease, writes while it holds it,
// and stops selfFenceDeadline after the Lease expires, unless
// ignoreDeadline (then it writes while it runs, as a primary without a
// watchdog that hangs in a write would).
type primary struct {
	namespace      string
	name, lease    string
	client         kubernetes.Interface
	kubelet        *harness.Kubelet
	uid            types.UID
	vol            *volume
	ignoreDeadline bool

	mu          sync.Mutex
	lastRenew   time.Time // the start of its last renewal that succeeded
	stopped     time.Time // when its watchdog stopped it
	failedHolds int       // renewals that failed, with the last error
	lastHoldErr error
}

// holdFailures says how many of its renewals failed and why the last did.
func (p *primary) holdFailures() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failedHolds, p.lastHoldErr
}

func (p *primary) renewedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastRenew
}

func (p *primary) run(ctx context.Context) {
	tick := time.NewTicker(selfFenceTick)
	defer tick.Stop()
	var lastTry time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !slicesContains(p.kubelet.Running(), p.uid) {
			return // its kubelet stopped the container
		}
		now := time.Now()
		if p.kubelet.Connected() && now.Sub(lastTry) >= selfFenceRenew {
			lastTry = now
			err := p.hold(ctx, now)
			p.mu.Lock()
			if err == nil {
				p.lastRenew = now
			} else {
				p.failedHolds++
				p.lastHoldErr = err
			}
			p.mu.Unlock()
		}
		renewed := p.renewedAt()
		switch {
		case renewed.IsZero():
		case p.ignoreDeadline:
			p.vol.write(p.name, now)
		case now.After(renewed.Add(selfFenceLease + selfFenceDeadline)):
			p.mu.Lock()
			p.stopped = now
			p.mu.Unlock()
			return // the watchdog
		case now.Before(renewed.Add(selfFenceLease)):
			p.vol.write(p.name, now)
		}
	}
}

// errHeldByAnother is hold's answer while another primary holds the Lease.
var errHeldByAnother = errors.New("the Lease is held by another primary and has not expired")

// hold acquires or renews the Lease, as of now, and says why it does not
// hold it: it takes over only a Lease expired by its own clock.
func (p *primary) hold(ctx context.Context, now time.Time) error {
	// A loaded API server may take longer than a renewal interval: the
	// renewal counts from its start either way.
	ctx, cancel := context.WithTimeout(ctx, 4*selfFenceRenew)
	defer cancel()
	leases := p.client.CoordinationV1().Leases(p.namespace)
	stamp := ptr.To(metav1.NewMicroTime(now))
	lease, err := leases.Get(ctx, p.lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: p.lease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(p.name), LeaseDurationSeconds: ptr.To(int32(selfFenceLease / time.Second)),
				AcquireTime: stamp, RenewTime: stamp},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	spec := &lease.Spec
	if ptrValue(spec.HolderIdentity) != p.name {
		if spec.RenewTime != nil && now.Before(spec.RenewTime.Add(selfFenceLease)) {
			return errHeldByAnother
		}
		spec.HolderIdentity, spec.AcquireTime = ptr.To(p.name), stamp
		spec.LeaseTransitions = ptr.To(ptrValue(spec.LeaseTransitions) + 1)
	}
	spec.RenewTime = stamp
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

func slicesContains(uids []types.UID, uid types.UID) bool {
	for _, u := range uids {
		if u == uid {
			return true
		}
	}
	return false
}

// selfFenceRun is what one self-fencing scenario measured.
type selfFenceRun struct {
	vol                        *volume
	old, repl                  string
	partition, evicted, gone   time.Time
	lastRenew, replacementLive time.Time
	held                       int
	byController               bool // held counts the controller's events, not checks
}

// singleWriter checks the volume alone: the old primary's last write comes
// before the replacement's first.
func (r selfFenceRun) singleWriter() error {
	spans := r.vol.spans()
	o, ok := spans[r.old]
	if !ok {
		return errors.New("the old primary never wrote")
	}
	n, ok := spans[r.repl]
	if !ok {
		return errors.New("the replacement never wrote")
	}
	if !o[1].Before(n[0]) {
		return fmt.Errorf("%s wrote until %s, %v after %s first wrote at %s", r.old, o[1].Format(time.StampMilli), o[1].Sub(n[0]).Round(time.Millisecond), r.repl, n[0].Format(time.StampMilli))
	}
	return nil
}

func (r selfFenceRun) row() string {
	goal := selfFenceLease + selfFenceDeadline + 5*time.Second
	who, held := "a database that fences itself", fmt.Sprintf("held back in %d checks", r.held)
	if r.byController {
		who, held = "the same, podhealth-controller `--fence-lease` its checker", fmt.Sprintf("%d `%s` event for the hold", r.held, podsource.ReasonHeldBack)
	}
	return fmt.Sprintf("| %s (Lease %v, deadline %v, margin %v) | partitioned: evicted %v, force-deleted %v (last renewal + duration + deadline: %v), the replacement the primary and writing %v after the partition (goal ≤ %v); %s; no two writers |",
		who, selfFenceLease, selfFenceDeadline, fencing.DefaultMargin, figSec(r.evicted.Sub(r.partition)), figSec(r.gone.Sub(r.partition)),
		figSec(r.lastRenew.Add(selfFenceLease+selfFenceDeadline).Sub(r.partition)), figSec(r.replacementLive.Sub(r.partition)), goal, held)
}

// selfFence says how a self-fencing scenario runs: in which namespace,
// whether its primary ignores its deadline (the mutation), and whether
// podhealth-controller --fence-lease is its checker rather than an
// operator's in-process Checker.
type selfFence struct {
	namespace      string
	ignoreDeadline bool
	controller     bool
}

// runSelfFence partitions the node of a self-fencing primary of database
// name and follows it to its replacement's first write.
func runSelfFence(ctx context.Context, t *testing.T, cp *harness.ControlPlane, name string, how selfFence) selfFenceRun {
	c := cp.Client()
	ns := how.namespace
	if ns != metav1.NamespaceDefault {
		// podhealth-controller acts in namespaces labelled so.
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"podhealth.io/enabled": "true"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodeA, nodeB := cp.AddNode(ctx, name+"-node-a"), cp.AddNode(ctx, name+"-node-b")
	kA, kB := cp.StartKubelet(nodeA, &harness.ContainerLog{}), cp.StartKubelet(nodeB, &harness.ContainerLog{})
	for _, n := range []*harness.Node{nodeA, nodeB} {
		if _, err := harness.WaitForNode(ctx, c, n.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatal(err)
		}
	}
	// The operator's custom resource: a ConfigMap stands in for it, a kind
	// the default policy does not vouch for.
	owner, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease := name + "-primary"
	instance := func(i int, node string) *corev1.Pod {
		p := harness.BoundPod(ns, fmt.Sprintf("%s-%d", name, i), node, 2)
		p.Labels = map[string]string{"e2e.podhealth.io/database": name}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
		p.Annotations = map[string]string{fencing.AnnotationLease: lease, fencing.AnnotationDeadline: selfFenceDeadline.String()}
		p.Spec.Volumes = []corev1.Volume{{Name: "pgdata", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pgdata-" + name}}}}
		return p
	}
	vol := &volume{}
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	t.Cleanup(func() { stop(); running.Wait() })
	startPrimary := func(pod *corev1.Pod, k *harness.Kubelet) *primary {
		p := &primary{namespace: ns, name: pod.Name, lease: lease, client: c, kubelet: k, uid: pod.UID, vol: vol, ignoreDeadline: how.ignoreDeadline}
		if err := pollUntil(ctx, func() bool { return slicesContains(k.Running(), pod.UID) }); err != nil {
			t.Fatalf("the kubelet of %s never ran %s: %v", k.Node().Name(), pod.Name, err)
		}
		running.Go(func() { p.run(runCtx) })
		return p
	}

	// The operator's checker, wired as docs/operators.md says: the pods'
	// and nodes' informers, the Lease fencer reading Leases live, with a
	// watch of the namespace's Leases for when each renewal arrived.
	selector := labels.SelectorFromSet(labels.Set{"e2e.podhealth.io/database": name})
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	nodeFactory := informers.NewSharedInformerFactory(c, 0)
	leaseWatch, err := kube.NewLeaseWatch(factory.Coordination().V1().Leases().Informer(), nil)
	if err != nil {
		t.Fatal(err)
	}
	loop := newStsLoop()
	loop.pokeOnUpdates(t, factory.Core().V1().Pods().Informer(), nodeFactory.Core().V1().Nodes().Informer())
	factory.Start(runCtx.Done())
	nodeFactory.Start(runCtx.Done())
	t.Cleanup(func() { stop(); factory.Shutdown(); nodeFactory.Shutdown() })
	factory.WaitForCacheSync(ctx.Done())
	nodeFactory.WaitForCacheSync(ctx.Done())
	leases, err := kube.NewLiveLeases(c.CoordinationV1())
	if err != nil {
		t.Fatal(err)
	}
	fencer, err := fencing.NewLeaseFencer(leases, fencing.LeaseOptions{Seen: leaseWatch})
	if err != nil {
		t.Fatal(err)
	}
	checker := fencersChecker(t, c, factory, nodeFactory, ns, selector, fencer)
	watch, err := cp.WatchPods(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}

	old := cp.CreatePod(ctx, instance(0, nodeA.Name()))
	oldPrimary := startPrimary(old, kA)
	if err := pollUntil(ctx, func() bool { _, ok := vol.spans()[old.Name]; return ok }); err != nil {
		t.Fatalf("%s never took the Lease and wrote: %v", old.Name, err)
	}
	var controller *harness.Operator
	if how.controller {
		// As an admin runs it, less its RBAC (the test's kubeconfig): the
		// namespaces labelled podhealth.io/enabled=true, with --fence-lease.
		// Its Breaker would stop it while the other scenarios' nodes are
		// down too (5 of 13): that is not what this measures.
		controller = cp.StartController(t, bins, "fence-lease", "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
			"--fence-lease", "--namespace-selector=podhealth.io/enabled=true", "--breaker-min-unhealthy=10")
	} else {
		running.Go(func() { loop.run(runCtx, checker, 500*time.Millisecond) })
	}

	r := selfFenceRun{vol: vol, old: old.Name, repl: name + "-1", partition: time.Now(), byController: how.controller}
	kA.Partition("the node's link goes down")
	wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
	_, err = watch.WaitFor(wctx, "the old primary force-deleted", func([]harness.PodHistory) bool {
		h, _ := watch.Pod(old.UID)
		return !h.Deleted.IsZero()
	})
	wcancel()
	if err != nil {
		_, prs := loop.reportsOf(old.UID)
		if len(prs) > 0 {
			t.Logf("the old primary's last report: %v %v %s", prs[len(prs)-1].Verdict.State, prs[len(prs)-1].Outcome, prs[len(prs)-1].HeldBack)
		}
		t.Fatal(err)
	}
	h, _ := watch.Pod(old.UID)
	r.evicted, r.gone, r.lastRenew = h.Evicted, h.Deleted, oldPrimary.renewedAt()
	if h.Evicted.IsZero() {
		t.Fatal("the old primary went before the taint-eviction controller evicted it")
	}
	if earliest := r.lastRenew.Add(selfFenceLease + selfFenceDeadline); r.gone.Before(earliest) {
		t.Errorf("the old primary was force-deleted at %s, %v before its Lease had been unrenewed for its duration plus the deadline (at %s)",
			r.gone.Format(time.StampMilli), earliest.Sub(r.gone), earliest.Format(time.StampMilli))
	}
	if how.controller {
		// The log line follows the DELETE's answer, which the watch may
		// deliver first.
		if err := pollUntil(ctx, func() bool { return containsLine(controller.LogLines("force-deleted pod"), old.Name) }); err != nil {
			t.Errorf("podhealth-controller did not force-delete %s; its force deletes: %v", old.Name, controller.LogLines("force-deleted pod"))
		}
		// Its hold, judged again at each pod and node event, is one event.
		if err := pollUntil(ctx, func() bool { return len(heldEvents(ctx, t, c, ns)) > 0 }); err != nil {
			t.Fatalf("no %s event: %v", podsource.ReasonHeldBack, err)
		}
		// The recorder folds a repeat into the first Event's series.
		events := heldEvents(ctx, t, c, ns)
		for _, e := range events {
			r.held++
			if e.Series != nil {
				r.held += int(e.Series.Count) - 1
			}
		}
		t.Logf("the hold's event, at %s: %s", events[0].CreationTimestamp.Format(time.StampMilli), events[0].Note)
		if r.held != 1 {
			t.Errorf("podhealth-controller recorded %d %s events for one hold, want 1", r.held, podsource.ReasonHeldBack)
		}
	} else {
		if err := loop.waitForCheckAfter(ctx, r.gone); err != nil {
			t.Fatal(err)
		}
		ats, prs := loop.reportsOf(old.UID)
		for i, pr := range prs {
			if pr.Outcome != health.HeldBack || ats[i].Before(r.evicted) {
				continue
			}
			if pr.HeldBack.Reason != health.HeldForFencing || !strings.Contains(pr.HeldBack.Detail, "lease "+ns+"/"+lease) {
				t.Errorf("the old primary held back for %s, want the Lease's wait", pr.HeldBack)
			}
			r.held++
		}
		if !stsHasOutcome(prs, health.ForceDeleted) {
			t.Errorf("the checker never reported the force delete; outcomes %v", stsOutcomes(prs))
		}
	}

	// The operator replaces the instance on the other node; it becomes the
	// primary once the Lease has expired by its own clock.
	repl := cp.CreatePod(ctx, instance(1, nodeB.Name()))
	startPrimary(repl, kB)
	if err := pollUntil(ctx, func() bool { _, ok := vol.spans()[repl.Name]; return ok }); err != nil {
		t.Fatalf("the replacement never took the Lease: %v", err)
	}
	r.replacementLive = vol.spans()[repl.Name][0]
	time.Sleep(2 * selfFenceRenew) // let an old primary that ignores its deadline write over it
	kA.Connect("the link is back")
	for _, err := range loop.errors() {
		t.Errorf("check failed: %v", err)
	}
	t.Logf("partition → evicted %v, force-deleted %v, replacement writing %v; held in %d checks", r.evicted.Sub(r.partition).Round(time.Millisecond),
		r.gone.Sub(r.partition).Round(time.Millisecond), r.replacementLive.Sub(r.partition).Round(time.Millisecond), r.held)
	return r
}

var networkFenceCRD = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installNetworkFences installs csi-addons' NetworkFence resource (its
// group, names, scope and status subresource; the schema keeps any field)
// and waits until it is served.
func installNetworkFences(ctx context.Context, t *testing.T, d dynamic.Interface) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "networkfences.csiaddons.openshift.io"},
		"spec": map[string]any{
			"group": "csiaddons.openshift.io", "scope": "Cluster",
			"names": map[string]any{"kind": "NetworkFence", "listKind": "NetworkFenceList", "plural": "networkfences", "singular": "networkfence"},
			"versions": []any{map[string]any{
				"name": "v1alpha1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	// The library's and the controller's scenarios install it, whichever
	// runs first.
	if _, err := d.Resource(networkFenceCRD).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := pollUntil(ctx, func() bool {
		_, err := d.Resource(fencing.NetworkFenceResource).List(ctx, metav1.ListOptions{})
		return err == nil
	}); err != nil {
		t.Fatalf("NetworkFences never served: %v", err)
	}
}

// putNetworkFence creates a NetworkFence of Ceph's RBD driver over cidr in
// fenceState, and then sets its status as csi-addons does after an
// operation that succeeded with message.
func putNetworkFence(ctx context.Context, t *testing.T, d dynamic.Interface, name, cidr, fenceState, message string) {
	t.Helper()
	fence := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"driver": "rbd.csi.ceph.com", "fenceState": fenceState, "cidrs": []any{cidr}},
	}}
	created, err := d.Resource(fencing.NetworkFenceResource).Create(ctx, fence, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Object["status"] = map[string]any{"result": "Succeeded", "message": message}
	if _, err := d.Resource(fencing.NetworkFenceResource).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// networkFenceLabel opts a namespace in for the network-fence scenario's
// podhealth-controller.
const networkFenceLabel = "e2e.podhealth.io/network-fence"

// networkFence says how a network-fence scenario runs: in which
// namespace, with which prefix for its nodes and fences (and their
// addresses), and whether podhealth-controller --network-fence-driver is
// its checker rather than an operator's library Checker.
type networkFence struct {
	namespace, prefix string
	controller        bool
}

// runNetworkFence fails two nodes of StatefulSet pods: the storage fences
// the first; the second's fence is withdrawn (Unfenced, with the success
// of its earlier fence still in its status).
func runNetworkFence(ctx context.Context, t *testing.T, cp *harness.ControlPlane, how networkFence) string {
	c := cp.Client()
	d, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	installNetworkFences(ctx, t, d)
	ns := how.namespace
	if how.controller {
		// This scenario's podhealth-controller acts in namespaces labelled
		// so, and the --fence-lease scenario's (podhealth.io/enabled) not
		// in this one.
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{networkFenceLabel: "true"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Each scenario's nodes have addresses of their own: 10.0.0.11 and .12
	// for the library's, .21 and .22 for the controller's.
	subnet := 10
	if how.controller {
		subnet = 20
	}
	fenced, withdrawn := cp.AddNode(ctx, how.prefix+"-node-fenced"), cp.AddNode(ctx, how.prefix+"-node-withdrawn")
	for i, n := range []*harness.Node{fenced, withdrawn} {
		if _, err := harness.WaitForNode(ctx, c, n.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatal(err)
		}
		patch := fmt.Sprintf(`{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.%d"}]}}`, subnet+1+i)
		if _, err := c.CoreV1().Nodes().Patch(ctx, n.Name(), types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	sts := createStatefulSetOwner(ctx, t, c, ns)
	group := map[string]string{"e2e.podhealth.io/group": "network-fence"}
	pod := func(name, node string) *corev1.Pod {
		p := harness.BoundPod(ns, name, node, 2)
		p.Labels = map[string]string{"app": "db", "e2e.podhealth.io/group": "network-fence"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr.To(true)}}
		return p
	}
	onFenced := cp.CreatePod(ctx, pod("db-0", fenced.Name()))
	onWithdrawn := cp.CreatePod(ctx, pod("db-1", withdrawn.Name()))
	putNetworkFence(ctx, t, d, how.prefix+"-withdrawn", fmt.Sprintf("10.0.0.%d/32", subnet+2), "Unfenced", "fencing operation successful")
	if how.controller {
		return runNetworkFenceController(ctx, t, cp, d, how, onFenced, onWithdrawn, fenced, withdrawn, subnet)
	}

	selector := labels.SelectorFromSet(group)
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	nodeFactory := informers.NewSharedInformerFactory(c, 0)
	loop := newStsLoop()
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	t.Cleanup(func() { stop(); running.Wait(); factory.Shutdown(); nodeFactory.Shutdown() })
	factory.Core().V1().Pods().Informer()
	nodeFactory.Core().V1().Nodes().Informer()
	factory.Start(runCtx.Done())
	nodeFactory.Start(runCtx.Done())
	factory.WaitForCacheSync(ctx.Done())
	nodeFactory.WaitForCacheSync(ctx.Done())
	fences, err := kube.NewLiveNetworkFences(d)
	if err != nil {
		t.Fatal(err)
	}
	fencer, err := fencing.NewNetworkFenceFencer(fences, fencing.NetworkFenceOptions{Drivers: []string{"rbd.csi.ceph.com"}, Recheck: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	checker := fencersChecker(t, c, factory, nodeFactory, ns, selector, fencer)
	running.Go(func() { loop.run(runCtx, checker, time.Second) })

	gone := failAndFence(ctx, t, c, d, how, onFenced, onWithdrawn, fenced, withdrawn, subnet)
	_, prs := loop.reportsOf(onWithdrawn.UID)
	if len(prs) == 0 || !strings.Contains(prs[len(prs)-1].HeldBack.Detail, `is fenceState "Unfenced"`) {
		t.Errorf("the withdrawn fence's pod: last reports %v, want held for the withdrawn fence", stsOutcomes(prs))
	} else {
		t.Logf("held: %s", prs[len(prs)-1].HeldBack)
	}
	_, prs = loop.reportsOf(onFenced.UID)
	if !stsHasOutcome(prs, health.ForceDeleted) {
		t.Errorf("the fenced node's pod was not force-deleted by the checker; outcomes %v", stsOutcomes(prs))
	}
	for _, err := range loop.errors() {
		t.Errorf("check failed: %v", err)
	}
	return fmt.Sprintf("| a StatefulSet pod on a node the storage fenced (a csi-addons NetworkFence, `Succeeded`; checks every 1 s) | force-deleted %v after the fence's status said so; the pod whose fence was withdrawn (`Unfenced`, an earlier fence's success left in its status) held |", figSec(gone))
}

// failAndFence fails both nodes, requires both pods held while no fence
// is fenced, fences the first node's address, and returns how long after
// that its pod was gone, with the second pod still held.
func failAndFence(ctx context.Context, t *testing.T, c kubernetes.Interface, d dynamic.Interface, how networkFence, onFenced, onWithdrawn *corev1.Pod, fenced, withdrawn *harness.Node, subnet int) time.Duration {
	t.Helper()
	ns := how.namespace
	fenced.Fail()
	withdrawn.Fail()
	for _, p := range []*corev1.Pod{onFenced, onWithdrawn} {
		if _, err := harness.WaitForPod(ctx, c, ns, p.Name, taintEvicted); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*corev1.Pod{onFenced, onWithdrawn} {
		if _, err := harness.ConsistentlyPod(ctx, c, ns, p.Name, 4*time.Second, taintEvicted); err != nil {
			t.Fatalf("%s without a fenced NetworkFence: %v", p.Name, err)
		}
	}
	putNetworkFence(ctx, t, d, how.prefix+"-fenced", fmt.Sprintf("10.0.0.%d/32", subnet+1), "Fenced", "fencing operation successful")
	fencedAt := time.Now()
	if _, err := harness.WaitForPod(ctx, c, ns, onFenced.Name, harness.PodGone); err != nil {
		t.Fatalf("the pod of the fenced node: %v", err)
	}
	gone := time.Since(fencedAt)
	if _, err := harness.ConsistentlyPod(ctx, c, ns, onWithdrawn.Name, 3*time.Second, taintEvicted); err != nil {
		t.Fatalf("the pod whose fence was withdrawn: %v", err)
	}
	return gone
}

// runNetworkFenceController is runNetworkFence's second half with
// podhealth-controller as the checker, run as an admin runs it (less its
// RBAC: the test's kubeconfig) with --network-fence-driver: the fenced
// node's pod goes, and the withdrawn fence's pod is held, with an event
// that says why. Its node cache is the one whose transform must keep the
// nodes' addresses.
func runNetworkFenceController(ctx context.Context, t *testing.T, cp *harness.ControlPlane, d dynamic.Interface, how networkFence, onFenced, onWithdrawn *corev1.Pod, fenced, withdrawn *harness.Node, subnet int) string {
	c := cp.Client()
	ns := how.namespace
	// Its Breaker would stop it while the other scenarios' nodes are down
	// too: that is not what this measures.
	cp.StartController(t, bins, "network-fence", "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--network-fence-driver=rbd.csi.ceph.com", "--namespace-selector="+networkFenceLabel+"=true", "--breaker-min-unhealthy=10")
	gone := failAndFence(ctx, t, c, d, how, onFenced, onWithdrawn, fenced, withdrawn, subnet)
	// The force delete's event names the proof, not the NotReady node
	// alone.
	var deleted string
	if err := pollUntil(ctx, func() bool {
		list, err := c.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Reason == podsource.ReasonForceDeleted && e.Related != nil && e.Related.Name == onFenced.Name {
				deleted = e.Note
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no %s event for %s: %v", podsource.ReasonForceDeleted, onFenced.Name, err)
	}
	if want := fmt.Sprintf("fenced: fencer network-fence: network fence %s-fenced proves NodeStopped", how.prefix); !strings.Contains(deleted, want) {
		t.Errorf("the force delete's event does not name its proof (%q): %s", want, deleted)
	} else {
		t.Logf("deleted: %s", deleted)
	}
	var why string
	if err := pollUntil(ctx, func() bool {
		for _, e := range heldEvents(ctx, t, c, ns) {
			if e.Related != nil && e.Related.Name == onWithdrawn.Name && strings.Contains(e.Note, `is fenceState "Unfenced"`) {
				why = e.Note
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no event holds the withdrawn fence's pod for its fence: %v; events %v", err, heldEvents(ctx, t, c, ns))
	}
	t.Logf("held: %s", why)
	return fmt.Sprintf("| a StatefulSet pod on a node the storage fenced, podhealth-controller `--network-fence-driver` its checker (its node cache; re-checks every 30 s) | force-deleted %v after the fence's status said so; the withdrawn fence's pod held, its event naming the `Unfenced` fence |", figSec(gone))
}

// fencersChecker is an operator's Checker of the pods of namespace that
// selector selects, from kube.NewChecker over the factories' informers
// (which must be started), with fencer.
func fencersChecker(t *testing.T, c kubernetes.Interface, pods, nodes informers.SharedInformerFactory, namespace string, selector labels.Selector, fencer health.Fencer) *health.Checker {
	t.Helper()
	checker, err := kube.NewChecker(c, pods.Core().V1().Pods().Lister(), namespace, selector, kube.CheckerOptions{
		Health: health.Options{Logger: testr.New(t), Fencers: []health.Fencer{fencer}},
		Nodes:  nodes.Core().V1().Nodes(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return checker
}

func containsLine(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// heldEvents are the events.k8s.io events of namespace that record a
// dead pod held back.
func heldEvents(ctx context.Context, t *testing.T, c kubernetes.Interface, namespace string) []eventsv1.Event {
	t.Helper()
	list, err := c.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == podsource.ReasonHeldBack {
			out = append(out, e)
		}
	}
	return out
}

// fencersFigures is the section of FIGURES.md.
func fencersFigures(rows []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Fencing evidence of the workload and of the storage\n\n")
	fmt.Fprintf(&b, "Measured by `TestScenarioFencingEvidenceOfTheWorkloadAndTheStorage` (`cd e2e && PODHEALTH_WRITE_FIGURES=1 go test -count=1 -run TestScenarioFencingEvidenceOfTheWorkloadAndTheStorage -v .`) on %s: %d CPUs, %s/%s, %s; 1-minute load average %s at the end. "+
		"The control plane is real; the nodes' kubelets and the database's containers are the harness's models (a partition cuts the kubelet and the containers off the API server; the containers keep running). "+
		"The database's primary renews its Lease every %v, writes only while it holds it, and its watchdog stops it %v after the Lease expires; the operator's checker runs every 500 ms and on each pod or node change, with `fencing.LeaseFencer` and a `kube.LeaseWatch`. "+
		"Node monitor grace period %v, the pods' toleration 2 s, `--node-eviction-rate=100` so that the scenarios' nodes, failing at once, are not tainted one per 10 s; podhealth-controller runs with `--breaker-min-unhealthy=10`, since the scenarios' failed nodes together would trip its Breaker. The wait ends at the last renewal + duration + deadline + margin; the goal is duration + deadline + 5 s from the partition.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), figLoadAverage(), selfFenceRenew, selfFenceDeadline, harness.NodeMonitorGracePeriod)
	fmt.Fprintf(&b, "| scenario | measured |\n|---|---|\n")
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	return b.String()
}
