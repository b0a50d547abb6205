//go:build go1.25

package sim

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

var (
	leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	podsResource   = schema.GroupResource{Resource: "pods"}
)

// store is the API server's state: Leases, Pods and Nodes, each with a
// resourceVersion from one counter, as etcd's revision. Only the world's
// goroutine touches it; it hands out copies.
type store struct {
	w       *world
	rv      int64
	uids    int
	leases  map[string]*coordinationv1.Lease
	pods    map[string]*corev1.Pod
	nodes   map[string]*corev1.Node
	streams []*stream
}

func newStore(w *world) *store {
	return &store{w: w, leases: map[string]*coordinationv1.Lease{}, pods: map[string]*corev1.Pod{}, nodes: map[string]*corev1.Node{}}
}

func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func (s *store) nextRV() string {
	s.rv++
	return strconv.FormatInt(s.rv, 10)
}

func (s *store) newUID(prefix string) types.UID {
	s.uids++
	return types.UID(fmt.Sprintf("%s-%d", prefix, s.uids))
}

// changed tells every watch of the change.
func (s *store) changed(old, obj runtime.Object) {
	for _, st := range s.streams {
		st.send(old, obj)
	}
}

func (s *store) getLease(namespace, name string) (*coordinationv1.Lease, error) {
	l, ok := s.leases[key(namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(leasesResource, name)
	}
	return l.DeepCopy(), nil
}

func (s *store) createLease(l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	k := key(l.Namespace, l.Name)
	if _, ok := s.leases[k]; ok {
		return nil, apierrors.NewAlreadyExists(leasesResource, l.Name)
	}
	l = l.DeepCopy()
	l.ResourceVersion = s.nextRV()
	l.UID = s.newUID("lease")
	l.CreationTimestamp = metav1.NewTime(origin.Add(s.w.now))
	s.leases[k] = l
	if holderOf(l) != "" {
		s.w.acquisitions = append(s.w.acquisitions, s.w.now)
	}
	s.changed(nil, l.DeepCopy())
	return l.DeepCopy(), nil
}

func (s *store) updateLease(l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	k := key(l.Namespace, l.Name)
	cur, ok := s.leases[k]
	if !ok {
		return nil, apierrors.NewNotFound(leasesResource, l.Name)
	}
	if l.ResourceVersion != "" && l.ResourceVersion != cur.ResourceVersion {
		return nil, apierrors.NewConflict(leasesResource, l.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	next := l.DeepCopy()
	if holderOf(cur) != holderOf(next) {
		s.w.holderChanges = append(s.w.holderChanges, s.w.now)
	}
	if holderOf(next) != "" && acquisitionOf(cur) != acquisitionOf(next) {
		s.w.acquisitions = append(s.w.acquisitions, s.w.now)
	}
	next.UID, next.CreationTimestamp = cur.UID, cur.CreationTimestamp
	next.ResourceVersion = s.nextRV()
	s.leases[k] = next
	s.changed(cur.DeepCopy(), next.DeepCopy())
	return next.DeepCopy(), nil
}

func (s *store) deleteLease(namespace, name string) error {
	k := key(namespace, name)
	cur, ok := s.leases[k]
	if !ok {
		return apierrors.NewNotFound(leasesResource, name)
	}
	delete(s.leases, k)
	s.rv++
	s.changed(cur.DeepCopy(), nil)
	return nil
}

func (s *store) getPod(namespace, name string) (*corev1.Pod, error) {
	p, ok := s.pods[key(namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	return p.DeepCopy(), nil
}

// putPod writes pod as the API server's controllers and the kubelet do:
// no precondition.
func (s *store) putPod(pod *corev1.Pod) {
	k := key(pod.Namespace, pod.Name)
	old := s.pods[k]
	pod = pod.DeepCopy()
	pod.ResourceVersion = s.nextRV()
	s.pods[k] = pod
	var prev runtime.Object
	if old != nil {
		prev = old.DeepCopy()
	}
	s.changed(prev, pod.DeepCopy())
}

// removePod removes a pod for good.
func (s *store) removePod(namespace, name string) {
	k := key(namespace, name)
	old, ok := s.pods[k]
	if !ok {
		return
	}
	delete(s.pods, k)
	s.rv++
	s.changed(old.DeepCopy(), nil)
}

// deletePod is a DELETE of a pod with its options' preconditions and
// grace period: a grace period of 0 removes it at once (a force delete),
// any other marks it for the kubelet.
func (s *store) deletePod(namespace, name string, opts metav1.DeleteOptions) (*corev1.Pod, error) {
	cur, ok := s.pods[key(namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	if pre := opts.Preconditions; pre != nil {
		if pre.UID != nil && *pre.UID != cur.UID {
			return nil, apierrors.NewConflict(podsResource, name, fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, cur.UID))
		}
		if pre.ResourceVersion != nil && *pre.ResourceVersion != cur.ResourceVersion {
			return nil, apierrors.NewConflict(podsResource, name, fmt.Errorf("precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *pre.ResourceVersion, cur.ResourceVersion))
		}
	}
	gone := cur.DeepCopy()
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds == 0 {
		s.removePod(namespace, name)
		return gone, nil
	}
	if cur.DeletionTimestamp == nil {
		grace := int64(30)
		if opts.GracePeriodSeconds != nil {
			grace = *opts.GracePeriodSeconds
		}
		next := cur.DeepCopy()
		at := metav1.NewTime(origin.Add(s.w.now + time.Duration(grace)*time.Second))
		next.DeletionTimestamp, next.DeletionGracePeriodSeconds = &at, &grace
		s.putPod(next)
	}
	return s.getPod(namespace, name)
}

func (s *store) putNode(node *corev1.Node) {
	old := s.nodes[node.Name]
	node = node.DeepCopy()
	node.ResourceVersion = s.nextRV()
	s.nodes[node.Name] = node
	var prev runtime.Object
	if old != nil {
		prev = old.DeepCopy()
	}
	s.changed(prev, node.DeepCopy())
}

// stream is a watch: it delivers the store's changes in order, each after
// a lag drawn from the seed.
type stream struct {
	w       *world
	maxLag  time.Duration
	last    time.Duration // when the last change is delivered
	deliver func(old, obj runtime.Object)
}

func (s *store) watch(maxLag time.Duration, deliver func(old, obj runtime.Object)) *stream {
	st := &stream{w: s.w, maxLag: maxLag, deliver: deliver}
	s.streams = append(s.streams, st)
	return st
}

func (st *stream) send(old, obj runtime.Object) {
	at := st.w.now
	if st.maxLag > 0 {
		at += time.Duration(st.w.rng.Int64N(int64(st.maxLag)))
	}
	if at < st.last {
		at = st.last
	}
	st.last = at
	st.w.at(at, func() { st.deliver(old, obj) })
}

// apiFaults are the odds of each fault of one request, and how late an
// answer may come.
type apiFaults struct {
	// fail answers 429 or 5xx without applying; conflict answers 409
	// without applying (a Lease's write); lostBefore never applies nor
	// answers; lostAfter applies and never answers.
	fail, conflict, lostBefore, lostAfter float64
	maxDelay                              time.Duration
}

// result is an answer of the API server.
type result struct {
	obj any
	err error
}

// request is one request of a process to the API server.
type request struct {
	w       *world
	p       *process
	verb    string
	what    string
	write   bool
	timeout time.Duration // on the caller's clock; zero: none
	apply   func() (any, error)
	reply   chan result
	done    bool
	sentAt  time.Duration
	// twins are requests alike that go and come back with this one.
	twins []*request
}

func (r *request) owner() *process { return r.p }
func (r *request) key() string     { return "req " + r.verb + " " + r.what }

func (r *request) answer(res result) {
	for _, t := range r.twins {
		t.answer(res)
	}
	if r.done {
		return
	}
	r.done = true
	r.w.ended(r)
	if res.err == nil && r.write && strings.HasPrefix(r.what, "lease ") && !r.w.over() {
		r.w.renewed(r.p, r.sentAt)
	}
	if l, ok := res.obj.(*coordinationv1.Lease); ok && res.err == nil && !r.write && r.p == r.w.operator && l.Spec.HolderIdentity != nil {
		r.w.leaseReads = append(r.w.leaseReads, leaseRead{at: r.w.now, holder: *l.Spec.HolderIdentity})
	}
	r.reply <- res
}

func (r *request) abort(*world) {
	r.answer(result{err: fmt.Errorf("sim: the run is over")})
}

// answerEach answers r and its twins, each with its own apply: alike,
// they apply alike.
func (r *request) answerEach(first result) {
	for _, t := range r.twins {
		obj, err := t.apply()
		t.answer(result{obj: obj, err: err})
	}
	twins := r.twins
	r.twins = nil
	r.answer(first)
	r.twins = twins
}

// fate is what happens to a request (and its twins).
type fate struct {
	roll         float64
	code         int
	apply, reply time.Duration
}

func (w *world) drawFate() fate {
	f := w.api
	delay := func() time.Duration {
		if f.maxDelay <= 0 {
			return time.Millisecond
		}
		return time.Millisecond + time.Duration(w.rng.Int64N(int64(f.maxDelay)))
	}
	return fate{roll: w.rng.Float64(), code: []int{429, 500, 503, 504}[w.rng.IntN(4)], apply: delay(), reply: delay()}
}

func (r *request) schedule(w *world) {
	r.sentAt = w.now
	for _, t := range r.twins {
		t.sentAt = w.now
	}
	ft, f := w.drawFate(), w.api
	if r.timeout > 0 {
		w.after(scale(r.timeout, r.p.rate), func() {
			r.p.wake(func() { r.answer(result{err: context.DeadlineExceeded}) })
		})
	}
	if !w.reachable(r.p) {
		w.logf("%s %s %s: lost (partitioned)", r.p.name, r.verb, r.what)
		return
	}
	answerAt := func(d time.Duration, res result) {
		w.after(d, func() { r.p.wake(func() { r.answer(res) }) })
	}
	switch roll := ft.roll; {
	case roll < f.fail:
		w.logf("%s %s %s: %d", r.p.name, r.verb, r.what, ft.code)
		answerAt(ft.apply, result{err: apierrors.NewGenericServerResponse(ft.code, r.verb, leasesResource, "", "sim", 1, ft.code < 500)})
		return
	case r.write && strings.HasPrefix(r.what, "lease ") && roll < f.fail+f.conflict:
		// A 409 as if another writer had raced it, on a Lease's write
		// only: a DELETE gets a 409 from its preconditions alone, as
		// from a real API server, and a Deleter reads it so.
		w.logf("%s %s %s: 409", r.p.name, r.verb, r.what)
		answerAt(ft.apply, result{err: apierrors.NewConflict(leasesResource, r.what, fmt.Errorf("sim: a conflict"))})
		return
	case roll < f.fail+f.conflict+f.lostBefore:
		w.logf("%s %s %s: lost before it applied", r.p.name, r.verb, r.what)
		return
	}
	lostAfter := ft.roll < f.fail+f.conflict+f.lostBefore+f.lostAfter
	w.after(ft.apply, func() {
		obj, err := r.apply()
		switch {
		case lostAfter:
			w.logf("%s %s %s: applied (%s), the answer lost", r.p.name, r.verb, r.what, outcome(obj, err))
		default:
			w.logf("%s %s %s: %s", r.p.name, r.verb, r.what, outcome(obj, err))
			res := result{obj: obj, err: err}
			w.after(ft.reply, func() { r.p.wake(func() { r.answerEach(res) }) })
		}
	})
}

// outcome says what an answer was, for the history.
func outcome(obj any, err error) string {
	if err != nil {
		return "error " + string(apierrors.ReasonForError(err))
	}
	switch o := obj.(type) {
	case *coordinationv1.Lease:
		return "rv " + o.ResourceVersion + " " + leaseText(o)
	case *corev1.Pod:
		return "rv " + o.ResourceVersion
	}
	return "ok"
}

// holderOf is a Lease's holder; empty for none.
// acquisitionOf is what tells one acquisition of a Lease from the next,
// as the fencer's takeover reads it: the holder, the acquireTime and the
// leaseTransitions.
func acquisitionOf(l *coordinationv1.Lease) string {
	return fmt.Sprintf("%s/%v/%d", holderOf(l), l.Spec.AcquireTime, ptr.Deref(l.Spec.LeaseTransitions, 0))
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leaseText is a Lease's record, for the history.
func leaseText(l *coordinationv1.Lease) string {
	if l == nil {
		return "none"
	}
	var holder string
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	var renew string
	if l.Spec.RenewTime != nil {
		renew = strconv.FormatInt(l.Spec.RenewTime.Sub(origin).Milliseconds(), 10)
	}
	return fmt.Sprintf("holder=%q renew=%s", holder, renew)
}

// call hands a request to the world, and waits for its answer.
func (w *world) call(ctx context.Context, p *process, verb, what string, write bool, apply func() (any, error)) (any, error) {
	r := &request{w: w, p: p, verb: verb, what: what, write: write, timeout: contextTimeout(ctx), apply: apply, reply: make(chan result, 1)}
	w.hand(r)
	res := <-r.reply
	return res.obj, res.err
}

// client is a process's client of the API server: the Leases and Pods
// that the code under test reads and writes. What it does not serve is a
// nil interface: a call to it is a bug of the simulation, and panics.
type client struct {
	kubernetes.Interface
	w *world
	p *process
}

func (c client) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return coordClient{c: c}
}
func (c client) CoreV1() corev1client.CoreV1Interface { return coreClient{c: c} }

type coordClient struct {
	coordinationv1client.CoordinationV1Interface
	c client
}

func (cc coordClient) Leases(namespace string) coordinationv1client.LeaseInterface {
	return leaseClient{c: cc.c, namespace: namespace}
}

type leaseClient struct {
	coordinationv1client.LeaseInterface
	c         client
	namespace string
}

// callAs is client.call for an answer of type T.
func callAs[T any](ctx context.Context, c client, verb, what string, write bool, apply func() (T, error)) (T, error) {
	obj, err := c.w.call(ctx, c.p, verb, what, write, func() (any, error) { return apply() })
	if err != nil {
		var none T
		return none, err
	}
	return obj.(T), nil
}

func (lc leaseClient) Get(ctx context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	return callAs(ctx, lc.c, "get", "lease "+name, false, func() (*coordinationv1.Lease, error) {
		return lc.c.w.store.getLease(lc.namespace, name)
	})
}

func (lc leaseClient) Create(ctx context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	l = l.DeepCopy()
	l.Namespace = lc.namespace
	return callAs(ctx, lc.c, "create", "lease "+l.Name, true, func() (*coordinationv1.Lease, error) {
		return lc.c.w.store.createLease(l)
	})
}

func (lc leaseClient) Update(ctx context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	l = l.DeepCopy()
	l.Namespace = lc.namespace
	return callAs(ctx, lc.c, "update", "lease "+l.Name, true, func() (*coordinationv1.Lease, error) {
		return lc.c.w.store.updateLease(l)
	})
}

type coreClient struct {
	corev1client.CoreV1Interface
	c client
}

func (cc coreClient) Pods(namespace string) corev1client.PodInterface {
	return podClient{c: cc.c, namespace: namespace}
}

type podClient struct {
	corev1client.PodInterface
	c         client
	namespace string
}

func (pc podClient) Get(ctx context.Context, name string, _ metav1.GetOptions) (*corev1.Pod, error) {
	return callAs(ctx, pc.c, "get", "pod "+name, false, func() (*corev1.Pod, error) {
		return pc.c.w.store.getPod(pc.namespace, name)
	})
}

func (pc podClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	opts = *opts.DeepCopy()
	_, err := pc.c.w.call(ctx, pc.c.p, "delete", "pod "+name, true, func() (any, error) {
		pod, err := pc.c.w.store.getPod(pc.namespace, name)
		if err != nil {
			return nil, err
		}
		deleted, err := pc.c.w.store.deletePod(pc.namespace, name, opts)
		if err == nil && opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds == 0 {
			// Applied, its preconditions met: a refused delete frees
			// nothing.
			pc.c.w.forceDeleting(pod)
		}
		return deleted, err
	})
	return err
}

// events is a watch of one kind as an informer's handlers see it.
type events struct {
	handlers []cache.ResourceEventHandler
}

// registration is an event handler's registration, synced from the
// start. Methods that newer client-go releases add to the interface, and
// that the code under test does not call, are the nil interface's.
type registration struct {
	cache.ResourceEventHandlerRegistration
}

func (registration) HasSynced() bool { return true }

func (e *events) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	e.handlers = append(e.handlers, h)
	return registration{}, nil
}

func (e *events) deliver(old, obj runtime.Object) {
	for _, h := range e.handlers {
		switch {
		case old == nil:
			h.OnAdd(obj, false)
		case obj == nil:
			h.OnDelete(old)
		default:
			h.OnUpdate(old, obj)
		}
	}
}
