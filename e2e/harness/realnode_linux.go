package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// realNodePrefix names every real node's cgroups and directory, followed
// by the test binary's pid: a later run removes what a run that died left.
const realNodePrefix = "podhealth-e2e-node-"

// The host sysctls a kubelet sets at start (or, with
// protectKernelDefaults, refuses to start without): each real node gets
// files of its own over them, in its mount namespace, so the host's never
// change.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// RealNodeSupport says why real nodes cannot run here, or nil: they need
// Linux, root, cgroup v1 (with the controllers a kubelet uses mounted
// under /sys/fs/cgroup: a kubelet on cgroup v2 would need a cgroup
// subtree delegated to each node, which the harness does not set up) and
// the commands unshare, nsenter, ip and mount.
func RealNodeSupport() error {
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root: namespaces, mounts and cgroups of their own")
	}
	for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "freezer"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, "cgroup.procs")); err != nil {
			return fmt.Errorf("real nodes need cgroup v1 with the %s controller at /sys/fs/cgroup/%s: %w", c, c, err)
		}
	}
	for _, cmd := range []string{"unshare", "nsenter", "ip", "mount"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return fmt.Errorf("real nodes need %s: %w", cmd, err)
		}
	}
	return nil
}

// RealNodeOptions adjusts a real node. The zero value is ready to use.
type RealNodeOptions struct {
	// Index numbers the node among the test's real nodes: its InternalIP
	// is 10.254.0.(Index+1), on an interface of its own that leads
	// nowhere. Each real node of one control plane needs its own.
	Index int
	// Labels are the node's labels, beside the kubelet's own.
	Labels map[string]string
}

// RealNode is a real kubelet and containerd, with runc, in network, mount
// and cgroup namespaces of their own: a node of the control plane whose
// containers are real processes. Its only path to the API server is a
// relay on its own 127.0.0.1 (see [RealNode.Partition]). It is torn down
// when the test that started it ends: every process of its cgroups, its
// namespaces, mounts, cgroups and files. Safe for concurrent use.
type RealNode struct {
	name   string
	ip     string
	dir    string
	bins   RealNodeBinaries
	cp     *ControlPlane
	holder *exec.Cmd
	relay  *relay
	// cgroups are the node's directory in every cgroup hierarchy.
	cgroups []string

	mu         sync.Mutex
	containerd *process
	kubelet    *process
	csi        *NodeCSIDriver // with StartCSIDriver
}

// Name returns the node's name.
func (n *RealNode) Name() string { return n.name }

// StartRealNode starts a real node named name and waits until the
// control plane has its Node object; what it started is torn down when t
// ends, whether it started or not. Call [RealNodeSupport] first, and skip
// where it cannot run. It may be called from any goroutine.
func (cp *ControlPlane) StartRealNode(ctx context.Context, t testing.TB, bins RealNodeBinaries, name string, opts RealNodeOptions) (*RealNode, error) {
	removeStaleRealNodes()
	n, err := cp.startRealNode(ctx, bins, name, opts)
	if n != nil {
		t.Cleanup(func() {
			if t.Failed() {
				for _, p := range []*process{n.containerd, n.kubelet} {
					if p != nil {
						t.Logf("%s %s (last lines):\n%s", name, p.name, p.tail(40))
					}
				}
			}
			if err := n.teardown(); err != nil {
				t.Errorf("tearing down real node %s: %v", name, err)
			}
		})
	}
	if err != nil {
		return nil, fmt.Errorf("harness: real node %s: %w", name, err)
	}
	return n, nil
}

