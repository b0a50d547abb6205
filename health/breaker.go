package health

import (
	"context"
	"errors"
	"fmt"

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
	defaultUnhealthyShare = 0.55
	defaultMinUnhealthy   = 3
)

// Breaker stops force deletes when an unusual share of nodes is not Ready at
// once, which points to a control-plane or network problem rather than to
// failed nodes: the node-lifecycle controller slows or stops its evictions
// in the same case. It judges the pod's zone (label
// topology.kubernetes.io/zone) and the whole cluster, and trips when either
// has at least MinUnhealthy nodes not Ready making up at least
// UnhealthyShare of its nodes, or when every node of the cluster is not
// Ready. It also trips when its Nodes cannot be read or list no node at
// all, since it then knows nothing about the cluster. The zero value (no
// Nodes) never trips.
type Breaker struct {
	Nodes NodeLister
	// UnhealthyShare is the share of not-Ready nodes at which it trips.
	// Zero means 0.55.
	UnhealthyShare float64
	// MinUnhealthy is the fewest not-Ready nodes that trip it, so that one
	// failed node of a small cluster does not. Zero means
	// 3.
	MinUnhealthy int
}

// nodeHealth counts a zone's nodes.
type nodeHealth struct{ total, notReady int }

// disruption is the Breaker's reading of the cluster in one check.
type disruption struct {
	cluster nodeHealth
	zones   map[string]nodeHealth
	byNode  map[string]string // node name -> zone
	err     error
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
	d := &disruption{zones: make(map[string]nodeHealth), byNode: make(map[string]string, len(nodes))}
	for i, n := range nodes {
		if n == nil {
			return &disruption{err: fmt.Errorf("the node lister listed a nil node at index %d", i)}
		}
		zone := n.Labels[corev1.LabelTopologyZone]
		d.byNode[n.Name] = zone
		z := d.zones[zone]
		z.total++
		d.cluster.total++
		if !nodeReady(n) {
			z.notReady++
			d.cluster.notReady++
		}
		d.zones[zone] = z
	}
	return d
}

// tripped returns why force deletes on node must stop, or "".
func (b Breaker) tripped(d *disruption, node string) string {
	if d.err != nil {
		return "cannot read node health: " + d.err.Error()
	}
	share, min := b.UnhealthyShare, b.MinUnhealthy
	if share <= 0 {
		share = defaultUnhealthyShare
	}
	if min <= 0 {
		min = defaultMinUnhealthy
	}
	disrupted := func(h nodeHealth) bool {
		return h.notReady >= min && float64(h.notReady) >= share*float64(h.total)
	}
	switch {
	case d.cluster.total > 0 && d.cluster.notReady == d.cluster.total:
		return fmt.Sprintf("all %d nodes are not Ready", d.cluster.total)
	case disrupted(d.cluster):
		return fmt.Sprintf("%d of %d nodes are not Ready", d.cluster.notReady, d.cluster.total)
	}
	zone, ok := d.byNode[node]
	if ok {
		if z := d.zones[zone]; disrupted(z) {
			return fmt.Sprintf("%d of %d nodes in zone %q are not Ready", z.notReady, z.total, zone)
		}
	}
	return ""
}
