package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
	"github.com/podhealth/podhealth/selffence"
)

// The self-fencing writer's protocol on real nodes: a 4 s Lease renewed
// every second, and the process stopped 3 s after it expires.
const (
	realSelfFenceDuration = 4 * time.Second
	realSelfFenceDeadline = 3 * time.Second
)

// runRealSelfFencing partitions the node of a StatefulSet pod whose writer
// fences itself with a selffence.Guard (bound to victim, its successor to
// spare). The library's Checker with FenceLease recovers it, or, with
// mutant, podhealth-controller --fence-lease recovers a writer that
// ignores its Guard. From the writers' file alone: the guarded writer
// writes nothing after its Lease's expiry, and its successor is the only
// writer; the mutant's successor writes beside it. It returns its row of
// FIGURES.md.
func runRealSelfFencing(ctx context.Context, t *testing.T, cp *harness.ControlPlane, victim, spare *harness.RealNode, mutant bool) string {
	c := cp.Client()
	podLabels := map[string]string{"app": "db"}
	ns, checker, recoverer, agent := "real-selffence", realChecker{on: true, fenceLease: true}, "podhealth's Checker (`FenceLease`)", realCheckerAgent
	if mutant {
		ns, checker, recoverer, agent = "real-selffence-mutant", realChecker{}, "podhealth-controller `--fence-lease`", controllerAgent
	}
	w := startRealWorkload(ctx, t, cp, ns, labels.SelectorFromSet(podLabels), checker, victim.Name(), spare.Name())
	volDir := filepath.Dir(w.writes)
	writeWriterKubeconfig(ctx, t, cp, ns, filepath.Join(volDir, "kubeconfig"))

	protocol := selffence.Options{Lease: "db-primary", Duration: realSelfFenceDuration, Deadline: realSelfFenceDeadline}
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
	if mutant {
		writer.Env = append(writer.Env, corev1.EnvVar{Name: "IGNORE_GUARD", Value: "1"})
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: template,
		},
	}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := w.firstWriter(ctx, t, victim.Name())
	partition, unknown := faultUntilEvicted(ctx, t, cp, w, victim, old.UID, realPartition)
	// The Lease's last renewal, read past the partition: its renewTime is
	// the start of the renewal on the writer's clock, the host's.
	lease, err := c.CoordinationV1().Leases(ns).Get(ctx, protocol.Lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != old.Name {
		t.Fatalf("the Lease is held by %q, not by the writer %s", h, old.Name)
	}
	expiry := lease.Spec.RenewTime.Add(realSelfFenceDuration)
	if _, err := w.watch.WaitFor(ctx, "the old pod force-deleted", func([]harness.PodHistory) bool {
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
	overlaps := realOverlaps(ws)

	// The one force DELETE of the old pod, with its UID, by the recoverer.
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
	if len(forced) != 1 || !strings.HasPrefix(forced[0].UserAgent, agent) {
		t.Errorf("the old pod's force DELETEs with its UID: %+v; want one, by %s (user agent %s…)", forced, recoverer, agent)
	}
	since := func(at time.Time) string { return figSec(at.Sub(partition)) }
	if mutant {
		if len(overlaps) == 0 {
			t.Errorf("a writer that ignores its Guard wrote until %s, its successor from %s, and the writers' file shows no second writer", oldLast.Format(time.StampMilli), nextFirst.Format(time.StampMilli))
		}
		victim.Heal()
		return fmt.Sprintf("| the mutation: the same writer ignoring its Guard (never stopped), recovered by %s | freed %s after the partition; the successor wrote %s after it, beside the old one: the writers' file shows two writers of %s | |",
			recoverer, since(old.Deleted), since(nextFirst), old.Name)
	}
	// Its writes end by the expiry, measured from the renewal's start
	// (a line's time is read just after the Guard said yes: 100 ms).
	if oldLast.After(expiry.Add(100 * time.Millisecond)) {
		t.Errorf("the guarded writer wrote at %s, after its Lease expired at %s", oldLast.Format(time.StampMilli), expiry.Format(time.StampMilli))
	}
	for _, o := range overlaps {
		t.Errorf("the writers' file shows %s", o)
	}
	if w.loop != nil {
		for _, err := range w.loop.errors() {
			t.Errorf("check failed: %v", err)
		}
	}
	heal := time.Now()
	victim.Heal()
	killed := waitGone(ctx, t, victim, old.UID, 2*time.Minute)
	if _, last, _ := writesOf(w.realWrites(t), old.UID); last.After(expiry.Add(100 * time.Millisecond)) {
		t.Errorf("the old pod's container wrote at %s, after its Lease expired at %s", last.Format(time.StampMilli), expiry.Format(time.StampMilli))
	}
	p8, goal := nextFirst.Sub(partition), realSelfFenceDuration+realSelfFenceDeadline+5*time.Second
	renewed := figSec(partition.Sub(lease.Spec.RenewTime.Time)) + " before the partition"
	if lease.Spec.RenewTime.After(partition) {
		renewed = since(lease.Spec.RenewTime.Time) + " after the partition"
	}
	beyond := ""
	if p8 > goal {
		beyond = fmt.Sprintf(", above it: the eviction comes first (the grace period and the toleration: %s), then the successor's Guard waits the Lease's duration, deadline and margin from its start",
			since(old.Evicted))
	}
	t.Logf("self-fencing partition: last renewal %s, last write %s, Unknown %s, evicted %s, freed %s by %s, successor writing %s (P8; goal %s); on heal the container was gone %s later",
		renewed, since(oldLast), since(unknown), since(old.Evicted), since(old.Deleted), recoverer, figSec(p8), figSec(goal), figSec(killed.Sub(heal)))
	return fmt.Sprintf("| a self-fencing StatefulSet pod's node partitioned: its writer holds the Lease with `selffence.Guard` (%v, deadline %v; toleration 2 s), recovered by %s | its last renewal %s, its last write %s after it, before the expiry at %s; node Unknown %s, the pod evicted %s, freed %s; **P8: its successor wrote %s after the partition** (goal: duration + deadline + 5 s = %s%s), the only writer | its container was gone %s after the heal |",
		realSelfFenceDuration, realSelfFenceDeadline, recoverer, renewed, since(oldLast), since(expiry), since(unknown), since(old.Evicted), since(old.Deleted),
		figSec(p8), figSec(goal), beyond, figSec(killed.Sub(heal)))
}

// writeWriterKubeconfig writes to path a kubeconfig for the writers of
// namespace ns: the service account writer, allowed get, create and update
// on leases there, reaching the API server at its URL, which on a real
// node's network is the node's relay.
func writeWriterKubeconfig(ctx context.Context, t *testing.T, cp *harness.ControlPlane, ns, path string) {
	t.Helper()
	c := cp.Client()
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "writer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
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