func (cp *ControlPlane) startRealNode(ctx context.Context, bins RealNodeBinaries, name string, opts RealNodeOptions) (*RealNode, error) {
	if opts.Index < 0 || opts.Index > 253 {
		return nil, fmt.Errorf("index %d: want 0 to 253", opts.Index)
	}
	base := realNodePrefix + strconv.Itoa(os.Getpid()) + "-" + name
	n := &RealNode{name: name, ip: fmt.Sprintf("10.254.0.%d", opts.Index+1), dir: filepath.Join(os.TempDir(), base), bins: bins, cp: cp}
	for _, sub := range []string{"kubelet", "containerd/root", "containerd/state", "run-containerd", "pods", "containers", "cni/net.d", "cni/state", "sysctl"} {
		if err := os.MkdirAll(filepath.Join(n.dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	if err := n.makeCgroups(base); err != nil {
		return n, err
	}
	if err := n.startHolder(); err != nil {
		return n, err
	}
	u, err := url.Parse(cp.apiURL)
	if err != nil {
		return n, err
	}
	relay, err := startRelay(n.netns(), "127.0.0.1:"+u.Port(), "127.0.0.1:"+u.Port())
	if err != nil {
		return n, err
	}
	n.relay = relay
	if err := n.writeConfigs(opts); err != nil {
		return n, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return n, err
	}
	if err := n.startKubelet(); err != nil {
		return n, err
	}
	if err := n.waitRegistered(ctx); err != nil {
		return n, fmt.Errorf("its kubelet never registered it: %w; %s", err, n.Diagnosis())
	}
	return n, nil
}

// realNodeKubeletStarts is how many times a kubelet that exits before it
// registers its node is started, as a node's service manager would restart
// it: a kubelet exits at start when its runtime does not answer in time
// on a loaded machine (it retries the API server instead).
const realNodeKubeletStarts = 3

// waitRegistered waits until the node's Node object exists, starting the
// kubelet again if it exits first, until realNodeKubeletStarts starts
// have exited or ctx is done.
func (n *RealNode) waitRegistered(ctx context.Context) error {
	starts := 1
	for {
		// Any other read error is read again, until ctx ends.
		if _, err := n.cp.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err == nil {
			return nil
		}
		n.mu.Lock()
		kubelet := n.kubelet
		n.mu.Unlock()
		if done, exitErr := kubelet.exited(); done {
			if starts >= realNodeKubeletStarts {
				return fmt.Errorf("the kubelet exited %d times before it registered the node, the last with %v", starts, exitErr)
			}
			starts++
			n.mu.Lock()
			_ = kubelet.kill() // reaps it, so that it can start again
			err := kubelet.start()
			n.mu.Unlock()
			if err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %d start(s) of the kubelet: %w", starts, ctx.Err())
		case <-time.After(PollInterval):
		}
	}
}

// Diagnosis says, in a few lines, how the node's daemons are: whether the
// kubelet and containerd run or how they exited, and the last errors each
// logged. It is short enough to end a test's failure message.
func (n *RealNode) Diagnosis() string {
	n.mu.Lock()
	daemons := []*process{n.kubelet, n.containerd}
	n.mu.Unlock()
	var b strings.Builder
	for _, p := range daemons {
		if p == nil {
			continue
		}
		state := "running"
		if done, err := p.exited(); done {
			state = fmt.Sprintf("exited (%v)", err)
		}
		fmt.Fprintf(&b, "%s %s %s", n.name, p.name, state)
		lines := p.errorLines(3)
		switch {
		case len(lines) > 0:
			b.WriteString(", its last errors:")
		case state != "running":
			// What a process that exited without an error line of its
			// format printed last is its reason: a shell's or nsenter's.
			lines = p.lastLines(3)
			b.WriteString(", its last lines:")
		default:
			b.WriteString(", no error logged")
		}
		for _, line := range lines {
			b.WriteString("\n  " + line)
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// makeCgroups makes the node's directory in every cgroup hierarchy; the
// kubelet's cgroupRoot names it, so its pods' cgroups are below it.
func (n *RealNode) makeCgroups(base string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		dir := filepath.Join(m, base)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
		n.cgroups = append(n.cgroups, dir)
		if filepath.Base(m) == "cpuset" {
			// A v1 cpuset accepts no task before it has CPUs and memory.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(m, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// cgroupMounts are the cgroup hierarchies mounted under /sys/fs/cgroup.
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		// mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPER
		fields := strings.Fields(s.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if fs := fields[sep+1]; (fs == "cgroup" || fs == "cgroup2") && strings.HasPrefix(fields[4], "/sys/fs/cgroup/") {
			out = append(out, fields[4])
		}
	}
	return out, s.Err()
}

// startHolder starts the process that owns the node's network and mount
// namespaces: loopback up, an interface with the node's address, and the
// node's own directories and sysctl files mounted where a kubelet and
// containerd expect the host's.
func (n *RealNode) startHolder() error {
	var script strings.Builder
	// The node's address is on one end of a veth pair whose both ends are
	// in its namespace: an interface that leads nowhere.
	script.WriteString("set -e\nip link set lo up\nip link add name node0 type veth peer name node1\n")
	fmt.Fprintf(&script, "ip addr add %s/32 dev node0\nip link set node1 up\nip link set node0 up\n", n.ip)
	binds := map[string]string{
		"/run/containerd":     filepath.Join(n.dir, "run-containerd"),
		"/var/log/containers": filepath.Join(n.dir, "containers"),
	}
	for target := range binds {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("the host's %s, which each node covers with its own: %w", target, err)
		}
	}
	for _, s := range kubeletSysctls {
		host, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return err
		}
		file := filepath.Join(n.dir, "sysctl", strings.ReplaceAll(s, "/", "."))
		if err := os.WriteFile(file, host, 0o644); err != nil {
			return err
		}
		binds[filepath.Join("/proc/sys", s)] = file
	}
	for target, source := range binds {
		fmt.Fprintf(&script, "mount --bind %s %s\n", source, target)
	}
	script.WriteString("echo ready\nexec sleep infinity\n")
	cmd := exec.Command("unshare", "--net", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script.String())
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("its namespaces: %w", err)
	}
	n.holder = cmd
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		n.holder = nil
		return fmt.Errorf("its namespaces: %q %v: %s", line, err, stderr.String())
	}
	return nil
}

// inNode is a process that runs in the node's cgroups and namespaces.
func (n *RealNode) inNode(name, path string, args ...string) *process {
	procs := make([]string, len(n.cgroups))
	for i, c := range n.cgroups {
		procs[i] = filepath.Join(c, "cgroup.procs")
	}
	// The shell joins the cgroups before it becomes nsenter and then the
	// program, so that every child is in them from its start.
	script := `for f in ` + strings.Join(procs, " ") + `; do echo $$ > "$f"; done; exec nsenter --target ` +
		strconv.Itoa(n.holder.Process.Pid) + ` --net --mount -- "$@"`
	return &process{
		name:    name,
		path:    "/bin/sh",
		args:    append([]string{"-c", script, "sh", path}, args...),
		logPath: filepath.Join(n.dir, name+".log"),
	}
}

func (n *RealNode) socket() string { return filepath.Join(n.dir, "containerd.sock") }

func (n *RealNode) writeConfigs(opts RealNodeOptions) error {
	containerd := fmt.Sprintf(`version = 3
root = %q
state = %q
# NRI's socket is at a fixed path, one per machine.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = %q

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = %q

[plugins."io.containerd.cri.v1.runtime"]
  # This machine's root may lack CAP_SYS_RESOURCE: runc cannot then give
  # a sandbox a lower oom_score_adj than containerd's.
  restrict_oom_score_adj = true

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = [%q]
  conf_dir = %q

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  BinaryName = %q
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(n.dir, "containerd/root"), filepath.Join(n.dir, "containerd/state"), n.socket(), PauseImage,
		n.bins.CNIDir, filepath.Join(n.dir, "cni/net.d"), n.bins.Runc)
	if err := os.WriteFile(filepath.Join(n.dir, "containerd.toml"), []byte(containerd), 0o644); err != nil {
		return err
	}
	// A runtime without a CNI configuration reports its network not
	// ready, and the kubelet its node NotReady, though every pod here has
	// the host's network.
	cni := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "e2e", "plugins": [{"type": "bridge", "bridge": "cni0", "isGateway": true,
  "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.253.%d.0/24"}]], "dataDir": %q}}, {"type": "loopback"}]}
`, opts.Index, filepath.Join(n.dir, "cni/state"))
	if err := os.WriteFile(filepath.Join(n.dir, "cni/net.d/10-e2e.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	labels := ""
	for k, v := range opts.Labels {
		labels += "," + k + "=" + v
	}
	if labels != "" {
		if err := os.WriteFile(filepath.Join(n.dir, "labels"), []byte(labels[1:]), 0o644); err != nil {
			return err
		}
	}
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
failSwapOn: false
protectKernelDefaults: false
resolvConf: ""
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
nodeStatusUpdateFrequency: 1s
nodeStatusReportFrequency: 10s
nodeLeaseDurationSeconds: %d
# The machine's disk is shared by every node and the builds: no node
# evicts for a disk another filled, nor collects the imported images.
evictionHard: {memory.available: "1Mi", nodefs.available: "0%%", nodefs.inodesFree: "0%%", imagefs.available: "0%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`, filepath.Base(n.cgroups[0]), n.socket(), filepath.Join(n.dir, "pods"), int(RealNodeMonitorGracePeriod/time.Second))
	return os.WriteFile(filepath.Join(n.dir, "kubelet.yaml"), []byte(kubelet), 0o644)
}

// RealNodeMonitorGracePeriod is the --node-monitor-grace-period that
// real nodes need: a real kubelet on a loaded 2-core machine misses a
// shorter one, and the node-lifecycle controller evicts a healthy node's
// pods. Give it in ExtraControllerManagerArgs of a control plane with real
// nodes.
const RealNodeMonitorGracePeriod = 20 * time.Second

func (n *RealNode) startContainerd(ctx context.Context) error {
	p := n.inNode("containerd", n.bins.Containerd, "--config", filepath.Join(n.dir, "containerd.toml"))
	// containerd finds its shim on its PATH.
	p.env = []string{"PATH=" + filepath.Dir(n.bins.Containerd) + ":" + os.Getenv("PATH")}
	n.mu.Lock()
	n.containerd = p
	n.mu.Unlock()
	if err := p.start(); err != nil {
		return err
	}
	return n.ctr(ctx, p, "images", "import", n.bins.Images.Archive)
}

// DialContext connects to address inside the node's network namespace,
// as a client on the node's own network would: 127.0.0.1 is the node's
// loopback, which its hostNetwork pods' servers listen on. A partition
// (which cuts only the node's path to the API server) leaves it
// connected.
func (n *RealNode) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	var derr error
	if err := inNetns(n.netns(), func() { c, derr = (&net.Dialer{}).DialContext(ctx, network, address) }); err != nil {
		return nil, fmt.Errorf("harness: dialling %s on %s: %w", address, n.name, err)
	}
	return c, derr
}

// NetCommand is a command that runs name in the node's network namespace
// (nsenter), on the machine's file system: a client program, such as
// pg_amcheck, that reaches the node's 127.0.0.1.
func (n *RealNode) NetCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + n.netns(), "--", name}, args...)...)
}

// netns is the path of the node's network namespace.
func (n *RealNode) netns() string {
	return fmt.Sprintf("/proc/%d/ns/net", n.holder.Process.Pid)
}

// ImportImages imports the images of a docker-archive tarball into the
// node's containerd (those of [BuildPostgresImages], say), beside the
// images every node imports when it starts.
func (n *RealNode) ImportImages(ctx context.Context, archive string) error {
	n.mu.Lock()
	p := n.containerd
	n.mu.Unlock()
	return n.ctr(ctx, p, "images", "import", archive)
}

// ctr runs ctr against the node's containerd, p, retrying for a minute
// while containerd starts.
func (n *RealNode) ctr(ctx context.Context, p *process, args ...string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := exec.CommandContext(ctx, n.bins.Ctr, append([]string{"-a", n.socket(), "-n", "k8s.io"}, args...)...).CombinedOutput()
		if err == nil {
			return nil
		}
		if done, _ := p.exited(); done || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("ctr %s: %v: %s\n%s", strings.Join(args, " "), err, out, p.tail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *RealNode) startKubelet() error {
	args := []string{
		"--config=" + filepath.Join(n.dir, "kubelet.yaml"),
		"--kubeconfig=" + n.cp.kubeconfig,
		"--root-dir=" + filepath.Join(n.dir, "kubelet"),
		"--cert-dir=" + filepath.Join(n.dir, "kubelet/pki"),
		"--hostname-override=" + n.name,
		"--node-ip=" + n.ip,
		"--v=2",
	}
	if labels, err := os.ReadFile(filepath.Join(n.dir, "labels")); err == nil {
		args = append(args, "--node-labels="+string(labels))
	}
	p := n.inNode("kubelet", n.bins.Kubelet, args...)
	n.mu.Lock()
	n.kubelet = p
	n.mu.Unlock()
	return p.start()
}

// Partition cuts the node off from the API server: its kubelet and
// containers keep running and cannot reach it. [RealNode.Heal] ends it.
func (n *RealNode) Partition() { n.relay.setCut(true) }

// Heal ends a partition.
func (n *RealNode) Heal() { n.relay.setCut(false) }

// Freeze stops the kubelet and containerd with SIGSTOP; the containers
// run on. [RealNode.Thaw] ends it.
func (n *RealNode) Freeze() error { return n.signalDaemons(syscall.SIGSTOP) }

// Thaw continues a frozen kubelet and containerd.
func (n *RealNode) Thaw() error { return n.signalDaemons(syscall.SIGCONT) }

func (n *RealNode) signalDaemons(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for _, p := range []*process{n.kubelet, n.containerd} {
		errs = append(errs, p.signal(sig))
	}
	return errors.Join(errs...)
}

// CrashKubelet kills the kubelet with SIGKILL; containerd and the
// containers run on. [RealNode.RestartKubelet] starts it again.
func (n *RealNode) CrashKubelet() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.kubelet.kill()
}

// RestartKubelet starts the kubelet again after a crash.
func (n *RealNode) RestartKubelet() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.kubelet.start()
}

