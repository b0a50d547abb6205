package controllerruntime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/podsource"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

// instanceOwner is a database operator's custom resource, as its object
// metadata.
var instanceOwner = &metav1.PartialObjectMetadata{
	TypeMeta:   metav1.TypeMeta{APIVersion: "db.example.com/v1", Kind: "Cluster"},
	ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pg", UID: "pg-uid"},
}

const byOwner = ".metadata.controller"

// instance is a pod of the fixture kind, without labels, that owner
// (name, UID) controls.
func instance(t *testing.T, file, name string, ownerName string, ownerUID types.UID) *corev1.Pod {
	p := loadPod(t, file).DeepCopy()
	p.Name, p.UID, p.Labels = name, types.UID("uid-"+name), nil
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "db.example.com/v1", Kind: "Cluster", Name: ownerName, UID: ownerUID, Controller: ptr.To(true)}}
	return p
}

// operatorClient is an operator's fake client with its index of pods by
// their controller's name, under fakeapi, seeded with objs.
func operatorClient(t *testing.T, objs ...client.Object) client.WithWatch {
	b := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithIndex(&corev1.Pod{}, byOwner, func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{ref.Name}
		}
		return nil
	})
	c, err := fakeapi.NewClientFrom(b, objs...)
	require.NoError(t, err)
	return c
}

// The owner's pods, found by its field index or by listing the namespace:
// never another owner's, nor those of an owner of the same name that was
// deleted and created again (another UID).
func TestOwnedPodSourceListsTheOwnersPodsAlone(t *testing.T) {
	mine := instance(t, testutil.PodAlive, "pg-1", "pg", "pg-uid")
	stale := instance(t, testutil.PodAlive, "pg-0", "pg", "an-older-pg")
	other := instance(t, testutil.PodAlive, "mysql-1", "mysql", "mysql-uid")
	c := operatorClient(t, mine, stale, other)
	for _, index := range []string{byOwner, ""} {
		source, err := crh.NewOwnedPodSource(c, instanceOwner, index)
		require.NoError(t, err)
		pods, err := source.ListPods(context.Background())
		require.NoError(t, err)
		require.Len(t, pods, 1, "index %q", index)
		require.Equal(t, "pg-1", pods[0].Name)
	}
}

// The owned Deleter deletes the owner's pods and refuses any other without
// a request.
func TestOwnedDeleterRefusesPodsTheOwnerDoesNotControl(t *testing.T) {
	mine := instance(t, testutil.PodTaintEvicted, "pg-1", "pg", "pg-uid")
	stale := instance(t, testutil.PodTaintEvicted, "pg-0", "pg", "an-older-pg")
	bare := loadPod(t, testutil.PodTaintEvicted)
	n := &calls{}
	c := counted(operatorClient(t, mine, stale, bare), n)
	d, err := crh.NewOwnedDeleter(c, instanceOwner)
	require.NoError(t, err)
	for _, p := range []*corev1.Pod{stale, bare} {
		err := d.ForceDelete(context.Background(), p)
		var scope *podsource.OutOfScopeError
		require.True(t, errors.As(err, &scope), "%s: %v", p.Name, err)
		require.Contains(t, scope.Reason, "not controlled by the deleter's owner")
	}
	require.Zero(t, n.get("delete"), "a refusal sends nothing")
	require.NoError(t, d.ForceDelete(context.Background(), mine))
	require.Equal(t, 1, n.get("delete"))
}

// A database operator's reconcile, as it finds its instance pods (by its
// owner index, no labels): the dead instance on the lost node goes (no
// claim, so no fencing needed), the other cluster's dead pod stays.
func TestCheckersForOwnerChecksTheOwnersPods(t *testing.T) {
	dead := instance(t, testutil.PodTaintEvicted, "pg-1", "pg", "pg-uid")
	alive := instance(t, testutil.PodAlive, "pg-2", "pg", "pg-uid")
	others := instance(t, testutil.PodTaintEvicted, "mysql-1", "mysql", "mysql-uid")
	c := operatorClient(t, dead, alive, others, loadNode(t, testutil.NodeLost), loadNode(t, testutil.NodeHealthy))
	checkers, err := crh.NewCheckers(&manager{cache: c, live: c}, crh.CheckersOptions{})
	require.NoError(t, err)
	checker, err := checkers.ForOwner(instanceOwner, byOwner, crh.CheckOptions{})
	require.NoError(t, err)
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.True(t, report.Healthy)
	require.Len(t, report.Pods, 2)
	_, err = getPod(c)(context.Background(), "default", "pg-1")
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	_, err = getPod(c)(context.Background(), "default", "mysql-1")
	require.NoError(t, err, "another owner's pod is not this checker's")
}

