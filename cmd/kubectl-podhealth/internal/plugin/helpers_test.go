package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/internal/testutil"
)

// now is the tests' clock: five minutes after the lost node of the
// real-cluster fixtures went NotReady (16:40:16Z), and past the deadline of
// the taint-evicted pod (deletionTimestamp 16:40:48Z).
var now = time.Date(2026, 11, 29, 16, 45, 16, 0, time.UTC)

// fixtures are the real-cluster fixtures of the root module's testdata.
type fixtures struct {
	alive, taintEvicted, drained, userDeleted *corev1.Pod
	nodeHealthy, nodeLost                     *corev1.Node
}

func loadFixtures(t *testing.T) fixtures {
	t.Helper()
	return fixtures{
		alive:        testutil.LoadPod(t, testutil.PodAlive),
		taintEvicted: testutil.LoadPod(t, testutil.PodTaintEvicted),
		drained:      testutil.LoadPod(t, testutil.PodDrained),
		userDeleted:  testutil.LoadPod(t, testutil.PodUserDeleted),
		nodeHealthy:  testutil.LoadNode(t, testutil.NodeHealthy),
		nodeLost:     testutil.LoadNode(t, testutil.NodeLost),
	}
}

// renamed returns a copy of pod with another name and UID.
func renamed(pod *corev1.Pod, name string) *corev1.Pod {
	p := pod.DeepCopy()
	p.Name = name
	p.UID = types.UID("uid-" + name)
	p.ResourceVersion = ""
	return p
}

// onNode returns a copy of pod bound to node.
func onNode(pod *corev1.Pod, node string) *corev1.Pod {
	p := pod.DeepCopy()
	p.Spec.NodeName = node
	return p
}

// ownedByStatefulSet returns a copy of pod owned by StatefulSet name.
func ownedByStatefulSet(pod *corev1.Pod, name string) *corev1.Pod {
	p := pod.DeepCopy()
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name, UID: "uid-sts-" + types.UID(name), Controller: ptr.To(true)}}
	return p
}

// outOfService returns a copy of node with the out-of-service taint.
func outOfService(node *corev1.Node) *corev1.Node {
	n := node.DeepCopy()
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	return n
}

// namedNode returns a copy of node with another name.
func namedNode(node *corev1.Node, name string) *corev1.Node {
	n := node.DeepCopy()
	n.Name = name
	n.UID = types.UID("uid-" + name)
	n.ResourceVersion = ""
	return n
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// newClient returns a fake clientset over objs whose pod and node LISTs
// honour limit and continue as the API server does.
func newClient(t *testing.T, objs ...k8sruntime.Object) *fake.Clientset {
	t.Helper()
	copies := make([]k8sruntime.Object, len(objs))
	for i, o := range objs {
		copies[i] = o.DeepCopyObject()
	}
	client := fake.NewClientset(copies...)
	paginate(client, "pods", corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"))
	paginate(client, "nodes", corev1.SchemeGroupVersion.WithResource("nodes"), corev1.SchemeGroupVersion.WithKind("Node"))
	return client
}

// paginate makes the fake's LISTs of resource return pages: objects sorted
// by namespace and name, filtered by the label selector, Limit at a time,
// with a continue token that is the index of the next object.
func paginate(client *fake.Clientset, resource string, gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) {
	client.PrependReactor("list", resource, func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		list := action.(k8stesting.ListActionImpl)
		opts := list.ListOptions
		obj, err := client.Tracker().List(gvr, gvk, list.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		items, err := meta.ExtractList(obj)
		if err != nil {
			return true, nil, err
		}
		sel := labels.Everything()
		if opts.LabelSelector != "" {
			if sel, err = labels.Parse(opts.LabelSelector); err != nil {
				return true, nil, err
			}
		}
		var kept []k8sruntime.Object
		for _, it := range items {
			m, _ := meta.Accessor(it)
			if sel.Matches(labels.Set(m.GetLabels())) {
				kept = append(kept, it)
			}
		}
		slices.SortFunc(kept, func(a, b k8sruntime.Object) int {
			ma, _ := meta.Accessor(a)
			mb, _ := meta.Accessor(b)
			return strings.Compare(ma.GetNamespace()+"/"+ma.GetName(), mb.GetNamespace()+"/"+mb.GetName())
		})
		start := 0
		if opts.Continue != "" {
			if _, err := fmt.Sscanf(opts.Continue, "%d", &start); err != nil {
				return true, nil, err
			}
		}
		end := len(kept)
		next := ""
		if opts.Limit > 0 && start+int(opts.Limit) < len(kept) {
			end = start + int(opts.Limit)
			next = fmt.Sprint(end)
		}
		page := kept[start:end]
		if err := meta.SetList(obj, page); err != nil {
			return true, nil, err
		}
		lm, _ := meta.ListAccessor(obj)
		lm.SetContinue(next)
		if next != "" {
			remaining := int64(len(kept) - end)
			lm.SetRemainingItemCount(&remaining)
		}
		return true, obj, nil
	})
}

// clientsetCluster is the Cluster of a clientset: the tests run the
// command over client-go's fake one, whose recorded actions and reactors
// they read and set.
type clientsetCluster struct{ client kubernetes.Interface }

var _ Cluster = clientsetCluster{}

func (c clientsetCluster) ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error) {
	return c.client.CoreV1().Pods(namespace).List(ctx, opts)
}

func (c clientsetCluster) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c clientsetCluster) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.client.CoreV1().Pods(namespace).Delete(ctx, name, opts)
}

