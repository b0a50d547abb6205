package health_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

type nodeOption func(*corev1.Node)

func newNode(name string, opts ...nodeOption) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }

func taint(key string) nodeOption {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute})
	}
}

func zone(z string) nodeOption {
	return func(n *corev1.Node) { n.Labels = map[string]string{corev1.LabelTopologyZone: z} }
}

var outOfService = taint(corev1.TaintNodeOutOfService)

func ownedByStatefulSet(p *corev1.Pod) {
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid"})
}

// ownedByReplicaSet makes a ReplicaSet the pod's controller: a copy among
// interchangeable copies.
func ownedByReplicaSet(p *corev1.Pod) {
	controller := true
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9", UID: "rs-uid", Controller: &controller})
}

func claimVolume(claim string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

func annotated(k, v string) podOption {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{k: v} }
}

func claim(name string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes}}
}

type podOutcome struct {
	Name     string
	State    health.State
	Rule     string
	Outcome  health.Outcome
	HeldBack bool
}

func podOutcomes(r health.Report) []podOutcome {
	var out []podOutcome
	for _, p := range r.Pods {
		out = append(out, podOutcome{p.Pod.Name, p.Verdict.State, p.Verdict.Rule, p.Outcome, p.HeldBack.Reason != health.NotHeld})
	}
	return out
}

func TestNodeAwareRules(t *testing.T) {
	errDown := apierrors.NewServiceUnavailable("apiserver down")
	tests := []struct {
		name     string
		pod      *corev1.Pod
		cache    []*corev1.Node
		live     []*corev1.Node // nil: no live getter
		noNodes  bool
		cacheErr error
		// fixtureNodes are added to the cache from the real-cluster files.
		fixtureNodes []string
		want         podOutcome
	}{
		{name: "node gone, confirmed by a live read: dead and fenced",
			pod: newPod("p", onNode("gone"), deleting), live: []*corev1.Node{},
			want: podOutcome{"p", health.Dead, health.RuleNodeGone, health.ForceDeleted, false}},
		{name: "node missing from the cache but the live read finds it: terminating",
			pod: newPod("p", onNode("n1"), deleting), live: []*corev1.Node{newNode("n1", notReady)},
			want: podOutcome{"p", health.Terminating, health.RuleGracefulDeletion, health.NoAction, false}},
		{name: "node gone and the pod is not being deleted: an orphan, dead and fenced",
			pod: newPod("p", onNode("gone")), live: []*corev1.Node{},
			want: podOutcome{"p", health.Dead, health.RuleNodeGone, health.ForceDeleted, false}},
		{name: "node out of service and not Ready: dead and fenced",
			pod: newPod("p", onNode("n1"), deleting), cache: []*corev1.Node{newNode("n1", notReady, outOfService)},
			want: podOutcome{"p", health.Dead, health.RuleOutOfService, health.ForceDeleted, false}},
		{name: "node out of service but Ready: terminating",
			pod: newPod("p", onNode("n1"), deleting), cache: []*corev1.Node{newNode("n1", outOfService)},
			want: podOutcome{"p", health.Terminating, health.RuleGracefulDeletion, health.NoAction, false}},
		{name: "real lost node without out-of-service taint: a drained pod stays terminating",
			pod: newPod("p", onNode("node-lost"), deleting, disruption("EvictionByEvictionAPI")), fixtureNodes: []string{"node-lost.json"},
			want: podOutcome{"p", health.Terminating, health.RuleGracefulDeletion, health.NoAction, false}},
		{name: "no node evidence: node rules have no opinion",
			pod: newPod("p", onNode("gone"), deleting), noNodes: true,
			want: podOutcome{"p", health.Terminating, health.RuleGracefulDeletion, health.NoAction, false}},
		{name: "node lookup fails: no opinion",
			pod: newPod("p", onNode("n1"), deleting), cacheErr: errDown,
			want: podOutcome{"p", health.Terminating, health.RuleGracefulDeletion, health.NoAction, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := fake.NewNodes(tt.cache...)
			for _, file := range tt.fixtureNodes {
				cache.Set(fixtureNode(t, file))
			}
			if tt.cacheErr != nil {
				cache.FailWith(tt.cacheErr)
			}
			opts := health.Options{Nodes: cache}
			if tt.live != nil {
				opts.LiveNodes = fake.NewNodes(tt.live...)
			}
			if tt.noNodes {
				opts = health.Options{}
			}
			pods := fake.New(fake.Options{}, tt.pod)
			report, err := newChecker(t, pods, opts).CheckReport(context.Background())
			require.NoError(t, err)
			require.Empty(t, cmp.Diff([]podOutcome{tt.want}, podOutcomes(report)))
		})
	}
}

