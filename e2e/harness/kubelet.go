package harness

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// KubeletUserAgent is the user agent of every request a [Kubelet] sends.
const KubeletUserAgent = "podhealth-e2e-kubelet"

// KubeletSyncInterval is how often a connected [Kubelet] lists the pods
// bound to its node.
const KubeletSyncInterval = 250 * time.Millisecond

// ContainerEventKind is what a [ContainerEvent] records.
type ContainerEventKind string

const (
	// ContainerStarted: a pod's container began to run on the node.
	ContainerStarted ContainerEventKind = "start"
	// ContainerStopped: a pod's container stopped running on the node.
	ContainerStopped ContainerEventKind = "stop"
	// NodeDisconnected: the node's kubelet can no longer reach the API
	// server (a power off, a partition or a stopped kubelet); its
	// heartbeat stops.
	NodeDisconnected ContainerEventKind = "disconnect"
	// NodeConnected: the node's kubelet reaches the API server again and
	// its heartbeat resumes.
	NodeConnected ContainerEventKind = "connect"
)

// ContainerEvent is one entry of a [ContainerLog]. For the node events
// (NodeDisconnected, NodeConnected) only At, Kind, Node and Why are set.
type ContainerEvent struct {
	At   time.Time
	Kind ContainerEventKind
	Node string
	Why  string

	Namespace, Pod string
	UID            types.UID
	Labels         map[string]string
	// Owner is the pod's controlling owner as Kind/Name, or empty.
	Owner string
	// Claims are the names of the PersistentVolumeClaims the pod mounts.
	Claims []string
	// Volumes are the unique names of the CSI volumes of Claims, which
	// were attached to the node when the container started.
	Volumes []corev1.UniqueVolumeName
}

// ContainerLog is the history of the containers of every [Kubelet] that
// shares it, in the order the events happened. It is safe for concurrent
// use.
type ContainerLog struct {
	mu     sync.Mutex
	events []ContainerEvent
}

func (l *ContainerLog) add(e ContainerEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.At = time.Now()
	l.events = append(l.events, e)
}

// Events returns a copy of the log.
func (l *ContainerLog) Events() []ContainerEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ContainerEvent(nil), l.events...)
}

// Kubelet models the kubelet of a [Node] together with the containers it
// runs, for tests about what really runs where. It is safe for concurrent
// use.
//
// While connected it lists the pods bound to its node every
// KubeletSyncInterval, and, as a kubelet does:
//   - starts the container of each pod that is bound to it, not deleted and
//     not finished (under Options.Volumes, once every CSI volume of its
//     claims is in the node's status.volumesAttached: the attach-detach
//     controller's word), and reports the pod Running and Ready;
//   - lists a pod's volumes in the node's status.volumesInUse before it
//     starts the container, and drops them once no running container
//     mounts them (a node that is off keeps its last report);
//   - stops the container of a pod it finds deleted gracefully, then
//     removes the pod (grace period 0, with a UID precondition);
//   - stops the container of a pod that is gone (force-deleted) or whose
//     name now belongs to another UID.
//
// Its faults ([Kubelet.PowerOff], [Kubelet.Partition]) cut it off from the
// API server and stop the node's heartbeat; only a power off stops the
// containers. [Kubelet.Connect] ends either: the heartbeat resumes and the
// next sync catches up with what was deleted meanwhile.
type Kubelet struct {
	node   *Node
	client kubernetes.Interface
	log    *ContainerLog
	// volumes: Options.Volumes; a pod with claims waits for their
	// attachment.
	volumes bool

	mu        sync.Mutex
	connected bool
	running   map[types.UID]ContainerEvent // the start event of each running container
	// reportedInUse is the node's status.volumesInUse as the kubelet last
	// set it (inUseReported: since it connected).
	reportedInUse []corev1.UniqueVolumeName
	inUseReported bool
	hadVolumes    bool // it ever reported a volume in use
	cancel        context.CancelFunc
	done          chan struct{}
}