// PowerOff kills every process of the node at once (the kubelet,
// containerd, the shims and the containers): its cgroups are frozen, every
// process in them is killed, and they are thawed so the kills land.
// [RealNode.PowerOn] boots it again.
func (n *RealNode) PowerOff() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.killAll(); err != nil {
		return err
	}
	for _, p := range []*process{n.kubelet, n.containerd} {
		_ = p.kill() // reaps it
	}
	return nil
}

// PowerOn boots a powered-off node: containerd, then, once it answers,
// the kubelet (which exits if its runtime does not answer at its start),
// which finds its pods' containers gone.
func (n *RealNode) PowerOn(ctx context.Context) error {
	n.mu.Lock()
	containerd := n.containerd
	n.mu.Unlock()
	if err := containerd.start(); err != nil {
		return err
	}
	if err := n.ctr(ctx, containerd, "version"); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.kubelet.start()
}

// FreezeAll freezes every process of the node (the kubelet, containerd,
// the shims and the containers) in its freezer cgroup, as a hung machine
// or a paused VM would: nothing of the node runs, its clocks go on.
// [RealNode.ThawAll] ends it.
func (n *RealNode) FreezeAll() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	freezer, err := n.freezer()
	if err != nil {
		return err
	}
	return setFreezer(freezer, "FROZEN")
}

