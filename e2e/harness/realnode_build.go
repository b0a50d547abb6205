package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// kubeletPackage is built from the e2e module, at the control plane's
// release; the runtime's packages from their own module, e2e/noderuntime.
const kubeletPackage = "k8s.io/kubernetes/cmd/kubelet"

// runtimePrograms are e2e/noderuntime's tools: the name go gives each
// binary, its package, and whether it is a CNI plugin.
var runtimePrograms = []struct {
	name, pkg string
	cni       bool
}{
	{"containerd", "github.com/containerd/containerd/v2/cmd/containerd", false},
	{"containerd-shim-runc-v2", "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2", false},
	{"ctr", "github.com/containerd/containerd/v2/cmd/ctr", false},
	{"runc", "github.com/opencontainers/runc", false},
	{"bridge", "github.com/containernetworking/plugins/plugins/main/bridge", true},
	{"host-local", "github.com/containernetworking/plugins/plugins/ipam/host-local", true},
	{"loopback", "github.com/containernetworking/plugins/plugins/main/loopback", true},
}

// RealNodeBinaries are what a real node runs.
type RealNodeBinaries struct {
	// Kubelet is kubelet, at the control plane's release.
	Kubelet string
	// Containerd, Ctr and Runc are containerd v2, its client and runc;
	// containerd-shim-runc-v2 is beside them, on containerd's PATH.
	Containerd, Ctr, Runc string
	// CNIDir holds the CNI plugins bridge, host-local and loopback.
	CNIDir string
	// Images is the archive every node imports.
	Images NodeImages
	// BuildTime is how long BuildRealNodeBinaries took.
	BuildTime time.Duration
}

// BuildRealNodeBinaries builds, into dir, the kubelet (from the e2e
// module, stamped with the control plane's version, which it reports to
// the API server), containerd, its shim, ctr, runc and the CNI plugins
// (from e2e/noderuntime; runc with cgo and libseccomp, which the
// sandbox's seccomp profile needs), and the node images. The builds run
// at once.
func BuildRealNodeBinaries(ctx context.Context, dir string) (RealNodeBinaries, error) {
	start := time.Now()
	wd, err := os.Getwd()
	if err != nil {
		return RealNodeBinaries{}, err
	}
	modDir, err := findModuleDir(wd, modulePath)
	if err != nil {
		return RealNodeBinaries{}, err
	}
	version, err := KubernetesVersion()
	if err != nil {
		return RealNodeBinaries{}, err
	}
	major, minor, ok := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	if !ok {
		return RealNodeBinaries{}, fmt.Errorf("harness: Kubernetes version %q", version)
	}
	minor, _, _ = strings.Cut(minor, ".")
	binDir, cniDir := filepath.Join(dir, "node-bin"), filepath.Join(dir, "cni-bin")
	for _, d := range []string{binDir, cniDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return RealNodeBinaries{}, err
		}
	}
	// The version it reports (component-base) and the one in its user
	// agent (client-go).
	stamp := "-ldflags=-s -w"
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		stamp += " -X " + pkg + ".gitVersion=" + version + " -X " + pkg + ".gitMajor=" + major + " -X " + pkg + ".gitMinor=" + minor
	}
	runtimeArgs := []string{"build", "-tags", "seccomp", stripFlags, "-o", binDir + string(filepath.Separator)}
	for _, p := range runtimePrograms {
		runtimeArgs = append(runtimeArgs, p.pkg)
	}
	builds := []struct {
		what, dir string
		args, env []string
	}{
		{"the kubelet", modDir, []string{"build", stamp, "-o", filepath.Join(binDir, "kubelet"), kubeletPackage}, nil},
		{"the container runtime", filepath.Join(modDir, "noderuntime"), runtimeArgs, []string{"CGO_ENABLED=1"}},
	}
	errs := make([]error, len(builds)+1)
	var wg sync.WaitGroup
	for i, b := range builds {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, "go", b.args...)
			cmd.Dir = b.dir
			cmd.Env = append(os.Environ(), b.env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("harness: building %s in %s: %w\n%s", b.what, b.dir, err, out.String())
			}
		})
	}
	var images NodeImages
	wg.Go(func() {
		var err error
		images, err = BuildNodeImages(ctx, dir)
		errs[len(builds)] = err
	})
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return RealNodeBinaries{}, err
		}
	}
	for _, p := range runtimePrograms {
		if !p.cni {
			continue
		}
		if err := os.Rename(filepath.Join(binDir, p.name), filepath.Join(cniDir, p.name)); err != nil {
			return RealNodeBinaries{}, err
		}
	}
	return RealNodeBinaries{
		Kubelet:    filepath.Join(binDir, "kubelet"),
		Containerd: filepath.Join(binDir, "containerd"),
		Ctr:        filepath.Join(binDir, "ctr"),
		Runc:       filepath.Join(binDir, "runc"),
		CNIDir:     cniDir,
		Images:     images,
		BuildTime:  time.Since(start),
	}, nil
}
