package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

// soakDatabase is the soak's self-fencing database (see
// fencers_test.go's primary): an operator of the test's own keeps one
// instance pod, which the scheduler model binds, replaces it once it is
// gone, and force-deletes a dead one with podhealth's Lease fencer.
const (
	soakDatabase      = "pgs"
	soakDatabaseAgent = "podhealth-soak-database"
	soakDatabaseLabel = "e2e.podhealth.io/database"
)

// startDatabase starts the database's operator and the supervisor that
// runs a primary model for each of its containers that a kubelet runs.
func (e *soakEnv) startDatabase(ctx context.Context) {
	owner, err := e.c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: soakDatabase}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	config := e.cp.RESTConfig()
	config.UserAgent = soakDatabaseAgent
	config.QPS, config.Burst = 100, 200
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		e.t.Fatal(err)
	}
	e.volume = &volume{}
	runCtx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	e.t.Cleanup(func() { cancel(); running.Wait() })

	selector := labels.SelectorFromSet(labels.Set{soakDatabaseLabel: soakDatabase})
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	nodeFactory := informers.NewSharedInformerFactory(client, 0)
	watch, err := kube.NewLeaseWatch(factory.Coordination().V1().Leases().Informer(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	leases, err := kube.NewLiveLeases(client.CoordinationV1())
	if err != nil {
		e.t.Fatal(err)
	}
	fencer, err := fencing.NewLeaseFencer(leases, fencing.LeaseOptions{Seen: watch})
	if err != nil {
		e.t.Fatal(err)
	}
	podLister := factory.Core().V1().Pods().Lister()
	checker, err := kube.NewChecker(client, podLister, ns, selector, kube.CheckerOptions{
		Health: health.Options{Fencers: []health.Fencer{fencer}},
		Nodes:  nodeFactory.Core().V1().Nodes(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	factory.Start(runCtx.Done())
	nodeFactory.Start(runCtx.Done())
	e.t.Cleanup(func() { cancel(); factory.Shutdown(); nodeFactory.Shutdown() })
	factory.WaitForCacheSync(ctx.Done())
	nodeFactory.WaitForCacheSync(ctx.Done())

	instance := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: soakDatabase + "-",
			Labels:          map[string]string{soakDatabaseLabel: soakDatabase, workloadLabel: soakDatabase},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}},
			Annotations: map[string]string{fencing.AnnotationLease: soakDatabase + "-primary", fencing.AnnotationDeadline: selfFenceDeadline.String(),
				// One writer at a time, though it mounts no claim here.
				health.AnnotationWriters: "single"}},
		Spec: soakPodTemplate(soakDatabase, nil).Spec,
	}
	// The operator: check, and create an instance when none is left (not
	// even a terminating one: its primary may still write).
	running.Go(func() {
		everyTick(runCtx, 500*time.Millisecond, func() {
			_, _ = checker.CheckReport(runCtx)
			pods, err := client.CoreV1().Pods(ns).List(runCtx, metav1.ListOptions{LabelSelector: selector.String()})
			if err != nil || len(pods.Items) > 0 {
				return
			}
			_, _ = client.CoreV1().Pods(ns).Create(runCtx, instance.DeepCopy(), metav1.CreateOptions{})
		})
	})
	// The supervisor: a primary for each container of the database that a
	// kubelet starts, reaching the API server as its node does.
	primaries := map[types.UID]bool{}
	running.Go(func() {
		everyTick(runCtx, selfFenceTick, func() {
			for _, ev := range e.log.Events() {
				if ev.Kind != harness.ContainerStarted || ev.Labels[soakDatabaseLabel] != soakDatabase || primaries[ev.UID] {
					continue
				}
				primaries[ev.UID] = true
				p := &primary{namespace: ns, name: ev.Pod, lease: soakDatabase + "-primary", client: e.primaryClient(config), kubelet: e.kubelet(ev.Node), uid: ev.UID,
					vol: e.volume, ignoreDeadline: e.cfg.databaseIgnoresDeadline}
				e.primariesMu.Lock()
				e.primaries = append(e.primaries, p)
				e.primariesMu.Unlock()
				running.Go(func() { p.run(runCtx) })
			}
		})
	})
	e.workloads = append(e.workloads, soakDatabase)
}

// describePrimaries says, for each primary the soak ran, how many of its
// renewals failed and why the last did: a database that never wrote
// says why.
func (e *soakEnv) describePrimaries() []string {
	e.primariesMu.Lock()
	defer e.primariesMu.Unlock()
	var out []string
	for _, p := range e.primaries {
		n, err := p.holdFailures()
		out = append(out, fmt.Sprintf("%s: last renewal %v, %d failed (last: %v)", p.name, p.renewedAt().Format(time.StampMilli), n, err))
	}
	return out
}

// primaryClient is a client of the database's container.
func (e *soakEnv) primaryClient(config *rest.Config) kubernetes.Interface {
	config = rest.CopyConfig(config)
	config.UserAgent = soakDatabaseAgent + "-primary"
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		e.t.Fatal(err)
	}
	return client
}

