package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lib/pq"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
)

// The real database's protocol settings: a 4 s Lease, and PostgreSQL
// killed (SIGKILL, which takes no time to speak of: --stop-takes 1s) 3 s
// after it expires; its fast shutdown on a graceful delete takes at most
// the grace period, 10 s.
const (
	pgLeaseDuration = 4 * time.Second
	pgDeadline      = 3 * time.Second
	pgStopTakes     = time.Second
	pgGrace         = 10
	pgLease         = "db-primary"
)

// postgresBuild is the database's images, built once per test binary.
var postgresBuild struct {
	once sync.Once
	imgs harness.PostgresImages
	err  error
}

// postgresImages returns the database's images, or skips t (fails it with
// realNodesRequiredEnv) where PostgreSQL is not installed.
func postgresImages(t *testing.T) harness.PostgresImages {
	t.Helper()
	if err := harness.PostgresSupport(); err != nil {
		if os.Getenv(realNodesRequiredEnv) == "1" {
			t.Fatalf("the real database cannot run here, and %s=1: %v", realNodesRequiredEnv, err)
		}
		t.Skipf("the real database cannot run here: %v", err)
	}
	postgresBuild.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		postgresBuild.imgs, postgresBuild.err = harness.BuildPostgresImages(ctx, bins.Dir)
	})
	if postgresBuild.err != nil {
		t.Fatal(postgresBuild.err)
	}
	return postgresBuild.imgs
}

// pgScenario is one scenario of the real database: its fault, who frees
// the old pod, and the mutation, if any.
type pgScenario struct {
	// fault is a fault of the primary's node; sidecarKilled, instead, is
	// a SIGKILL of the primary's sidecar alone, as an OOM kill would send.
	fault         realFault
	sidecarKilled bool
	// holds: the fault leaves the primary running and renewing its Lease
	// (a kubelet crash), so podhealth must hold its evicted pod, and no
	// other server may start until the node's own kubelet ends it.
	holds bool
	// window: the fault is a freeze past the wait, and what the history
	// and the data directory show after the thaw is the freeze window
	// that docs/safety.md names: reported, whatever it is, not required.
	window  bool
	checker realChecker
	// mutation breaks the protocol; the checks must find it.
	mutation pgMutation
}

// pgMutation is a way of running PostgreSQL that breaks the protocol.
type pgMutation int

const (
	pgKept pgMutation = iota
	// pgNoStop: the sidecar runs as another user, so its kill at the
	// deadline reaches nothing, and PostgreSQL has no liveness probe: no
	// stop at all.
	pgNoStop
	// pgNoSidecar: the pod states the protocol with no sidecar (and its
	// server asks nothing); the Lease names the pod from an earlier
	// incarnation that had one.
	pgNoSidecar
)

