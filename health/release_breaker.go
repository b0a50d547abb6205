package health

import (
	"context"
	"errors"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
)

// NodeLister lists all nodes of the cluster. The nodes must not be mutated.
// Implementations must be safe for concurrent use.
type NodeLister interface {
	ListNodes(ctx context.Context) ([]*corev1.Node, error)
}

// Default thresholds of a Breaker, those of the node-lifecycle controller's
// partial disruption of a zone.
const (
	defaultUnhealthyMillionths = 550_000 // 0.55
	defaultMinUnhealthy        = 3
)

// millionths is how finely the Breaker reads UnhealthyShare: the share is
// compared in whole millionths, in integers, so that 0.55 trips at exactly
// 55 of 100 nodes (as a float64, 0.55*100 is 55.00000000000001).
const millionths = 1_000_000

// Breaker stops force deletes when an unusual share of nodes is not Ready at
// once, which points to a control-plane or network problem rather than to
// failed nodes: the node-lifecycle controller slows or stops its evictions
// in the same case. It judges the pod's zone (label
// topology.kubernetes.io/zone) and the whole cluster, and trips when either
// has at least MinUnhealthy nodes not Ready making up at least
// UnhealthyShare of its nodes (a node counts as not Ready unless its
// NodeState is NodeReady), or when no node of the cluster counts as
// Ready. A node InMaintenance (a graceful shutdown or a drain in progress)
// is not counted at all, neither as not Ready nor among the nodes: a
// rolling reboot is no disruption. But when every listed node is in
// maintenance, none counts as Ready, and it trips: a cluster with no
// healthy node to compare against gives no reading of a node's failure.
// It also trips when its Nodes cannot be read or list no node at all,
// since it then knows nothing about the cluster. The zero value (no
// Nodes) never trips. It is safe for concurrent use when its Nodes are.
type Breaker struct {
	Nodes NodeLister
	// UnhealthyShare is the share of not-Ready nodes at which it trips:
	// n not-Ready nodes of total trip it when n/total >= UnhealthyShare,
	// compared exactly in integers after rounding the share to the nearest
	// millionth (0.55 trips at 55 of 100 nodes, and not at 54). Zero means
	// 0.55; New refuses a value outside 0 to 1, NaN, and a positive share
	// below half a millionth, which would round to zero.
	UnhealthyShare float64
	// MinUnhealthy is the fewest not-Ready nodes that trip it, so that one
	// failed node of a small cluster does not. Zero means 3; New refuses
	// a negative value.
	MinUnhealthy int
}

// nodeHealth counts a zone's nodes.
type nodeHealth struct{ total, notReady int }

// disruption is the Breaker's reading of the cluster in one check: one pass
// over the listed nodes that counts them and their not-Ready ones, per zone
// and in all, without sorting or indexing them. Which zone a node is in is
// needed only when a zone is disrupted, and then read once per check (see
// zoneOf).
type disruption struct {
	cluster     nodeHealth
	zones       zoneCounts
	disrupted   bool // some zone is disrupted
	maintenance int  // listed nodes InMaintenance, counted nowhere
	nodes       []*corev1.Node
	byNode      map[string]string // node name -> zone; made on first use
	err         error
}

// zoneCounts counts the nodes of each zone. A cluster has few zones, so it
// keeps them in a slice, searched in turn, and indexes them by name only
// when there are more than a few.
type zoneCounts struct {
	counts []zoneCount
	index  map[string]int // into counts, when it is long
}

type zoneCount struct {
	zone string
	nodeHealth
}

// fewZones is how many zones zoneCounts searches in turn.
const fewZones = 8

// of returns the counts of zone, adding it if it is new.
func (z *zoneCounts) of(zone string) *nodeHealth {
	if z.index != nil {
		if i, ok := z.index[zone]; ok {
			return &z.counts[i].nodeHealth
		}
	} else {
		for i := range z.counts {
			if z.counts[i].zone == zone {
				return &z.counts[i].nodeHealth
			}
		}
	}
	z.counts = append(z.counts, zoneCount{zone: zone})
	switch n := len(z.counts); {
	case z.index != nil:
		z.index[zone] = n - 1
	case n > fewZones:
		z.index = make(map[string]int, 2*n)
		for i := range z.counts {
			z.index[z.counts[i].zone] = i
		}
	}
	return &z.counts[len(z.counts)-1].nodeHealth
}

// Tripped returns why the Breaker stops force deletes on the named node
// now, or "" when it does not: the answer a check would give, from one
// listing of b.Nodes. A caller that guards other actions with the
// Breaker (the out-of-service taints of podhealth-controller) asks it
// here. A Breaker without Nodes never trips.
func (b Breaker) Tripped(ctx context.Context, node string) string {
	if b.Nodes == nil {
		return ""
	}
	if why := b.tripped(b.read(ctx), node); why != "" {
		return "breaker open: " + why
	}
	return ""
}