// all is every write, in time order.
func (v *volume) all() []volumeWrite {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	out := append([]volumeWrite(nil), v.writes...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// soakCheckOneWriter is invariant 5: the self-fencing database's volume
// has one writer at a time. Each instance is a new pod, and a primary
// never writes again once another took the Lease, so in time order each
// writer's writes form one run: a writer that writes again after another
// wrote wrote beside it.
func soakCheckOneWriter(writes []volumeWrite, t0 time.Time) []soakViolation {
	var out []soakViolation
	ended := map[string]volumeWrite{} // writers another wrote after: their last write
	reported := map[string]bool{}
	var cur volumeWrite
	for _, w := range writes {
		if w.who == cur.who {
			cur = w
			continue
		}
		if cur.who != "" {
			ended[cur.who] = cur
		}
		if last, ok := ended[w.who]; ok && !reported[w.who] {
			reported[w.who] = true
			out = append(out, soakViolation{Invariant: 5,
				What: fmt.Sprintf("%s wrote at %.3fs after %s had written: two writers of the database at once", w.who, w.at.Sub(t0).Seconds(), cur.who),
				History: []string{
					fmt.Sprintf("%8.3fs %s writes", last.at.Sub(t0).Seconds(), w.who),
					fmt.Sprintf("%8.3fs %s writes", cur.at.Sub(t0).Seconds(), cur.who),
					fmt.Sprintf("%8.3fs %s writes again", w.at.Sub(t0).Seconds(), w.who)}})
		}
		cur = w
	}
	return out
}

// The model soak's self-fencing database's protocol: its primary holds a Lease of
// selfFenceLease, renews it every selfFenceRenew, writes only while it
// holds it, and its watchdog stops it selfFenceDeadline after the Lease
// expires.
const (
	selfFenceLease    = 10 * time.Second
	selfFenceDeadline = 5 * time.Second
	selfFenceRenew    = 500 * time.Millisecond
	selfFenceTick     = 100 * time.Millisecond
)

// volumeWrite is one write of a primary to the volume.
type volumeWrite struct {
	who string
	at  time.Time
}

// volume is what every primary of one database writes to: it stands for
// the shared data directory.
type volume struct {
	mu     sync.Mutex
	writes []volumeWrite
}

func (v *volume) write(who string, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.writes = append(v.writes, volumeWrite{who, at})
}

// primary is the model of a database container that fences itself: it
// runs while the node's kubelet runs its pod, reaches the API server only
// while the node is connected, renews its Lease, writes while it holds it,
// and stops selfFenceDeadline after the Lease expires, unless
// ignoreDeadline (then it writes while it runs, as a primary without a
// watchdog that hangs in a write would).
type primary struct {
	namespace      string
	name, lease    string
	client         kubernetes.Interface
	kubelet        *harness.Kubelet
	uid            types.UID
	vol            *volume
	ignoreDeadline bool

	mu          sync.Mutex
	lastRenew   time.Time // the start of its last renewal that succeeded
	stopped     time.Time // when its watchdog stopped it
	failedHolds int       // renewals that failed, with the last error
	lastHoldErr error
}

// holdFailures says how many of its renewals failed and why the last did.
func (p *primary) holdFailures() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failedHolds, p.lastHoldErr
}

func (p *primary) renewedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastRenew
}

func (p *primary) run(ctx context.Context) {
	tick := time.NewTicker(selfFenceTick)
	defer tick.Stop()
	var lastTry time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !slicesContains(p.kubelet.Running(), p.uid) {
			return // its kubelet stopped the container
		}
		now := time.Now()
		if p.kubelet.Connected() && now.Sub(lastTry) >= selfFenceRenew {
			lastTry = now
			err := p.hold(ctx, now)
			p.mu.Lock()
			if err == nil {
				p.lastRenew = now
			} else {
				p.failedHolds++
				p.lastHoldErr = err
			}
			p.mu.Unlock()
		}
		renewed := p.renewedAt()
		switch {
		case renewed.IsZero():
		case p.ignoreDeadline:
			p.vol.write(p.name, now)
		case now.After(renewed.Add(selfFenceLease + selfFenceDeadline)):
			p.mu.Lock()
			p.stopped = now
			p.mu.Unlock()
			return // the watchdog
		case now.Before(renewed.Add(selfFenceLease)):
			p.vol.write(p.name, now)
		}
	}
}

// errHeldByAnother is hold's answer while another primary holds the Lease.
var errHeldByAnother = errors.New("the Lease is held by another primary and has not expired")

// hold acquires or renews the Lease, as of now, and says why it does not
// hold it: it takes over only a Lease expired by its own clock.
func (p *primary) hold(ctx context.Context, now time.Time) error {
	// A loaded API server may take longer than a renewal interval: the
	// renewal counts from its start either way.
	ctx, cancel := context.WithTimeout(ctx, 4*selfFenceRenew)
	defer cancel()
	leases := p.client.CoordinationV1().Leases(p.namespace)
	stamp := ptr.To(metav1.NewMicroTime(now))
	lease, err := leases.Get(ctx, p.lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: p.lease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(p.name), LeaseDurationSeconds: ptr.To(int32(selfFenceLease / time.Second)),
				AcquireTime: stamp, RenewTime: stamp},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	spec := &lease.Spec
	if ptrValue(spec.HolderIdentity) != p.name {
		if spec.RenewTime != nil && now.Before(spec.RenewTime.Add(selfFenceLease)) {
			return errHeldByAnother
		}
		spec.HolderIdentity, spec.AcquireTime = ptr.To(p.name), stamp
		spec.LeaseTransitions = ptr.To(ptrValue(spec.LeaseTransitions) + 1)
	}
	spec.RenewTime = stamp
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

func slicesContains(uids []types.UID, uid types.UID) bool {
	for _, u := range uids {
		if u == uid {
			return true
		}
	}
	return false
}