// runRealPostgres runs PostgreSQL behind podhealth-selffence on victim
// and spare: a StatefulSet of two pods whose data directory is one host
// directory that both nodes mount (shared storage, where two servers
// can write the same files), each pod a PostgreSQL container and the
// sidecar in one process namespace, stating the protocol with the
// annotations the sidecar prints. db-0, on victim, holds the Lease and
// runs the server; db-1's server waits for its sidecar's yes. A client
// outside the nodes commits without pause to every server that accepts,
// and records each acknowledged commit. After the fault, from the history
// alone: every acknowledged commit is in the table, and no server
// accepted a commit once a later one had (the rows' server start times,
// in commit order, never go back); the data directory is sound
// (pg_amcheck on the last server, pg_checksums once it stopped). A
// mutation must be caught by those checks. It returns its row of
// FIGURES.md.
func runRealPostgres(ctx context.Context, t *testing.T, cp *harness.ControlPlane, imgs harness.PostgresImages, victim, spare *harness.RealNode, how pgScenario) string {
	c := cp.Client()
	for _, n := range []*harness.RealNode{victim, spare} {
		if err := n.ImportImages(ctx, imgs.Archive); err != nil {
			t.Fatal(err)
		}
	}
	podLabels := map[string]string{"app": "pg"}
	// db-0 first, on victim; db-1, once db-0 is Ready (its sidecar holds
	// the Lease), on spare; a pod made again, on a Ready node.
	w, stopBinding := startRealPair(ctx, t, cp, victim, spare, podLabels, how.checker)
	defer stopBinding()
	ns := w.ns
	configDir, dataDir := t.TempDir(), filepath.Join(t.TempDir(), "pgdata")
	kubeconfig := filepath.Join(configDir, "kubeconfig")
	writeWriterKubeconfig(ctx, t, cp, ns, kubeconfig)
	// The sidecar runs as PostgreSQL's user, to signal its processes.
	for _, p := range []string{configDir, kubeconfig} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dataDir, int(imgs.UID), int(imgs.GID)); err != nil {
		t.Fatal(err)
	}
	leases := watchLease(ctx, t, c, ns, pgLease)
	annotations := sidecarAnnotations(ctx, t, imgs)
	spec := postgresPodSpec(imgs, configDir, dataDir, how.mutation)
	replicas := int32(2)
	if how.mutation == pgNoSidecar {
		// One pod, and the Lease an earlier incarnation of it left,
		// renewed a minute ago: the fencer reads it as unrenewed since.
		replicas = 1
		ago := metav1.NewMicroTime(time.Now().Add(-time.Minute))
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pgLease}, Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("db-0"), LeaseDurationSeconds: ptr.To(int32(pgLeaseDuration / time.Second)), AcquireTime: &ago, RenewTime: &ago}}
		if _, err := c.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations}, Spec: spec},
		},
	}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := waitRunning(ctx, t, c, ns, "db-0", victim.Name())
	if replicas == 2 {
		waitRunning(ctx, t, c, ns, "db-1", spare.Name())
	}

	history := &pgHistory{}
	clientCtx, stopClient := context.WithCancel(ctx)
	var clients sync.WaitGroup
	for _, n := range []*harness.RealNode{victim, spare} {
		clients.Go(func() { history.commitWithoutPause(clientCtx, n) })
	}
	defer func() { stopClient(); clients.Wait() }()
	first := history.waitAcks(ctx, t, 20, "the primary's first commits")
	if first.node != victim.Name() {
		t.Fatalf("the first commit was acknowledged by the server on %s, not db-0's on %s", first.node, victim.Name())
	}
	time.Sleep(2 * time.Second) // the standby's sidecar has read the primary's Lease

	recoverer, agents := realRecoverers(how.checker)
	var fault, unknown time.Time
	var next pgAck
	switch {
	case how.sidecarKilled:
		fault = time.Now()
		n, err := victim.Signal("UID="+string(old.UID), "podhealth-selffence", syscall.SIGKILL)
		if err != nil || n != 1 {
			t.Fatalf("SIGKILL of db-0's sidecar: %d processes, %v", n, err)
		}
		// The successor: db-0's server once its restarted sidecar holds
		// the Lease again, or db-1's, whichever claims it first.
		next = history.waitNewServer(ctx, t, first.started, "a server's first commit after the sidecar's kill")
	case how.holds:
		fault, unknown = faultUntilEvicted(ctx, t, cp, w, victim, old.UID, how.fault)
		// Twice the wait: the sidecar renews through the fault, so no
		// evidence frees the pod, and no other server starts.
		time.Sleep(2 * (pgLeaseDuration + pgDeadline + 2*time.Second))
		if p := w.pod(old.UID); !p.Deleted.IsZero() {
			t.Errorf("the pod of a server that renews its Lease was deleted %s after the fault", figSec(p.Deleted.Sub(fault)))
		}
		if a, ok := history.firstAfter(first.started); ok {
			t.Errorf("a second server (started %s, on %s) acknowledged a commit while the primary renewed its Lease", a.started.Format(time.StampMicro), a.node)
		}
	default:
		fault, unknown = faultUntilEvicted(ctx, t, cp, w, victim, old.UID, how.fault)
		next = history.waitNewServer(ctx, t, first.started, "the successor's first commit")
		if _, err := w.watch.WaitFor(ctx, "the old primary force-deleted", func([]harness.PodHistory) bool {
			return !w.pod(old.UID).Deleted.IsZero()
		}); err != nil {
			t.Fatal(err)
		}
	}
	old = w.pod(old.UID)
	since := func(at time.Time) string { return figSec(at.Sub(fault)) }
	last, ok := leases.lastOf(old.Name)
	if !ok {
		t.Fatalf("no record of the Lease held by %s was read", old.Name)
	}
	if how.mutation == pgNoSidecar {
		last = leaseRecord{} // the earlier incarnation's, not this server's
	}
	undone := time.Now()
	var gone string
	if !how.sidecarKilled {
		if err := how.fault.undo(victim); err != nil {
			t.Fatal(err)
		}
		if how.holds {
			// The restarted kubelet ends the evicted pod, and only then
			// does another server start.
			next = history.waitNewServer(ctx, t, first.started, "the successor's first commit after the kubelet's restart")
		}
		gone = fmt.Sprintf("the old server gone %s after %s", figSec(waitGone(ctx, t, victim, old.UID, 2*time.Minute).Sub(undone)), how.fault.heal)
	}
	time.Sleep(3 * time.Second) // the successor, and the old server if it could, commit a while
	stopClient()
	clients.Wait()
	oldLast := history.lastOf(first.started)

	if how.holds {
		old = w.pod(old.UID)
	}
	var found pgFindings
	found.add("commits of an earlier server after a later one's, in the client's history", history.overlaps())
	if !last.renew.IsZero() {
		if deadline := last.renew.Add(pgLeaseDuration + pgDeadline); oldLast.at.After(deadline) {
			found.add("commit of the old server past its deadline", []string{fmt.Sprintf("the old server acknowledged commit %d at %s, after its Lease's expiry plus the deadline (%s)", oldLast.n, oldLast.at.Format(time.StampMilli), deadline.Format(time.StampMilli))})
		}
	}
	final := spare
	if next.node == victim.Name() {
		final = victim
	}
	rows := checkPostgresData(ctx, t, imgs, final, history, &found)
	// The server stopped (the StatefulSet scaled to none), its files are
	// checked page by page.
	stopPostgres(ctx, t, cp, ns)
	found.add("pg_checksums failure", checksums(ctx, imgs, filepath.Join(dataDir, "pg")))
	findings := found.all

	whose := "the primary's node " + how.fault.name
	if how.sidecarKilled {
		whose = "the primary's sidecar SIGKILLed (as an OOM kill; it restarts)"
	}
	setting := "the protocol kept"
	switch how.mutation {
	case pgNoStop:
		setting = "the mutation: a sidecar that cannot signal PostgreSQL (another user) and no liveness probe"
	case pgNoSidecar:
		setting = "the mutation: one PostgreSQL pod annotated for the protocol with no sidecar, the Lease left by an earlier incarnation"
	}
	if how.mutation != pgKept {
		if len(findings) == 0 {
			t.Errorf("%s, %s: the history and the data directory show nothing wrong", setting, whose)
		}
		t.Logf("%s, %s: found %q", setting, whose, findings)
		return fmt.Sprintf("| %s; %s, recovered by %s | the successor's first commit %s after the fault; found: %s | %s |",
			setting, whose, recoverer, since(next.at), found.summary(), gone)
	}
	if how.window {
		t.Logf("the freeze window: %d findings %q", len(findings), findings)
		shown := "nothing: no commit of the thawed server, every acknowledged commit in the table, `pg_amcheck` and `pg_checksums` clean"
		if len(findings) > 0 {
			shown = found.summary()
		}
		return fmt.Sprintf("| the freeze window: %s past the wait, recovered by %s, thawed after the successor had written | the old server's last commit %s; the successor's first %s after the fault; what the history and the data directory show after the thaw: %s | %s |",
			whose, recoverer, relative(oldLast.at, fault), since(next.at), shown, gone)
	}
	for _, f := range findings {
		t.Error(f)
	}
	if !how.sidecarKilled && !how.holds {
		requireOneForceDelete(t, cp, ns, old, recoverer, agents)
		if w.loop != nil {
			requireFencedByTheTakeover(t, w.loop, old.UID)
		}
	}
	if w.loop != nil {
		for _, err := range w.loop.errors() {
			t.Errorf("check failed: %v", err)
		}
	}
	deadline := last.renew.Add(pgLeaseDuration + pgDeadline)
	p8, goal := next.at.Sub(fault), pgLeaseDuration+pgDeadline+next.sinceServerStart()+5*time.Second
	freed := "node Unknown " + since(unknown) + ", the old pod freed " + since(old.Deleted) + " by " + recoverer
	p8Text := fmt.Sprintf("**P8: the successor's first acknowledged commit %s after the fault** (goal: duration + deadline + PostgreSQL's start + 5 s = %s)", figSec(p8), figSec(goal))
	switch {
	case how.sidecarKilled:
		freed = "no pod deleted: the standby's sidecar took the Lease once unrenewed, and the kubelet restarted db-0's"
		gone = "no heal needed"
	case how.holds:
		freed = "node Unknown " + since(unknown) + "; " + recoverer + " held the evicted pod while its server renewed, and no other server started; the restarted kubelet ended it " + since(old.Deleted)
		p8Text = fmt.Sprintf("the successor's first acknowledged commit %s after the fault, %s after the restarted kubelet ended the old pod (P8's goal does not apply: the old server rightly ran on)", figSec(p8), figSec(next.at.Sub(old.Deleted)))
	}
	t.Logf("PostgreSQL, %s: last renewal %s, the old server's last commit %s (deadline %s), the successor's first commit %s on %s (goal %s, its server started %s after the fault); %s; %d commits acknowledged, %d rows",
		whose, relative(last.renew, fault), relative(oldLast.at, fault), relative(deadline, fault), figSec(p8), next.node, figSec(goal), since(next.started), freed, len(history.acks), rows)
	return fmt.Sprintf("| %s | the old server's last acknowledged commit %s, its deadline %s; %s; %s; %d commits acknowledged, every one in the table, one server at a time; `pg_amcheck` and `pg_checksums` clean | %s |",
		whose, relative(oldLast.at, fault), relative(deadline, fault), p8Text, freed, len(history.acks), gone)
}

