package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/podsource"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

const ns = "default"

// cluster is a fake API server (fakeapi) behind a cache that can lag: a pod
// created through the cache's client reaches the store at once, but the
// cache lists it only after catchUp, as an informer does a moment later.
type cluster struct {
	store client.WithWatch
	cache client.Client

	mu       sync.Mutex
	lagging  bool
	unseen   map[types.UID]bool
	requests map[string]int // by verb and kind, e.g. "create Pod"
	recorder *eventLog
}

func newCluster(t *testing.T, lagging bool, objs ...client.Object) *cluster {
	t.Helper()
	store, err := fakeapi.NewClient(objs...)
	require.NoError(t, err)
	c := &cluster{store: store, lagging: lagging, unseen: map[types.UID]bool{}, requests: map[string]int{}, recorder: &eventLog{}}
	c.cache = interceptor.NewClient(store, interceptor.Funcs{
		List: func(ctx context.Context, s client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := s.List(ctx, list, opts...); err != nil {
				return err
			}
			if pods, ok := list.(*corev1.PodList); ok {
				c.mu.Lock()
				defer c.mu.Unlock()
				kept := pods.Items[:0]
				for _, p := range pods.Items {
					if !c.unseen[p.UID] {
						kept = append(kept, p)
					}
				}
				pods.Items = kept
			}
			return nil
		},
		Create: func(ctx context.Context, s client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := s.Create(ctx, obj, opts...); err != nil {
				return err
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			c.requests["create "+kindOf(obj)]++
			if c.lagging {
				c.unseen[obj.GetUID()] = true
			}
			return nil
		},
		Delete: func(ctx context.Context, s client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			c.mu.Lock()
			c.requests["delete "+kindOf(obj)]++
			c.mu.Unlock()
			return s.Delete(ctx, obj, opts...)
		},
	})
	return c
}

func kindOf(obj client.Object) string { return strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.") }

// catchUp makes the cache list every pod the store holds.
func (c *cluster) catchUp() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unseen = map[types.UID]bool{}
}

func (c *cluster) count(req string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests[req]
}

func (c *cluster) GetClient() client.Client                       { return c.cache }
func (c *cluster) GetAPIReader() client.Reader                    { return c.store }
func (c *cluster) GetEventRecorder(string) recorder.EventRecorder { return c.recorder }

var _ crh.Manager = (*cluster)(nil)

// pods returns the pods of the store (what the API server holds).
func (c *cluster) pods(t *testing.T) []corev1.Pod {
	var list corev1.PodList
	require.NoError(t, c.store.List(context.Background(), &list, client.InNamespace(ns)))
	return list.Items
}

type recorded struct {
	regarding, related runtime.Object
	reason, note       string
}

type eventLog struct {
	mu     sync.Mutex
	events []recorded
}

func (l *eventLog) Eventf(regarding, related runtime.Object, _, reason, _, note string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, recorded{regarding, related, reason, fmt.Sprintf(note, args...)})
}

func (l *eventLog) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, t, reason, action, note string, args ...any) {
	l.Eventf(regarding, related, t, reason, action, note, args...)
}

func (l *eventLog) reasons() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		out = append(out, e.reason)
	}
	return out
}

func registry(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("cm-" + name), Labels: map[string]string{RegistryLabel: "true"}},
		Data:       map[string]string{ImageKey: "registry.example/catalog:1"},
	}
}

// registryPod returns fixture file's pod as a pod of registry cm.
func registryPod(t *testing.T, file, name string, cm *corev1.ConfigMap) *corev1.Pod {
	p := testutil.LoadPod(t, file)
	p.Name, p.UID = name, types.UID("pod-"+name)
	p.Labels = map[string]string{WorkloadLabel: cm.Name}
	p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}
	return p
}

func reconcileOnce(t *testing.T, r *RegistryReconciler, name string) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	require.NoError(t, err)
	return res
}

func TestAnEmptyRegistryGetsExactlyOnePodWhileTheCacheLags(t *testing.T) {
	cm := registry("catalog")
	c := newCluster(t, true, cm, testutil.LoadNode(t, testutil.NodeHealthy))
	r, err := NewRegistryReconciler(c, Config{Resync: time.Minute, TolerationSeconds: 30})
	require.NoError(t, err)

	res := reconcileOnce(t, r, cm.Name)
	require.Zero(t, res.RequeueAfter, "nothing to wait for after creating the pod: its event comes")
	pods := c.pods(t)
	require.Len(t, pods, 1)
	pod := pods[0]
	require.True(t, strings.HasPrefix(pod.Name, "catalog-"), "name %q is not from generateName", pod.Name)
	require.NotEmpty(t, pod.UID)
	require.Equal(t, map[string]string{WorkloadLabel: "catalog"}, pod.Labels)
	require.Len(t, pod.OwnerReferences, 1)
	require.Equal(t, cm.UID, pod.OwnerReferences[0].UID)
	require.True(t, *pod.OwnerReferences[0].Controller)
	require.Equal(t, "registry.example/catalog:1", pod.Spec.Containers[0].Image)

	// The cache does not list the new pod yet: reconciles (its own create
	// event, a resync) must not create a second one.
	for range 3 {
		res = reconcileOnce(t, r, cm.Name)
		require.Positive(t, res.RequeueAfter, "a pending replacement is looked at again")
		require.LessOrEqual(t, res.RequeueAfter, 5*time.Minute)
	}
	require.Equal(t, 1, c.count("create Pod"), "a lagging cache made the reconciler create a second pod")

	c.catchUp() // the cache lists it, and the kubelet would run it
	res = reconcileOnce(t, r, cm.Name)
	require.Equal(t, time.Minute, res.RequeueAfter, "a healthy registry waits for the resync")
	require.Equal(t, 1, c.count("create Pod"))
	require.Equal(t, []string{ReasonCreatedReplacement}, c.recorder.reasons())
}