// A cache alone never proves a node gone: it may lag, never have synced,
// or be filtered. Without a live read, a node missing from it stays unknown
// however long it is missing.
func TestNodeMissingFromTheCacheIsNeverGoneWithoutALiveRead(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	pods := fake.New(fake.Options{}, newPod("p", onNode("gone"), deleting))
	checker := newChecker(t, pods, health.Options{Clock: clk, Nodes: fake.NewNodes()})

	var states []health.State
	for _, step := range []time.Duration{0, time.Minute, time.Hour} {
		clk.SetTime(clk.Now().Add(step))
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		states = append(states, report.Pods[0].Verdict.State)
	}
	require.Equal(t, []health.State{health.Terminating, health.Terminating, health.Terminating}, states)
	require.Empty(t, pods.Deletes())
}

func TestTerminatingTooLongNeedsBothClocksAndANodeThatIsNotReady(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const margin = time.Minute
	grace := 30 * time.Second
	tests := []struct {
		name       string
		deletionAt time.Time // the pod's deletionTimestamp, on the API server's clock
		node       *corev1.Node
		elapsed    time.Duration // on the checker's clock since it first saw the pod terminating
		want       health.State
	}{
		{"both clocks past grace plus margin, node not Ready: dead", start.Add(-time.Hour), newNode("n1", notReady), grace + margin, health.Dead},
		{"own clock one second short: terminating", start.Add(-time.Hour), newNode("n1", notReady), grace + margin - time.Second, health.Terminating},
		{"deletionTimestamp in the future (clock skew): terminating", start.Add(time.Hour), newNode("n1", notReady), grace + margin, health.Terminating},
		{"node Ready: terminating however long", start.Add(-time.Hour), newNode("n1"), time.Hour, health.Terminating},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			pod := drained("p")
			pod.Spec.NodeName = "n1"
			pod.DeletionTimestamp = &metav1.Time{Time: tt.deletionAt}
			pods := fake.New(fake.Options{}, pod)
			rules := health.Rules{health.TaintEvicted(), health.TerminatingTooLong(margin), health.GracefulDeletion()}
			checker := newChecker(t, pods, health.Options{Clock: clk, Rules: rules, Nodes: fake.NewNodes(tt.node)})

			_, err := checker.Check(context.Background()) // first sighting
			require.NoError(t, err)
			clk.SetTime(start.Add(tt.elapsed))
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.Equal(t, tt.want, report.Pods[0].Verdict.State, "verdict %+v", report.Pods[0].Verdict)
		})
	}
}