// StartKubelet runs a Kubelet for node, recording into log. It stops when
// the test ends. It stops the test with t.Fatal if its client cannot be
// made.
func (cp *ControlPlane) StartKubelet(node *Node, log *ContainerLog) *Kubelet {
	cp.t.Helper()
	config := rest.CopyConfig(cp.config)
	config.UserAgent = KubeletUserAgent + "/" + node.Name()
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		cp.t.Fatalf("harness: kubelet client for node %s: %v", node.Name(), err)
	}
	k := &Kubelet{node: node, client: client, log: log, volumes: cp.opts.Volumes, running: map[types.UID]ContainerEvent{}}
	k.Connect("started")
	cp.t.Cleanup(k.stopLoop)
	return k
}

// Node returns the node the kubelet runs on.
func (k *Kubelet) Node() *Node { return k.node }

// Connected reports whether the kubelet reaches the API server.
func (k *Kubelet) Connected() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.connected
}

// Running returns the UIDs of the pods whose containers run on the node.
func (k *Kubelet) Running() []types.UID {
	k.mu.Lock()
	defer k.mu.Unlock()
	uids := make([]types.UID, 0, len(k.running))
	for uid := range k.running {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	return uids
}

// PowerOff stops the node: its heartbeat, its kubelet and, at once, every
// container on it.
func (k *Kubelet) PowerOff(why string) {
	k.disconnect(why)
	k.mu.Lock()
	defer k.mu.Unlock()
	for uid, start := range k.running {
		k.stopLocked(uid, start, why)
	}
}

// Partition cuts the node off from the API server (a network partition, or
// a kubelet that stopped): the heartbeat stops and nothing is synced, but
// the containers keep running.
func (k *Kubelet) Partition(why string) { k.disconnect(why) }

// Connect ends a power off or a partition: the heartbeat resumes, and the
// kubelet syncs with the API server again. Connecting a connected kubelet
// does nothing.
func (k *Kubelet) Connect(why string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.connected {
		return
	}
	k.connected = true
	k.inUseReported = false // a kubelet that starts reports afresh
	k.log.add(ContainerEvent{Kind: NodeConnected, Node: k.node.Name(), Why: why})
	k.node.Recover()
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel, k.done = cancel, make(chan struct{})
	go k.loop(ctx, k.done)
}

// Boot ends a power off as a machine that starts again does: the node's
// Lease is renewed at once and its Ready is False for notReadyFor (see
// [Node.Boot]); the kubelet starts no container before then (the
// container runtime's network is not ready), and syncs as Connect's after.
// The NodeConnected event is logged at once: a booting node runs. Booting a
// connected kubelet does nothing.
func (k *Kubelet) Boot(why string, notReadyFor time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.connected {
		return
	}
	k.connected = true
	k.inUseReported = false
	k.log.add(ContainerEvent{Kind: NodeConnected, Node: k.node.Name(), Why: why + " (booting)"})
	k.node.Boot(notReadyFor)
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel, k.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		select {
		case <-ctx.Done():
			close(done)
			return
		case <-time.After(notReadyFor):
		}
		k.loop(ctx, done)
	}(k.done)
}

func (k *Kubelet) disconnect(why string) {
	k.stopLoop()
	k.node.Fail()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.connected {
		k.connected = false
		k.log.add(ContainerEvent{Kind: NodeDisconnected, Node: k.node.Name(), Why: why})
	}
}

