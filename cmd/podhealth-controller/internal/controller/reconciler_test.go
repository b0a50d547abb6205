package controller

import (
	"context"
	"encoding/json"
	"fmt"
	coordinationv1 "k8s.io/api/coordination/v1"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

// fakeManager is a fake API server (fakeapi) as both the cache and the
// live reader, counting the DELETEs it is sent and answering the field
// selectors of the cache's pod indexes as the cache does.
type fakeManager struct {
	client  client.Client
	deletes *[]string
	// lists are the field selectors of the lists sent, "" for none.
	lists *[]string
	// live, when not nil, is the API server behind a cache (client) that
	// lags it; nil: client is both.
	live client.Reader
}

func (m fakeManager) GetClient() client.Client { return m.client }
func (m fakeManager) GetAPIReader() client.Reader {
	if m.live != nil {
		return m.live
	}
	return m.client
}

// newFakeManager holds objs and three Ready nodes, h1 to h3, so that one
// failed node does not trip the Breaker (a cluster whose every node is
// down does).
func newFakeManager(t testing.TB, objs ...client.Object) fakeManager {
	t.Helper()
	for _, n := range []string{"h1", "h2", "h3"} {
		objs = append(objs, node(n, corev1.ConditionTrue))
	}
	store, err := fakeapi.NewClient(objs...)
	require.NoError(t, err)
	var mu sync.Mutex
	var deletes, lists []string
	c := interceptor.NewClient(store, interceptor.Funcs{
		Delete: func(ctx context.Context, s client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			mu.Lock()
			deletes = append(deletes, obj.GetNamespace()+"/"+obj.GetName())
			mu.Unlock()
			return s.Delete(ctx, obj, opts...)
		},
		List: func(ctx context.Context, s client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			fields := lo.FieldSelector
			lo.FieldSelector = nil
			mu.Lock()
			if fields == nil {
				lists = append(lists, "")
			} else {
				lists = append(lists, fields.String())
			}
			mu.Unlock()
			if err := s.List(ctx, list, lo); err != nil || fields == nil {
				return err
			}
			return filterByIndexes(list, fields)
		},
	})
	return fakeManager{client: c, deletes: &deletes, lists: &lists}
}

// listByIndexes is an interceptor's List that reads the field selectors
// of the cache's indexes (and metadata.name of Leases) as the cache and the
// API server do.
func listByIndexes(ctx context.Context, s client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	fields := lo.FieldSelector
	lo.FieldSelector = nil
	if err := s.List(ctx, list, lo); err != nil || fields == nil {
		return err
	}
	return filterByIndexes(list, fields)
}

// filterByIndexes keeps the pods of list that the cache's indexes
// (SetupWithManager) match with every requirement of fields.
func filterByIndexes(list client.ObjectList, fields fields.Selector) error {
	if leases, ok := list.(*coordinationv1.LeaseList); ok {
		// The API server's own field of every object.
		name, ok := fields.RequiresExactMatch("metadata.name")
		if !ok || len(fields.Requirements()) != 1 {
			return fmt.Errorf("fakeManager: Leases are listed by metadata.name only, not %q", fields)
		}
		leases.Items = slices.DeleteFunc(leases.Items, func(l coordinationv1.Lease) bool { return l.Name != name })
		return nil
	}
	pods, ok := list.(*corev1.PodList)
	if !ok {
		return fmt.Errorf("fakeManager: no index for %T", list)
	}
	indexes := map[string]client.IndexerFunc{groupField: groupIndex, nodeField: nodeIndex}
	kept := pods.Items[:0]
	for i := range pods.Items {
		match := true
		for _, req := range fields.Requirements() {
			index, ok := indexes[req.Field]
			if !ok {
				return fmt.Errorf("fakeManager: no index %q", req.Field)
			}
			match = match && slices.Contains(index(&pods.Items[i]), req.Value)
		}
		if match {
			kept = append(kept, pods.Items[i])
		}
	}
	pods.Items = kept
	return nil
}

func namespace(name string, enabled bool) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if enabled {
		ns.Labels = map[string]string{EnabledLabel: "true"}
	}
	return ns
}

func node(name string, ready corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
	}
}

var unreachable = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
var outOfService = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// evicted is a pod of owner (kind/name; empty: a bare pod) that the
// taint-eviction controller deleted from nodeName.
func evicted(ns, name, nodeName, ownerKind, ownerName string) *corev1.Pod {
	deleted := metav1.NewTime(time.Now().Add(-time.Minute))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name),
			DeletionTimestamp: &deleted, DeletionGracePeriodSeconds: ptrTo[int64](30)},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager", LastTransitionTime: deleted}}},
	}
	if ownerKind != "" {
		apiVersion := "apps/v1"
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: ownerKind, Name: ownerName, UID: types.UID("uid-" + ownerName), Controller: ptrTo(true)}}
	}
	return pod
}

func alive(ns, name, nodeName, ownerKind, ownerName string) *corev1.Pod {
	pod := evicted(ns, name, nodeName, ownerKind, ownerName)
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = nil, nil
	pod.Status.Conditions = nil
	return pod
}

func ptrTo[T any](v T) *T { return &v }

func reconcileAll(t *testing.T, r *Reconciler, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: GroupOf(p)})
		require.NoError(t, err)
	}
}

