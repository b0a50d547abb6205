package fencing_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/health/fencertest"
	"github.com/podhealth/podhealth/podsource/fake"
)

// networkFences is a NetworkFenceLister over a list that a test changes
// as it goes, or that answers err.
type networkFences struct {
	mu    sync.Mutex
	items []unstructured.Unstructured
	err   error
}

func (n *networkFences) set(items ...unstructured.Unstructured) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.items = items
}

func (n *networkFences) ListNetworkFences(ctx context.Context) ([]unstructured.Unstructured, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.items, n.err
}

// networkFence is a NetworkFence of driver over cidrs in the state
// csi-addons leaves after a fence operation that succeeded.
func networkFence(name, driver string, cidrs ...string) unstructured.Unstructured {
	list := make([]any, len(cidrs))
	for i, c := range cidrs {
		list[i] = c
	}
	return unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "csiaddons.openshift.io/v1alpha1",
		"kind":       "NetworkFence",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"driver": driver, "fenceState": "Fenced", "cidrs": list},
		"status":     map[string]any{"result": "Succeeded", "message": "fencing operation successful"},
	}}
}

// with sets a field of a fence: path then value.
func with(u unstructured.Unstructured, value any, path ...string) unstructured.Unstructured {
	u = *u.DeepCopy()
	require.NoError(nil, unstructured.SetNestedField(u.Object, value, path...))
	return u
}

// nodeAt is an unreachable node with the given addresses.
func nodeAt(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	n := unreachableNode(name)
	n.Status.Addresses = addrs
	return n
}

func internalIP(a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a}
}

const rbd = "rbd.csi.ceph.com"

func newNetworkFenceFencer(t testing.TB, l fencing.NetworkFenceLister) *fencing.NetworkFenceFencer {
	t.Helper()
	f, err := fencing.NewNetworkFenceFencer(l, fencing.NetworkFenceOptions{Drivers: []string{rbd}})
	require.NoError(t, err)
	return f
}

