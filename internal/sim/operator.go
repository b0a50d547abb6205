//go:build go1.25

package sim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

// reconcileEvery is how often the operator checks without being asked.
const reconcileEvery = 10 * time.Second

// operator is an operator's process on the control plane: its caches,
// fed by watches that lag, and its kube.Checkers, which decide the force
// deletes.
type operator struct {
	p     *process
	pods  cache.Indexer
	nodes map[string]*corev1.Node
}

// startOperator starts an operator process: its informers list what the
// API server holds, then follow its changes.
func (w *world) startOperator() {
	w.procSeq++
	p := w.newProcess(w.procSeq, fmt.Sprintf("operator#%d", w.procSeq), w.drawRate(), w.drawOffset())
	w.procs = append(w.procs, p)
	w.operator = p
	w.operatorStarts = append(w.operatorStarts, w.now)
	op := &operator{p: p, pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}), nodes: map[string]*corev1.Node{}}
	leases := &events{}
	// changed wakes the reconcile loop: a pod of the operator's changed,
	// as an informer's event enqueues a reconcile.
	changed := make(chan struct{}, 1)
	follow := func(deliver func(old, obj runtime.Object)) {
		w.store.watch(w.watchLag, func(old, obj runtime.Object) {
			if !p.dead {
				deliver(old, obj)
			}
		})
	}
	follow(func(old, obj runtime.Object) {
		switch o := obj.(type) {
		case *corev1.Pod:
			_ = op.pods.Update(o)
		case *corev1.Node:
			op.nodes[o.Name] = o
		case nil:
			if pod, ok := old.(*corev1.Pod); ok {
				_ = op.pods.Delete(pod)
			}
		}
		if isLease(old) || isLease(obj) {
			leases.deliver(old, obj)
		}
		// Last: the reconcile it wakes runs at once, beside this
		// goroutine, and must find the caches already changed, or the
		// run depends on which goroutine the scheduler runs first.
		if _, ok := obj.(*corev1.Pod); ok || isPod(old) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	// The informers' first lists.
	for _, k := range w.podKeys() {
		_ = op.pods.Add(w.store.pods[k].DeepCopy())
	}
	for _, n := range w.nodes {
		op.nodes[n.name] = w.store.nodes[n.name].DeepCopy()
	}
	opts := kube.CheckersOptions{
		Health:     health.Options{Clock: procClock{p}, Nodes: nodeCache{op}},
		FenceLease: true,
		Leases:     leases,
	}
	if w.noLeaseWatch {
		opts.Leases = nil
	}
	checkers, err := kube.NewCheckers(client{w: w, p: p}, opts)
	if err != nil {
		panic(fmt.Sprintf("sim: the operator's Checkers are refused: %v", err))
	}
	for _, l := range sortedKeys(w.store.leases) {
		leases.deliver(nil, w.store.leases[l].DeepCopy())
	}
	w.logf("%s: started (clock rate %d ppm)", p.name, p.rate)
	lister := drawnOrder{PodLister: corelisters.NewPodLister(op.pods), w: w}
	selector := labels.SelectorFromSet(labels.Set{"app": setName})
	protocol := func(pod *corev1.Pod) (fencing.LeaseProtocol, bool) {
		return fencing.LeaseProtocol{Lease: primaryLease, Deadline: w.protocol.Deadline}, pod.Labels["role"] == "primary" && !w.mutations.ProtocolForReplica
	}
	if w.mutations.ProtocolForReplica {
		protocol = func(*corev1.Pod) (fencing.LeaseProtocol, bool) {
			return fencing.LeaseProtocol{Lease: primaryLease, Deadline: w.protocol.Deadline}, true
		}
	}
	if w.annotated && !w.mutations.ProtocolForReplica {
		protocol = nil // the fencer reads the pods' annotations
	}
	clk := procClock{p}
	go func() {
		failures := 0
		for {
			ctx, cancel := context.WithTimeout(p.ctx, reconcileEvery)
			report, err := checkers.Check(ctx, lister, namespace, selector, kube.CheckOptions{LeaseProtocol: protocol})
			cancel()
			w.do(p, "report", func() { w.logf("%s: checked: %s", p.name, reportText(report, err)) })
			next := reconcileEvery
			if w.onlyAtRetryAfter {
				next = 10 * time.Hour // a resync far off: a pod's change, or RetryAfter
			}
			switch {
			case err != nil:
				// A failed reconcile is retried after a backoff, as
				// controller-runtime's queue does.
				failures++
				next = min(time.Second<<min(failures, 9), 5*time.Minute)
			case report.RetryAfter > 0 && report.RetryAfter < next:
				failures = 0
				next = report.RetryAfter
			default:
				failures = 0
			}
			t := clk.NewTimer(next)
			select {
			case <-p.ctx.Done():
				t.Stop()
				return
			case <-t.C():
			case <-changed:
				t.Stop()
			}
		}
	}()
}

// reportText is a check's report, for the history.
func reportText(r health.Report, err error) string {
	if err != nil {
		return "error " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "healthy %t, retry after %s", r.Healthy, r.RetryAfter)
	var pods []string // in the pods' order, not the check's
	for _, p := range r.Pods {
		if p.Outcome != health.NoAction {
			line := fmt.Sprintf("; %s %v", p.Pod.Name, p.Outcome)
			if p.Outcome == health.HeldBack {
				line += fmt.Sprintf(" (%v: %s)", p.HeldBack.Reason, p.HeldBack.Detail)
			}
			pods = append(pods, line)
		}
	}
	sort.Strings(pods)
	b.WriteString(strings.Join(pods, ""))
	return b.String()
}

func isPod(obj runtime.Object) bool {
	_, ok := obj.(*corev1.Pod)
	return ok
}

func isLease(obj runtime.Object) bool {
	_, ok := obj.(*coordinationv1.Lease)
	return ok
}

// drawnOrder lists the informer's pods in an order drawn from the seed:
// an informer's cache lists them in its map's order, which a check must
// not depend on, and which a replay must not vary.
type drawnOrder struct {
	corelisters.PodLister
	w *world
}

func (d drawnOrder) Pods(namespace string) corelisters.PodNamespaceLister {
	return drawnNamespace{PodNamespaceLister: d.PodLister.Pods(namespace), w: d.w}
}

type drawnNamespace struct {
	corelisters.PodNamespaceLister
	w *world
}

func (d drawnNamespace) List(selector labels.Selector) ([]*corev1.Pod, error) {
	pods, err := d.PodNamespaceLister.List(selector)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	d.w.rng.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	return pods, err
}

// nodeCache is the operator's node informer's cache, as a NodeGetter.
type nodeCache struct{ op *operator }

func (c nodeCache) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	n, ok := c.op.nodes[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	return n.DeepCopy(), nil
}

// forceDeleting is told of a force delete as it applies: it records
// which of the pod's processes still ran, and which of those wrote, may
// write, or have held the Lease (a holder that the protocol says has
// stopped by now). A process that the kubelet restarted after the
// holder's stop and that never held the Lease since runs, but cannot
// write.
func (w *world) forceDeleting(pod *corev1.Pod) {
	fd := forceDelete{pod: pod.Name, uid: string(pod.UID), at: w.now}
	for _, n := range w.nodes {
		run, ok := n.known[string(pod.UID)]
		if !ok {
			continue
		}
		for _, c := range run.containers {
			switch {
			case c.proc == nil || c.proc.dead:
			case c.proc.frozen:
				fd.frozen = append(fd.frozen, c.proc.name)
			case c.held() || (c.canWrite != nil && c.canWrite()):
				fd.running = append(fd.running, c.proc.name)
			default:
				fd.idle = append(fd.idle, c.proc)
			}
		}
	}
	w.forceDeletes = append(w.forceDeletes, fd)
	w.logf("operator: force delete of %s (%s); writers running %v, frozen %v, running without the Lease %v", pod.Name, pod.UID, fd.running, fd.frozen, processNames(fd.idle))
}

// forceDelete is a force delete as it applied.
type forceDelete struct {
	pod, uid string
	at       time.Duration
	// running are the processes that wrote, could write or had held the
	// Lease; frozen those frozen, by name; idle those running that could
	// not write and had not held it, which must never write.
	running, frozen []string
	idle            []*process
}

func processNames(ps []*process) []string {
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, p.name)
	}
	return names
}