func exists(t *testing.T, m fakeManager, pod *corev1.Pod) bool {
	t.Helper()
	err := m.client.Get(context.Background(), client.ObjectKeyFromObject(pod), &corev1.Pod{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

func TestGroupIsTheControllingOwnerOrTheBarePod(t *testing.T) {
	owned := alive("shop", "web-1", "n1", "ReplicaSet", "web-7d9f")
	bare := alive("shop", "debug", "n1", "", "")
	notController := alive("shop", "x", "n1", "", "")
	notController.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "cm"}}
	require.Equal(t, types.NamespacedName{Namespace: "shop", Name: "ReplicaSet.apps/web-7d9f"}, GroupOf(owned))
	require.Equal(t, types.NamespacedName{Namespace: "shop", Name: "Pod/debug"}, GroupOf(bare))
	require.Equal(t, types.NamespacedName{Namespace: "shop", Name: "Pod/x"}, GroupOf(notController), "an owner that is not the controller makes no group")
}

func TestDeadPodsAreForceDeletedInOptedInNamespacesOnly(t *testing.T) {
	inShop := evicted("shop", "web-1", "lost", "ReplicaSet", "web-7d9f")
	bareInShop := evicted("shop", "debug", "lost", "", "")
	inOther := evicted("other", "web-1", "lost", "ReplicaSet", "web-7d9f")
	liveInShop := alive("shop", "web-2", "healthy", "ReplicaSet", "web-7d9f")
	m := newFakeManager(t, namespace("shop", true), namespace("other", false),
		node("lost", corev1.ConditionUnknown, unreachable), node("healthy", corev1.ConditionTrue), inShop, bareInShop, inOther, liveInShop)
	r, err := New(m, Options{})
	require.NoError(t, err)
	reconcileAll(t, r, inShop, bareInShop, inOther, liveInShop)
	require.False(t, exists(t, m, inShop))
	require.False(t, exists(t, m, bareInShop), "a bare pod is a group of its own")
	require.True(t, exists(t, m, inOther), "a namespace without the label is never written to")
	require.True(t, exists(t, m, liveInShop))
	require.Empty(t, cmp.Diff([]string{"shop/web-1", "shop/debug"}, *m.deletes))
}

func TestPolicyHoldsBackWhatTheLibraryHoldsBack(t *testing.T) {
	sts := evicted("shop", "db-0", "lost", "StatefulSet", "db")
	never := evicted("shop", "pinned", "lost", "ReplicaSet", "pinned-1")
	never.Annotations = map[string]string{health.AnnotationForceDelete: "never"}
	m := newFakeManager(t, namespace("shop", true), node("lost", corev1.ConditionUnknown, unreachable), sts, never)
	r, err := New(m, Options{})
	require.NoError(t, err)
	reconcileAll(t, r, sts, never)
	require.Empty(t, *m.deletes, "a StatefulSet pod without fencing and a pod annotated never stay")

	var lost corev1.Node
	require.NoError(t, m.client.Get(context.Background(), client.ObjectKey{Name: "lost"}, &lost))
	lost.Spec.Taints = append(lost.Spec.Taints, outOfService)
	require.NoError(t, m.client.Update(context.Background(), &lost))
	reconcileAll(t, r, sts, never)
	require.False(t, exists(t, m, sts), "the out-of-service taint fences the node")
	require.True(t, exists(t, m, never))
}

func TestOpenBreakerAndDryRunDeleteNothing(t *testing.T) {
	objs := []client.Object{namespace("shop", true)}
	var pods []*corev1.Pod
	for _, n := range []string{"a", "b", "c"} {
		objs = append(objs, node(n, corev1.ConditionUnknown, unreachable))
		p := evicted("shop", "web-"+n, n, "ReplicaSet", "web-"+n)
		pods = append(pods, p)
		objs = append(objs, p)
	}
	objs = append(objs, node("d", corev1.ConditionTrue))
	tests := []struct {
		name string
		opts Options
	}{
		{"three of seven nodes down trip the controller's default Breaker", Options{Breaker: health.Breaker{UnhealthyShare: 0.3, MinUnhealthy: 3}}},
		{"a dry run", Options{DryRun: true, Breaker: health.Breaker{MinUnhealthy: 10}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeManager(t, objs...)
			r, err := New(m, tt.opts)
			require.NoError(t, err)
			reconcileAll(t, r, pods...)
			require.Empty(t, *m.deletes)
		})
	}
}

func TestBudgetIsSharedByEveryGroup(t *testing.T) {
	a := evicted("shop", "a", "lost", "ReplicaSet", "a")
	b := evicted("shop", "b", "lost", "ReplicaSet", "b")
	c := evicted("cafe", "c", "lost", "ReplicaSet", "c")
	m := newFakeManager(t, namespace("shop", true), namespace("cafe", true), node("lost", corev1.ConditionUnknown, unreachable), a, b, c)
	budget, err := health.NewDeleteBudget(2, time.Hour)
	require.NoError(t, err)
	r, err := New(m, Options{Budget: budget})
	require.NoError(t, err)
	reconcileAll(t, r, a, b, c)
	require.Len(t, *m.deletes, 2, "two force deletes over three groups in two namespaces")
}

func TestNewRefusesAnEmptyNamespaceSelector(t *testing.T) {
	m := newFakeManager(t)
	_, err := New(m, Options{Namespaces: labels.Everything()})
	require.ErrorContains(t, err, "every namespace")
	_, err = New(nil, Options{})
	require.Error(t, err)
}

func TestHealthyStatusUpdatesEnqueueNothing(t *testing.T) {
	healthy := alive("shop", "web-1", "n1", "ReplicaSet", "web")
	updated := healthy.DeepCopy()
	updated.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	deleting := evicted("shop", "web-1", "n1", "ReplicaSet", "web")
	failed := healthy.DeepCopy()
	failed.Status.Phase = corev1.PodFailed
	require.False(t, podMayBeDead.Update(event.UpdateEvent{ObjectOld: healthy, ObjectNew: updated}))
	require.True(t, podMayBeDead.Update(event.UpdateEvent{ObjectOld: healthy, ObjectNew: deleting}))
	require.True(t, podMayBeDead.Update(event.UpdateEvent{ObjectOld: healthy, ObjectNew: failed}))
	require.True(t, podMayBeDead.Create(event.CreateEvent{Object: healthy}), "at start every bound pod is judged once")
	require.False(t, podMayBeDead.Delete(event.DeleteEvent{Object: healthy}))

	ready := node("n1", corev1.ConditionTrue)
	beat := ready.DeepCopy()
	beat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	lost := node("n1", corev1.ConditionUnknown, unreachable)
	fenced := node("n1", corev1.ConditionUnknown, unreachable, outOfService)
	require.False(t, nodeChanged.Update(event.UpdateEvent{ObjectOld: ready, ObjectNew: beat}), "a heartbeat changes nothing")
	require.True(t, nodeChanged.Update(event.UpdateEvent{ObjectOld: ready, ObjectNew: lost}))
	require.True(t, nodeChanged.Update(event.UpdateEvent{ObjectOld: lost, ObjectNew: fenced}), "the out-of-service taint fences")
	require.True(t, nodeChanged.Delete(event.DeleteEvent{Object: lost}))
}

// A node that starts or ends a graceful shutdown or a drain (KEP-5683's
// conditions) changes the Breaker's count and early replacement's verdict
// without changing its NodeState: its pods are judged again.
func TestANodeStartingOrEndingAShutdownOrADrainIsJudgedAgain(t *testing.T) {
	lost := node("n1", corev1.ConditionUnknown, unreachable)
	for _, typ := range []corev1.NodeConditionType{"DrainInProgress", "GracefulNodeShutdownInProgress"} {
		stopping := lost.DeepCopy()
		stopping.Status.Conditions = append(stopping.Status.Conditions, corev1.NodeCondition{Type: typ, Status: corev1.ConditionTrue})
		require.True(t, nodeChanged.Update(event.UpdateEvent{ObjectOld: lost, ObjectNew: stopping}), "%s starts", typ)
		done := stopping.DeepCopy()
		done.Status.Conditions[len(done.Status.Conditions)-1].Status = corev1.ConditionFalse
		require.True(t, nodeChanged.Update(event.UpdateEvent{ObjectOld: stopping, ObjectNew: done}), "%s ends", typ)
		require.False(t, nodeChanged.Update(event.UpdateEvent{ObjectOld: done, ObjectNew: lost}), "%s False is no declaration either way", typ)
	}
}

func TestNodeEventEnqueuesTheGroupsOnThatNodeOnly(t *testing.T) {
	a := alive("shop", "a-1", "n1", "ReplicaSet", "a")
	a2 := alive("shop", "a-2", "n1", "ReplicaSet", "a")
	b := alive("cafe", "b-1", "n1", "", "")
	c := alive("shop", "c-1", "n2", "ReplicaSet", "c")
	m := newFakeManager(t, namespace("shop", true), a, a2, b, c)
	r, err := New(m, Options{})
	require.NoError(t, err)
	got := r.groupsOnNode(context.Background(), node("n1", corev1.ConditionUnknown))
	var names []string
	for _, req := range got {
		names = append(names, req.String())
	}
	require.ElementsMatch(t, []string{"shop/ReplicaSet.apps/a", "cafe/Pod/b-1"}, names)
	require.Equal(t, []string{nodeField + "=n1"}, *m.lists, "the pods of node n1 come from the cache's node index, not a copy of every pod")
}

func TestAReconcileReadsItsGroupThroughTheGroupIndex(t *testing.T) {
	m := newFakeManager(t, namespace("shop", true), node("lost", corev1.ConditionUnknown, unreachable),
		evicted("shop", "web-1", "lost", "ReplicaSet", "web"), evicted("shop", "web-2", "lost", "ReplicaSet", "web"),
		evicted("shop", "api-1", "lost", "ReplicaSet", "api"))
	r, err := New(m, Options{})
	require.NoError(t, err)
	*m.lists = nil
	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "ReplicaSet.apps/web"}})
	require.NoError(t, err)
	require.Contains(t, *m.lists, groupField+"=ReplicaSet.apps/web", "the group's pods come from the cache's group index")
	require.ElementsMatch(t, []string{"shop/web-1", "shop/web-2"}, *m.deletes, "the group's dead pods, and no other group's")
}