func (c clientsetCluster) ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	return c.client.CoreV1().Nodes().List(ctx, opts)
}

func (c clientsetCluster) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	return c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func (c clientsetCluster) GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return c.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c clientsetCluster) GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
}

// run runs the plugin against client with the given stdin, with a
// kubeconfig whose current context "test" has namespace default.
type result struct {
	stdout, stderr string
	code           int
}

type runOptions struct {
	stdin      string
	terminal   bool
	pageSize   int64
	kubeconfig string // default: writeKubeconfig's
}

func run(t *testing.T, client kubernetes.Interface, ro runOptions, args ...string) result {
	t.Helper()
	kubeconfig := ro.kubeconfig
	if kubeconfig == "" {
		kubeconfig = writeKubeconfig(t)
	}
	var stdout, stderr bytes.Buffer
	env := Env{
		NewCluster: func(*rest.Config) (Cluster, error) { return clientsetCluster{client}, nil },
		IsTerminal: func(io.Writer) bool { return ro.terminal },
		Clock:      clocktesting.NewFakePassiveClock(now),
		PageSize:   ro.pageSize,
	}
	streams := IOStreams{In: strings.NewReader(ro.stdin), Out: &stdout, ErrOut: &stderr}
	code := Main(context.Background(), append([]string{"--kubeconfig=" + kubeconfig}, args...), streams, env)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// writeKubeconfig writes a kubeconfig with contexts "test" (namespace
// default, current) and "shop" (namespace shop). Its server is never
// contacted: the tests hand the plugin a fake clientset.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const cfg = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: test}
contexts:
- name: test
  context: {cluster: c, user: u, namespace: default}
- name: shop
  context: {cluster: c, user: u, namespace: shop}
current-context: test
`
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

// decode parses -o json output.
func decode(t *testing.T, out string) PodHealthList {
	t.Helper()
	var list PodHealthList
	require.NoError(t, json.Unmarshal([]byte(out), &list), "output: %s", out)
	return list
}

// row is the part of a listed pod that the tests compare.
type row struct {
	Pod, Node, NodeState, Verdict, Rule, Action string
}

func rowsOf(list PodHealthList) []row {
	out := []row{}
	for _, it := range list.Items {
		out = append(out, row{Pod: it.Namespace + "/" + it.Name, Node: it.Node, NodeState: it.NodeState, Verdict: it.Verdict, Rule: it.Rule, Action: it.Action})
	}
	return out
}

// writes returns the client's actions that are not reads.
func writes(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource+" "+a.GetNamespace())
	}
	return out
}

// deletes returns the client's pod DELETE actions.
func deletes(client *fake.Clientset) []k8stesting.DeleteActionImpl {
	var out []k8stesting.DeleteActionImpl
	for _, a := range client.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok && d.GetResource().Resource == "pods" {
			out = append(out, d)
		}
	}
	return out
}

// countActions counts the client's actions of verb on resource.
func countActions(client *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