// The network-fence fencer passes the conformance suite: node-level proof
// when fenced fences of the counted driver cover every node address, none
// otherwise.
func TestNetworkFenceFencerPassesTheConformanceSuite(t *testing.T) {
	node := nodeAt("n1", internalIP("10.0.0.5"), corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"})
	pod := evictedOn("pg-1", "n1", ownedByStatefulSet)
	q := health.FenceQuery{Pod: pod, NodeState: health.NodeUnreachable, Node: node, Now: fenceStart}
	fences := &networkFences{}
	fences.set(networkFence("n1-rbd", rbd, "10.0.0.0/24"))
	require.NoError(t, fencertest.TestFencer(newNetworkFenceFencer(t, fences),
		fencertest.Case{Name: "fenced", Query: q, Want: health.NodeStopped},
		fencertest.Case{Name: "no node object", Query: health.FenceQuery{Pod: pod, NodeState: health.NodeUnreachable, Now: fenceStart}, Want: health.NoProof},
	))
	other := &networkFences{}
	other.set(networkFence("n1-cephfs", "cephfs.csi.ceph.com", "10.0.0.0/24"))
	require.NoError(t, fencertest.TestFencer(newNetworkFenceFencer(t, other),
		fencertest.Case{Name: "a fence of storage that does not count", Query: q, Want: health.NoProof}))
}

// Each way the storage's word can be missing, partial or withdrawn is no
// proof, with a detail that says why; a list that fails is an error.
func TestNetworkFenceFencerFailsClosed(t *testing.T) {
	fenced := networkFence("n1-rbd", rbd, "10.0.0.5/32", "fd00::5/128")
	dualStack := nodeAt("n1", internalIP("10.0.0.5"), internalIP("fd00::5"))
	notInstalled := apierrors.NewNotFound(fencing.NetworkFenceResource.GroupResource(), "")
	for _, tt := range []struct {
		name    string
		node    *corev1.Node
		fences  []unstructured.Unstructured
		err     error
		detail  string
		wantErr error
	}{
		// The storage may fence the node later: these ask again within
		// the recheck (TestNetworkFenceFencerAsksAgainWhereTheStorageMayFenceLater).
		{"no fence at all", dualStack, nil, nil, "no fenced NetworkFence covers 10.0.0.5", nil},
		{"one address of two covered", dualStack, []unstructured.Unstructured{networkFence("n1-rbd", rbd, "10.0.0.5/32")}, nil, "covers fd00::5", nil},
		{"the fence withdrawn", dualStack, []unstructured.Unstructured{with(fenced, "Unfenced", "spec", "fenceState")}, nil, `is fenceState "Unfenced"`, nil},
		{"the fence pending", dualStack, []unstructured.Unstructured{with(fenced, "", "status", "result")}, nil, `with result ""`, nil},
		{"the fence failed", dualStack, []unstructured.Unstructured{with(fenced, "Failed", "status", "result")}, nil, `with result "Failed"`, nil},
		{"an earlier unfence's success", dualStack, []unstructured.Unstructured{with(fenced, "unfencing operation successful", "status", "message")}, nil, "not that of a fence", nil},
		{"the fence being deleted", dualStack, []unstructured.Unstructured{func() unstructured.Unstructured {
			u := *fenced.DeepCopy()
			now := metav1.NewTime(fenceStart)
			u.SetDeletionTimestamp(&now)
			return u
		}()}, nil, "being deleted", nil},
		{"a withdrawn fence beside a fenced one", dualStack, []unstructured.Unstructured{fenced, with(networkFence("n1-rbd-old", rbd, "10.0.0.0/8"), "Unfenced", "spec", "fenceState")}, nil, "n1-rbd-old covers 10.0.0.5", nil},
		{"a fence of another driver", dualStack, []unstructured.Unstructured{with(fenced, "other.csi", "spec", "driver")}, nil, "no fenced NetworkFence covers", nil},
		{"a CIDR that does not parse", dualStack, []unstructured.Unstructured{networkFence("n1-rbd", rbd, "10.0.0.5/33", "fd00::5/128")}, nil, "covers 10.0.0.5", nil},
		{"a node without addresses", nodeAt("n1"), []unstructured.Unstructured{fenced}, nil, "reports no InternalIP or ExternalIP", nil},
		{"a node address that does not parse", nodeAt("n1", internalIP("10.0.0.500")), []unstructured.Unstructured{fenced}, nil, "which is not an IP address", nil},
		{"no node object", nil, []unstructured.Unstructured{fenced}, nil, "no node object", nil},
		{"the resource not installed", dualStack, nil, notInstalled, "", notInstalled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := &networkFences{err: tt.err}
			l.set(tt.fences...)
			f := newNetworkFenceFencer(t, l)
			fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1"), Node: tt.node, Now: fenceStart, Sightings: fencertest.NewRecord().At(fenceStart)})
			require.Equal(t, health.NoProof, fence.Proves)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Contains(t, fence.Detail, tt.detail)
			if fence.RetryAfter != 0 {
				require.Equal(t, fencing.DefaultNetworkFenceRecheck, fence.RetryAfter)
			}
		})
	}
}

// Where the storage may still fence the node (no fence yet, or one that is
// pending or withdrawn), the answer asks again within the recheck, since
// no event of the Checker's says when the fence holds; where the node
// itself is wanting, it does not.
func TestNetworkFenceFencerAsksAgainWhereTheStorageMayFenceLater(t *testing.T) {
	pending := with(networkFence("n1-rbd", rbd, "10.0.0.5/32"), "", "status", "result")
	for _, tt := range []struct {
		name   string
		node   *corev1.Node
		fences []unstructured.Unstructured
		want   time.Duration
	}{
		{"no fence yet", nodeAt("n1", internalIP("10.0.0.5")), nil, 5 * time.Second},
		{"a fence pending", nodeAt("n1", internalIP("10.0.0.5")), []unstructured.Unstructured{pending}, 5 * time.Second},
		{"no node object", nil, nil, 0},
		{"no address", nodeAt("n1"), nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := &networkFences{}
			l.set(tt.fences...)
			f, err := fencing.NewNetworkFenceFencer(l, fencing.NetworkFenceOptions{Drivers: []string{rbd}, Recheck: 5 * time.Second})
			require.NoError(t, err)
			fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1"), Node: tt.node, Now: fenceStart})
			require.NoError(t, err)
			require.Equal(t, health.NoProof, fence.Proves)
			require.Equal(t, tt.want, fence.RetryAfter)
		})
	}
}

