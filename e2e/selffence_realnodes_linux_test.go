package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/selffence"
)

// The self-fencing writers' protocol on real nodes: a 4 s Lease renewed
// every second, and the process stopped 3 s after it expires.
const (
	realSelfFenceDuration = 4 * time.Second
	realSelfFenceDeadline = 3 * time.Second
	realSelfFenceLease    = "db-primary"
)

// selfFencing is one self-fencing scenario on real nodes: a fault of the
// primary's node, and who recovers it.
type selfFencing struct {
	fault realFault
	// checker is the library's Checker (checker.on, with FenceLease) or
	// podhealth-controller --fence-lease, or both (alsoController).
	checker realChecker
	// holds: the fault leaves the primary running and renewing its Lease
	// (a kubelet crash), so podhealth must hold its pod until the node's
	// own kubelet ends it.
	holds bool
	// mutant: db-0's writer ignores its Guard and is never stopped.
	mutant bool
}

// runRealSelfFencing runs a database's shape on victim and spare: a
// StatefulSet of two whose writers share one Lease through
// selffence.Guard, so that only its holder, the primary (db-0, on
// victim), writes, and the standby (db-1, on spare) takes the Lease over
// once it is left unrenewed: the failover. It injects the scenario's fault
// on victim. From the writers' file alone: the old primary writes nothing
// after its Lease's expiry, the standby writes after it, and never do two
// writers of the Lease write at once (invariant 5). The recoverer frees
// the evicted old primary on the takeover's evidence, with its UID, once;
// or, when the fault leaves the primary renewing, holds it until the
// node's kubelet ends it. It returns its row of FIGURES.md.
func runRealSelfFencing(ctx context.Context, t *testing.T, cp *harness.ControlPlane, victim, spare *harness.RealNode, how selfFencing) string {
	c := cp.Client()
	podLabels := map[string]string{"app": "db"}
	w, stopBinding := startRealPair(ctx, t, cp, victim, spare, podLabels, how.checker)
	defer stopBinding()
	ns := w.ns
	volDir := filepath.Dir(w.writes)
	writeWriterKubeconfig(ctx, t, cp, ns, filepath.Join(volDir, "kubeconfig"))
	leases := watchLease(ctx, t, c, ns, realSelfFenceLease)

	template := selfFencingTemplate(t, podLabels, volDir)
	if how.mutant {
		writer := &template.Spec.Containers[0]
		writer.Env = append(writer.Env, corev1.EnvVar{Name: "IGNORE_GUARD", Value: "db-0"})
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: template,
		},
	}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := w.firstWriter(ctx, t, victim.Name())
	if old.Name != "db-0" {
		t.Fatalf("the first writer is %s, want db-0", old.Name)
	}
	standby := waitRunning(ctx, t, c, ns, "db-1", spare.Name())
	time.Sleep(2 * time.Second) // the standby's Guard has read the primary's Lease

	recoverer, agents := realRecoverers(how.checker)
	fault, unknown := faultUntilEvicted(ctx, t, cp, w, victim, old.UID, how.fault)
	since := func(at time.Time) string { return figSec(at.Sub(fault)) }
	if how.holds {
		return holdWhileRenewing(ctx, t, cp, w, victim, old, standby, leases, how, fault, unknown, recoverer, agents)
	}
	if _, err := w.watch.WaitFor(ctx, "the old primary force-deleted", func([]harness.PodHistory) bool {
		return !w.pod(old.UID).Deleted.IsZero()
	}); err != nil {
		t.Fatal(err)
	}
	old = w.pod(old.UID)
	next := w.successor(ctx, t, old.UID)
	time.Sleep(2 * time.Second) // both write a while, if both can
	ws := w.realWrites(t)
	nextFirst, _, _ := writesOf(ws, next.UID)
	_, oldLast, _ := writesOf(ws, old.UID)
	overlaps := primaryOverlaps(ws)
	requireOneForceDelete(t, cp, ns, old, recoverer, agents)
	if how.mutant {
		if len(overlaps) == 0 {
			t.Errorf("a writer that ignores its Guard wrote until %s, the standby from %s, and the writers' file shows no second writer", oldLast.Format(time.StampMilli), nextFirst.Format(time.StampMilli))
		}
		if err := how.fault.undo(victim); err != nil {
			t.Error(err)
		}
		return fmt.Sprintf("| the mutation: db-0's writer ignoring its Guard (never stopped), its node %s, recovered by %s | the standby took over and wrote %s after the fault, beside the old primary: the writers' file shows two writers of the Lease; the old pod freed %s | |",
			how.fault.name, recoverer, since(nextFirst), since(old.Deleted))
	}
	if next.Name != standby.Name || next.UID != standby.UID {
		t.Errorf("the first writer after the fault is %s (%s), not the standby %s", next.Name, next.UID, standby.Name)
	}
	last, ok := leases.lastOf(old.Name)
	if !ok {
		t.Fatalf("no record of the Lease held by %s was read", old.Name)
	}
	expiry := last.renew.Add(realSelfFenceDuration)
	// A line's time is read just after the Guard said yes: 100 ms.
	if oldLast.After(expiry.Add(100 * time.Millisecond)) {
		t.Errorf("the old primary wrote at %s, after its Lease expired at %s", oldLast.Format(time.StampMilli), expiry.Format(time.StampMilli))
	}
	for _, o := range overlaps {
		t.Errorf("the writers' file shows %s", o)
	}
	if w.loop != nil {
		for _, err := range w.loop.errors() {
			t.Errorf("check failed: %v", err)
		}
		requireFencedByTheTakeover(t, w.loop, old.UID)
	}
	undone := time.Now()
	if err := how.fault.undo(victim); err != nil {
		t.Fatal(err)
	}
	killed := waitGone(ctx, t, victim, old.UID, 2*time.Minute)
	time.Sleep(2 * time.Second) // the old container, if it could, and the recreated db-0 write a while
	ws = w.realWrites(t)
	if _, last, _ := writesOf(ws, old.UID); last.After(expiry.Add(100 * time.Millisecond)) {
		t.Errorf("the old primary's container wrote at %s, after its Lease expired at %s", last.Format(time.StampMilli), expiry.Format(time.StampMilli))
	}
	for _, o := range primaryOverlaps(ws) {
		t.Errorf("after %s, the writers' file shows %s", how.fault.heal, o)
	}
	p8, goal := nextFirst.Sub(fault), realSelfFenceDuration+realSelfFenceDeadline+5*time.Second
	t.Logf("self-fencing, node %s: last renewal %s, last write %s, the standby writing %s (P8; goal %s); Unknown %s, evicted %s, freed %s by %s; the container gone %s after %s",
		how.fault.name, relative(last.renew, fault), relative(oldLast, fault), figSec(p8), figSec(goal), since(unknown), since(old.Evicted), since(old.Deleted), recoverer, figSec(killed.Sub(undone)), how.fault.heal)
	return fmt.Sprintf("| a self-fencing primary's node %s: db-0 and db-1 share the Lease through `selffence.Guard` (%v, deadline %v; toleration 2 s), recovered by %s | the last renewal %s, the last write %s, the expiry %s; **P8: the standby took over and wrote %s after the fault** (goal: duration + deadline + 5 s = %s), the only writer; node Unknown %s, the old pod evicted %s, freed on the takeover %s | its container gone %s after %s |",
		how.fault.name, realSelfFenceDuration, realSelfFenceDeadline, recoverer, relative(last.renew, fault), relative(oldLast, fault), relative(expiry, fault),
		figSec(p8), figSec(goal), since(unknown), since(old.Evicted), since(old.Deleted), figSec(killed.Sub(undone)), how.fault.heal)
}

