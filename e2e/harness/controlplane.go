package harness

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Controllers are the kube-controller-manager controllers the harness runs:
// enough to take a pod from "its node stopped heartbeating" to "deleted
// gracefully and left Terminating", plus ReplicaSets and pod garbage
// collection.
var Controllers = []string{
	"node-lifecycle-controller",
	"taint-eviction-controller",
	"replicaset-controller",
	"pod-garbage-collector-controller",
}

// NodeMonitorGracePeriod is how long the node-lifecycle controller waits
// after a node's last heartbeat before marking it unreachable.
const NodeMonitorGracePeriod = 6 * time.Second

// Options adjusts a control plane started by [Start]. The zero value is
// ready to use.
type Options struct {
	// StartTimeout bounds the whole start-up, and each RestartAPIServer.
	// Default: 2 minutes.
	StartTimeout time.Duration
	// ExtraAPIServerArgs are appended to kube-apiserver's command line.
	ExtraAPIServerArgs []string
	// ExtraControllerManagerArgs are appended to kube-controller-manager's
	// command line.
	ExtraControllerManagerArgs []string
	// LogTailLines is how many lines of each process's output are logged
	// when the test fails. Default: 60.
	LogTailLines int
	// ServiceAccountTokens runs kube-controller-manager's
	// serviceaccount-token-controller, with the key the API server signs
	// tokens with, so that it fills Secrets of type
	// kubernetes.io/service-account-token as a cluster does.
	ServiceAccountTokens bool
	// AuditPodDeletes makes the API server write an audit log of every
	// DELETE of a pod, with its DeleteOptions, for
	// [ControlPlane.PodDeletes].
	AuditPodDeletes bool
	// AuditWritesBy are users (such as a service account's
	// system:serviceaccount:NAMESPACE:NAME) whose every write the audit
	// log records, for [ControlPlane.Writes]; it implies AuditPodDeletes.
	AuditWritesBy []string
	// AuditRequestsBy are users whose every request, reads and watches
	// too, the audit log records, for [ControlPlane.AuditedRequests]; it implies
	// AuditPodDeletes.
	AuditRequestsBy []string
	// HeartbeatInterval is how often each node's heartbeat is renewed.
	// Zero means the package's HeartbeatInterval. A longer one needs a
	// longer --node-monitor-grace-period in ExtraControllerManagerArgs
	// (the last one given wins).
	HeartbeatInterval time.Duration
	// NodeLeaseDuration is the duration each node's Lease names: a
	// kubelet's is 40 s, the default --node-monitor-grace-period, so that
	// its Lease expires when the node-lifecycle controller calls it
	// unreachable. Zero means NodeMonitorGracePeriod; give the grace
	// period of ExtraControllerManagerArgs when it differs.
	NodeLeaseDuration time.Duration
	// Volumes runs the volume path: kube-controller-manager also runs
	// VolumeControllers, and every [Kubelet] starts a pod with claims only
	// once their CSI volumes are attached to its node (see Kubelet). Off,
	// a kubelet runs a pod whatever its claims.
	Volumes bool
}

// withDefaults fills in every field whose zero value means a default, as
// its doc says: Start and StartStandalone both start from it, so that a
// control plane started either way runs with the same settings.
func (o Options) withDefaults() Options {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 2 * time.Minute
	}
	if o.LogTailLines <= 0 {
		o.LogTailLines = 60
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = HeartbeatInterval
	}
	if o.NodeLeaseDuration <= 0 {
		o.NodeLeaseDuration = NodeMonitorGracePeriod
	}
	return o
}

// ControlPlane is a running etcd, kube-apiserver and kube-controller-manager.
// All of it is stopped when the test that started it ends.
type ControlPlane struct {
	t    testing.TB
	opts Options
	dir  string

	etcd, apiServer, controllerManager *process
	restartMu                          sync.Mutex // one RestartAPIServer at a time

	apiURL   string
	auditLog string // empty without Options.AuditPodDeletes
	config   *rest.Config
	client   kubernetes.Interface
	// heartbeats is the nodes' client: each kubelet of a real cluster has
	// a rate limit of its own, so the harness's nodes share none, and a
	// thousand of them are not throttled by client's.
	heartbeats kubernetes.Interface
	kubeconfig string
}

// Start starts a control plane for the test t and waits until the API server
// is ready and the controller-manager's node-lifecycle controller is
// processing nodes. It stops the test with t.Fatal if any of that fails. All
// processes are killed in t.Cleanup; if the test failed, the tail of each
// process's output is logged first.
func Start(t testing.TB, bins Binaries, opts Options) *ControlPlane {
	t.Helper()
	opts = opts.withDefaults()
	cp := &ControlPlane{t: t, opts: opts, dir: t.TempDir()}
	t.Cleanup(cp.shutdown)

	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	if err := cp.start(ctx, bins); err != nil {
		t.Fatalf("harness: starting the control plane: %v", err)
	}
	return cp
}

