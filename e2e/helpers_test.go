package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

// ns is the namespace of every scenario; each test has a control plane of
// its own.
const ns = metav1.NamespaceDefault

// workloadLabel ties a pod to its workload in examples/operator.
const workloadLabel = "podhealth.example/workload"

// operatorImage is the image of the example operator's replacement pods;
// nothing ever pulls it.
const operatorImage = "registry.example/x:1"

// taintEvicted is true of a pod the taint-eviction controller has marked and
// deleted gracefully: DisruptionTarget=True, reason DeletionByTaintManager,
// and a deletionTimestamp.
var taintEvicted = harness.PodAll(
	harness.PodHasCondition(corev1.DisruptionTarget, corev1.ConditionTrue, "DeletionByTaintManager"),
	harness.PodTerminating,
)

// startCluster starts a control plane with one heartbeating node per name
// and waits until every node is Ready.
func startCluster(ctx context.Context, t *testing.T, nodeNames ...string) (*harness.ControlPlane, []*harness.Node) {
	t.Helper()
	start := time.Now()
	cp := harness.Start(t, bins, harness.Options{})
	nodes := make([]*harness.Node, len(nodeNames))
	for i, name := range nodeNames {
		nodes[i] = cp.AddNode(ctx, name)
	}
	for _, n := range nodes {
		if _, err := harness.WaitForNode(ctx, cp.Client(), n.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("control plane with nodes %v ready in %v", nodeNames, time.Since(start).Round(100*time.Millisecond))
	return cp, nodes
}

// workloadPod is a pod of workload w bound to nodeName (see
// harness.BoundPod).
func workloadPod(name, nodeName, w string, tolerationSeconds int64) *corev1.Pod {
	pod := harness.BoundPod(ns, name, nodeName, tolerationSeconds)
	pod.Labels[workloadLabel] = w
	return pod
}

// workloadSelector selects the pods of workload w.
func workloadSelector(w string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{workloadLabel: w})
}

// failAndWaitEvicted stops the heartbeat of node and waits until the
// taint-eviction controller has evicted every one of pods, which must be
// bound to it. It returns the pods as last read, in the same order.
func failAndWaitEvicted(ctx context.Context, t *testing.T, c kubernetes.Interface, node *harness.Node, pods ...*corev1.Pod) []*corev1.Pod {
	t.Helper()
	node.Fail()
	failedAt := time.Now()
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		got, err := harness.WaitForPod(ctx, c, p.Namespace, p.Name, harness.PodAll(taintEvicted, hasUID(p.UID)))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = got
	}
	t.Logf("node %s failed; pods taint-evicted and Terminating %v after its last heartbeat", node.Name(), time.Since(failedAt).Round(100*time.Millisecond))
	return out
}

// hasUID is true of a pod with the given UID.
func hasUID(uid types.UID) harness.PodPredicate {
	return func(pod *corev1.Pod) bool { return pod != nil && pod.UID == uid }
}

// notTerminating is true of a pod that exists and has no deletionTimestamp.
func notTerminating(pod *corev1.Pod) bool { return pod != nil && pod.DeletionTimestamp == nil }

// onNode is true of a pod bound to nodeName.
func onNode(nodeName string) harness.PodPredicate {
	return func(pod *corev1.Pod) bool { return pod != nil && pod.Spec.NodeName == nodeName }
}

// newChecker returns a Checker over the API server for workload w in ns: a
// LIST per check through c, force deletes through c.
func newChecker(t *testing.T, c kubernetes.Interface, w string) *health.Checker {
	t.Helper()
	source, err := kube.NewClientSource(c.CoreV1(), ns, workloadSelector(w))
	if err != nil {
		t.Fatal(err)
	}
	return newCheckerOver(t, c, w, source)
}

// newCheckerOver returns a Checker for workload w in ns that lists pods
// from source and force-deletes them through c.
func newCheckerOver(t *testing.T, c kubernetes.Interface, w string, source health.PodSource) *health.Checker {
	t.Helper()
	deleter, err := kube.NewDeleter(c.CoreV1(), ns, kube.DeleterOptions{Selector: workloadSelector(w)})
	if err != nil {
		t.Fatal(err)
	}
	checker, err := health.New(source, deleter, withLiveNodes(t, c, health.Options{Logger: testr.New(t)}))
	if err != nil {
		t.Fatal(err)
	}
	return checker
}

// withLiveNodes gives opts node evidence read live through c: a node GET per
// node and check, so that a taint-evicted pod on a node that is not Ready
// is dead at once rather than after its grace period.
func withLiveNodes(t *testing.T, c kubernetes.Interface, opts health.Options) health.Options {
	t.Helper()
	live, err := kube.NewLiveNodes(c.CoreV1())
	if err != nil {
		t.Fatal(err)
	}
	opts.Nodes, opts.LiveNodes = live, live
	return opts
}