func TestPolicyForEachKindOfPod(t *testing.T) {
	lost := newNode("node-lost", notReady, taint("node.kubernetes.io/unreachable"))
	fencedNode := newNode("node-lost", notReady, taint("node.kubernetes.io/unreachable"), outOfService)
	claims := fake.NewClaims(claim("rwo", corev1.ReadWriteOnce), claim("rwop", corev1.ReadWriteOncePod), claim("rwx", corev1.ReadWriteMany))
	ephemeralRWO := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}}}})
	}
	tests := []struct {
		name       string
		pod        *corev1.Pod
		node       *corev1.Node
		policy     health.Options
		wantDelete bool
		wantWhy    string
	}{
		{name: "stateless pod goes on taint-eviction evidence", pod: taintEvicted("p"), node: lost, wantDelete: true},
		{name: "StatefulSet pod on an unreachable node is held back", pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ownedByStatefulSet), node: lost, wantWhy: "StatefulSet db"},
		{name: "StatefulSet pod on an out-of-service node goes", pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ownedByStatefulSet), node: fencedNode, wantDelete: true},
		{name: "StatefulSet pod terminated by the kubelet goes: its containers stopped", pod: newPod("p", phase(corev1.PodFailed), disruption("TerminationByKubelet"), ownedByStatefulSet), node: lost, wantDelete: true},
		{name: "ReadWriteOnce claim is held back", pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), claimVolume("rwo"), ownedByReplicaSet), node: lost, policy: health.Options{Claims: claims}, wantWhy: "single-writer claim rwo"},
		{name: "ReadWriteOncePod claim is held back", pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), claimVolume("rwop"), ownedByReplicaSet), node: lost, policy: health.Options{Claims: claims}, wantWhy: "single-writer claim rwop"},
		{name: "ReadWriteMany claim goes", pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), claimVolume("rwx"), ownedByReplicaSet), node: lost, policy: health.Options{Claims: claims}, wantDelete: true},
		{name: "claim whose modes are unknown is held back", pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), claimVolume("rwx"), ownedByReplicaSet), node: lost, wantWhy: "access modes are unknown"},
		{name: "claim that cannot be read is held back", pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), claimVolume("missing"), ownedByReplicaSet), node: lost, policy: health.Options{Claims: claims}, wantWhy: "could not be read"},
		{name: "single-writer ephemeral claim is held back", pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ephemeralRWO, ownedByReplicaSet), node: lost, wantWhy: "ephemeral claim"},
		{name: "FenceNever loosens the policy for a StatefulSet pod", pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ownedByStatefulSet), node: lost, policy: health.Options{Fencing: health.FenceNever}, wantDelete: true},
		{name: "FenceAlways tightens the policy for a stateless pod", pod: taintEvicted("p"), node: lost, policy: health.Options{Fencing: health.FenceAlways}, wantWhy: "every pod"},
		{name: "FenceAlways lets a stateless pod go on an out-of-service node", pod: taintEvicted("p"), node: fencedNode, policy: health.Options{Fencing: health.FenceAlways}, wantDelete: true},
		{name: "the opt-out annotation holds back even a stateless pod", pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), annotated(health.AnnotationForceDelete, health.ForceDeleteNever)), node: fencedNode, wantWhy: "opted out"},
		{name: "another annotation value does not opt out", pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), annotated(health.AnnotationForceDelete, "sometimes")), node: lost, wantDelete: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := fake.New(fake.Options{}, newPod("alive", onNode("node-b")), tt.pod)
			opts := tt.policy
			opts.Nodes = fake.NewNodes(tt.node, newNode("node-b"))
			checker := newChecker(t, pods, opts)
			report, err := checker.CheckReport(context.Background())
			require.NoError(t, err)
			require.True(t, report.Healthy, "a held-back pod counts in neither column")
			got := report.Pods[1]
			if tt.wantDelete {
				require.Equal(t, health.ForceDeleted, got.Outcome, "held back: %s", got.HeldBack)
				require.Len(t, pods.Deletes(), 1)
				return
			}
			require.Equal(t, health.HeldBack, got.Outcome)
			require.Contains(t, got.HeldBack.String(), tt.wantWhy)
			require.Empty(t, pods.Deletes())
		})
	}
}

func TestStatefulPodWithoutNodeEvidenceIsHeldBack(t *testing.T) {
	pods := fake.New(fake.Options{}, newPod("db-0", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ownedByStatefulSet))
	report, err := newChecker(t, pods, health.Options{}).CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
	require.False(t, report.Healthy, "D9: no alive pod")
	require.Empty(t, pods.Deletes())
}