func (cp *ControlPlane) start(ctx context.Context, bins Binaries) error {
	token, err := randomHex(24)
	if err != nil {
		return err
	}
	tokenFile := filepath.Join(cp.dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return err
	}
	keyFile := filepath.Join(cp.dir, "service-account.key")
	if err := writeRSAKey(keyFile); err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdClientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcdPeerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	apiPort := ports[2]
	cp.apiURL = "https://127.0.0.1:" + strconv.Itoa(apiPort)

	cp.config = &rest.Config{
		Host:            cp.apiURL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             100,
		Burst:           200,
		Timeout:         30 * time.Second,
	}
	if cp.client, err = kubernetes.NewForConfig(rest.CopyConfig(cp.config)); err != nil {
		return err
	}
	unlimited := rest.CopyConfig(cp.config)
	unlimited.QPS = -1 // no client-side rate limit
	if cp.heartbeats, err = kubernetes.NewForConfig(unlimited); err != nil {
		return err
	}
	cp.kubeconfig = filepath.Join(cp.dir, "kubeconfig")
	if err := writeKubeconfig(cp.kubeconfig, cp.apiURL, token); err != nil {
		return err
	}

	cp.etcd = &process{
		name:    "etcd",
		path:    bins.Etcd,
		logPath: filepath.Join(cp.dir, "etcd.log"),
		args: []string{
			"--name=harness",
			"--data-dir=" + filepath.Join(cp.dir, "etcd-data"),
			"--listen-client-urls=" + etcdClientURL,
			"--advertise-client-urls=" + etcdClientURL,
			"--listen-peer-urls=" + etcdPeerURL,
			"--initial-advertise-peer-urls=" + etcdPeerURL,
			"--initial-cluster=harness=" + etcdPeerURL,
			// Test data need not survive a power cut.
			"--unsafe-no-fsync",
		},
	}
	if err := cp.etcd.start(); err != nil {
		return err
	}
	if err := waitFor(ctx, cp.etcd, func(ctx context.Context) error {
		return etcdHealthy(ctx, etcdClientURL)
	}); err != nil {
		return fmt.Errorf("etcd did not become healthy: %w", err)
	}

	var auditFlags []string
	if cp.opts.AuditPodDeletes || len(cp.opts.AuditWritesBy) > 0 || len(cp.opts.AuditRequestsBy) > 0 {
		if auditFlags, cp.auditLog, err = auditArgs(cp.dir, cp.opts.AuditWritesBy, cp.opts.AuditRequestsBy); err != nil {
			return err
		}
	}
	cp.apiServer = &process{
		name:    "kube-apiserver",
		path:    bins.APIServer,
		logPath: filepath.Join(cp.dir, "kube-apiserver.log"),
		args: append([]string{
			"--etcd-servers=" + etcdClientURL,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(apiPort),
			"--cert-dir=" + filepath.Join(cp.dir, "apiserver-certs"),
			"--token-auth-file=" + tokenFile,
			"--authorization-mode=RBAC",
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=" + keyFile,
			"--service-account-signing-key-file=" + keyFile,
			"--service-cluster-ip-range=10.0.0.0/24",
			"--disable-admission-plugins=ServiceAccount",
		}, append(auditFlags, cp.opts.ExtraAPIServerArgs...)...),
	}
	if err := cp.startAPIServer(ctx); err != nil {
		return err
	}

	cp.controllerManager = &process{
		name:    "kube-controller-manager",
		path:    bins.ControllerManager,
		logPath: filepath.Join(cp.dir, "kube-controller-manager.log"),
		args: append([]string{
			"--kubeconfig=" + cp.kubeconfig,
			"--controllers=" + strings.Join(Controllers, ","),
			"--node-monitor-grace-period=" + NodeMonitorGracePeriod.String(),
			"--node-monitor-period=1s",
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
		}, append(append(volumeControllerArgs(cp.opts.Volumes), cp.tokenControllerArgs()...), cp.opts.ExtraControllerManagerArgs...)...),
	}
	if err := cp.controllerManager.start(); err != nil {
		return err
	}
	if err := cp.waitForNodeLifecycleController(ctx); err != nil {
		return fmt.Errorf("kube-controller-manager did not start processing nodes: %w", err)
	}
	return nil
}

// tokenControllerArgs adds, with Options.ServiceAccountTokens, the token
// controller and its signing key to kube-controller-manager's command
// line (--controllers accumulates).
func (cp *ControlPlane) tokenControllerArgs() []string {
	if !cp.opts.ServiceAccountTokens {
		return nil
	}
	return []string{"--controllers=serviceaccount-token-controller", "--service-account-private-key-file=" + filepath.Join(cp.dir, "service-account.key")}
}