// ThawAll continues every process that FreezeAll froze.
func (n *RealNode) ThawAll() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	freezer, err := n.freezer()
	if err != nil {
		return err
	}
	return setFreezer(freezer, "THAWED")
}

// freezer is the node's freezer cgroup.
func (n *RealNode) freezer() (string, error) {
	for _, c := range n.cgroups {
		if filepath.Base(filepath.Dir(c)) == "freezer" {
			return c, nil
		}
	}
	return "", errors.New("no freezer cgroup")
}

// setFreezer writes state to the freezer cgroup at dir and waits up to a
// few seconds for it to be reached (freezing takes a moment, longer on a
// busy machine).
func setFreezer(dir, state string) error {
	if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte(state), 0o644); err != nil {
		return err
	}
	for i := 0; i < 500; i++ {
		now, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(now)) == state {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("freezer %s did not reach %s in 5 s", dir, state)
}

// killAll kills every process in the node's cgroups, the freezer holding
// them still so that none forks past the kill.
func (n *RealNode) killAll() error {
	freezer, err := n.freezer()
	if err != nil {
		return err
	}
	if err := setFreezer(freezer, "FROZEN"); err != nil {
		return err
	}
	for _, pid := range cgroupPids(freezer) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := setFreezer(freezer, "THAWED"); err != nil {
		return err
	}
	for i := 0; i < 500 && len(cgroupPids(freezer)) > 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if left := cgroupPids(freezer); len(left) > 0 {
		return fmt.Errorf("processes %v outlived SIGKILL", left)
	}
	return nil
}