// startRealPair starts the workload of a scenario on victim and spare: its
// namespace (named for the pair) and Checker (startRealWorkload), and a
// binder of its new pods to the less loaded of the two that is Ready. It
// returns the workload and what stops the binder.
func startRealPair(ctx context.Context, t *testing.T, cp *harness.ControlPlane, victim, spare *harness.RealNode, podLabels map[string]string, checker realChecker) (*realWorkload, func()) {
	t.Helper()
	ns := "real-" + strings.TrimSuffix(strings.TrimPrefix(victim.Name(), "real-"), "-victim")
	w := startRealWorkload(ctx, t, cp, ns, labels.SelectorFromSet(podLabels), checker)
	bindCtx, stop := context.WithCancel(ctx)
	var binding sync.WaitGroup
	binding.Go(func() { bindToLeastLoaded(bindCtx, cp, ns, []string{victim.Name(), spare.Name()}) })
	return w, func() { stop(); binding.Wait() }
}

// holdWhileRenewing is the end of a scenario whose fault leaves the
// primary running and renewing (a kubelet crash): its pod is evicted, and
// podhealth holds it, since its Lease is renewed, while the standby never
// writes; once the fault ends, the node's kubelet ends the container, and
// the standby takes the Lease over.
func holdWhileRenewing(ctx context.Context, t *testing.T, cp *harness.ControlPlane, w *realWorkload, victim *harness.RealNode, old, standby harness.PodHistory, leases *leaseLog, how selfFencing, fault, unknown time.Time, recoverer string, agents []string) string {
	since := func(at time.Time) string { return figSec(at.Sub(fault)) }
	// Held well past the eviction plus the Lease's wait, had it not
	// been renewed.
	hold := 45 * time.Second
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(fault.Add(hold))):
	}
	evicted := w.pod(old.UID).Evicted
	if !w.pod(old.UID).Deleted.IsZero() {
		t.Fatalf("the primary, renewing its Lease, was deleted %s after the fault", since(w.pod(old.UID).Deleted))
	}
	ws := w.realWrites(t)
	_, oldLast, _ := writesOf(ws, old.UID)
	if fault.Add(hold).Sub(oldLast) > time.Second {
		t.Errorf("the primary's last write was %s after the fault; it runs and renews, so it writes on", since(oldLast))
	}
	if _, _, n := writesOf(ws, standby.UID); n > 0 {
		t.Errorf("the standby wrote %d lines while the primary renewed its Lease", n)
	}
	if last, ok := leases.lastOf(old.Name); !ok || last.renew.Before(fault.Add(hold-5*time.Second)) {
		t.Errorf("the primary's Lease was last seen renewed %s after the fault (%v); it renews while the kubelet is down", since(last.renew), ok)
	}
	held := 0
	if w.loop != nil {
		ats, prs := w.loop.reportsOf(old.UID)
		// Until its deletionTimestamp comes the evicted pod is alive
		// (NoAction); from then on, each report holds it for the Lease.
		for i, pr := range prs {
			switch {
			case ats[i].Before(evicted) || pr.Outcome == health.NoAction:
			case pr.Outcome != health.HeldBack || pr.HeldBack.Reason != health.HeldForFencing || !strings.Contains(pr.HeldBack.Detail, "lease "+w.ns+"/"+realSelfFenceLease+" held by "+old.Name):
				t.Errorf("the renewing primary's report: %v %s; want held for the Lease's wait", pr.Outcome, pr.HeldBack)
			default:
				held++
			}
		}
		if held == 0 {
			t.Error("the Checker never reported the evicted primary held back")
		}
	}
	events := 0
	if how.checker.alsoController || !how.checker.on {
		// Its hold, judged again at each pod, node and Lease event, is one
		// event; the recorder folds a repeat into the first Event's series.
		if err := pollUntil(ctx, func() bool { return len(heldEvents(ctx, t, cp.Client(), w.ns)) > 0 }); err != nil {
			t.Fatalf("no %s event: %v", podsource.ReasonHeldBack, err)
		}
		for _, e := range heldEvents(ctx, t, cp.Client(), w.ns) {
			events++
			if e.Series != nil {
				events += int(e.Series.Count) - 1
			}
			t.Logf("the hold's event: %s", e.Note)
		}
		if events != 1 {
			t.Errorf("podhealth-controller recorded %d %s events for one hold, want 1", events, podsource.ReasonHeldBack)
		}
	}
	undone := time.Now()
	if err := how.fault.undo(victim); err != nil {
		t.Fatal(err)
	}
	if _, err := w.watch.WaitFor(ctx, "the old primary deleted by its kubelet", func([]harness.PodHistory) bool {
		return !w.pod(old.UID).Deleted.IsZero()
	}); err != nil {
		t.Fatal(err)
	}
	gone := w.pod(old.UID).Deleted
	if err := pollUntil(ctx, func() bool { _, _, n := writesOf(w.realWrites(t), standby.UID); return n > 0 }); err != nil {
		t.Fatalf("the standby never took the Lease over: %v", err)
	}
	time.Sleep(2 * time.Second)
	ws = w.realWrites(t)
	standbyFirst, _, _ := writesOf(ws, standby.UID)
	_, oldLast, _ = writesOf(ws, old.UID)
	for _, o := range primaryOverlaps(ws) {
		t.Errorf("the writers' file shows %s", o)
	}
	deletes, err := cp.PodDeletes()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deletes {
		if d.Namespace == w.ns && d.Name == old.Name && hasAnyPrefix(d.UserAgent, agents) {
			t.Errorf("%s sent a DELETE of the renewing primary: %+v", recoverer, d)
		}
	}
	t.Logf("self-fencing, node %s: Unknown %s, evicted %s, held by %s (%d reports, %d events) while it renewed; %s at %s, the pod gone %s, its last write %s, the standby writing %s",
		how.fault.name, since(unknown), since(evicted), recoverer, held, events, how.fault.heal, since(undone), since(gone), since(oldLast), since(standbyFirst))
	return fmt.Sprintf("| a self-fencing primary's node %s, recovered by %s | node Unknown %s, the pod evicted %s; it kept renewing its Lease and writing, so podhealth held it (no DELETE; podhealth-controller's one `%s` event) and the standby never wrote | %s at %s: the kubelet ended the container and the pod was gone %s, the old primary's last write %s; the standby took over and wrote %s |",
		how.fault.name, recoverer, since(unknown), since(evicted), podsource.ReasonHeldBack, how.fault.heal, since(undone), since(gone), since(oldLast), since(standbyFirst))
}

