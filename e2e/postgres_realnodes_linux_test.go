package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lib/pq"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// pgScenario is one scenario of the real database: a fault of the
// primary's node, who frees the old pod, and the mutation, if any.
type pgScenario struct {
	fault   realFault
	checker realChecker
}

// runRealPostgres runs PostgreSQL behind podhealth-selffence on victim
// and spare: a StatefulSet of two pods whose data directory is one host
// directory that both nodes mount (shared storage, where two servers
// can write the same files), each pod a PostgreSQL container and the
// sidecar in one process namespace, stating the protocol with the
// annotations the sidecar prints. db-0, on victim, holds the Lease and
// runs the server; db-1's server waits for its sidecar's yes. A client
// outside the nodes commits without pause to every server that accepts,
// and records each acknowledged commit. After the fault on victim, from
// the history alone: every acknowledged commit is in the table, and no
// server accepted a commit once a later one had (the rows' server start
// times, in commit order, never go back); the data directory is sound
// (pg_amcheck on the last server, pg_checksums once it stopped). It
// returns its row of FIGURES.md.
func runRealPostgres(ctx context.Context, t *testing.T, cp *harness.ControlPlane, imgs harness.PostgresImages, victim, spare *harness.RealNode, how pgScenario) string {
	c := cp.Client()
	for _, n := range []*harness.RealNode{victim, spare} {
		if err := n.ImportImages(ctx, imgs.Archive); err != nil {
			t.Fatal(err)
		}
	}
	podLabels := map[string]string{"app": "pg"}
	ns := "real-" + strings.TrimSuffix(strings.TrimPrefix(victim.Name(), "real-"), "-victim")
	w := startRealWorkload(ctx, t, cp, ns, labels.SelectorFromSet(podLabels), how.checker)
	// db-0 first, on victim; db-1, once db-0 is Ready (its sidecar holds
	// the Lease), on spare; a pod made again, on a Ready node.
	bindCtx, stopBinding := context.WithCancel(ctx)
	var binding sync.WaitGroup
	binding.Go(func() { bindToLeastLoaded(bindCtx, cp, ns, []string{victim.Name(), spare.Name()}) })
	defer func() { stopBinding(); binding.Wait() }()
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

	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
				Spec:       postgresPodSpec(imgs, configDir, dataDir),
			},
		},
	}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := waitRunning(ctx, t, c, ns, "db-0", victim.Name())
	standby := waitRunning(ctx, t, c, ns, "db-1", spare.Name())

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
	fault, unknown := faultUntilEvicted(ctx, t, cp, w, victim, old.UID, how.fault)
	since := func(at time.Time) string { return figSec(at.Sub(fault)) }
	next := history.waitServer(ctx, t, spare.Name(), first.started, "the successor's first commit")
	if _, err := w.watch.WaitFor(ctx, "the old primary force-deleted", func([]harness.PodHistory) bool {
		return !w.pod(old.UID).Deleted.IsZero()
	}); err != nil {
		t.Fatal(err)
	}
	old = w.pod(old.UID)
	last, ok := leases.lastOf(old.Name)
	if !ok {
		t.Fatalf("no record of the Lease held by %s was read", old.Name)
	}
	expiry := last.renew.Add(pgLeaseDuration)
	oldLast := history.lastOf(first.started)
	undone := time.Now()
	if err := how.fault.undo(victim); err != nil {
		t.Fatal(err)
	}
	killed := waitGone(ctx, t, victim, old.UID, 2*time.Minute)
	time.Sleep(3 * time.Second) // the successor, and the old server if it could, commit a while
	requireOneForceDelete(t, cp, ns, old, recoverer, agents)
	if w.loop != nil {
		for _, err := range w.loop.errors() {
			t.Errorf("check failed: %v", err)
		}
		requireFencedByTheTakeover(t, w.loop, old.UID)
	}
	stopClient()
	clients.Wait()
	for _, f := range history.overlaps() {
		t.Errorf("the client's history shows %s", f)
	}
	if oldLast.at.After(expiry.Add(pgDeadline)) {
		t.Errorf("the old server acknowledged commit %d at %s, after its Lease's expiry (%s) plus the deadline", oldLast.n, oldLast.at.Format(time.StampMilli), expiry.Format(time.StampMilli))
	}
	rows := checkPostgresData(ctx, t, spare, history)
	// The server stopped (the StatefulSet scaled to none), its files are
	// checked page by page.
	stopPostgres(ctx, t, cp, ns)
	checksums(ctx, t, imgs, filepath.Join(dataDir, "pg"))

	p8, goal := next.at.Sub(fault), pgLeaseDuration+pgDeadline+next.sinceServerStart()+5*time.Second
	if next.node != standby.NodeName {
		t.Errorf("the successor's server ran on %s, not on the standby db-1's node %s", next.node, standby.NodeName)
	}
	t.Logf("PostgreSQL, node %s: last renewal %s, the old server's last commit %s (deadline %s), the successor's first commit %s (P8; goal %s, its server started %s after the fault); node Unknown %s, freed %s by %s; %d commits acknowledged, %d rows",
		how.fault.name, relative(last.renew, fault), relative(oldLast.at, fault), relative(expiry.Add(pgDeadline), fault), figSec(p8), figSec(goal), since(next.started), since(unknown), since(old.Deleted), recoverer, len(history.acks), rows)
	return fmt.Sprintf("| PostgreSQL 15 behind `podhealth-selffence` (%v Lease, deadline %v, `--stop-takes` %v; a liveness probe of `/may-write`), its data directory one host directory that both nodes mount; the primary's node %s, recovered by %s | the old server's last acknowledged commit %s, its deadline %s; **P8: the successor's first acknowledged commit %s after the fault** (goal: duration + deadline + PostgreSQL's start + 5 s = %s); the old pod freed %s; %d commits acknowledged, every one in the table, one server at a time; `pg_amcheck` and `pg_checksums` clean | the old server gone %s after %s |",
		pgLeaseDuration, pgDeadline, pgStopTakes, how.fault.name, recoverer, relative(oldLast.at, fault), relative(expiry.Add(pgDeadline), fault), figSec(p8), figSec(goal), since(old.Deleted), len(history.acks), figSec(killed.Sub(undone)), how.fault.heal)
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
func postgresPodSpec(imgs harness.PostgresImages, configDir, dataDir string) corev1.PodSpec {
	uidEnv := corev1.EnvVar{Name: "UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}
	// The kubelet is the second stop (docs/safety.md): it probes the
	// sidecar's endpoint on the node's loopback, which a hostNetwork
	// pod's kubelet shares.
	mayWrite := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/may-write", Port: intstr.FromInt32(8089)}}
	return corev1.PodSpec{
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
				uidEnv,
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config", ReadOnly: true}},
		}, {
			Name: "postgres", Image: harness.PostgresImage, ImagePullPolicy: corev1.PullNever,
			Env:          []corev1.EnvVar{{Name: "PGDATA", Value: "/var/lib/postgresql/data/pg"}, uidEnv},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql/data"}},
			StartupProbe: &corev1.Probe{ProbeHandler: mayWrite, PeriodSeconds: 1, FailureThreshold: 86400},
			LivenessProbe: &corev1.Probe{ProbeHandler: mayWrite, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1,
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

// waitServer waits for a commit acknowledged on node by a server started
// after after, and returns the first.
func (h *pgHistory) waitServer(ctx context.Context, t *testing.T, node string, after time.Time, what string) pgAck {
	t.Helper()
	var found pgAck
	if err := pollUntil(ctx, func() bool {
		for _, a := range h.snapshot() {
			if a.node == node && a.started.After(after) {
				found = a
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return found
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
// returns the number of rows.
func checkPostgresData(ctx context.Context, t *testing.T, node *harness.RealNode, h *pgHistory) int {
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
		t.Errorf("%d acknowledged commits are not in the table: %v", len(missing), missing[:min(len(missing), 20)])
	}
	for _, f := range serversGoBack(inOrder) {
		t.Errorf("the table, in commit order, shows %s", f)
	}
	if _, err := db.ExecContext(ctx, "CREATE EXTENSION IF NOT EXISTS amcheck"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(postgresBuild.imgs.Bin, "pg_amcheck")
	if out, err := node.NetCommand(ctx, bin, "--host=127.0.0.1", "--username=postgres", "--database=postgres", "--heapallindexed").CombinedOutput(); err != nil {
		t.Errorf("pg_amcheck on %s: %v\n%s", node.Name(), err, out)
	}
	return len(inOrder)
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
func checksums(ctx context.Context, t *testing.T, imgs harness.PostgresImages, dir string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, filepath.Join(imgs.Bin, "pg_checksums"), "--check", "-D", dir).CombinedOutput()
	if err != nil {
		t.Errorf("pg_checksums --check: %v\n%s", err, out)
	}
}

// realDatabaseSection is TestPostgresRealNodes's section of FIGURES.md.
const realDatabaseSection = "real database"

// TestPostgresRealNodes runs PostgreSQL 15, a database written elsewhere
// that cannot ask before each write, behind podhealth-selffence on real
// nodes of a control plane of its own (runRealPostgres): the primary's
// node partitioned from the API server (its clients still reach it, the
// case of a node that never stopped), and the library's Checker frees
// the old pod on the takeover.
func TestPostgresRealNodes(t *testing.T) {
	t.Parallel()
	rb := realNodeBinaries(t)
	imgs := postgresImages(t)
	setup, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	// Volumes: the StatefulSet controller too.
	cp := harness.Start(t, bins, harness.Options{AuditPodDeletes: true, Volumes: true, ExtraControllerManagerArgs: []string{
		"--node-monitor-grace-period=" + harness.RealNodeMonitorGracePeriod.String(),
	}})
	names := []string{"real-pgpartition-victim", "real-pgpartition-spare"}
	nodes := make([]*harness.RealNode, len(names))
	for i, name := range names {
		n, err := cp.StartRealNode(setup, t, rb, name, harness.RealNodeOptions{Index: i, Labels: map[string]string{corev1.LabelTopologyZone: "pg"}})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	for i, name := range names {
		if _, err := harness.WaitForNode(setup, cp.Client(), name, harness.NodeReadyIs(corev1.ConditionTrue)); err != nil {
			t.Fatalf("%v; %s", err, nodes[i].Diagnosis())
		}
	}
	var rows []string
	t.Cleanup(func() {
		if os.Getenv(figWriteEnv) != "1" || t.Failed() {
			return
		}
		body := "## A real database\n\nMeasured by `TestPostgresRealNodes` (`cd e2e && PODHEALTH_WRITE_FIGURES=1 go test -count=1 -run TestPostgresRealNodes -v .`) on " +
			time.Now().UTC().Format("2006-01-02") + ": PostgreSQL " + "15" + " from the machine's Debian packages in a node image, behind `podhealth-selffence`, on real nodes (real kubelets, containerd and runc); node monitor grace period " +
			harness.RealNodeMonitorGracePeriod.String() + ". A client outside the nodes commits without pause to every server that accepts.\n\n" +
			"| fault | what happened | on heal |\n|---|---|---|\n" + strings.Join(rows, "\n") + "\n"
		if err := figWriteSection(figFiguresFile, realDatabaseSection, body); err != nil {
			t.Error(err)
		}
	})
	ctx, stop := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(stop)
	rows = append(rows, runRealPostgres(ctx, t, cp, imgs, nodes[0], nodes[1], pgScenario{fault: realPartition, checker: realChecker{on: true, fenceLease: true}}))
}