// cgroupPids lists every process in the cgroup at dir and below it.
func cgroupPids(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// teardown stops every process of the node and removes its namespaces,
// mounts, cgroups and files.
func (n *RealNode) teardown() error {
	var errs []error
	if n.relay != nil {
		n.relay.close()
	}
	n.mu.Lock()
	driver := n.csi
	n.mu.Unlock()
	if driver != nil {
		driver.stop()
	}
	if len(n.cgroups) > 0 {
		n.mu.Lock()
		if err := n.killAll(); err != nil {
			errs = append(errs, err)
		}
		for _, p := range []*process{n.kubelet, n.containerd} {
			if p != nil {
				_ = p.kill()
			}
		}
		n.mu.Unlock()
	}
	if n.holder != nil {
		// Its namespaces, and the mounts in them, end with it.
		_ = n.holder.Process.Kill()
		_ = n.holder.Wait()
	}
	errs = append(errs, removeCgroups(n.cgroups))
	if err := os.RemoveAll(n.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeCgroups removes each cgroup directory, its children first.
func removeCgroups(dirs []string) error {
	var errs []error
	for _, dir := range dirs {
		var all []string
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				all = append(all, path)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- {
			var err error
			for try := 0; try < 50; try++ {
				// A cgroup is busy for a moment after its last process.
				if err = syscall.Rmdir(all[i]); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", all[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeStaleRealNodes kills and removes what real nodes of test binaries
// that died before their cleanup left: their cgroups' processes (a shim
// and its container outlive the kubelet's parent), the cgroups and
// directories.
func removeStaleRealNodes() {
	mounts, err := cgroupMounts()
	if err != nil {
		return
	}
	stale := map[string]bool{}
	for _, m := range mounts {
		matches, _ := filepath.Glob(filepath.Join(m, realNodePrefix+"*"))
		for _, dir := range matches {
			rest := strings.TrimPrefix(filepath.Base(dir), realNodePrefix)
			pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
			if err != nil || pid == os.Getpid() || processAlive(pid) {
				continue
			}
			for _, p := range cgroupPids(dir) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			stale[filepath.Base(dir)] = true
		}
	}
	for base := range stale {
		var dirs []string
		for _, m := range mounts {
			dirs = append(dirs, filepath.Join(m, base))
		}
		time.Sleep(100 * time.Millisecond)
		_ = removeCgroups(dirs)
		_ = os.RemoveAll(filepath.Join(os.TempDir(), base))
	}
}

// RunningWith reports whether a process of the node has env (such as
// "UID=...", which the writer image's pods set) in its environment: a
// container's process, seen on the node itself rather than through the
// API server.
func (n *RealNode) RunningWith(env string) bool {
	for _, c := range n.cgroups {
		if filepath.Base(filepath.Dir(c)) != "pids" {
			continue
		}
		for _, pid := range cgroupPids(c) {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil {
				continue
			}
			for _, e := range strings.Split(string(data), "\x00") {
				if e == env {
					return true
				}
			}
		}
	}
	return false
}

// Signal sends sig to every process of the node whose command name is
// comm (as /proc/PID/comm holds it: its first 15 bytes) and whose
// environment holds env, as the kernel's OOM killer or an admin's kill
// would, and returns how many it signalled.
func (n *RealNode) Signal(env, comm string, sig syscall.Signal) (int, error) {
	comm = comm[:min(len(comm), 15)]
	signalled := 0
	for _, c := range n.cgroups {
		if filepath.Base(filepath.Dir(c)) != "pids" {
			continue
		}
		for _, pid := range cgroupPids(c) {
			name, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if err != nil || strings.TrimSpace(string(name)) != comm {
				continue
			}
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil || !slices.Contains(strings.Split(string(data), "\x00"), env) {
				continue
			}
			if err := syscall.Kill(pid, sig); err != nil {
				return signalled, fmt.Errorf("harness: signalling %s (%d) on %s: %w", comm, pid, n.name, err)
			}
			signalled++
		}
	}
	return signalled, nil
}

// ResidentBytes is the resident memory of every process of the node (the
// kubelet, containerd, the shims and the containers), from /proc.
func (n *RealNode) ResidentBytes() uint64 {
	var total uint64
	for _, c := range n.cgroups {
		if filepath.Base(filepath.Dir(c)) != "pids" {
			continue
		}
		for _, pid := range cgroupPids(c) {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(data), "\n") {
				if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
					kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
					if err == nil {
						total += kb << 10
					}
				}
			}
		}
	}
	return total
}