// startAPIServer starts kube-apiserver and waits for /readyz.
func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	if err := cp.apiServer.start(); err != nil {
		return err
	}
	if err := waitFor(ctx, cp.apiServer, cp.readyz); err != nil {
		return fmt.Errorf("kube-apiserver did not become ready: %w", err)
	}
	return nil
}

// readyz asks the API server for /readyz and returns nil if it answers ok.
func (cp *ControlPlane) readyz(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	body, err := cp.client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("/readyz answered %q", body)
	}
	return nil
}

// waitForNodeLifecycleController creates a throw-away Node and waits for the
// node-lifecycle controller to announce it with a RegisteredNode event. That
// happens only once the controller-manager has connected, synced its caches
// and started its monitoring loop. The node is deleted afterwards.
func (cp *ControlPlane) waitForNodeLifecycleController(ctx context.Context) error {
	const probe = "harness-probe"
	nodes := cp.client.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: probe}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating probe node: %w", err)
	}
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.kind", "Node"),
		fields.OneTermEqualSelector("involvedObject.name", probe),
		fields.OneTermEqualSelector("reason", "RegisteredNode"),
	).String()
	err := waitFor(ctx, cp.controllerManager, func(ctx context.Context) error {
		events, err := cp.client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return err
		}
		if len(events.Items) == 0 {
			return errors.New("no RegisteredNode event for the probe node yet")
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := nodes.Delete(ctx, probe, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting probe node: %w", err)
	}
	return nil
}

// RESTConfig returns a new copy of a client configuration for the API server:
// bearer-token authentication as a member of system:masters, TLS without
// server verification (the serving certificate is self-signed).
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.config) }

// Client returns a clientset for the API server, built from RESTConfig.
func (cp *ControlPlane) Client() kubernetes.Interface { return cp.client }

// KubeconfigPath returns the path of a kubeconfig file with the same
// credentials as RESTConfig, for programs run with --kubeconfig.
func (cp *ControlPlane) KubeconfigPath() string { return cp.kubeconfig }

// APIServerURL returns the API server's address, https://127.0.0.1:PORT. It
// does not change when the API server is restarted.
func (cp *ControlPlane) APIServerURL() string { return cp.apiURL }

// Dir returns the directory holding the control plane's state and logs.
func (cp *ControlPlane) Dir() string { return cp.dir }

// StopAPIServer stops kube-apiserver alone (SIGTERM, then SIGKILL after five
// seconds); etcd and the controller-manager keep running. Requests fail
// until RestartAPIServer. Stopping a stopped API server does nothing.
func (cp *ControlPlane) StopAPIServer() {
	cp.apiServer.stop(5 * time.Second)
}

// RestartAPIServer starts kube-apiserver again on the same port with the same
// flags and state, and waits for /readyz. If it is running it is stopped
// first. The API server's metrics start from zero again. Restarts asked for
// at once run one after the other.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	cp.restartMu.Lock()
	defer cp.restartMu.Unlock()
	cp.StopAPIServer()
	ctx, cancel := context.WithTimeout(ctx, cp.opts.StartTimeout)
	defer cancel()
	return cp.startAPIServer(ctx)
}

// shutdown stops every process, the controller-manager first, and logs the
// tail of each one's output if the test failed.
func (cp *ControlPlane) shutdown() {
	var procs []*process
	for _, p := range []*process{cp.controllerManager, cp.apiServer, cp.etcd} {
		if p != nil {
			procs = append(procs, p)
			p.stop(5 * time.Second)
		}
	}
	if !cp.t.Failed() {
		return
	}
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		cp.t.Logf("---- last %d lines of %s output (%s) ----\n%s", cp.opts.LogTailLines, p.name, p.logPath, p.tail(cp.opts.LogTailLines))
	}
}

// waitFor calls check every 200ms until it returns nil, p exits, or ctx is
// done.
func waitFor(ctx context.Context, p *process, check func(context.Context) error) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if exited, exitErr := p.exited(); exited {
			return fmt.Errorf("%s exited (%v); last check: %v", p.name, exitErr, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last check: %v", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// etcdHealthy asks etcd's /health endpoint whether it is serving.
func etcdHealthy(ctx context.Context, clientURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/health answered %s", resp.Status)
	}
	return nil
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1. All
// listeners are held until every port is chosen, so the ports differ.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// writeRSAKey writes a new 2048-bit RSA private key in PKCS #1 PEM form. The
// API server signs service-account tokens with it and verifies them with its
// public half.
func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	return os.WriteFile(path, pem.EncodeToMemory(block), 0o600)
}

// writeKubeconfig writes a kubeconfig for server with a bearer token.
func writeKubeconfig(path, server, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["harness"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["harness"] = &clientcmdapi.Context{Cluster: "harness", AuthInfo: "admin"}
	cfg.CurrentContext = "harness"
	return clientcmd.WriteToFile(*cfg, path)
}