// A fence counts when its driver or its class is one the fencer was told
// to count; the proof names every fence it rests on.
func TestNetworkFenceFencerCountsTheNamedStorageOnly(t *testing.T) {
	node := nodeAt("n1", internalIP("10.0.0.5"), corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.5"})
	byClass := with(networkFence("n1-internal", "", "10.0.0.0/24"), "ceph-rbd", "spec", "networkFenceClassName")
	external := networkFence("n1-external", rbd, "203.0.113.5")
	l := &networkFences{}
	l.set(byClass, external)
	f, err := fencing.NewNetworkFenceFencer(l, fencing.NetworkFenceOptions{Drivers: []string{rbd}, Classes: []string{"ceph-rbd"}})
	require.NoError(t, err)
	fence, err := f.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1"), Node: node, Now: fenceStart})
	require.NoError(t, err)
	require.Equal(t, health.NodeStopped, fence.Proves)
	require.Equal(t, "network fence n1-external, n1-internal", fence.By)

	onlyDriver := newNetworkFenceFencer(t, l)
	fence, err = onlyDriver.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1"), Node: node, Now: fenceStart})
	require.NoError(t, err)
	require.Equal(t, health.NoProof, fence.Proves, "the class's fence does not count")
}

func TestNewNetworkFenceFencerRefusesWhatCannotWork(t *testing.T) {
	var typedNil *networkFences
	for _, tt := range []struct {
		name   string
		lister fencing.NetworkFenceLister
		opts   fencing.NetworkFenceOptions
		want   string
	}{
		{"nil lister", nil, fencing.NetworkFenceOptions{Drivers: []string{rbd}}, "nil NetworkFenceLister"},
		{"typed nil lister", typedNil, fencing.NetworkFenceOptions{Drivers: []string{rbd}}, "nil NetworkFenceLister"},
		{"nothing counts", &networkFences{}, fencing.NetworkFenceOptions{}, "no driver and no class"},
		{"an empty name", &networkFences{}, fencing.NetworkFenceOptions{Classes: []string{" "}}, "empty driver or class"},
		{"a negative recheck", &networkFences{}, fencing.NetworkFenceOptions{Drivers: []string{rbd}, Recheck: -time.Second}, "negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fencing.NewNetworkFenceFencer(tt.lister, tt.opts)
			require.ErrorContains(t, err, tt.want)
		})
	}
	var zero fencing.NetworkFenceFencer
	_, err := zero.Fence(context.Background(), health.FenceQuery{Pod: evictedOn("pg-1", "n1"), Now: fenceStart})
	require.ErrorContains(t, err, "NewNetworkFenceFencer")
}

// In a Checker, a StatefulSet pod on a partitioned node is held until the
// storage fences the node, force-deleted then, and held again for the
// next pod once the fence is withdrawn.
func TestACheckerFreesAPodOnceItsStorageFencesTheNode(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(fenceStart)
	pods := fake.New(fake.Options{}, evictedOn("pg-0", "n1", ownedByStatefulSet))
	nodes := fake.NewNodes(nodeAt("n1", internalIP("10.0.0.5")))
	fences := &networkFences{}
	checker, err := health.New(pods, pods, health.Options{Nodes: nodes, Clock: clk, Fencers: []health.Fencer{newNetworkFenceFencer(t, fences)}})
	require.NoError(t, err)

	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
	require.Contains(t, report.Pods[0].HeldBack.Detail, "no fenced NetworkFence covers 10.0.0.5")

	fences.set(networkFence("n1-rbd", rbd, "10.0.0.5/32"))
	clk.SetTime(clk.Now().Add(time.Second))
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome)
	require.Len(t, pods.Deletes(), 1)

	fences.set(with(networkFence("n1-rbd", rbd, "10.0.0.5/32"), "Unfenced", "spec", "fenceState"))
	require.NoError(t, pods.Add(evictedOn("pg-1", "n1", ownedByStatefulSet)))
	clk.SetTime(clk.Now().Add(time.Second))
	report, err = checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
	require.Len(t, pods.Deletes(), 1, "a withdrawn fence frees nothing")
}