// podReport returns the report of the pod with the given UID, failing the
// test if the report has none.
func podReport(t *testing.T, r health.Report, uid types.UID) health.PodReport {
	t.Helper()
	for _, p := range r.Pods {
		if p.Pod.UID == uid {
			return p
		}
	}
	t.Fatalf("report has no pod with UID %s: %+v", uid, r.Pods)
	return health.PodReport{}
}

// requests is a snapshot of the API server's apiserver_request_total.
type requests map[harness.RequestKey]float64

func readRequests(ctx context.Context, t *testing.T, cp *harness.ControlPlane) requests {
	t.Helper()
	r, err := cp.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// count returns how many requests of verb on resource the snapshot holds,
// with response code code, or with any code if code is empty.
func (r requests) count(verb, resource, code string) float64 {
	var n float64
	for k, v := range r {
		if strings.EqualFold(k.Verb, verb) && k.Resource == resource && (code == "" || k.Code == code) {
			n += v
		}
	}
	return n
}

// since returns how many more requests of verb on resource, with code (any
// if empty), r holds than before.
func (r requests) since(before requests, verb, resource, code string) float64 {
	return r.count(verb, resource, code) - before.count(verb, resource, code)
}

// codes describes the requests of verb on resource r holds since before,
// by response code, for failure messages.
func (r requests) codesSince(before requests, verb, resource string) string {
	byCode := map[string]float64{}
	for k, v := range r {
		if strings.EqualFold(k.Verb, verb) && k.Resource == resource {
			byCode[k.Code] += v - before[k]
		}
	}
	var parts []string
	for code, n := range byCode {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%s:%v", code, n))
		}
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

// listWorkload lists the pods of workload w from the API server.
func listWorkload(ctx context.Context, c kubernetes.Interface, w string) ([]corev1.Pod, error) {
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: workloadSelector(w).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// describePods lists name, UID, node and deletion state of pods.
func describePods(pods []corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		s := fmt.Sprintf("%s(uid=%s node=%q", p.Name, p.UID, p.Spec.NodeName)
		if p.DeletionTimestamp != nil {
			s += " terminating"
		}
		parts = append(parts, s+")")
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// consistentlyWorkload lists the pods of workload w every PollInterval for
// d and fails the test as soon as check returns an error.
func consistentlyWorkload(ctx context.Context, t *testing.T, c kubernetes.Interface, w string, d time.Duration, check func([]corev1.Pod) error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		pods, err := listWorkload(ctx, c, w)
		if err == nil {
			err = check(pods)
		}
		if err != nil {
			t.Fatalf("workload %s after %v: %v; pods %s", w, d-time.Until(deadline), err, describePods(pods))
		}
		if !time.Now().Before(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(harness.PollInterval):
		}
	}
}

// waitForOperator waits until the operator's log says its pod cache has
// synced, so that it is watching the workloads.
func waitForOperator(ctx context.Context, t *testing.T, op *harness.Operator) {
	t.Helper()
	if err := pollUntil(ctx, func() bool { return len(op.LogLines("pod cache synced")) > 0 }); err != nil {
		t.Fatalf("operator did not sync its pod cache: %v\n%s", err, op.Log())
	}
}

// operatorResync is the example operator's --resync in the scenarios.
const operatorResync = 2 * time.Second

// operatorArgs are the example operator's flags for workloads in ns: a
// resync of 2 s so that it checks often, and replacements that tolerate a
// lost node for 2 s only. Node evidence is on, the operator's default.
func operatorArgs(workloads string, extra ...string) []string {
	return append([]string{
		"--namespace=" + ns,
		"--workloads=" + workloads,
		"--image=" + operatorImage,
		"--resync=" + operatorResync.String(),
		"--toleration-seconds=2",
	}, extra...)
}

// watchFinalState watches the pod ns/name from the current state on and
// delivers the pod as it was when the API server deleted it. The watch ends
// with ctx.
func watchFinalState(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) <-chan *corev1.Pod {
	t.Helper()
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *corev1.Pod, 1)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type != watch.Deleted {
				continue
			}
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				out <- pod
				return
			}
		}
	}()
	return out
}

// timed runs f and returns how long it took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// deleterFunc adapts a function to a health.Deleter.
type deleterFunc func(ctx context.Context, pod *corev1.Pod) error

func (f deleterFunc) ForceDelete(ctx context.Context, pod *corev1.Pod) error { return f(ctx, pod) }

// createStatefulSetOwner creates the StatefulSet "db" in ns, with no
// replicas: no statefulset controller runs, the object only owns the pods
// a test binds to it (app=db).
func createStatefulSetOwner(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string) *appsv1.StatefulSet {
	t.Helper()
	sts, err := c.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "registry.invalid/db:v1"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sts
}