func TestOwnedScopesRefuseOwnersTheyCannotMatch(t *testing.T) {
	c := operatorClient(t)
	checkers, err := crh.NewCheckers(&manager{cache: c, live: c}, crh.CheckersOptions{})
	require.NoError(t, err)
	noUID := instanceOwner.DeepCopy()
	noUID.UID = ""
	noNamespace := instanceOwner.DeepCopy()
	noNamespace.Namespace = ""
	for name, owner := range map[string]client.Object{"nil": nil, "no UID": noUID, "no namespace": noNamespace} {
		_, err := crh.NewOwnedPodSource(c, owner, "")
		require.Error(t, err, name)
		_, err = crh.NewOwnedDeleter(c, owner)
		require.Error(t, err, name)
		_, err = checkers.ForOwner(owner, "", crh.CheckOptions{})
		require.Error(t, err, name)
	}
	_, err = crh.NewOwnedPodSource(c, noUID, "")
	require.ErrorContains(t, err, "has no UID")
	var typedNil *metav1.PartialObjectMetadata
	_, err = crh.NewOwnedDeleter(c, typedNil)
	require.ErrorContains(t, err, "nil owner")
}

// A pod that another controller adopts after the list is judged on the
// live object: the owned Deleter's DELETE carries the listed pod's
// resourceVersion, so the API server refuses it once the pod changed, and
// the Checker reports a failed delete (judged again next time), not a
// newer pod holding the name. The pod stays. A pod unchanged since the
// list goes.
func TestAPodAdoptedAfterTheListIsNotForceDeletedByTheOwnedDeleter(t *testing.T) {
	dead := instance(t, testutil.PodTaintEvicted, "pg-1", "pg", "pg-uid")
	c := operatorClient(t, dead, loadNode(t, testutil.NodeLost), loadNode(t, testutil.NodeHealthy))
	source, err := crh.NewOwnedPodSource(c, instanceOwner, byOwner)
	require.NoError(t, err)
	deleter, err := crh.NewOwnedDeleter(c, instanceOwner)
	require.NoError(t, err)
	listed, err := source.ListPods(context.Background())
	require.NoError(t, err)
	require.Len(t, listed, 1)

	// Between the list and the delete, another controller adopts it.
	var live corev1.Pod
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(dead), &live))
	live.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "other", UID: "other-uid", Controller: ptr.To(true)}}
	require.NoError(t, c.Update(context.Background(), &live))

	checker, err := health.New(health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return listed, nil }), deleter,
		health.Options{Nodes: crhNodes(t, c)})
	require.NoError(t, err)
	report, err := checker.CheckReport(context.Background())
	require.Error(t, err)
	require.Equal(t, health.DeleteFailed, report.Pods[0].Outcome, "not NameReused: the pod may still be there")
	require.ErrorIs(t, err, crh.ErrPodChanged)
	require.ErrorContains(t, err, "was refused")
	var scope *podsource.OutOfScopeError
	require.False(t, errors.As(err, &scope), "the DELETE was sent: not an OutOfScopeError, which says nothing was")
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(dead), &live), "the adopted pod stays")

	// Unchanged since the list: deleted.
	unchanged := instance(t, testutil.PodTaintEvicted, "pg-2", "pg", "pg-uid")
	c = operatorClient(t, unchanged)
	deleter, err = crh.NewOwnedDeleter(c, instanceOwner)
	require.NoError(t, err)
	var fresh corev1.Pod
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(unchanged), &fresh))
	require.NotEmpty(t, fresh.ResourceVersion)
	require.NoError(t, deleter.ForceDelete(context.Background(), &fresh))
	err = c.Get(context.Background(), client.ObjectKeyFromObject(unchanged), &fresh)
	require.True(t, apierrors.IsNotFound(err), "%v", err)
}