// TestTransformKeepsEveryVerdict: the pods and nodes of a real cluster
// (testdata/real-cluster), stripped by Transform, get the same verdict,
// rule and hold as the originals.
func TestTransformKeepsEveryVerdict(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "..", "testdata", "real-cluster")
	read := func(name string, into any) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, into))
	}
	var lost, healthy corev1.Node
	read("node-lost.json", &lost)
	read("node-healthy.json", &healthy)
	var pods []*corev1.Pod
	for _, name := range []string{"pod-alive.json", "pod-drained.json", "pod-taint-evicted.json", "pod-user-deleted.json"} {
		var p corev1.Pod
		read(name, &p)
		pods = append(pods, &p)
	}
	sts := pods[2].DeepCopy()
	sts.Name, sts.UID = sts.Name+"-sts", sts.UID+"-sts"
	sts.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "db", Controller: ptrTo(true)}}
	pods = append(pods, sts)
	// A dead pod that the policy holds back for the single-writer volume
	// it mounts, next to the service-account volume that Transform drops.
	iscsi := pods[2].DeepCopy()
	iscsi.Name, iscsi.UID = iscsi.Name+"-iscsi", iscsi.UID+"-iscsi"
	iscsi.Spec.Volumes = append(iscsi.Spec.Volumes,
		corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
		corev1.Volume{Name: "lun", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "10.0.0.1:3260", IQN: "iqn.2026-01.example:db", Lun: 0}}})
	pods = append(pods, iscsi)
	require.NotEmpty(t, pods[2].ManagedFields, "the fixture is as a cluster holds it")

	verdicts := func(strip bool) []string {
		var nodes []*corev1.Node
		var in []*corev1.Pod
		for _, n := range []*corev1.Node{&lost, &healthy} {
			n = n.DeepCopy()
			if strip {
				o, err := Transform(n)
				require.NoError(t, err)
				n = o.(*corev1.Node)
			}
			nodes = append(nodes, n)
		}
		for _, p := range pods {
			p = p.DeepCopy()
			if strip {
				o, err := Transform(p)
				require.NoError(t, err)
				p = o.(*corev1.Pod)
				require.Empty(t, p.ManagedFields)
			}
			in = append(in, p)
		}
		var out []string
		for _, p := range in {
			checker, err := health.New(health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return []*corev1.Pod{p}, nil }), nil,
				health.Options{DryRun: true, Nodes: nodeGetter(nodes)})
			require.NoError(t, err)
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			for _, pr := range report.Pods {
				out = append(out, pr.Pod.Name+" "+pr.Verdict.State.String()+" "+pr.Verdict.Rule+" "+pr.Outcome.String()+" "+pr.HeldBack.Reason.String())
			}
		}
		return out
	}
	full, stripped := verdicts(false), verdicts(true)
	require.Empty(t, cmp.Diff(full, stripped))
	require.Len(t, full, len(pods))
	require.Contains(t, full, iscsi.Name+" Dead "+health.RuleTaintEvicted+" HeldBack "+health.HeldForFencing.String(), "the single-writer volume holds the pod back")
}

