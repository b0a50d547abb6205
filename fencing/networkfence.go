package fencing

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/nilcheck"
)

// NetworkFenceResource is the csi-addons NetworkFence resource that a
// NetworkFenceFencer reads: cluster-scoped, in csiaddons.openshift.io.
var NetworkFenceResource = schema.GroupVersionResource{Group: "csiaddons.openshift.io", Version: "v1alpha1", Resource: "networkfences"}

// The values by which csi-addons says that a NetworkFence's CIDRs are
// fenced. It keeps one result per object, overwritten by whichever
// operation ran last and with no generation, so only the message tells a
// fence's success from an earlier unfence's.
const (
	networkFenceFenced    = "Fenced"
	networkFenceSucceeded = "Succeeded"
	networkFenceDone      = "fencing operation successful"
)

// NetworkFenceLister lists the cluster's csi-addons NetworkFences, as
// unstructured objects so that no csi-addons module is needed. It must
// read live: a cache that lags would still show a withdrawn fence. The
// fencer only reads the objects. Implementations must be safe for
// concurrent use;
// podsource/kube.LiveNetworkFences is one over client-go's dynamic client.
type NetworkFenceLister interface {
	ListNetworkFences(ctx context.Context) ([]unstructured.Unstructured, error)
}

// NetworkFenceOptions configure a NetworkFenceFencer: which fences count.
// A fence cuts a node off one storage system only, so the fencer counts
// only the fences of the storage that holds the fenced workloads' data;
// at least one of the two lists must be set.
type NetworkFenceOptions struct {
	// Drivers are CSI driver names (spec.driver), such as
	// "rbd.csi.ceph.com".
	Drivers []string
	// Classes are NetworkFenceClass names (spec.networkFenceClassName).
	Classes []string
	// Recheck is how soon to ask again without proof (Fence.RetryAfter):
	// nothing tells a Checker when the storage fences a node, so a caller
	// that checks only on pod and node events looks again then. Zero means
	// DefaultNetworkFenceRecheck; it must not be negative.
	Recheck time.Duration
}

// DefaultNetworkFenceRecheck is NetworkFenceOptions.Recheck by default.
const DefaultNetworkFenceRecheck = 30 * time.Second

// NetworkFenceFencer is the storage's fencer, named "network-fence". It
// proves NodeStopped (the node is cut off its storage, so no container of
// it reaches its volumes) when a live list of csi-addons NetworkFences
// shows every address of the pod's node (its InternalIP and ExternalIP
// addresses) inside the CIDRs of fences that count (NetworkFenceOptions)
// and are fenced: spec.fenceState Fenced, status.result Succeeded with
// csi-addons' message for a fence operation, and not being deleted.
//
// No proof, with a detail that says why: no node object (a gone node is
// the node fencer's), a node without addresses, an address no fence
// covers, or any counting fence that covers one of the node's addresses
// and is not fenced (pending, failed, unfenced or being deleted: a
// withdrawn fence is no evidence even beside another). The last two ask
// again within NetworkFenceOptions.Recheck, since only the storage's own
// operation changes them. A list that fails (the resource not installed,
// RBAC denied) is an error.
//
// It proves the storage is cut off, not that the processes stopped: a
// container on the node may still run and write to anything else it
// reaches, such as a local disk or another storage system. Count only the
// storage that holds the data of the workloads you fence.
//
// A NetworkFenceFencer must come from NewNetworkFenceFencer. It is safe
// for concurrent use.
type NetworkFenceFencer struct {
	fences  NetworkFenceLister
	drivers []string
	classes []string
	recheck time.Duration
}

var _ health.Fencer = (*NetworkFenceFencer)(nil)

// NewNetworkFenceFencer returns a NetworkFenceFencer that lists fences
// live through fences. It refuses options that count no fence.
func NewNetworkFenceFencer(fences NetworkFenceLister, opts NetworkFenceOptions) (*NetworkFenceFencer, error) {
	if nilcheck.IsNil(fences) {
		return nil, errors.New("fencing: NewNetworkFenceFencer: nil NetworkFenceLister")
	}
	if len(opts.Drivers) == 0 && len(opts.Classes) == 0 {
		return nil, errors.New("fencing: NewNetworkFenceFencer: NetworkFenceOptions name no driver and no class, so no fence would count")
	}
	for _, s := range append(slices.Clone(opts.Drivers), opts.Classes...) {
		if strings.TrimSpace(s) == "" {
			return nil, errors.New("fencing: NewNetworkFenceFencer: an empty driver or class name")
		}
	}
	recheck := opts.Recheck
	switch {
	case recheck < 0:
		return nil, fmt.Errorf("fencing: NewNetworkFenceFencer: negative NetworkFenceOptions.Recheck %v", recheck)
	case recheck == 0:
		recheck = DefaultNetworkFenceRecheck
	}
	return &NetworkFenceFencer{fences: fences, drivers: slices.Clone(opts.Drivers), classes: slices.Clone(opts.Classes), recheck: recheck}, nil
}

