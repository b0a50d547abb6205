package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// modulePath is the module that declares the control-plane binaries as tool
// dependencies; BuildBinaries runs the Go toolchain from its directory.
const modulePath = "github.com/podhealth/podhealth/e2e"

// rootModulePath is the library's module, which holds the nested modules
// of examples/controllerruntime and cmd/kubectl-podhealth.
const rootModulePath = "github.com/podhealth/podhealth"

// Packages built by BuildBinaries from the e2e module. They are declared as
// tool dependencies in its go.mod, which pins their versions.
const (
	etcdPackage              = "go.etcd.io/etcd/server/v3"
	apiServerPackage         = "k8s.io/kubernetes/cmd/kube-apiserver"
	controllerManagerPackage = "k8s.io/kubernetes/cmd/kube-controller-manager"
	operatorPackage          = "github.com/podhealth/podhealth/examples/operator"
)

// stripFlags leaves the symbol table and DWARF out of every binary: linking
// kube-apiserver then takes about half the time, and a panic's stack trace
// does not need them.
const stripFlags = "-ldflags=-s -w"

// Binaries holds the paths of the executables the scenarios run: the three
// control-plane programs, the two example controllers and the kubectl plugin.
type Binaries struct {
	// Dir is the directory the binaries were built into.
	Dir string
	// Etcd is the etcd server.
	Etcd string
	// APIServer is kube-apiserver.
	APIServer string
	// ControllerManager is kube-controller-manager.
	ControllerManager string
	// Operator is the library's example operator (examples/operator),
	// built with the e2e module's versions: the client-go of the control
	// plane's release.
	Operator string
	// ControllerRuntime is the controller-runtime example
	// (examples/controllerruntime), built from its own nested module.
	ControllerRuntime string
	// Plugin is the kubectl plugin kubectl-podhealth (cmd/kubectl-podhealth),
	// built from its own nested module with its own dependencies.
	Plugin string
	// Controller is podhealth-controller (cmd/podhealth-controller), built
	// from its own nested module.
	Controller string
	// BuildTime is how long BuildBinaries took.
	BuildTime time.Duration
}

// BuildBinaries builds etcd, kube-apiserver, kube-controller-manager, the
// example operators (examples/operator, examples/controllerruntime) and the
// kubectl plugin (cmd/kubectl-podhealth) into a
// fresh directory under os.TempDir. It is meant to be called once per test
// binary, from TestMain; the Go build cache makes every build after the first
// one on a machine a matter of linking. The caller should call
// [Binaries.Remove] when the tests are done.
//
// The e2e module is located by walking up from the working directory, which
// for `go test` is the directory of the package under test.
func BuildBinaries(ctx context.Context) (Binaries, error) {
	start := time.Now()
	wd, err := os.Getwd()
	if err != nil {
		return Binaries{}, err
	}
	modDir, err := findModuleDir(wd, modulePath)
	if err != nil {
		return Binaries{}, err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return Binaries{}, fmt.Errorf("harness: the go command is needed to build the control plane: %w", err)
	}
	removeStaleBinaryDirs()
	dir, err := os.MkdirTemp("", binDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{
		Dir:               dir,
		Etcd:              filepath.Join(dir, "etcd"),
		APIServer:         filepath.Join(dir, "kube-apiserver"),
		ControllerManager: filepath.Join(dir, "kube-controller-manager"),
	}
	// One invocation builds all four so that compiling and linking overlap.
	// The output directory gets one executable per package, named after the
	// package; etcd's ends in a major-version element, so go names it after
	// the element before it. The operator is built here, at the versions of
	// the control plane's client-go, so that its dependencies are not built
	// a second time at the root module's older floors.
	cmd := exec.CommandContext(ctx, goTool, "build", stripFlags, "-o", dir+string(filepath.Separator),
		etcdPackage, apiServerPackage, controllerManagerPackage, operatorPackage)
	cmd.Dir = modDir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		b.Remove()
		return Binaries{}, fmt.Errorf("harness: go build in %s: %w\n%s", modDir, err, out.String())
	}
	if err := os.Rename(filepath.Join(dir, "server"), b.Etcd); err != nil {
		b.Remove()
		return Binaries{}, fmt.Errorf("harness: locating the etcd binary: %w", err)
	}
	b.Operator = filepath.Join(dir, "podhealth-operator")
	if err := os.Rename(filepath.Join(dir, "operator"), b.Operator); err != nil {
		b.Remove()
		return Binaries{}, fmt.Errorf("harness: locating the operator binary: %w", err)
	}
	rootDir, err := findModuleDir(modDir, rootModulePath)
	if err != nil {
		b.Remove()
		return Binaries{}, err
	}
	// examples/controllerruntime and cmd/kubectl-podhealth are modules of
	// their own (controller-runtime and cobra stay out of the root
	// module's graph), so go builds each from its directory, with the
	// versions its go.mod states (the same as the e2e module's: .ci/run
	// checks that every module shared by two builds is at one version).
	b.ControllerRuntime = filepath.Join(dir, "podhealth-controllerruntime")
	b.Plugin = filepath.Join(dir, "kubectl-podhealth")
	b.Controller = filepath.Join(dir, "podhealth-controller")
	for _, program := range []struct{ out, dir, pkg string }{
		{b.ControllerRuntime, filepath.Join(rootDir, "examples", "controllerruntime"), "."},
		{b.Plugin, filepath.Join(rootDir, "cmd", "kubectl-podhealth"), "."},
		{b.Controller, filepath.Join(rootDir, "cmd", "podhealth-controller"), "."},
	} {
		cmd := exec.CommandContext(ctx, goTool, "build", stripFlags, "-o", program.out, program.pkg)
		cmd.Dir = program.dir
		out.Reset()
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Run(); err != nil {
			b.Remove()
			return Binaries{}, fmt.Errorf("harness: go build %s in %s: %w\n%s", program.pkg, program.dir, err, out.String())
		}
	}
	for _, p := range []string{b.Etcd, b.APIServer, b.ControllerManager, b.Operator, b.ControllerRuntime, b.Plugin, b.Controller} {
		if _, err := os.Stat(p); err != nil {
			b.Remove()
			return Binaries{}, fmt.Errorf("harness: build produced no %s: %w", filepath.Base(p), err)
		}
	}
	b.BuildTime = time.Since(start)
	return b, nil
}

// Remove deletes the directory the binaries were built into.
func (b Binaries) Remove() error {
	if b.Dir == "" {
		return nil
	}
	return os.RemoveAll(b.Dir)
}

// binDirPrefix starts the name of every directory BuildBinaries creates; the
// building process's PID follows it.
const binDirPrefix = "podhealth-e2e-bin-"

// removeStaleBinaryDirs deletes binary directories left behind by test
// binaries that died before calling Remove, for example on Ctrl-C: those whose
// PID no longer names a live process.
func removeStaleBinaryDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, dir := range matches {
		rest := strings.TrimPrefix(filepath.Base(dir), binDirPrefix)
		pidText, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		os.RemoveAll(dir)
	}
}

// findModuleDir returns the first directory at or above dir whose go.mod
// declares the module path want.
func findModuleDir(dir, want string) (string, error) {
	for d := dir; ; {
		if path, err := readModulePath(filepath.Join(d, "go.mod")); err == nil && path == want {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("harness: no go.mod for module %s at or above %s", want, dir)
		}
		d = parent
	}
}

// readModulePath returns the path in the module directive of a go.mod file.
func readModulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no module directive")
}