// sidecarAnnotations are the annotations that podhealth-selffence prints
// for the scenario's settings (--print-annotations), as an admin copies
// them onto the pod template.
func sidecarAnnotations(ctx context.Context, t *testing.T, imgs harness.PostgresImages) map[string]string {
	t.Helper()
	out, err := exec.CommandContext(ctx, imgs.SelfFence, "--lease", pgLease, "--duration", pgLeaseDuration.String(),
		"--deadline", pgDeadline.String(), "--stop-takes", pgStopTakes.String(), "--print-annotations").Output()
	if err != nil {
		t.Fatalf("podhealth-selffence --print-annotations: %v", err)
	}
	annotations := map[string]string{}
	s := bufio.NewScanner(strings.NewReader(string(out)))
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ": ")
		if !ok {
			t.Fatalf("podhealth-selffence --print-annotations printed %q", s.Text())
		}
		annotations[k] = strings.Trim(v, `"`)
	}
	if len(annotations) == 0 {
		t.Fatal("podhealth-selffence --print-annotations printed nothing")
	}
	return annotations
}

// postgresPodSpec is the database's pod: PostgreSQL and the sidecar in
// one process namespace, as PostgreSQL's user, on the node's network
// (both listen on its 127.0.0.1), the data directory a host directory.
func postgresPodSpec(imgs harness.PostgresImages, configDir, dataDir string, mutation pgMutation) corev1.PodSpec {
	uidEnv := corev1.EnvVar{Name: "UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}
	// The kubelet is the second stop (docs/safety.md): it probes the
	// sidecar's /live on the node's loopback, which a hostNetwork pod's
	// kubelet shares, with no startup probe before it.
	live := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/live", Port: intstr.FromInt32(8089)}}
	spec := corev1.PodSpec{
		HostNetwork:                   true,
		ShareProcessNamespace:         ptr.To(true),
		TerminationGracePeriodSeconds: ptr.To(int64(pgGrace)),
		SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr.To(imgs.UID), RunAsGroup: ptr.To(imgs.GID), RunAsNonRoot: ptr.To(true)},
		Containers: []corev1.Container{{
			Name: "fence", Image: harness.SelfFenceImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"--lease", pgLease, "--duration", pgLeaseDuration.String(), "--deadline", pgDeadline.String(),
				"--stop-takes", pgStopTakes.String(), "--kubeconfig", "/config/kubeconfig"},
			Env: []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
				uidEnv,
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config", ReadOnly: true}},
		}, {
			Name: "postgres", Image: harness.PostgresImage, ImagePullPolicy: corev1.PullNever,
			Env:          []corev1.EnvVar{{Name: "PGDATA", Value: "/var/lib/postgresql/data/pg"}, uidEnv},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql/data"}},
			LivenessProbe: &corev1.Probe{ProbeHandler: live, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1,
				TerminationGracePeriodSeconds: ptr.To(int64(1))},
		}},
		Volumes: []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: configDir, Type: ptr.To(corev1.HostPathDirectory)}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dataDir, Type: ptr.To(corev1.HostPathDirectory)}}},
		},
		Tolerations: []corev1.Toleration{
			{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(2))},
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(2))},
		},
	}
	postgres := &spec.Containers[1]
	switch mutation {
	case pgNoStop:
		spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To(int64(65534)), RunAsGroup: ptr.To(int64(65534))}
		postgres.LivenessProbe = nil
	case pgNoSidecar:
		postgres.LivenessProbe = nil
		postgres.Env = append(postgres.Env, corev1.EnvVar{Name: "ASK_SIDECAR", Value: "false"})
		spec.Containers = spec.Containers[1:]
		spec.Volumes = spec.Volumes[1:]
	}
	return spec
}