// Open returns why the Breaker stops force deletes on some node now (the
// whole cluster, or one zone), or "" when it stops none: from one listing
// of b.Nodes, so that a gauge of the Breaker's state (podhealth_breaker_open)
// tells the truth whether or not a dead pod has asked it lately. A
// Breaker without Nodes is never open.
func (b Breaker) Open(ctx context.Context) string {
	if b.Nodes == nil {
		return ""
	}
	d := b.read(ctx)
	if why := b.trippedCluster(d); why != "" {
		return "breaker open: " + why
	}
	least, share := b.thresholds()
	for _, z := range d.zones.counts {
		if z.disruptedAt(least, share) {
			return "breaker open: " + fmt.Sprintf("%d of %d nodes in zone %q are not Ready", z.notReady, z.total, z.zone) + d.uncounted()
		}
	}
	return ""
}

func (b Breaker) read(ctx context.Context) *disruption {
	nodes, err := b.Nodes.ListNodes(ctx)
	switch {
	case err != nil:
		return &disruption{err: err}
	case len(nodes) == 0:
		// A cluster with pods has nodes: a lister that lists none has not
		// synced, or sees nothing, so there is no reading of its health.
		return &disruption{err: errors.New("no nodes seen")}
	}
	d := &disruption{nodes: nodes}
	for i, n := range nodes {
		if n == nil {
			return &disruption{err: fmt.Errorf("the node lister listed a nil node at index %d", i)}
		}
		if _, stopping := InMaintenance(n); stopping {
			d.maintenance++
			continue
		}
		z := d.zones.of(n.Labels[corev1.LabelTopologyZone])
		z.total++
		d.cluster.total++
		if NodeStateOf(n) != NodeReady { // NodeUnknown counts as not Ready: fail closed
			z.notReady++
			d.cluster.notReady++
		}
	}
	least, share := b.thresholds()
	for _, z := range d.zones.counts {
		d.disrupted = d.disrupted || z.disruptedAt(least, share)
	}
	return d
}

// thresholds returns MinUnhealthy and UnhealthyShare in millionths, or
// their defaults.
func (b Breaker) thresholds() (least int, share int64) {
	least, share = b.MinUnhealthy, shareInMillionths(b.UnhealthyShare)
	if share <= 0 {
		share = defaultUnhealthyMillionths
	}
	if least <= 0 {
		least = defaultMinUnhealthy
	}
	return least, share
}

// shareInMillionths is share rounded to the nearest millionth; 0 for a
// share that is not positive (or NaN, which New refuses).
func shareInMillionths(share float64) int64 {
	if !(share > 0) {
		return 0
	}
	return int64(math.Round(min(share, 1) * millionths))
}

// disruptedAt reports whether at least least nodes, and at least share
// millionths of them, are not Ready, in integers: notReady/total >= share
// is notReady*1e6 >= share*total, exact for any cluster below 9e12 nodes.
func (h nodeHealth) disruptedAt(least int, share int64) bool {
	return h.notReady >= least && int64(h.notReady)*millionths >= share*int64(h.total)
}

// zoneOf returns the zone of the named node, and whether it was listed.
func (d *disruption) zoneOf(node string) (string, bool) {
	if d.byNode == nil {
		d.byNode = make(map[string]string, len(d.nodes))
		for _, n := range d.nodes {
			d.byNode[n.Name] = n.Labels[corev1.LabelTopologyZone]
		}
	}
	zone, ok := d.byNode[node]
	return zone, ok
}

// trippedCluster returns why force deletes on every node must stop, or "".
func (b Breaker) trippedCluster(d *disruption) string {
	if d.err != nil {
		return "cannot read node health: " + d.err.Error()
	}
	least, share := b.thresholds()
	switch {
	case d.cluster.total == 0:
		return fmt.Sprintf("none of the %d nodes counts as Ready: all are in a graceful shutdown or a drain", d.maintenance)
	case d.cluster.notReady == d.cluster.total:
		return fmt.Sprintf("all %d nodes are not Ready", d.cluster.total) + d.uncounted()
	case d.cluster.disruptedAt(least, share):
		return fmt.Sprintf("%d of %d nodes are not Ready", d.cluster.notReady, d.cluster.total) + d.uncounted()
	}
	return ""
}

// tripped returns why force deletes on node must stop, or "".
func (b Breaker) tripped(d *disruption, node string) string {
	if why := b.trippedCluster(d); why != "" || !d.disrupted {
		return why
	}
	least, share := b.thresholds()
	if zone, ok := d.zoneOf(node); ok {
		if z := d.zones.of(zone); z.disruptedAt(least, share) {
			return fmt.Sprintf("%d of %d nodes in zone %q are not Ready", z.notReady, z.total, zone) + d.uncounted()
		}
	}
	return ""
}

// uncounted is the end of a tripped reason that names the nodes left out
// for maintenance, or "".
func (d *disruption) uncounted() string {
	if d.maintenance == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d more in a graceful shutdown or a drain, not counted)", d.maintenance)
}

// breakerTripped returns why the Checker's Breaker holds force deletes on
// pod's node, or "" when it has no Nodes or is not tripped. It reads the
// nodes once per check, when the first pod that may go meets it.
func (k *check) breakerTripped(pod *corev1.Pod) string {
	if k.breaker.Nodes == nil {
		return ""
	}
	if k.disruption == nil {
		k.disruption = k.breaker.read(k.ctx)
	}
	return k.breaker.tripped(k.disruption, pod.Spec.NodeName)
}