// selfFencingTemplate is the writers' pod template: the writer image
// holding realSelfFenceLease through a Guard, with the protocol's
// annotations stamped from the same settings.
func selfFencingTemplate(t *testing.T, podLabels map[string]string, volDir string) corev1.PodTemplateSpec {
	t.Helper()
	protocol := selffence.Options{Lease: realSelfFenceLease, Duration: realSelfFenceDuration, Deadline: realSelfFenceDeadline}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: writerPodSpec(volDir, 2)}
	if err := protocol.Stamp(&template); err != nil {
		t.Fatal(err)
	}
	writer := &template.Spec.Containers[0]
	writer.Env = append(writer.Env,
		corev1.EnvVar{Name: "LEASE", Value: protocol.Lease},
		corev1.EnvVar{Name: "LEASE_DURATION", Value: realSelfFenceDuration.String()},
		corev1.EnvVar{Name: "LEASE_DEADLINE", Value: realSelfFenceDeadline.String()},
		corev1.EnvVar{Name: "KUBECONFIG", Value: "/vol/kubeconfig"},
		corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}})
	return template
}

// realRecoverers names who recovers a scenario's pods, for its row, and
// the user agents of their DELETEs.
func realRecoverers(checker realChecker) (string, []string) {
	switch {
	case checker.on && checker.alsoController:
		return "podhealth's Checker (`FenceLease`) and podhealth-controller `--fence-lease`", []string{realCheckerAgent, controllerAgent}
	case checker.on:
		return "podhealth's Checker (`FenceLease`)", []string{realCheckerAgent}
	}
	return "podhealth-controller `--fence-lease`", []string{controllerAgent}
}