func TestTransformKeepsEveryVolumeThePolicyMayCount(t *testing.T) {
	volume := func(name string, src corev1.VolumeSource) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: src}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}},
		Volumes: []corev1.Volume{
			volume("kube-api-access", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}),
			volume("config", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}),
			volume("tls", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}),
			volume("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
			volume("info", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}),
			volume("data", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}),
			volume("cache", corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}),
			volume("lun", corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{}}),
			volume("share", corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{}}),
			volume("two-kinds", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}, RBD: &corev1.RBDVolumeSource{}}),
		},
	}}
	o, err := Transform(pod)
	require.NoError(t, err)
	var kept []string
	for _, v := range o.(*corev1.Pod).Spec.Volumes {
		kept = append(kept, v.Name)
	}
	require.Equal(t, []string{"data", "cache", "lun", "share", "two-kinds"}, kept)
	require.Empty(t, o.(*corev1.Pod).Spec.Containers)
	require.Len(t, pod.Spec.Volumes, 10, "the decoded pod is read, not changed")
}

type nodeGetter []*corev1.Node

func (g nodeGetter) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	for _, n := range g {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
}

// eventLog is an events.EventRecorder that keeps what each event regards
// and relates.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, reason+" regarding "+describeObject(regarding)+" related "+describeObject(related))
}

func describeObject(obj runtime.Object) string {
	switch o := obj.(type) {
	case nil:
		return "nothing"
	case *corev1.ObjectReference:
		return o.Kind + " " + o.Namespace + "/" + o.Name
	case *corev1.Pod:
		return "Pod " + o.Namespace + "/" + o.Name
	}
	return "an object of another type"
}

func TestEventsRegardTheOwnerAndRelateThePodOrRegardABarePod(t *testing.T) {
	owned := evicted("shop", "web-1", "lost", "ReplicaSet", "web-7d9f")
	bare := evicted("shop", "debug", "lost", "", "")
	m := newFakeManager(t, namespace("shop", true), node("lost", corev1.ConditionUnknown, unreachable), owned, bare)
	events := &eventLog{}
	r, err := New(m, Options{Recorder: events})
	require.NoError(t, err)
	reconcileAll(t, r, owned, bare)
	require.Len(t, events.events, 2)
	for _, want := range []string{"regarding ReplicaSet shop/web-7d9f related Pod shop/web-1", "regarding Pod shop/debug related nothing"} {
		found := false
		for _, e := range events.events {
			if strings.HasSuffix(e, want) {
				found = true
			}
		}
		require.True(t, found, "no event %q in %v", want, events.events)
	}
}

// A StatefulSet pod held for fencing, reconciled again and again (as a
// re-check or an informer's resync does), gets one event for its hold,
// not one per reconcile.
func TestAHoldIsRecordedOnceNotAtEachReconcile(t *testing.T) {
	held := evicted("shop", "db-0", "lost", "StatefulSet", "db")
	m := newFakeManager(t, namespace("shop", true), node("lost", corev1.ConditionUnknown, unreachable), held)
	events := &eventLog{}
	r, err := New(m, Options{Recorder: events})
	require.NoError(t, err)
	for range 5 {
		reconcileAll(t, r, held)
	}
	require.True(t, exists(t, m, held), "a StatefulSet pod without fencing evidence stays")
	require.Equal(t, []string{"DeadPodHeldBack regarding StatefulSet shop/db related Pod shop/db-0"}, events.events)
}

