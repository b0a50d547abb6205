// Command build-image builds the container image of podhealth-controller
// (or, with -program, of podhealth-selffence) from a clean git checkout, with no daemon and no base image to pull: the static
// binary for each platform, built with the go command, packed by package
// image into an OCI image index, written as an OCI image layout and, with
// -push, pushed to a registry.
//
//	go -C internal/release run ./cmd/build-image -src ../.. -version v0.2.0 -out /tmp/oci
//	go -C internal/release run ./cmd/build-image -src ../.. -version v0.2.0 -out /tmp/oci -push ghcr.io/podhealth/podhealth-controller:v0.2.0
//
// It prints the index's digest (sha256:...) on its last line, and with -push
// the reference by digest it pushed. Built twice from the same commit with
// the same Go release, the digest is the same (.ci/image checks it).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/podhealth/podhealth/internal/release/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "build-image:", err)
		os.Exit(1)
	}
}

func run() error {
	src := flag.String("src", ".", "the repository's root: a clean git checkout")
	version := flag.String("version", "dev", `the release the image is of: "dev" or vMAJOR.MINOR.PATCH`)
	out := flag.String("out", "", "the directory to write the OCI image layout to (must not exist, or be empty), outside the checkout; empty means a new temporary directory")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "the platforms, os/arch, comma-separated")
	push := flag.String("push", "", "a reference (registry/repository:tag) to push the index to")
	program := flag.String("program", image.Programs[0], fmt.Sprintf("the program: one of %q", image.Programs))
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	root, err := filepath.Abs(*src)
	if err != nil {
		return err
	}
	layout, err := outDir(*out, root)
	if err != nil {
		return err
	}
	out = &layout
	if status, err := git(ctx, root, "status", "--porcelain"); err != nil {
		return err
	} else if status != "" {
		// A dirty tree would be stamped into the binary (vcs.modified) and
		// the revision label would name a commit the image is not.
		return fmt.Errorf("%s has uncommitted changes; the image is built from a commit:\n%s", root, status)
	}
	revision, err := git(ctx, root, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	epoch, err := git(ctx, root, "log", "-1", "--format=%ct")
	if err != nil {
		return err
	}
	seconds, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("commit time %q: %w", epoch, err)
	}
	if !slices.Contains(image.Programs, *program) {
		return fmt.Errorf("-program %q: want one of %q", *program, image.Programs)
	}
	// The program's own module's LICENSE; podhealth-selffence is a
	// command of the root module.
	license, err := os.ReadFile(filepath.Join(root, "cmd", *program, "LICENSE"))
	if errors.Is(err, fs.ErrNotExist) {
		license, err = os.ReadFile(filepath.Join(root, "LICENSE"))
	}
	if err != nil {
		return err
	}
	options := image.Options{
		Name:     *program,
		Binaries: map[image.Platform][]byte{},
		License:  license,
		Version:  *version,
		Revision: revision,
		Created:  time.Unix(seconds, 0).UTC(),
	}
	scratch, err := os.MkdirTemp("", "build-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	for _, p := range strings.Split(*platforms, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || goarch == "" {
			return fmt.Errorf("platform %q: want os/arch", p)
		}
		binary, err := build(ctx, root, scratch, *program, goos, goarch)
		if err != nil {
			return err
		}
		if goos == runtime.GOOS && goarch == runtime.GOARCH {
			if err := checkVersion(ctx, filepath.Join(scratch, *program+"-"+goos+"-"+goarch), revision); err != nil {
				return err
			}
		}
		options.Binaries[image.Platform{OS: goos, Architecture: goarch}] = binary
	}
	index, err := image.Build(options)
	if err != nil {
		return err
	}
	if err := image.WriteLayout(*out, index, *version); err != nil {
		return err
	}
	digest, err := index.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote the OCI image layout of %s %s (%s) to %s\n", *program, *version, *platforms, *out)
	if *push != "" {
		pushed, err := image.Push(ctx, index, *push)
		if err != nil {
			return err
		}
		fmt.Println("pushed", pushed)
	}
	fmt.Println(digest)
	return nil
}

// outDir is where the image layout goes: out, which must not lie inside
// the checkout at root (the next build would find the checkout dirty and
// refuse it), or a new temporary directory when out is empty.
func outDir(out, root string) (string, error) {
	if out == "" {
		return os.MkdirTemp("", "podhealth-controller-oci-")
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(root, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("-out %s is inside the checkout %s: the next build would find it dirty; write the layout elsewhere, or leave -out empty for a temporary directory", out, root)
	}
	return abs, nil
}

// build compiles program for one platform: static, with no paths or build
// IDs of this machine, and with the commit stamped by the go command's VCS
// stamping (its --version prints it), asked for explicitly:
// GOFLAGS=-buildvcs=false in the environment would drop it.
func build(ctx context.Context, root, scratch, program, goos, goarch string) ([]byte, error) {
	out := filepath.Join(scratch, program+"-"+goos+"-"+goarch)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=true", "-ldflags=-s -w -buildid=", "-o", out, ".")
	cmd.Dir = filepath.Join(root, "cmd", program)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOWORK=off")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building for %s/%s: %w", goos, goarch, err)
	}
	return os.ReadFile(out)
}

// checkVersion runs the binary built for this machine: its --version must
// name the commit, not dirty, as an admin reading it from a pod would.
func checkVersion(ctx context.Context, binary, revision string) error {
	out, err := exec.CommandContext(ctx, binary, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %w: %s", binary, err, out)
	}
	// version.Of prints "(commit X, go1.26.0)", and "X, dirty" for a dirty tree.
	if !strings.Contains(string(out), "commit "+revision[:12]+", go") {
		return fmt.Errorf("%s --version printed %q, which does not name commit %s (clean)", binary, strings.TrimSpace(string(out)), revision[:12])
	}
	return nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}