// requireOneForceDelete fails t unless old had exactly one force DELETE
// with its UID, sent by one of agents.
func requireOneForceDelete(t *testing.T, cp *harness.ControlPlane, ns string, old harness.PodHistory, recoverer string, agents []string) {
	t.Helper()
	deletes, err := cp.PodDeletes()
	if err != nil {
		t.Fatal(err)
	}
	var forced []harness.PodDelete
	for _, d := range deletes {
		if d.Namespace == ns && d.Name == old.Name && d.Force() && d.PreconditionUID == old.UID {
			forced = append(forced, d)
		}
	}
	if len(forced) != 1 || !hasAnyPrefix(forced[0].UserAgent, agents) {
		t.Errorf("the old pod's force DELETEs with its UID: %+v; want one, by %s (user agent %v…)", forced, recoverer, agents)
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// requireFencedByTheTakeover fails t unless the Checker's report of the
// old primary's force delete names the Lease's takeover as its proof.
func requireFencedByTheTakeover(t *testing.T, loop *stsLoop, old types.UID) {
	t.Helper()
	_, prs := loop.reportsOf(old)
	for _, pr := range prs {
		if pr.Outcome != health.ForceDeleted {
			continue
		}
		if pr.FencedBy == nil || !strings.Contains(pr.FencedBy.Detail, "taken over") {
			t.Errorf("the old primary was force-deleted on %v, not on the Lease's takeover", pr.FencedBy)
		}
		return
	}
	t.Errorf("the Checker never reported the old primary force-deleted; outcomes %v", stsOutcomes(prs))
}

// primaryOverlaps is invariant 5, from the writers' file alone: of all the
// processes that wrote as holders of the one Lease, whatever their
// identity, none writes again once another has written. A process is told
// by its pod's UID and its sequence, which starts again at 1 when the
// pod's container restarts: a Guard never writes again once it lost the
// Lease, but the pod's next container may take the Lease back, after the
// takeover's wait, and that is a new writer.
func primaryOverlaps(ws []realWrite) []string {
	one := make([]realWrite, len(ws))
	process := map[types.UID]int{}
	lastSeq := map[types.UID]int{}
	for i, w := range ws { // in the file's order: each process appends in order
		if seq, ok := lastSeq[w.uid]; ok && w.seq <= seq {
			process[w.uid]++
		}
		lastSeq[w.uid] = w.seq
		if n := process[w.uid]; n > 0 {
			w.uid = types.UID(fmt.Sprintf("%s (its container's start %d)", w.uid, n+1))
		}
		w.who = "the Lease " + realSelfFenceLease
		one[i] = w
	}
	return realOverlaps(one)
}

// relative says when at was, before or after the fault.
func relative(at, fault time.Time) string {
	if at.Before(fault) {
		return figSec(fault.Sub(at)) + " before the fault"
	}
	return figSec(at.Sub(fault)) + " after the fault"
}

// waitRunning waits until pod name of ns runs on node, and returns its
// history's start.
func waitRunning(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name, node string) harness.PodHistory {
	t.Helper()
	var p *corev1.Pod
	if err := pollUntil(ctx, func() bool {
		var err error
		p, err = c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning
	}); err != nil {
		t.Fatalf("%s/%s never ran on %s: %v (%v)", ns, name, node, err, p)
	}
	return harness.PodHistory{Name: p.Name, UID: p.UID, NodeName: node}
}

// leaseLog is every record of one Lease read by watchLease: who held it,
// and the renewal's time, as the holder wrote it.
type leaseLog struct {
	mu      sync.Mutex
	records []leaseRecord
}

type leaseRecord struct {
	holder string
	renew  time.Time
}

// lastOf returns the last record read with holder.
func (l *leaseLog) lastOf(holder string) (leaseRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.records) - 1; i >= 0; i-- {
		if l.records[i].holder == holder {
			return l.records[i], true
		}
	}
	return leaseRecord{}, false
}

// watchLease reads Lease name of ns every 100 ms, more often than it is
// renewed, until t's cleanup, and keeps each new record.
func watchLease(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) *leaseLog {
	l := &leaseLog{}
	ctx, stop := context.WithCancel(ctx)
	var polling sync.WaitGroup
	t.Cleanup(func() { stop(); polling.Wait() })
	polling.Go(func() {
		everyTick(ctx, 100*time.Millisecond, func() {
			lease, err := c.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || lease.Spec.RenewTime == nil {
				return
			}
			r := leaseRecord{holder: ptr.Deref(lease.Spec.HolderIdentity, ""), renew: lease.Spec.RenewTime.Time}
			l.mu.Lock()
			defer l.mu.Unlock()
			if n := len(l.records); n == 0 || l.records[n-1] != r {
				l.records = append(l.records, r)
			}
		})
	})
	return l
}

// writeWriterKubeconfig writes to path a kubeconfig for the writers of
// namespace ns: the service account writer, allowed get, create and update
// on leases there and get on pods (each Guard reads its own), reaching the
// API server at its URL, which on a real node's network is the node's
// relay.
func writeWriterKubeconfig(ctx context.Context, t *testing.T, cp *harness.ControlPlane, ns, path string) {
	t.Helper()
	c := cp.Client()
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "writer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
	}}
	if _, err := c.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "writer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "writer", Namespace: ns}},
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "writer",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.APIServerURL(), InsecureSkipTLSVerify: true}
	cfg.AuthInfos["writer"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "writer", Namespace: ns}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}