// TestABreakerHoldIsJudgedAgainWhenTheBreakerMayLetGo: a group held back
// by the Breaker asks to be judged again within the re-check interval,
// and a node event anywhere (here a node that is not the pod's coming
// back) enqueues it, so that once the Breaker closes its dead pod goes at
// once. Before, a held group came back only with its own pod's or node's
// change, or the cache's resync (about 10 hours).
func TestABreakerHoldIsJudgedAgainWhenTheBreakerMayLetGo(t *testing.T) {
	objs := []client.Object{namespace("shop", true), node("d", corev1.ConditionTrue)}
	var pods []*corev1.Pod
	for _, n := range []string{"a", "b", "c"} {
		objs = append(objs, node(n, corev1.ConditionUnknown, unreachable))
		p := evicted("shop", "web-"+n, n, "ReplicaSet", "web-"+n)
		pods = append(pods, p)
		objs = append(objs, p)
	}
	m := newFakeManager(t, objs...) // with h1 to h3: 3 of 7 nodes down
	r, err := New(m, Options{Breaker: health.Breaker{UnhealthyShare: 0.3, MinUnhealthy: 3}, BreakerRecheck: 2 * time.Minute})
	require.NoError(t, err)
	held := ctrl.Request{NamespacedName: GroupOf(pods[0])}
	res, err := r.Reconcile(context.Background(), held)
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, res.RequeueAfter, "a Breaker hold is judged again within the re-check interval")
	require.Empty(t, *m.deletes)

	// Node b comes back: 2 of 7 are down, and the Breaker would let go.
	recovered := node("b", corev1.ConditionTrue)
	var stored corev1.Node
	require.NoError(t, m.client.Get(context.Background(), client.ObjectKey{Name: "b"}, &stored))
	stored.Status = recovered.Status
	require.NoError(t, m.client.Status().Update(context.Background(), &stored))
	stored.Spec.Taints = nil
	require.NoError(t, m.client.Update(context.Background(), &stored))
	require.True(t, nodeChanged.Update(event.UpdateEvent{ObjectOld: node("b", corev1.ConditionUnknown, unreachable), ObjectNew: &stored}))
	enqueued := r.groupsOnNodeAndBreakerHeld(context.Background(), &stored)
	require.Contains(t, enqueued, held, "node b's change enqueues the group held on node a")

	res, err = r.Reconcile(context.Background(), held)
	require.NoError(t, err)
	require.Equal(t, []string{"shop/web-a"}, *m.deletes, "the Breaker closed: the held pod goes")
	require.Zero(t, res.RequeueAfter)
	require.Empty(t, r.breakerHeldGroups(context.Background()), "no longer held")
}

// TestAMassRecoveryEnqueuesEachHeldGroupOnceUntilItIsJudged: when the
// nodes of a mass failure come back, the first node event enqueues every
// group the Breaker held, and the next ones none of those still waiting
// in the queue; a group being judged is enqueued again by every event, as
// its check may have read the cache before the change, and a group judged
// and held again since is enqueued by the next event. A thousand events
// over ten thousand held groups enqueue each once, not ten million times.
func TestAMassRecoveryEnqueuesEachHeldGroupOnceUntilItIsJudged(t *testing.T) {
	r, err := New(newFakeManager(t), Options{})
	require.NoError(t, err)
	ctx := context.Background()
	const groups = 10_000
	group := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: "shop", Name: fmt.Sprintf("ReplicaSet.apps/web-%05d", i)}
	}
	for i := range groups {
		r.heldByBreaker(group(i), true)
	}
	recovered := node("h1", corev1.ConditionTrue)
	enqueued := map[types.NamespacedName]int{}
	for range 1000 {
		for _, req := range r.groupsOnNodeAndBreakerHeld(ctx, recovered) {
			enqueued[req.NamespacedName]++
		}
	}
	require.Len(t, enqueued, groups)
	for g, n := range enqueued {
		require.Equal(t, 1, n, "group %s enqueued %d times", g, n)
	}

	// Group 7 is being judged: every event enqueues it again. Its check
	// ends held: the next event enqueues it once more, and not the others.
	done := r.checking(group(7))
	for range 3 {
		require.Equal(t, []ctrl.Request{{NamespacedName: group(7)}}, r.groupsOnNodeAndBreakerHeld(ctx, recovered))
	}
	r.heldByBreaker(group(7), true)
	done()
	require.Equal(t, []ctrl.Request{{NamespacedName: group(7)}}, r.groupsOnNodeAndBreakerHeld(ctx, recovered))
	require.Empty(t, r.groupsOnNodeAndBreakerHeld(ctx, recovered))

	// A group judged for the first time, not yet held, is enqueued too.
	done = r.checking(group(groups))
	require.Equal(t, []ctrl.Request{{NamespacedName: group(groups)}}, r.groupsOnNodeAndBreakerHeld(ctx, recovered))
	done()
	require.Empty(t, r.groupsOnNodeAndBreakerHeld(ctx, recovered))

	// A group no longer held is not enqueued.
	r.heldByBreaker(group(3), false)
	r.heldByBreaker(group(4), true)
	require.Equal(t, []ctrl.Request{{NamespacedName: group(4)}}, r.breakerHeldOnLease(ctx, nil))
}