func TestBudgetLimitsForceDeletesPerWindow(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) // past the pods' deletion deadlines
	budget, err := health.NewDeleteBudget(3, time.Minute)
	require.NoError(t, err)
	var seed []*corev1.Pod
	for i := range 5 {
		seed = append(seed, taintEvicted(fmt.Sprintf("dead-%d", i)))
	}
	first := fake.New(fake.Options{}, seed[:3]...)
	second := fake.New(fake.Options{}, append([]*corev1.Pod{newPod("alive")}, seed[3:]...)...)
	opts := health.Options{Clock: clk, Budget: budget}
	checkFirst, checkSecond := newChecker(t, first, opts), newChecker(t, second, opts)

	_, err = checkFirst.Check(context.Background())
	require.NoError(t, err)
	clk.SetTime(clk.Now().Add(20 * time.Second))
	report, err := checkSecond.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, []health.Outcome{health.NoAction, health.HeldBack, health.HeldBack}, outcomes(report), "the shared budget is spent")
	require.Contains(t, report.Pods[1].HeldBack.String(), "budget used up: 3 per 1m0s")
	require.Equal(t, 40*time.Second, report.RetryAfter)
	require.True(t, report.Healthy, "D8")

	clk.SetTime(clk.Now().Add(40 * time.Second))
	report, err = checkSecond.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, []health.Outcome{health.NoAction, health.ForceDeleted, health.ForceDeleted}, outcomes(report))
	require.Len(t, first.Deletes(), 3)
	require.Len(t, second.Deletes(), 2)
}

func TestNewDeleteBudgetRejectsNonsense(t *testing.T) {
	for _, tt := range []struct {
		max    int
		window time.Duration
	}{{0, time.Minute}, {-1, time.Minute}, {1, 0}} {
		_, err := health.NewDeleteBudget(tt.max, tt.window)
		require.Error(t, err, "NewDeleteBudget(%d, %v)", tt.max, tt.window)
	}
}

func TestBreakerStopsForceDeletesWhenManyNodesFailAtOnce(t *testing.T) {
	// nodes builds nodes n0, n1, ... from "<zone letter><up|down>" specs.
	nodes := func(spec ...string) []*corev1.Node {
		var out []*corev1.Node
		for i, s := range spec {
			var z, state string
			_, _ = fmt.Sscanf(s, "%1s%s", &z, &state)
			opts := []nodeOption{zone(z)}
			if state == "down" {
				opts = append(opts, notReady)
			}
			out = append(out, newNode(fmt.Sprintf("n%d", i), opts...))
		}
		return out
	}
	var manyZones []string
	for _, z := range "abcdefghij" {
		manyZones = append(manyZones, string(z)+"up", string(z)+"up")
	}
	manyZones = append(manyZones, "kdown", "kdown", "kdown")
	tests := []struct {
		name    string
		nodes   []*corev1.Node
		podNode string
		breaker health.Breaker
		wantWhy string // empty: deleted
	}{
		{name: "one of two nodes down: deletes", nodes: nodes("aup", "adown"), podNode: "n1"},
		{name: "every node down: held back", nodes: nodes("adown", "adown"), podNode: "n1", wantWhy: "all 2 nodes are not Ready"},
		{name: "three of five down: held back", nodes: nodes("aup", "aup", "adown", "adown", "adown"), podNode: "n4", wantWhy: "3 of 5 nodes"},
		{name: "two of five down: deletes", nodes: nodes("aup", "aup", "aup", "adown", "adown"), podNode: "n4"},
		{name: "a disrupted zone holds back its own pods", nodes: nodes("aup", "aup", "aup", "aup", "aup", "bdown", "bdown", "bdown"), podNode: "n7", wantWhy: `zone "b"`},
		{name: "a disrupted zone does not hold back another zone's pods", nodes: nodes("aup", "aup", "aup", "aup", "adown", "bdown", "bdown", "bdown"), podNode: "n4"},
		{name: "a lower threshold trips sooner", nodes: nodes("aup", "aup", "aup", "adown", "adown"), podNode: "n4", breaker: health.Breaker{UnhealthyShare: 0.4, MinUnhealthy: 2}, wantWhy: "2 of 5"},
		// Ten zones of two Ready nodes, then zone "k" with three nodes down
		// (n20, n21, n22): more zones than a breaker searches in turn.
		{name: "among many zones, a disrupted zone holds back its own pods", nodes: nodes(manyZones...), podNode: "n22", wantWhy: `3 of 3 nodes in zone "k"`},
		{name: "among many zones, a disrupted zone does not hold back another zone's pods", nodes: nodes(append(manyZones, "jdown")...), podNode: "n23"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodeSource := fake.NewNodes(tt.nodes...)
			breaker := tt.breaker
			breaker.Nodes = nodeSource
			pods := fake.New(fake.Options{}, newPod("p", onNode(tt.podNode), deleting, disruption("DeletionByTaintManager")))
			report, err := newChecker(t, pods, health.Options{Breaker: breaker}).CheckReport(context.Background())
			require.NoError(t, err)
			if tt.wantWhy == "" {
				require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome, report.Pods[0].HeldBack)
				return
			}
			require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
			require.Contains(t, report.Pods[0].HeldBack.String(), "breaker open")
			require.Contains(t, report.Pods[0].HeldBack.String(), tt.wantWhy)
			require.Empty(t, pods.Deletes())
		})
	}
}

