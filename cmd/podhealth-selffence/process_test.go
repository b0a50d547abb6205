//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// The test binary plays the parts of a pod: its pause process (PID 1 of
// a PID namespace of its own, which starts and kills the pod's
// containers' processes on a test's word and reaps them), the sidecar
// (this command's main), and a workload that cannot ask (it writes until
// it is killed).
const roleEnv = "PODHEALTH_SELFFENCE_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "pause":
		pause()
	case "sidecar":
		main()
	case "workload":
		workload()
	default:
		os.Exit(m.Run())
	}
}

// workload appends a line with the time to $WRITES every 10 ms, until it
// is killed: a process that writes whatever its sidecar says.
func workload() {
	f, err := os.OpenFile(os.Getenv("WRITES"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		os.Exit(3)
	}
	for {
		fmt.Fprintf(f, "%d\n", time.Now().UnixNano())
		time.Sleep(10 * time.Millisecond)
	}
}

// pause is PID 1 of a pod: it reads commands from standard input
// ("start NAME ROLE ARG...", "kill NAME"), starts each process with the
// environment it was given plus the role, reaps every child (orphans too,
// as a pause process does), and reports on standard output "started NAME
// PID", "exited NAME UNIXNANO STATUS". It ends when its input ends, which
// ends every process of its namespace.
func pause() {
	var mu sync.Mutex
	names := map[int]string{}
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	go func() {
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, 0, nil)
			if errors.Is(err, syscall.ECHILD) {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			if err != nil {
				continue
			}
			mu.Lock()
			name := names[pid]
			delete(names, pid)
			mu.Unlock()
			if name != "" {
				say("exited %s %d %s %d", name, time.Now().UnixNano(), status.Signal(), status.ExitStatus())
			}
		}
	}()
	in := bufio.NewScanner(os.Stdin)
	pids := map[string]int{}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		os.Exit(3)
	}
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) >= 3 && f[0] == "start":
			env := []string{roleEnv + "=" + f[2]} // first: the first of a name wins
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, roleEnv+"=") {
					env = append(env, kv)
				}
			}
			mu.Lock()
			pid, err := syscall.ForkExec("/proc/self/exe", append([]string{f[1]}, f[3:]...), &syscall.ProcAttr{Env: env, Files: []uintptr{devNull.Fd(), 2, 2}})
			if err == nil {
				names[pid] = f[1]
				pids[f[1]] = pid
			}
			mu.Unlock()
			if err != nil {
				say("failed %s %v", f[1], err)
				continue
			}
			say("started %s %d", f[1], pid)
		case len(f) == 2 && f[0] == "kill":
			_ = syscall.Kill(pids[f[1]], syscall.SIGKILL)
		}
	}
	os.Exit(0)
}

// pod is a pause process in a PID namespace of its own, as a pod that
// shares its process namespace has.
type pod struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	mu    sync.Mutex
	exits map[string][]exit
	env   []string
}

type exit struct {
	at     time.Time
	signal string
}

// newPod starts a pod whose processes get env.
func newPod(t *testing.T, env ...string) *pod {
	t.Helper()
	p := &pod{t: t, exits: map[string][]exit{}, env: env}
	p.cmd = exec.Command("/proc/self/exe")
	p.cmd.Env = append(append(os.Environ(), roleEnv+"=pause"), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	p.cmd.Stderr = os.Stderr
	var err error
	p.in, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	if err := p.cmd.Start(); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skip("a PID namespace needs CAP_SYS_ADMIN (CI runs as root)")
		}
		require.NoError(t, err)
	}
	t.Cleanup(func() { p.in.Close(); _ = p.cmd.Wait() })
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			t.Log(s.Text())
			f := strings.Fields(s.Text())
			if len(f) >= 4 && f[0] == "exited" {
				ns, _ := strconv.ParseInt(f[2], 10, 64)
				p.mu.Lock()
				p.exits[f[1]] = append(p.exits[f[1]], exit{at: time.Unix(0, ns), signal: f[3]})
				p.mu.Unlock()
			}
		}
	}()
	return p
}