// stopLoop ends the sync loop and waits for it, so that nothing the
// kubelet does reaches the API server after it returns.
func (k *Kubelet) stopLoop() {
	k.mu.Lock()
	cancel, done := k.cancel, k.done
	k.cancel, k.done = nil, nil
	k.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (k *Kubelet) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(KubeletSyncInterval)
	defer tick.Stop()
	for {
		k.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sync lists the node's pods and brings the containers in line with them.
// An API error leaves everything as it is until the next sync.
func (k *Kubelet) sync(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := k.client.CoreV1().Pods(metav1.NamespaceAll).List(rctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", k.node.Name()).String(),
	})
	if err != nil {
		return
	}
	listed := make(map[types.UID]bool, len(list.Items))
	var node *corev1.Node // read once per sync, for the first pod with a claim
	for i := range list.Items {
		pod := &list.Items[i]
		listed[pod.UID] = true
		switch {
		case pod.DeletionTimestamp != nil:
			k.stop(pod.UID, "the pod was deleted")
			k.finishDeletion(rctx, pod)
		case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
			k.stop(pod.UID, "the pod finished")
		default:
			if k.isRunning(pod.UID) {
				continue
			}
			volumes, ok := k.claimVolumes(rctx, pod)
			if !ok {
				continue
			}
			if len(volumes) > 0 {
				if node == nil {
					if node, err = k.client.CoreV1().Nodes().Get(rctx, k.node.Name(), metav1.GetOptions{}); err != nil {
						node = nil
						continue
					}
				}
				if !attachedTo(node, volumes) || !k.markInUse(rctx, volumes) {
					continue
				}
			}
			if k.start(ctx, pod, volumes) {
				k.reportRunning(rctx, pod)
			}
		}
	}
	k.mu.Lock()
	for uid, start := range k.running {
		if !listed[uid] {
			k.stopLocked(uid, start, "the pod is gone")
		}
	}
	k.mu.Unlock()
	k.reportVolumesInUse(rctx)
}

func (k *Kubelet) isRunning(uid types.UID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.running[uid]
	return ok
}

// start starts the pod's container unless it runs, or the kubelet was cut
// off while this sync ran; it reports whether it started it.
func (k *Kubelet) start(ctx context.Context, pod *corev1.Pod, volumes []corev1.UniqueVolumeName) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.running[pod.UID]; ok || ctx.Err() != nil || !k.connected {
		return false
	}
	e := ContainerEvent{Kind: ContainerStarted, Node: k.node.Name(), Why: "bound to the node",
		Namespace: pod.Namespace, Pod: pod.Name, UID: pod.UID, Labels: pod.Labels, Volumes: volumes}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		e.Owner = ref.Kind + "/" + ref.Name
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			e.Claims = append(e.Claims, v.PersistentVolumeClaim.ClaimName)
		}
	}
	k.log.add(e)
	k.running[pod.UID] = e
	return true
}

func (k *Kubelet) stop(uid types.UID, why string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if start, ok := k.running[uid]; ok {
		k.stopLocked(uid, start, why)
	}
}

func (k *Kubelet) stopLocked(uid types.UID, start ContainerEvent, why string) {
	delete(k.running, uid)
	stop := start
	stop.Kind, stop.Why = ContainerStopped, why
	k.log.add(stop)
}

// finishDeletion removes a gracefully deleted pod once its container has
// stopped, as the kubelet does.
func (k *Kubelet) finishDeletion(ctx context.Context, pod *corev1.Pod) {
	// An error is retried by the next sync, which lists the pod again;
	// NotFound and a UID conflict mean it is gone already.
	_ = k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
}

// reportRunning sets the pod's phase to Running and its Ready condition to
// True, as the kubelet does once its containers run. A failure is retried
// by nothing: the container runs either way, and the tests read what runs
// from the ContainerLog.
func (k *Kubelet) reportRunning(ctx context.Context, pod *corev1.Pod) {
	update := pod.DeepCopy()
	now := metav1.Now()
	update.Status.Phase = corev1.PodRunning
	update.Status.StartTime = &now
	for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		update.Status.Conditions = setPodCondition(update.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	_, _ = k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
}

// setPodCondition returns conds with c in place of the condition of c's
// type, or with c added.
func setPodCondition(conds []corev1.PodCondition, c corev1.PodCondition) []corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}