// A lagging cache lists a dead pod whose name a newer pod of the same
// owner now holds: the owned Deleter's DELETE fails the UID precondition
// (the API server checks it before the resourceVersion), and the Checker
// reports NameReused with no error, as the label-scoped Deleter does
// (README rows D3 and D4). The newer pod stays.
func TestTheOwnedDeleterReportsANameANewerPodHoldsAsNameReused(t *testing.T) {
	dead := instance(t, testutil.PodTaintEvicted, "pg-1", "pg", "pg-uid")
	dead.ResourceVersion = "7"
	newer := instance(t, testutil.PodTaintEvicted, "pg-1", "pg", "pg-uid")
	newer.UID = "00000000-0000-0000-0000-0000000000a1"
	newer.DeletionTimestamp, newer.Status.Conditions, newer.ResourceVersion = nil, nil, ""
	c := operatorClient(t, newer, loadNode(t, testutil.NodeLost), loadNode(t, testutil.NodeHealthy))
	deleter, err := crh.NewOwnedDeleter(c, instanceOwner)
	require.NoError(t, err)
	checker, err := health.New(health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return []*corev1.Pod{dead}, nil }), deleter,
		health.Options{Nodes: crhNodes(t, c), Fencing: health.FenceNever})
	require.NoError(t, err)
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.NameReused, report.Pods[0].Outcome)
	var live corev1.Pod
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(newer), &live))
	require.Equal(t, newer.UID, live.UID, "the newer pod stays")
}

func crhNodes(t *testing.T, c client.Reader) health.NodeGetter {
	t.Helper()
	nodes, err := crh.NewNodes(c)
	require.NoError(t, err)
	return nodes
}

// Checkers.CheckOwner and Checkers.Check are ForOwner and For with the
// check's report in one call: the dead instance goes, once over a cache
// that goes on listing it; a refused owner is ForOwner's error; a failed
// list is wrapped with the owner, or with the namespace and selector, and
// still unwraps to health.ListError.
func TestCheckersCheckOwnerAndCheckAreTheCheckInOneCall(t *testing.T) {
	dead := instance(t, testutil.PodTaintEvicted, "pg-1", "pg", "pg-uid")
	alive := instance(t, testutil.PodAlive, "pg-2", "pg", "pg-uid")
	var deletes atomic.Int32
	c := interceptor.NewClient(operatorClient(t, dead, alive, loadNode(t, testutil.NodeLost), loadNode(t, testutil.NodeHealthy)), interceptor.Funcs{
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			deletes.Add(1) // accepted; the cache goes on listing the pod
			return nil
		}})
	checkers, err := crh.NewCheckers(&manager{cache: c, live: c}, crh.CheckersOptions{})
	require.NoError(t, err)
	for i := range 3 {
		report, err := checkers.CheckOwner(context.Background(), instanceOwner, byOwner, crh.CheckOptions{})
		require.NoError(t, err, "reconcile %d", i)
		require.True(t, report.Healthy, "reconcile %d", i)
		require.Len(t, report.Pods, 2, "reconcile %d", i)
	}
	require.Equal(t, int32(1), deletes.Load(), "DELETEs sent by three reconciles over a stale cache")

	noUID := instanceOwner.DeepCopy()
	noUID.UID = ""
	_, err = checkers.CheckOwner(context.Background(), noUID, byOwner, crh.CheckOptions{})
	require.ErrorContains(t, err, "has no UID")

	failing := interceptor.NewClient(operatorClient(t, dead), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("the cache is gone")
		}})
	broken, err := crh.NewCheckers(&manager{cache: failing, live: failing}, crh.CheckersOptions{NoNodeEvidence: true})
	require.NoError(t, err)
	var listErr *health.ListError
	_, err = broken.CheckOwner(context.Background(), instanceOwner, byOwner, crh.CheckOptions{})
	require.ErrorAs(t, err, &listErr)
	require.ErrorContains(t, err, "the pods that default/pg controls")
	_, err = broken.Check(context.Background(), "default", registry, crh.CheckOptions{})
	require.ErrorAs(t, err, &listErr)
	require.ErrorContains(t, err, `namespace "default" that match "app=registry"`)

	var none *crh.Checkers
	_, err = none.CheckOwner(context.Background(), instanceOwner, byOwner, crh.CheckOptions{})
	require.ErrorContains(t, err, "not made by NewCheckers")
	_, err = none.Check(context.Background(), "default", registry, crh.CheckOptions{})
	require.ErrorContains(t, err, "not made by NewCheckers")
}