func (p *pod) start(name, role string, args ...string) {
	p.t.Helper()
	_, err := fmt.Fprintf(p.in, "start %s %s %s\n", name, role, strings.Join(args, " "))
	require.NoError(p.t, err)
}

func (p *pod) kill(name string) {
	p.t.Helper()
	_, err := fmt.Fprintf(p.in, "kill %s\n", name)
	require.NoError(p.t, err)
}

// exited returns the exits of the process name.
func (p *pod) exited(name string) []exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]exit(nil), p.exits[name]...)
}

// leaseAPI serves one namespace's Leases as an API server does where the
// protocol leans on it: get, create (a Conflict-free AlreadyExists), and
// update conditional on the stored resourceVersion (a Conflict
// otherwise), on 127.0.0.1; and a get of the pods pg-1 and pg-2, whose
// UIDs are uid-of-pg-1 and uid-of-pg-2, for the Guards' reads of their
// own pods.
type leaseAPI struct {
	mu     sync.Mutex
	rv     int
	leases map[string]*coordinationv1.Lease
}

func (a *leaseAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const prefix = "/apis/coordination.k8s.io/v1/namespaces/db/leases"
	const pods = "/api/v1/namespaces/db/pods/"
	if name, ok := strings.CutPrefix(r.URL.Path, pods); ok && r.Method == http.MethodGet {
		if name != "pg-1" && name != "pg-2" {
			writeStatus(w, apierrors.NewNotFound(corev1.Resource("pods"), name))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, UID: types.UID("uid-of-" + name)}})
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	gr := coordinationv1.Resource("leases")
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/")
	var in coordinationv1.Lease
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		// JSON or protobuf, as the client sends it (client-go's newer
		// releases send built-in kinds as protobuf); answers are JSON,
		// which every client accepts.
		body, err := io.ReadAll(r.Body)
		if err == nil {
			_, _, err = scheme.Codecs.UniversalDeserializer().Decode(body, nil, &in)
		}
		if err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
	}
	cur := a.leases[name]
	switch {
	case !strings.HasPrefix(r.URL.Path, prefix):
		writeStatus(w, apierrors.NewNotFound(gr, r.URL.Path))
	case r.Method == http.MethodGet && cur == nil:
		writeStatus(w, apierrors.NewNotFound(gr, name))
	case r.Method == http.MethodGet:
		writeLease(w, http.StatusOK, cur)
	case r.Method == http.MethodPost && a.leases[in.Name] != nil:
		writeStatus(w, apierrors.NewAlreadyExists(gr, in.Name))
	case r.Method == http.MethodPost:
		a.store(&in)
		writeLease(w, http.StatusCreated, &in)
	case r.Method == http.MethodPut && cur == nil:
		writeStatus(w, apierrors.NewNotFound(gr, name))
	case r.Method == http.MethodPut && in.ResourceVersion != cur.ResourceVersion:
		writeStatus(w, apierrors.NewConflict(gr, name, errors.New("the object has been modified")))
	case r.Method == http.MethodPut:
		a.store(&in)
		writeLease(w, http.StatusOK, &in)
	default:
		writeStatus(w, apierrors.NewMethodNotSupported(gr, r.Method))
	}
}

func (a *leaseAPI) store(l *coordinationv1.Lease) {
	a.rv++
	l.ResourceVersion = strconv.Itoa(a.rv)
	l.Namespace = "db"
	a.leases[l.Name] = l.DeepCopy()
}

func (a *leaseAPI) holder() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l := a.leases["pg-primary"]; l != nil && l.Spec.HolderIdentity != nil {
		return *l.Spec.HolderIdentity
	}
	return ""
}

