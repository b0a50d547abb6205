package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
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

// fencersSection is TestScenarioFencingEvidenceOfTheStorage's
// section of FIGURES.md.
const fencersSection = "fencers"

// TestScenarioFencingEvidenceOfTheStorage runs, on one control plane, the
// fencing evidence that comes from the storage: a StatefulSet pod on a
// node that the storage fenced (a csi-addons NetworkFence that reports a
// fence operation succeeded) is force-deleted, and one whose fence was
// withdrawn is held; by the library's Checker and by podhealth-controller
// --network-fence-driver. The workload's own evidence, a Lease that a
// self-fencing writer holds, is proven on real nodes
// (selffence_realnodes_linux_test.go).
func TestScenarioFencingEvidenceOfTheStorage(t *testing.T) {
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

	t.Run("the storage's network fence", func(t *testing.T) {
		t.Parallel()
		record(runNetworkFence(sub(t), t, cp, networkFence{namespace: ns, prefix: "nf"}))
	})
	t.Run("podhealth-controller --network-fence-driver", func(t *testing.T) {
		t.Parallel()
		record(runNetworkFence(sub(t), t, cp, networkFence{namespace: "fencers-nf-controller", prefix: "nfc", controller: true}))
	})
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
	fmt.Fprintf(&b, "## Fencing evidence of the storage\n\n")
	fmt.Fprintf(&b, "Measured by `TestScenarioFencingEvidenceOfTheStorage` (`cd e2e && PODHEALTH_WRITE_FIGURES=1 go test -count=1 -run TestScenarioFencingEvidenceOfTheStorage -v .`) on %s: %d CPUs, %s/%s, %s; 1-minute load average %s at the end. "+
		"The control plane is real; the nodes' kubelets are the harness's models. "+
		"Node monitor grace period %v, the pods' toleration 2 s, `--node-eviction-rate=100` so that the scenarios' nodes, failing at once, are not tainted one per 10 s; podhealth-controller runs with `--breaker-min-unhealthy=10`, since the scenarios' failed nodes together would trip its Breaker.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), figLoadAverage(), harness.NodeMonitorGracePeriod)
	fmt.Fprintf(&b, "| scenario | measured |\n|---|---|\n")
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	return b.String()
}