// pgAck is a commit that a server acknowledged: its number, the node of
// the server, the server's start time (pg_postmaster_start_time(), which
// tells one server from the next), and when the client saw the answer.
type pgAck struct {
	n       int64
	node    string
	started time.Time
	at      time.Time
}

// sinceServerStart is how long after its server started the commit was
// acknowledged: for a new server's first commit, PostgreSQL's start
// (crash recovery, then readiness), which P8's goal allows for.
func (a pgAck) sinceServerStart() time.Duration { return a.at.Sub(a.started) }

// pgHistory is what the client saw: every acknowledged commit. Safe for
// concurrent use.
type pgHistory struct {
	next atomic.Int64
	mu   sync.Mutex
	acks []pgAck
}

// commitWithoutPause commits, until ctx ends, one row after another to
// the server on node's 127.0.0.1:5432, reconnecting whenever the server
// is away; each row is a number of its own and the server's start time.
func (h *pgHistory) commitWithoutPause(ctx context.Context, node *harness.RealNode) {
	connector, err := pq.NewConnector("host=127.0.0.1 port=5432 user=postgres dbname=postgres sslmode=disable connect_timeout=2")
	if err != nil {
		panic(err) // a constant DSN
	}
	connector.Dialer(nodeDialer{node})
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(1)
	for ctx.Err() == nil {
		n := h.next.Add(1)
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		var started time.Time
		err := db.QueryRowContext(qctx, "INSERT INTO history (n, server_started) VALUES ($1, pg_postmaster_start_time()) RETURNING server_started", n).Scan(&started)
		cancel()
		if err == nil {
			h.mu.Lock()
			h.acks = append(h.acks, pgAck{n: n, node: node.Name(), started: started, at: time.Now()})
			h.mu.Unlock()
			continue
		}
		var pqErr *pq.Error
		if errors.As(err, &pqErr) && pqErr.Code == "42P01" { // undefined_table: a fresh cluster
			_, _ = db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS history (n bigint PRIMARY KEY, server_started timestamptz NOT NULL, committed timestamptz NOT NULL DEFAULT clock_timestamp())")
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// nodeDialer dials the node's own network. Every read and write has a
// deadline: a server frozen mid-answer fails the commit, not the client.
type nodeDialer struct{ node *harness.RealNode }

func (d nodeDialer) Dial(network, address string) (net.Conn, error) {
	return d.DialTimeout(network, address, 2*time.Second)
}

func (d nodeDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, network, address)
}

func (d nodeDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := d.node.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return deadlineConn{c}, nil
}

// deadlineConn gives each read and write 3 s.
type deadlineConn struct{ net.Conn }

func (c deadlineConn) Read(b []byte) (int, error) {
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	return c.Conn.Read(b)
}

func (c deadlineConn) Write(b []byte) (int, error) {
	_ = c.SetWriteDeadline(time.Now().Add(3 * time.Second))
	return c.Conn.Write(b)
}

// snapshot is the acknowledged commits so far, in the order they were
// acknowledged.
func (h *pgHistory) snapshot() []pgAck {
	h.mu.Lock()
	defer h.mu.Unlock()
	acks := append([]pgAck(nil), h.acks...)
	sort.SliceStable(acks, func(i, j int) bool { return acks[i].at.Before(acks[j].at) })
	return acks
}

// waitAcks waits for n acknowledged commits, and returns the first.
func (h *pgHistory) waitAcks(ctx context.Context, t *testing.T, n int, what string) pgAck {
	t.Helper()
	if err := pollUntil(ctx, func() bool { return len(h.snapshot()) >= n }); err != nil {
		t.Fatalf("%s: %v (%d commits acknowledged)", what, err, len(h.snapshot()))
	}
	return h.snapshot()[0]
}

// waitNewServer waits for a commit acknowledged by a server started
// after after, and returns the first.
func (h *pgHistory) waitNewServer(ctx context.Context, t *testing.T, after time.Time, what string) pgAck {
	t.Helper()
	var found pgAck
	if err := pollUntil(ctx, func() bool {
		var ok bool
		found, ok = h.firstAfter(after)
		return ok
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return found
}

// firstAfter is the first commit acknowledged by a server started after
// after.
func (h *pgHistory) firstAfter(after time.Time) (pgAck, bool) {
	for _, a := range h.snapshot() {
		if a.started.After(after) {
			return a, true
		}
	}
	return pgAck{}, false
}

// lastOf is the last commit that the server started at started
// acknowledged.
func (h *pgHistory) lastOf(started time.Time) pgAck {
	var last pgAck
	for _, a := range h.snapshot() {
		if a.started.Equal(started) {
			last = a
		}
	}
	return last
}

// overlaps is the single-server check on the client's history alone: in
// the order the commits were acknowledged, the server start times never
// go back to an earlier server once a later one has acknowledged.
func (h *pgHistory) overlaps() []string {
	return serversGoBack(h.snapshot())
}

// serversGoBack reports each commit, in order, acknowledged by a server
// that started before one that had already acknowledged a commit.
func serversGoBack(acks []pgAck) []string {
	var out []string
	var latest pgAck
	for _, a := range acks {
		switch {
		case latest.started.IsZero() || a.started.After(latest.started):
			latest = a
		case a.started.Before(latest.started):
			out = append(out, fmt.Sprintf("commit %d acknowledged at %s by the server started %s (on %s), after commit %d at %s by the server started %s (on %s): two servers accepting writes",
				a.n, a.at.Format(time.StampMilli), a.started.Format(time.StampMicro), a.node, latest.n, latest.at.Format(time.StampMilli), latest.started.Format(time.StampMicro), latest.node))
		}
	}
	return out
}

// checkPostgresData checks the table on node's server: every commit the
// client saw acknowledged is there, its rows in commit order never go
// back to an earlier server, and pg_amcheck finds nothing wrong. It
// returns the number of rows, and adds what it found wrong to found.
func checkPostgresData(ctx context.Context, t *testing.T, imgs harness.PostgresImages, node *harness.RealNode, h *pgHistory, found *pgFindings) int {
	t.Helper()
	connector, err := pq.NewConnector("host=127.0.0.1 port=5432 user=postgres dbname=postgres sslmode=disable connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	connector.Dialer(nodeDialer{node})
	db := sql.OpenDB(connector)
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT n, server_started, committed FROM history ORDER BY committed, n")
	if err != nil {
		t.Fatalf("reading the table on %s: %v", node.Name(), err)
	}
	defer rows.Close()
	have := map[int64]bool{}
	var inOrder []pgAck
	for rows.Next() {
		var a pgAck
		if err := rows.Scan(&a.n, &a.started, &a.at); err != nil {
			t.Fatal(err)
		}
		a.node = "the table"
		have[a.n] = true
		inOrder = append(inOrder, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var missing []int64
	for _, a := range h.snapshot() {
		if !have[a.n] {
			missing = append(missing, a.n)
		}
	}
	if len(missing) > 0 {
		found.add("report of acknowledged commits missing from the table", []string{fmt.Sprintf("%d acknowledged commits are not in the table: %v", len(missing), missing[:min(len(missing), 20)])})
	}
	var goBack []string
	for _, f := range serversGoBack(inOrder) {
		goBack = append(goBack, "the table, in commit order, shows "+f)
	}
	found.add("rows of an earlier server after a later one's, in the table's commit order", goBack)
	if _, err := db.ExecContext(ctx, "CREATE EXTENSION IF NOT EXISTS amcheck"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(imgs.Bin, "pg_amcheck")
	if out, err := node.NetCommand(ctx, bin, "--host=127.0.0.1", "--username=postgres", "--database=postgres", "--heapallindexed").CombinedOutput(); err != nil {
		found.add("pg_amcheck failure", []string{fmt.Sprintf("pg_amcheck on %s: %v: %s", node.Name(), err, strings.TrimSpace(string(out)))})
	}
	return len(inOrder)
}

// pgFindings are what the checks of one scenario found wrong, by check.
type pgFindings struct {
	all    []string
	counts []string
}

func (f *pgFindings) add(check string, findings []string) {
	if len(findings) == 0 {
		return
	}
	f.all = append(f.all, findings...)
	f.counts = append(f.counts, fmt.Sprintf("%d %s", len(findings), check))
}

// summary says how many each check found, and the first finding.
func (f *pgFindings) summary() string {
	if len(f.all) == 0 {
		return "nothing"
	}
	return strings.Join(f.counts, ", ") + "; the first: " + f.all[0]
}

// stopPostgres scales the StatefulSet to none and waits until its pods
// are gone: their servers have stopped.
func stopPostgres(ctx context.Context, t *testing.T, cp *harness.ControlPlane, ns string) {
	t.Helper()
	c := cp.Client()
	patch := []byte(`{"spec":{"replicas":0}}`)
	if _, err := c.AppsV1().StatefulSets(ns).Patch(ctx, "db", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pollUntil(ctx, func() bool {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0
	}); err != nil {
		t.Fatalf("the database's pods never went: %v", err)
	}
}

// checksums runs pg_checksums --check on a stopped cluster's directory:
// every page's checksum (the cluster was made with them).
func checksums(ctx context.Context, imgs harness.PostgresImages, dir string) []string {
	out, err := exec.CommandContext(ctx, filepath.Join(imgs.Bin, "pg_checksums"), "--check", "-D", dir).CombinedOutput()
	if err != nil {
		return []string{fmt.Sprintf("pg_checksums --check: %v: %s", err, strings.TrimSpace(string(out)))}
	}
	return nil
}

// realDatabaseSection is TestPostgresRealNodes's section of FIGURES.md.
const realDatabaseSection = "real database"

// realDatabaseAllEnv, set to 1, runs every scenario of
// TestPostgresRealNodes; CI runs realDatabaseCI.
const realDatabaseAllEnv = "PODHEALTH_REAL_DATABASE_ALL"

// realDatabaseScenarios are TestPostgresRealNodes's scenarios, by the
// name their nodes and FIGURES.md's rows carry.
var realDatabaseScenarios = []struct {
	name, title string
	how         pgScenario
}{
	{"1partition", "the primary's node partitioned: its server stops by the deadline, the standby's starts after the wait, the Checker frees the old pod on the takeover",
		pgScenario{fault: realPartition, checker: realChecker{on: true, fenceLease: true}}},
	{"2sidecarkill", "the primary's sidecar SIGKILLed as an OOM kill: PostgreSQL is stopped before any server starts again",
		pgScenario{sidecarKilled: true, checker: realChecker{on: true, fenceLease: true}}},
	{"3crash", "the primary's kubelet crashed: its server renews on, podhealth holds the evicted pod, the standby starts once the restarted kubelet ends it",
		pgScenario{fault: realCrash, holds: true, checker: realChecker{on: true, fenceLease: true}}},
	{"4poweroff", "the primary's node powered off: the standby's server starts after the wait, podhealth-controller frees the old pod",
		pgScenario{fault: realPowerOff}},
	{"5freeze", "the freeze window: the primary's node frozen whole past the wait and thawed after the successor wrote",
		pgScenario{fault: realFreezeAll, window: true}},
	{"6nostop", "the mutation without a stop: a sidecar that cannot signal PostgreSQL and no liveness probe, caught by the history",
		pgScenario{fault: realPartition, mutation: pgNoStop, checker: realChecker{on: true, fenceLease: true}}},
	{"7nosidecar", "the mutation without a sidecar: a pod annotated for the protocol and nothing to keep it, caught by the history",
		pgScenario{fault: realPartition, mutation: pgNoSidecar, checker: realChecker{on: true, fenceLease: true}}},
}

// realDatabaseCI are the scenarios CI runs on every run.
var realDatabaseCI = []string{"1partition", "2sidecarkill"}

// TestPostgresRealNodes runs PostgreSQL 15, a database written elsewhere
// that cannot ask before each write, behind podhealth-selffence on real
// nodes of a control plane of its own (runRealPostgres), one pair of nodes
// per scenario: the faults of realDatabaseScenarios and the mutations,
// which the history must catch. CI runs realDatabaseCI;
// PODHEALTH_REAL_DATABASE_ALL=1 runs them all, and with
// PODHEALTH_WRITE_FIGURES=1 writes their rows to FIGURES.md.
func TestPostgresRealNodes(t *testing.T) {
	t.Parallel()
	rb := realNodeBinaries(t)
	imgs := postgresImages(t)
	all := os.Getenv(realDatabaseAllEnv) == "1"
	var scenarios []int
	controller := false
	for i, sc := range realDatabaseScenarios {
		if all || slices.Contains(realDatabaseCI, sc.name) {
			scenarios = append(scenarios, i)
			controller = controller || !sc.how.checker.on || sc.how.checker.alsoController
		}
	}
	setup, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	// Volumes: the StatefulSet controller too.
	cp := harness.Start(t, bins, harness.Options{AuditPodDeletes: true, Volumes: true, ExtraControllerManagerArgs: []string{
		"--node-monitor-grace-period=" + harness.RealNodeMonitorGracePeriod.String(),
		"--node-eviction-rate=100", // the scenarios' nodes fail at once
	}})
	nodes := make([]*harness.RealNode, 2*len(realDatabaseScenarios))
	var start sync.WaitGroup
	errs := make([]error, len(nodes))
	for _, i := range scenarios {
		name := realDatabaseScenarios[i].name
		for j, role := range []string{"victim", "spare"} {
			k := 2*i + j
			start.Go(func() {
				// A zone per scenario: the node-lifecycle controller
				// counts disruption per zone.
				nodes[k], errs[k] = cp.StartRealNode(setup, t, rb, "real-pg"+name[1:]+"-"+role, harness.RealNodeOptions{Index: k,
					Labels: map[string]string{corev1.LabelTopologyZone: "pg-" + name}})
			})
		}
	}
	start.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if _, err := harness.WaitForNode(setup, cp.Client(), n.Name(), harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatalf("%v; %s", err, n.Diagnosis())
		}
	}
	if controller {
		applyObjects(setup, t, cp, append(controllerManifests(t), kustomizationObjects(t, controllerConfigDir+"/fence-lease")...), false)
		startControllerReplica(t, cp, "podhealth-controller", controllerKubeconfig(setup, t, cp), "--fence-lease")
	}
	var mu sync.Mutex
	rows := map[string]string{}
	t.Cleanup(func() {
		if os.Getenv(figWriteEnv) != "1" || t.Failed() || !all {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		var b strings.Builder
		fmt.Fprintf(&b, "## A real database\n\nMeasured by `TestPostgresRealNodes` (`cd e2e && %s=1 PODHEALTH_WRITE_FIGURES=1 go test -count=1 -run TestPostgresRealNodes -v .`) on %s: %d CPUs, %s/%s, %s. "+
			"PostgreSQL 15 from the machine's own Debian packages, packed into a node image, behind `podhealth-selffence` (a %v Lease, deadline %v, `--stop-takes` %v; a liveness probe of `/live`, no startup probe) on real nodes (real kubelets, containerd and runc): a StatefulSet of two pods whose data directory is one host directory both nodes mount. "+
			"A client outside the nodes commits without pause to every server that accepts and records each acknowledged commit. Node monitor grace period %v, toleration 2 s; each scenario on a pair of nodes of its own, all at once.\n\n",
			realDatabaseAllEnv, time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), pgLeaseDuration, pgDeadline, pgStopTakes, harness.RealNodeMonitorGracePeriod)
		b.WriteString("| scenario | what happened | on heal |\n|---|---|---|\n")
		for _, k := range slices.Sorted(maps.Keys(rows)) {
			b.WriteString(rows[k] + "\n")
		}
		if err := figWriteSection(figFiguresFile, realDatabaseSection, b.String()); err != nil {
			t.Error(err)
		}
	})
	for _, i := range scenarios {
		sc := realDatabaseScenarios[i]
		t.Run(sc.title, func(t *testing.T) {
			t.Parallel()
			ctx, stop := context.WithTimeout(context.Background(), 6*time.Minute)
			t.Cleanup(stop)
			row := runRealPostgres(ctx, t, cp, imgs, nodes[2*i], nodes[2*i+1], sc.how)
			mu.Lock()
			defer mu.Unlock()
			rows[sc.name] = row
		})
	}
}

// serversGoBack finds a planted second server from the history alone, and
// nothing in a clean hand-over or a history of one server.
func TestServersGoBackFindsTwoServersAcceptingAtOnce(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	a, b := at(0), at(10) // two servers' start times
	tests := []struct {
		name string
		acks []pgAck
		want int
	}{
		{"one server", []pgAck{{1, "n1", a, at(1)}, {2, "n1", a, at(2)}}, 0},
		{"a clean hand-over", []pgAck{{1, "n1", a, at(1)}, {2, "n2", b, at(11)}, {3, "n2", b, at(12)}}, 0},
		{"the old server accepting after the new one", []pgAck{{1, "n1", a, at(1)}, {2, "n2", b, at(11)}, {3, "n1", a, at(12)}}, 1},
		{"two servers interleaving", []pgAck{{1, "n1", a, at(1)}, {2, "n2", b, at(11)}, {3, "n1", a, at(12)}, {4, "n2", b, at(13)}, {5, "n1", a, at(14)}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := serversGoBack(tt.acks); len(got) != tt.want {
				t.Errorf("found %d: %q; want %d", len(got), got, tt.want)
			}
		})
	}
}