func TestADeadPodIsForceDeletedAndReplacedOnce(t *testing.T) {
	cm := registry("catalog")
	dead := registryPod(t, testutil.PodTaintEvicted, "catalog-dead", cm) // on node-lost, not Ready
	lost := testutil.LoadNode(t, testutil.NodeLost)
	c := newCluster(t, true, cm, dead, lost)
	r, err := NewRegistryReconciler(c, Config{})
	require.NoError(t, err)

	reconcileOnce(t, r, cm.Name)
	pods := c.pods(t)
	require.Len(t, pods, 1, "the dead pod is gone and one replacement exists")
	require.NotEqual(t, dead.UID, pods[0].UID)
	require.Equal(t, 1, c.count("delete Pod"))
	require.Equal(t, []string{podsource.ReasonForceDeleted, ReasonCreatedReplacement}, c.recorder.reasons())
	for _, e := range c.recorder.events {
		regarding, ok := e.regarding.(*corev1.ConfigMap)
		require.True(t, ok, "the event regards a %T, want the registry", e.regarding)
		require.Equal(t, cm.UID, regarding.UID, "the events regard the registry")
	}

	// Before the cache catches up: the dead pod is no longer listed (a
	// deletion shows at once in this fake), the replacement not yet.
	reconcileOnce(t, r, cm.Name)
	require.Equal(t, 1, c.count("create Pod"))
	require.Equal(t, 1, c.count("delete Pod"))
}

func TestABudgetThatHoldsADeadPodBackRequeuesAfterRetryAfter(t *testing.T) {
	cm, other := registry("catalog"), registry("other")
	first := registryPod(t, testutil.PodTaintEvicted, "other-dead", other)
	dead := registryPod(t, testutil.PodTaintEvicted, "catalog-dead", cm)
	alive := registryPod(t, testutil.PodAlive, "catalog-alive", cm)
	c := newCluster(t, false, cm, other, first, dead, alive, testutil.LoadNode(t, testutil.NodeLost), testutil.LoadNode(t, testutil.NodeHealthy))
	r, err := NewRegistryReconciler(c, Config{MaxForceDeletesPerMinute: 1, Resync: time.Hour})
	require.NoError(t, err)

	reconcileOnce(t, r, other.Name) // spends the budget
	require.Equal(t, 1, c.count("delete Pod"))
	res := reconcileOnce(t, r, cm.Name)
	require.Equal(t, 1, c.count("delete Pod"), "the budget let a second force delete through")
	require.Positive(t, res.RequeueAfter)
	require.LessOrEqual(t, res.RequeueAfter, time.Minute, "requeued after RetryAfter, not after the resync")
	require.Equal(t, 1, c.count("create Pod"), "only other's replacement: catalog has a live pod")
}

func TestReconcileOfAGoneRegistryDoesNothingAndAnErrorIsReturned(t *testing.T) {
	c := newCluster(t, false)
	r, err := NewRegistryReconciler(c, Config{})
	require.NoError(t, err)
	require.Equal(t, ctrl.Result{}, reconcileOnce(t, r, "gone"))
	require.Zero(t, c.count("create Pod"))

	cm := registry("catalog")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", fmt.Errorf("no RBAC"))
	failing := newCluster(t, false, cm)
	failing.cache = interceptor.NewClient(failing.store, interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return forbidden
		},
	})
	r, err = NewRegistryReconciler(failing, Config{})
	require.NoError(t, err)
	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: cm.Name}})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	require.Empty(t, failing.pods(t), "a failed check created a pod")

	noImage := registry("noimage")
	noImage.Data = nil
	c = newCluster(t, false, noImage)
	r, err = NewRegistryReconciler(c, Config{})
	require.NoError(t, err)
	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: noImage.Name}})
	require.ErrorContains(t, err, `no data["image"]`)
}

var markerRE = regexp.MustCompile(`(?m)^// \+kubebuilder:rbac:groups=("?[^,"]*"?),resources=([^,]+),verbs=(\S+)$`)