func writeLease(w http.ResponseWriter, code int, l *coordinationv1.Lease) {
	l = l.DeepCopy()
	l.APIVersion, l.Kind = "coordination.k8s.io/v1", "Lease"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(l)
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.ErrStatus
	st.APIVersion, st.Kind = "v1", "Status"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

// freeAddr returns a free address on 127.0.0.1.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// mayWrite asks a sidecar's endpoint; an error is false.
func mayWrite(addr string) bool {
	c := http.Client{Timeout: 200 * time.Millisecond}
	resp, err := c.Get("http://" + addr + "/may-write")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// The sidecar run as a process beside a real workload process that cannot
// ask, in pods that share their process namespace: pg-1's sidecar, SIGKILLed
// as an OOM kill would and restarted with the same settings, stops pg-1's
// workload as it starts, before it waits or answers anything, and so before
// a successor (pg-2's sidecar, or its own restarted one), which takes the
// Lease over once pg-1's record goes unrenewed, says true.
func TestASidecarRestartedAfterAKillStopsItsWorkloadBeforeASuccessorWrites(t *testing.T) {
	api := &leaseAPI{leases: map[string]*coordinationv1.Lease{}}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: time.Second}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(l) //nolint:errcheck // ends with the test
	t.Cleanup(func() { srv.Close() })
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://%s"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, l.Addr())), 0o600))
	writes := filepath.Join(dir, "pg-1-writes")
	settings := []string{"--lease", "pg-primary", "--kubeconfig", kubeconfig,
		"--duration", "2s", "--renew-interval", "500ms", "--deadline", "1s", "--stop-takes", "200ms"}

	addrA, addrB := freeAddr(t), freeAddr(t)
	pg1 := newPod(t, "POD_NAMESPACE=db", "POD_NAME=pg-1", "POD_UID=uid-of-pg-1", "WRITES="+writes)
	pg1.start("sidecar", "sidecar", append(settings, "--listen", addrA)...)
	require.Eventually(t, func() bool { return mayWrite(addrA) }, 30*time.Second, 20*time.Millisecond, "pg-1's sidecar holds the Lease")
	pg1.start("workload", "workload") // asked once, then writes until killed
	require.Eventually(t, func() bool { _, err := os.Stat(writes); return err == nil }, 10*time.Second, 10*time.Millisecond, "pg-1's workload writes")

	pg2 := newPod(t, "POD_NAMESPACE=db", "POD_NAME=pg-2", "POD_UID=uid-of-pg-2")
	pg2.start("sidecar", "sidecar", append(settings, "--listen", addrB)...)
	time.Sleep(time.Second) // pg-2's sidecar has read pg-1's record
	require.False(t, mayWrite(addrB))

	pg1.kill("sidecar") // an OOM kill: no warning, and the workload runs on
	require.Eventually(t, func() bool { return len(pg1.exited("sidecar")) == 1 }, 10*time.Second, 10*time.Millisecond)
	restarted := time.Now()
	pg1.start("sidecar", "sidecar", append(settings, "--listen", addrA)...)

	// Whichever takes the Lease over first, pg-2's sidecar or pg-1's
	// restarted one (both wait for pg-1's record to go unrenewed), says
	// true only once pg-1's workload has stopped.
	var successor time.Time
	require.Eventually(t, func() bool {
		if mayWrite(addrB) || mayWrite(addrA) {
			successor = time.Now()
			return true
		}
		return false
	}, 60*time.Second, 10*time.Millisecond, "a sidecar takes the Lease over")
	t.Logf("taken over by %s", api.holder())

	stopped := pg1.exited("workload")
	require.Len(t, stopped, 1, "pg-1's workload still ran when %s's sidecar said true", api.holder())
	require.Equal(t, "killed", stopped[0].signal)
	require.True(t, stopped[0].at.Before(successor), "pg-1's workload stopped at %s, pg-2 may write from %s", stopped[0].at, successor)
	require.Less(t, stopped[0].at.Sub(restarted), 5*time.Second, "stopped as the sidecar started")
	data, err := os.ReadFile(writes)
	require.NoError(t, err)
	lines := strings.Fields(string(data))
	last, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	require.NoError(t, err)
	require.True(t, time.Unix(0, last).Before(successor), "pg-1's last write before pg-2 may write")
	t.Logf("pg-1's workload stopped %v after its sidecar restarted; the successor may write %v after that", stopped[0].at.Sub(restarted).Round(time.Millisecond), successor.Sub(stopped[0].at).Round(time.Millisecond))
}