func TestBreakerThatCannotReadNodesHoldsBack(t *testing.T) {
	nodes := fake.NewNodes()
	nodes.FailWith(errors.New("forbidden"))
	pods := fake.New(fake.Options{}, taintEvicted("p"))
	report, err := newChecker(t, pods, health.Options{Breaker: health.Breaker{Nodes: nodes}}).CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.HeldBack, report.Pods[0].Outcome)
	require.Contains(t, report.Pods[0].HeldBack.String(), "forbidden")
}

type decisionLog struct {
	recordingObserver
	decisions []string
}

func (d *decisionLog) Observe(ctx context.Context, r health.PodReport) {
	d.recordingObserver.Observe(ctx, r)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.decisions = append(d.decisions, fmt.Sprintf("%s:%s:%s", r.Pod.Name, r.Verdict.State, r.Outcome))
}

func TestObserverHearsEveryDecisionOncePerCheck(t *testing.T) {
	pods := fake.New(fake.Options{}, newPod("alive"), taintEvicted("dead"), drained("drained"),
		newPod("db-0", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ownedByStatefulSet))
	log := &decisionLog{}
	_, err := newChecker(t, pods, health.Options{Observer: log}).Check(context.Background())
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"alive:Alive:NoAction", "dead:Dead:ForceDeleted", "drained:Terminating:NoAction", "db-0:Dead:HeldBack"}, log.decisions)
	require.Equal(t, []string{"dead:ForceDeleted"}, log.seen())
}

func TestNewRejectsAnUnknownFencingPolicy(t *testing.T) {
	pods := fake.New(fake.Options{})
	_, err := health.New(pods, pods, health.Options{Fencing: 42})
	require.ErrorContains(t, err, "unknown Options.Fencing")
}

func TestEvidenceLooksUpEachNodeOncePerCheck(t *testing.T) {
	nodes := fake.NewNodes(newNode("n1", notReady))
	pods := fake.New(fake.Options{},
		newPod("a", onNode("n1"), deleting), newPod("b", onNode("n1"), deleting), newPod("c", onNode("n1"), deleting, disruption("EvictionByEvictionAPI")))
	checker := newChecker(t, pods, health.Options{Nodes: nodes})

	_, err := checker.Check(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, nodes.Gets(), "three terminating pods on one node, one lookup")
	_, err = checker.Check(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, nodes.Gets(), "the next check looks again")
}

func TestSharedBudgetHoldsUnderConcurrentChecks(t *testing.T) {
	const workloads, perWorkload, limit = 8, 5, 7
	budget, err := health.NewDeleteBudget(limit, time.Hour)
	require.NoError(t, err)
	var all []*fake.Pods
	var wg sync.WaitGroup
	for w := range workloads {
		var seed []*corev1.Pod
		for i := range perWorkload {
			seed = append(seed, taintEvicted(fmt.Sprintf("w%d-dead-%d", w, i)))
		}
		pods := fake.New(fake.Options{}, seed...)
		all = append(all, pods)
		checker := newChecker(t, pods, health.Options{Budget: budget})
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := checker.Check(context.Background())
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	sent := 0
	for _, pods := range all {
		sent += len(pods.Deletes())
	}
	require.Equal(t, limit, sent, "force deletes over all checkers")
}