// Name is "network-fence".
func (f *NetworkFenceFencer) Name() string { return "network-fence" }

// Fence lists the NetworkFences and says whether they cut the pod's node
// off its storage; see NetworkFenceFencer.
func (f *NetworkFenceFencer) Fence(ctx context.Context, q health.FenceQuery) (health.Fence, error) {
	if f == nil || f.fences == nil {
		return health.Fence{}, errors.New("the NetworkFenceFencer was not made by NewNetworkFenceFencer")
	}
	if q.Pod == nil {
		return health.Fence{}, nil
	}
	node := q.Node
	if node == nil {
		return health.Fence{Detail: "network fence: no node object to read addresses from: no evidence"}, nil
	}
	addrs, bad := nodeAddresses(node)
	switch {
	case bad != "":
		return health.Fence{Detail: "network fence: node " + node.Name + " " + bad + ": no evidence"}, nil
	case len(addrs) == 0:
		return health.Fence{Detail: "network fence: node " + node.Name + " reports no InternalIP or ExternalIP: no evidence"}, nil
	}
	list, err := f.fences.ListNetworkFences(ctx)
	if err != nil {
		return health.Fence{}, fmt.Errorf("listing NetworkFences: %w", err)
	}
	covered := make([]string, len(addrs)) // the fence that covers each address
	for i := range list {
		fence := &list[i]
		if !f.counts(fence) {
			continue
		}
		prefixes := fenceCIDRs(fence)
		fenced, state := fenceState(fence)
		for j, a := range addrs {
			if !containsAny(prefixes, a) {
				continue
			}
			if !fenced {
				return health.Fence{Detail: fmt.Sprintf("network fence %s covers %s of node %s but is %s: no evidence", fence.GetName(), a, node.Name, state), RetryAfter: f.recheck}, nil
			}
			if covered[j] == "" {
				covered[j] = fence.GetName()
			}
		}
	}
	for j, a := range addrs {
		if covered[j] == "" {
			return health.Fence{Detail: fmt.Sprintf("network fence: no fenced NetworkFence covers %s of node %s: no evidence", a, node.Name), RetryAfter: f.recheck}, nil
		}
	}
	names := slices.Clone(covered)
	slices.Sort(names)
	names = slices.Compact(names)
	by := "network fence " + strings.Join(names, ", ")
	return health.Fence{
		Proves: health.NodeStopped,
		By:     by,
		Detail: fmt.Sprintf("%s fences every address of node %s (%s)", by, node.Name, joinAddrs(addrs)),
	}, nil
}

// counts says whether fence is of the storage the fencer was told to
// count.
func (f *NetworkFenceFencer) counts(fence *unstructured.Unstructured) bool {
	driver, _, _ := unstructured.NestedString(fence.Object, "spec", "driver")
	class, _, _ := unstructured.NestedString(fence.Object, "spec", "networkFenceClassName")
	return (driver != "" && slices.Contains(f.drivers, driver)) || (class != "" && slices.Contains(f.classes, class))
}

// fenceState says whether fence is fenced, and if not, what it is.
func fenceState(fence *unstructured.Unstructured) (bool, string) {
	want, _, _ := unstructured.NestedString(fence.Object, "spec", "fenceState")
	result, _, _ := unstructured.NestedString(fence.Object, "status", "result")
	message, _, _ := unstructured.NestedString(fence.Object, "status", "message")
	switch {
	case fence.GetDeletionTimestamp() != nil:
		return false, "being deleted"
	case want != networkFenceFenced:
		return false, fmt.Sprintf("fenceState %q", want)
	case result != networkFenceSucceeded:
		return false, fmt.Sprintf("fenceState Fenced with result %q", result)
	case message != networkFenceDone:
		return false, fmt.Sprintf("fenceState Fenced, result Succeeded with message %q, not that of a fence", message)
	}
	return true, "fenced"
}

// fenceCIDRs reads spec.cidrs; a CIDR that does not parse covers nothing.
func fenceCIDRs(fence *unstructured.Unstructured) []netip.Prefix {
	raw, _, _ := unstructured.NestedStringSlice(fence.Object, "spec", "cidrs")
	var out []netip.Prefix
	for _, s := range raw {
		if p, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil {
			out = append(out, p.Masked())
		} else if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}

func containsAny(prefixes []netip.Prefix, a netip.Addr) bool {
	return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(a) })
}

// nodeAddresses reads the node's IP addresses, or says what is wrong with
// them: an address that does not parse could be one no fence covers.
func nodeAddresses(node *corev1.Node) ([]netip.Addr, string) {
	var out []netip.Addr
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			return nil, fmt.Sprintf("reports %s %q, which is not an IP address", a.Type, a.Address)
		}
		ip = ip.Unmap()
		if !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out, ""
}

func joinAddrs(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