// BenchmarkANodeEventOverHeldGroups measures one node or Lease event of a
// mass recovery after the first: the held groups are all waiting in the
// queue already, as in the 2,500-node run's recovery, where about 27,000
// groups were held and 746 nodes reported back one by one, and two
// groups are being judged.
func BenchmarkANodeEventOverHeldGroups(b *testing.B) {
	for _, groups := range []int{1_000, 27_000} {
		b.Run(fmt.Sprintf("held=%d", groups), func(b *testing.B) {
			r, err := New(newFakeManager(b), Options{})
			require.NoError(b, err)
			ctx := context.Background()
			for i := range groups {
				r.heldByBreaker(types.NamespacedName{Namespace: "shop", Name: fmt.Sprintf("ReplicaSet.apps/web-%05d", i)}, true)
			}
			require.Len(b, r.breakerHeldOnLease(ctx, nil), groups, "the first event enqueues every held group")
			for i := range 2 {
				defer r.checking(types.NamespacedName{Namespace: "shop", Name: fmt.Sprintf("ReplicaSet.apps/web-%05d", i)})()
			}
			b.ReportAllocs()
			for b.Loop() {
				if got := r.breakerHeldOnLease(ctx, nil); len(got) != 2 {
					b.Fatalf("an event after the first enqueued %d groups, want the 2 being judged", len(got))
				}
			}
		})
	}
}

// TestAnEventThatEnqueuesTheHeldGroupsEndsTheBreakersSharedViewFirst: the
// shared view's own informer handlers may hear of a node's change after
// the controller's handler has enqueued the held groups, whose checks
// would then read the view from before it, be held again, and wait for
// the re-check interval. The controller's handler ends the view before it
// enqueues them.
func TestAnEventThatEnqueuesTheHeldGroupsEndsTheBreakersSharedViewFirst(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	m := newFakeManager(t)
	r, err := New(m, Options{Clock: clk})
	require.NoError(t, err)
	r.breaker.memo = r.newViewMemo()
	ctx := context.Background()
	view := func() map[string]health.NodeState {
		nodes, err := r.breaker.ListNodes(ctx)
		require.NoError(t, err)
		out := map[string]health.NodeState{}
		for _, n := range nodes {
			out[n.Name] = health.NodeStateOf(n)
		}
		return out
	}
	require.Equal(t, health.NodeReady, view()["h1"])
	var stored corev1.Node
	for name, event := range map[string]func(){
		"a node's change":       func() { r.groupsOnNodeAndBreakerHeld(ctx, &stored) },
		"a stale Lease renewed": func() { r.breakerHeldOnLease(ctx, nil) },
	} {
		// h1 changes state in the cache; the view's own handler has not
		// run.
		require.NoError(t, m.client.Get(ctx, client.ObjectKey{Name: "h1"}, &stored))
		flipped := corev1.ConditionTrue
		if health.NodeStateOf(&stored) == health.NodeReady {
			flipped = corev1.ConditionUnknown
		}
		stored.Status = node("h1", flipped).Status
		require.NoError(t, m.client.Status().Update(ctx, &stored))
		require.NotEqual(t, health.NodeStateOf(&stored), view()["h1"], "%s: the shared view, until a change is reported", name)
		event()
		require.Equal(t, health.NodeStateOf(&stored), view()["h1"], "%s: the checks it enqueues read the change", name)
	}
}

// TestAStaleLeaseRenewedEnqueuesTheBreakerHeldGroups: the Breaker counts a
// node whose Lease is stale as not Ready, and a renewal of that Lease is
// the only event when its Ready condition never changed; renewals of fresh
// Leases pass nothing.
func TestAStaleLeaseRenewedEnqueuesTheBreakerHeldGroups(t *testing.T) {
	now := time.Now()
	r, err := New(newFakeManager(t), Options{Clock: clocktesting.NewFakePassiveClock(now)})
	require.NoError(t, err)
	stale, fresh, fresher := nodeLease("n1", now.Add(-time.Minute), 40), nodeLease("n1", now.Add(-time.Second), 40), nodeLease("n1", now, 40)
	renewed := r.leaseRenewedAfterStale()
	require.True(t, renewed.Update(event.UpdateEvent{ObjectOld: stale, ObjectNew: fresh}))
	require.False(t, renewed.Update(event.UpdateEvent{ObjectOld: fresh, ObjectNew: fresher}), "a renewal of a fresh Lease")
	require.False(t, renewed.Update(event.UpdateEvent{ObjectOld: fresh, ObjectNew: stale}))
	elsewhere := fresh.DeepCopy()
	elsewhere.Namespace = "kube-system"
	require.False(t, renewed.Update(event.UpdateEvent{ObjectOld: stale, ObjectNew: elsewhere}), "a Lease that is not a node's")

	r.heldByBreaker(types.NamespacedName{Namespace: "shop", Name: "ReplicaSet.apps/web"}, true)
	require.Equal(t, []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "ReplicaSet.apps/web"}}}, r.breakerHeldOnLease(context.Background(), fresh))
}

// TestABudgetHoldIsJudgedAgainWhenItsWindowFreesASlot: the group whose dead
// pod the budget held back asks to be judged again when the window lets
// the next force delete go, not later.
func TestABudgetHoldIsJudgedAgainWhenItsWindowFreesASlot(t *testing.T) {
	a := evicted("shop", "a", "lost", "ReplicaSet", "a")
	b := evicted("shop", "b", "lost", "ReplicaSet", "b")
	m := newFakeManager(t, namespace("shop", true), node("lost", corev1.ConditionUnknown, unreachable), a, b)
	budget, err := health.NewDeleteBudget(1, time.Hour)
	require.NoError(t, err)
	r, err := New(m, Options{Budget: budget})
	require.NoError(t, err)
	reconcileAll(t, r, a)
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: GroupOf(b)})
	require.NoError(t, err)
	require.Equal(t, []string{"shop/a"}, *m.deletes)
	require.InDelta(t, time.Hour.Seconds(), res.RequeueAfter.Seconds(), 60, "when the first charge leaves the window")
}

func TestNewRefusesANegativeBreakerRecheck(t *testing.T) {
	_, err := New(newFakeManager(t), Options{BreakerRecheck: -time.Second})
	require.ErrorContains(t, err, "BreakerRecheck")
}