// TestRBACMarkersGrantWhatTheLibraryAndTheReconcilerSend: the library's
// rules, plus create on pods and the registries' ConfigMaps.
func TestRBACMarkersGrantWhatTheLibraryAndTheReconcilerSend(t *testing.T) {
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	granted := map[string]bool{}
	for _, m := range markerRE.FindAllStringSubmatch(string(src), -1) {
		for _, res := range strings.Split(m[2], ";") {
			for _, verb := range strings.Split(m[3], ";") {
				granted[strings.Trim(m[1], `"`)+"/"+res+"/"+verb] = true
			}
		}
	}
	cluster, _ := crh.EvidencePolicyRules()
	want := []string{"/pods/create", "/configmaps/list", "/configmaps/watch"}
	for _, rule := range append(crh.PolicyRules(), cluster...) {
		for _, res := range rule.Resources {
			for _, verb := range rule.Verbs {
				want = append(want, rule.APIGroups[0]+"/"+res+"/"+verb)
			}
		}
	}
	for _, w := range want {
		require.True(t, granted[w], "the markers do not grant %s", w)
	}
	require.Len(t, granted, len(want), "the markers grant more than is sent: %v", granted)
}

// TestFlagsParseOnTheCommandLineThatControllerRuntimeSharesWithUs: the
// controller-runtime config package defines --kubeconfig on
// flag.CommandLine; the command's own flags must not define it again.
func TestFlagsParseOnTheCommandLineThatControllerRuntimeSharesWithUs(t *testing.T) {
	require.NotNil(t, flag.CommandLine.Lookup("kubeconfig"), "controller-runtime no longer defines --kubeconfig")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	flag.CommandLine.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	f, err := parseFlags(fs, []string{"--kubeconfig=/dev/null", "--namespace=registries", "--resync=2s", "--max-force-deletes-per-minute=3", "--toleration-seconds=5"})
	require.NoError(t, err)
	require.Equal(t, flags{Config: Config{Resync: 2 * time.Second, MaxForceDeletesPerMinute: 3, TolerationSeconds: 5}, namespace: "registries", metricsAddr: "0"}, f)

	for _, bad := range [][]string{{"--namespace=Not_A_Label"}, {"--resync=-1s"}, {"--toleration-seconds=-1"}} {
		_, err := parseFlags(flag.NewFlagSet("bad", flag.ContinueOnError), bad)
		require.Error(t, err, "%v", bad)
	}
}

// TestANodeEventReconcilesTheRegistriesWithAPodOnIt: a node's deletion, or
// a change of its readiness, changes none of its pods; the registries with a
// pod on it are reconciled all the same.
func TestANodeEventReconcilesTheRegistriesWithAPodOnIt(t *testing.T) {
	a, b := registry("a"), registry("b")
	onLost := registryPod(t, testutil.PodAlive, "a-0", a)
	onLost.Spec.NodeName = "node-lost"
	alsoOnLost := registryPod(t, testutil.PodAlive, "a-1", a)
	alsoOnLost.Spec.NodeName = "node-lost"
	elsewhere := registryPod(t, testutil.PodAlive, "b-0", b)
	elsewhere.Spec.NodeName = "node-healthy"
	unowned := testutil.LoadPod(t, testutil.PodAlive)
	unowned.Name, unowned.UID, unowned.Spec.NodeName = "unowned", "unowned-uid", "node-lost"
	c := newCluster(t, false, a, b, onLost, alsoOnLost, elsewhere, unowned)
	r, err := NewRegistryReconciler(c, Config{})
	require.NoError(t, err)

	lost := testutil.LoadNode(t, testutil.NodeLost)
	got := r.registriesOnNode(context.Background(), lost)
	require.Equal(t, []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: "a"}}}, got)
	require.Equal(t, []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: "b"}}},
		r.registriesOnNode(context.Background(), testutil.LoadNode(t, testutil.NodeHealthy)))

	ready := testutil.LoadNode(t, testutil.NodeHealthy)
	notReady := ready.DeepCopy()
	for i := range notReady.Status.Conditions {
		if notReady.Status.Conditions[i].Type == corev1.NodeReady {
			notReady.Status.Conditions[i].Status = corev1.ConditionUnknown
		}
	}
	relabelled := ready.DeepCopy()
	relabelled.Labels = map[string]string{"new": "label"}
	require.True(t, nodeChanged.Update(event.UpdateEvent{ObjectOld: ready, ObjectNew: notReady}), "Ready → Unknown")
	require.True(t, nodeChanged.Update(event.UpdateEvent{ObjectOld: notReady, ObjectNew: ready}), "Unknown → Ready")
	require.False(t, nodeChanged.Update(event.UpdateEvent{ObjectOld: ready, ObjectNew: relabelled}), "a heartbeat or label change")
	require.True(t, nodeChanged.Delete(event.DeleteEvent{Object: lost}), "deleted")
	require.False(t, nodeChanged.Create(event.CreateEvent{Object: lost}), "created")
}
