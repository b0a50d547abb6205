package main

import (
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
)

// dockerfile is the part of the Dockerfile that the test reads.
type dockerfile struct {
	stages []dockerStage
}

type dockerStage struct {
	from       string
	runs       []string          // RUN commands, continuation lines joined
	copies     map[string]string // destination -> flags and source
	user       string
	args       []string // ARG names
	entrypoint []string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	var df dockerfile
	var line string
	for _, raw := range strings.Split(string(data), "\n") {
		raw = strings.TrimSpace(raw)
		if strings.HasPrefix(raw, "#") || raw == "" && line == "" {
			continue
		}
		if cont, ok := strings.CutSuffix(raw, `\`); ok {
			line += cont + " "
			continue
		}
		line += raw
		instruction, args, _ := strings.Cut(line, " ")
		line = ""
		args = strings.TrimSpace(args)
		switch strings.ToUpper(instruction) {
		case "FROM":
			df.stages = append(df.stages, dockerStage{from: args, copies: map[string]string{}})
			continue
		case "":
			continue
		}
		require.NotEmpty(t, df.stages, "%s before FROM", instruction)
		stage := &df.stages[len(df.stages)-1]
		switch strings.ToUpper(instruction) {
		case "RUN":
			stage.runs = append(stage.runs, args)
		case "COPY":
			fields := strings.Fields(args)
			stage.copies[fields[len(fields)-1]] = strings.Join(fields[:len(fields)-1], " ")
		case "USER":
			stage.user = args
		case "ARG":
			name, _, _ := strings.Cut(args, "=")
			stage.args = append(stage.args, name)
		case "ENTRYPOINT":
			require.NoError(t, json.Unmarshal([]byte(args), &stage.entrypoint), "ENTRYPOINT in exec form")
		}
	}
	require.Len(t, df.stages, 2, "a build stage and the image")
	return df
}

// TestDockerfileBuildsAStaticBinaryThatRunsAsTheDeploymentsUser checks what
// an image build would produce, without the registries its base images
// come from: the build stage's own command, run here from the repository's
// root, makes a statically linked binary (the image has no C library),
// which runs as the non-root user that both the image and the Deployment
// name; and the image's entrypoint is the binary it copies.
func TestDockerfileBuildsAStaticBinaryThatRunsAsTheDeploymentsUser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	df := readDockerfile(t)
	build, image := df.stages[0], df.stages[1]
	require.Contains(t, image.from, ":nonroot")
	require.Len(t, image.entrypoint, 1)
	binary := image.entrypoint[0]
	built, ok := image.copies[binary]
	require.True(t, ok, "the image copies its entrypoint %s", binary)
	require.Contains(t, built, "--from=build")
	built = strings.Fields(built)[len(strings.Fields(built))-1]

	uid, gid, ok := strings.Cut(image.user, ":")
	require.True(t, ok, "USER uid:gid, numeric, so that runAsNonRoot can check it")
	uidN, err := strconv.Atoi(uid)
	require.NoError(t, err)
	gidN, err := strconv.Atoi(gid)
	require.NoError(t, err)
	require.NotZero(t, uidN, "not root")
	var d appsv1.Deployment
	readManifest(t, "deployment.yaml", &d)
	require.Equal(t, int64(uidN), *d.Spec.Template.Spec.SecurityContext.RunAsUser, "the Deployment runs as the image's user")

	// The build stage's command, from the repository's root (its WORKDIR),
	// writing to a directory of the test's instead of /out.
	require.Len(t, build.runs, 1)
	// Not t.TempDir, whose parent only root may enter: the image's user
	// runs the binary below.
	out, err := os.MkdirTemp("", "podhealth-image-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(out) })
	require.NoError(t, os.Chmod(out, 0o755))
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(build.runs[0], filepath.Dir(built), out))
	cmd.Dir = filepath.Join("..", "..")
	// docker build --build-arg VERSION=v9.8.7: the ARG is in the RUN's
	// environment.
	require.Contains(t, build.args, "VERSION")
	cmd.Env = append(os.Environ(), "VERSION=v9.8.7")
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", output)
	path := filepath.Join(out, filepath.Base(built))

	f, err := elf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "statically linked: no dynamic loader")
		require.NotEqual(t, elf.PT_DYNAMIC, p.Type, "statically linked: no shared libraries")
	}

	run := exec.Command(path, "--help")
	if os.Geteuid() == 0 {
		run.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uidN), Gid: uint32(gidN)}}
	}
	usage, err := run.CombinedOutput()
	require.NoError(t, err, "%s", usage)
	require.Contains(t, string(usage), "-namespace-selector")

	// With no VCS stamp, --version names the VERSION build argument.
	versionOut, err := exec.Command(path, "--version").CombinedOutput()
	require.NoError(t, err, "%s", versionOut)
	require.True(t, strings.HasPrefix(string(versionOut), "podhealth-controller v9.8.7 ("), "%s", versionOut)
}