// TestOwnersOfOneKindAndNameInTwoAPIGroupsMakeTwoGroups: a Deployment of
// apps and an operator's own "Deployment" kind are two owners.
func TestOwnersOfOneKindAndNameInTwoAPIGroupsMakeTwoGroups(t *testing.T) {
	apps := alive("shop", "web-1", "n1", "Deployment", "web")
	other := alive("shop", "web-2", "n1", "Deployment", "web")
	other.OwnerReferences[0].APIVersion = "example.com/v1"
	core := alive("shop", "web-3", "n1", "Deployment", "web")
	core.OwnerReferences[0].APIVersion = "v1"
	require.Equal(t, "Deployment.apps/web", GroupOf(apps).Name)
	require.Equal(t, "Deployment.example.com/web", GroupOf(other).Name)
	require.Equal(t, "Deployment/web", GroupOf(core).Name)
}

// TestEventsRegardEachPodsOwnOwner: two pods of one group whose owners
// differ in UID (the owner was deleted and created again) each get an
// event regarding their own owner; before, every event of a group
// regarded the owner of the pod listed last.
func TestEventsRegardEachPodsOwnOwner(t *testing.T) {
	old := evicted("shop", "web-old", "lost", "ReplicaSet", "web")
	old.OwnerReferences[0].UID = "uid-first"
	recreated := evicted("shop", "web-new", "lost", "ReplicaSet", "web")
	recreated.OwnerReferences[0].UID = "uid-second"
	m := newFakeManager(t, namespace("shop", true), node("lost", corev1.ConditionUnknown, unreachable), old, recreated)
	events := &uidLog{}
	r, err := New(m, Options{Recorder: events})
	require.NoError(t, err)
	reconcileAll(t, r, old)
	require.ElementsMatch(t, []string{"web-old regards uid-first", "web-new regards uid-second"}, events.seen)
}

// uidLog keeps, per event, the related pod and the UID of what it regards.
type uidLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *uidLog) Eventf(regarding, related runtime.Object, _, _, _, _ string, _ ...interface{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, related.(*corev1.ObjectReference).Name+" regards "+string(regarding.(*corev1.ObjectReference).UID))
}

// TestALabelledNamespaceBeingDeletedStaysOptedIn: the namespace controller
// deletes a terminating namespace's pods gracefully, and one on a failed
// node would block the namespace's deletion for ever; the controller acts
// there as in any labelled namespace.
func TestALabelledNamespaceBeingDeletedStaysOptedIn(t *testing.T) {
	ns := namespace("shop", true)
	ns.Finalizers = []string{"kubernetes"}
	deleting := metav1.Now()
	ns.DeletionTimestamp = &deleting
	dead := evicted("shop", "web-1", "lost", "ReplicaSet", "web")
	m := newFakeManager(t, ns, node("lost", corev1.ConditionUnknown, unreachable), dead)
	r, err := New(m, Options{})
	require.NoError(t, err)
	reconcileAll(t, r, dead)
	require.Equal(t, []string{"shop/web-1"}, *m.deletes)
}

// TestAFencingHoldIsCountedFromItsFirstCheckUntilItsPodGoes: the pods held
// back for fencing, which podhealth_fencing_held_pods and the age of the
// oldest report (an alert rule reads them), keep the time a check first
// held them across later checks, and leave the count when the fencing
// evidence lets them go or their namespace opts out.
func TestAFencingHoldIsCountedFromItsFirstCheckUntilItsPodGoes(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(start)
	sts := evicted("shop", "db-0", "lost", "StatefulSet", "db")
	queue := evicted("tools", "mq-0", "lost", "StatefulSet", "mq")
	m := newFakeManager(t, namespace("shop", true), namespace("tools", true), node("lost", corev1.ConditionUnknown, unreachable), sts, queue)
	r, err := New(m, Options{Clock: clock})
	require.NoError(t, err)
	pods, oldest := r.FencingHolds()
	require.Zero(t, pods)
	require.Zero(t, oldest)

	reconcileAll(t, r, sts)
	clock.SetTime(start.Add(5 * time.Minute))
	reconcileAll(t, r, sts, queue)
	pods, oldest = r.FencingHolds()
	require.Equal(t, 2, pods)
	require.Equal(t, 5*time.Minute, oldest, "db-0 keeps the time of the first check that held it")

	var tools corev1.Namespace
	require.NoError(t, m.client.Get(context.Background(), client.ObjectKey{Name: "tools"}, &tools))
	tools.Labels = nil
	require.NoError(t, m.client.Update(context.Background(), &tools))
	reconcileAll(t, r, queue)
	pods, _ = r.FencingHolds()
	require.Equal(t, 1, pods, "a namespace that opted out holds nothing for podhealth")

	var lost corev1.Node
	require.NoError(t, m.client.Get(context.Background(), client.ObjectKey{Name: "lost"}, &lost))
	lost.Spec.Taints = append(lost.Spec.Taints, outOfService)
	require.NoError(t, m.client.Update(context.Background(), &lost))
	reconcileAll(t, r, sts)
	require.False(t, exists(t, m, sts), "the out-of-service taint fences the node")
	pods, oldest = r.FencingHolds()
	require.Zero(t, pods)
	require.Zero(t, oldest)
}

// TestAFencingHoldEndsWhenSomeoneElseDeletesItsPod: a pod held back for
// fencing that a human force-deletes (or PodGC removes) brings its group
// back through the pod's delete event, which pods not held never do, and
// the group's check then counts it no longer.
func TestAFencingHoldEndsWhenSomeoneElseDeletesItsPod(t *testing.T) {
	sts := evicted("shop", "db-0", "lost", "StatefulSet", "db")
	other := evicted("shop", "web-1", "lost", "ReplicaSet", "web-1")
	m := newFakeManager(t, namespace("shop", true), node("lost", corev1.ConditionUnknown, unreachable), sts)
	r, err := New(m, Options{})
	require.NoError(t, err)
	reconcileAll(t, r, sts)
	pods, _ := r.FencingHolds()
	require.Equal(t, 1, pods)

	require.NoError(t, m.client.Delete(context.Background(), sts, client.GracePeriodSeconds(0)))
	deleted := r.fencingHeldPodDeleted()
	require.True(t, deleted.Delete(event.DeleteEvent{Object: sts}), "the held pod's deletion enqueues its group")
	require.False(t, deleted.Delete(event.DeleteEvent{Object: other}), "a pod not held passes nothing")
	require.False(t, deleted.Update(event.UpdateEvent{ObjectOld: sts, ObjectNew: sts}))
	reconcileAll(t, r, sts)
	pods, oldest := r.FencingHolds()
	require.Zero(t, pods)
	require.Zero(t, oldest)
}

// TestTheNamespacedModeActsInTheNamedNamespacesOnly: with WatchNamespaces
// the namespaces named are opted in whatever their labels, a labelled
// namespace that is not named is never written to, and no Namespace
// object is read (the namespaced mode has no right to).
func TestTheNamespacedModeActsInTheNamedNamespacesOnly(t *testing.T) {
	inShop := evicted("shop", "web-1", "lost", "ReplicaSet", "web-1")
	inOther := evicted("other", "web-1", "lost", "ReplicaSet", "web-1")
	m := newFakeManager(t, namespace("shop", false), namespace("other", true), node("lost", corev1.ConditionUnknown, unreachable), inShop, inOther)
	namespaceReads := 0
	m.client = interceptor.NewClient(m.client.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				namespaceReads++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r, err := New(m, Options{WatchNamespaces: []string{"shop"}})
	require.NoError(t, err)
	reconcileAll(t, r, inShop, inOther)
	require.False(t, exists(t, m, inShop), "shop is named: its dead pod goes though shop has no label")
	require.True(t, exists(t, m, inOther), "other is labelled but not named")
	require.Equal(t, []string{"shop/web-1"}, *m.deletes)
	require.Zero(t, namespaceReads)
}

func TestNewRefusesWatchNamespacesThatCannotBeWhatTheyName(t *testing.T) {
	for name, opts := range map[string]Options{
		"with a selector, which would do nothing": {WatchNamespaces: []string{"shop"}, Namespaces: labels.SelectorFromSet(labels.Set{"team": "a"})},
		"a name that is no namespace's":           {WatchNamespaces: []string{"Shop_1"}},
		"an empty name":                           {WatchNamespaces: []string{""}},
		"a name twice":                            {WatchNamespaces: []string{"shop", "shop"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(newFakeManager(t), opts)
			require.ErrorContains(t, err, "WatchNamespaces")
		})
	}
}

// TestTheNamespacedModesRulesAreTheClusterWideOnesLessNamespaces: the
// namespaced mode's Role and ClusterRole together grant what the
// cluster-wide ClusterRole does, but reading Namespaces, and the
// ClusterRole holds no right on pods.
func TestTheNamespacedModesRulesAreTheClusterWideOnesLessNamespaces(t *testing.T) {
	key := func(r rbacv1.PolicyRule) string {
		return strings.Join(r.APIGroups, ",") + "/" + strings.Join(r.Resources, ",") + ":" + strings.Join(r.Verbs, ",")
	}
	var clusterWide, namespaced []string
	for _, r := range ClusterRules() {
		if !slices.Contains(r.Resources, "namespaces") {
			clusterWide = append(clusterWide, key(r))
		}
	}
	for _, r := range append(NamespaceRules(), NamespacedModeClusterRules()...) {
		namespaced = append(namespaced, key(r))
	}
	require.ElementsMatch(t, clusterWide, namespaced)
	for _, r := range NamespacedModeClusterRules() {
		require.NotContains(t, r.Resources, "pods")
		require.NotContains(t, r.Verbs, "delete")
	}
}

// A shutdown taint's wait longer than the Memory's TTL ends for the
// controller, which comes back only at the RequeueAfter its reconcile
// returned: the Checker runs on Options.Clock, and the Memory keeps the
// wait's start until the requeue.
func TestAWaitLongerThanTheMemorysTTLEndsAtItsRequeue(t *testing.T) {
	const after = 15 * time.Minute
	db := evicted("shop", "db-0", "lost", "StatefulSet", "db")
	m := newFakeManager(t, namespace("shop", true), node("lost", corev1.ConditionUnknown, unreachable, cloudShutdownTaint), db)
	start := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	r, err := New(m, Options{Clock: clk, Memory: health.NewMemory(health.MemoryOptions{TTL: 10 * time.Minute}),
		ShutdownTaints: []health.ShutdownTaint{{Key: health.TaintCloudShutdown, After: after}}})
	require.NoError(t, err)
	req := ctrl.Request{NamespacedName: GroupOf(db)}
	for looks := 1; exists(t, m, db); looks++ {
		require.Less(t, looks, 4, "the wait started again at each requeue")
		res, err := r.Reconcile(context.Background(), req)
		require.NoError(t, err)
		if !exists(t, m, db) {
			break
		}
		require.Positive(t, res.RequeueAfter)
		clk.SetTime(clk.Now().Add(res.RequeueAfter))
	}
	require.Equal(t, after, clk.Now().Sub(start), "freed when the wait ended, on the controller's clock")
}
