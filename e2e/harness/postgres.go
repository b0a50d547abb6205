package harness

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The images of the real database's pods, in the archive that
// [BuildPostgresImages] writes and [RealNode.ImportImages] imports on the
// nodes that run them.
const (
	// PostgresImage runs PostgreSQL 15 from the machine's own Debian
	// packages, behind e2e/nodeimages/pgstart: it waits until the
	// sidecar's GET /may-write answers 200, creates the cluster in
	// $PGDATA with page checksums if there is none, and becomes postgres
	// on 127.0.0.1:5432 of the pod's network. Its stop signal is SIGINT
	// (PostgreSQL's fast shutdown); it runs as [PostgresImages.UID].
	PostgresImage = "e2e.podhealth.io/postgres:v1"
	// SelfFenceImage runs cmd/podhealth-selffence, the protocol's sidecar.
	SelfFenceImage = "e2e.podhealth.io/selffence:v1"
)

// postgresRelease is the PostgreSQL release the image packs: Debian's
// postgresql-15 (.ci/run installs it where it is missing).
const postgresRelease = "15"

// PostgresImages is the archive of PostgresImage and SelfFenceImage.
type PostgresImages struct {
	// Archive is a docker-archive tarball, as NodeImages.Archive.
	Archive string
	// UID and GID are the postgres user's and group's ids, the machine's
	// own, which the image's /etc/passwd names: the server runs as them,
	// and its data directory must be theirs (mode 0700).
	UID, GID int64
	// Bin is the machine's directory of PostgreSQL's programs, whose
	// clients (psql, pg_amcheck, pg_checksums) the tests run.
	Bin string
	// SelfFence is the podhealth-selffence binary that SelfFenceImage
	// runs, for its --print-annotations.
	SelfFence string
}

// PostgresSupport says why the database's images cannot be built here,
// or nil: PostgreSQL's programs and the postgres user must be on the
// machine (Debian's postgresql-15).
func PostgresSupport() error {
	bin := postgresBin()
	for _, p := range []string{"postgres", "initdb", "pg_amcheck", "pg_checksums"} {
		if _, err := os.Stat(filepath.Join(bin, p)); err != nil {
			return fmt.Errorf("PostgreSQL %s is not installed (apt-get install postgresql-%s): %w", postgresRelease, postgresRelease, err)
		}
	}
	if _, err := user.Lookup("postgres"); err != nil {
		return fmt.Errorf("no postgres user (apt-get install postgresql-%s makes it): %w", postgresRelease, err)
	}
	return nil
}

func postgresBin() string { return "/usr/lib/postgresql/" + postgresRelease + "/bin" }

// BuildPostgresImages packs PostgresImage from the machine's own files
// (PostgreSQL's programs and the shared libraries they load, found by
// ldd; its data files for initdb; dash as /bin/sh, which initdb runs; the
// UTC zone; a passwd naming the machine's postgres user) with pgstart,
// and SelfFenceImage from cmd/podhealth-selffence, both static Go
// binaries, into one archive in dir.
func BuildPostgresImages(ctx context.Context, dir string) (PostgresImages, error) {
	if err := PostgresSupport(); err != nil {
		return PostgresImages{}, err
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		return PostgresImages{}, err
	}
	uid, err1 := strconv.ParseInt(pg.Uid, 10, 64)
	gid, err2 := strconv.ParseInt(pg.Gid, 10, 64)
	if err1 != nil || err2 != nil {
		return PostgresImages{}, fmt.Errorf("harness: the postgres user's ids %q:%q", pg.Uid, pg.Gid)
	}
	binDir := filepath.Join(dir, "postgres-image-binaries")
	if err := buildStatic(ctx, binDir, modulePath+"/nodeimages/pgstart", "github.com/podhealth/podhealth/cmd/podhealth-selffence"); err != nil {
		return PostgresImages{}, fmt.Errorf("harness: building pgstart and podhealth-selffence: %w", err)
	}

	layer := newLayer()
	if err := layer.addFile("/pgstart", filepath.Join(binDir, "pgstart"), 0o755); err != nil {
		return PostgresImages{}, err
	}
	if err := layer.addFile("/bin/sh", "/bin/dash", 0o755); err != nil {
		return PostgresImages{}, err
	}
	bin := postgresBin()
	programs := []string{filepath.Join(bin, "postgres"), filepath.Join(bin, "initdb"), "/bin/dash"}
	for _, p := range programs[:2] {
		if err := layer.addFile(p, p, 0o755); err != nil {
			return PostgresImages{}, err
		}
	}
	libs, err := sharedLibraries(ctx, programs...)
	if err != nil {
		return PostgresImages{}, err
	}
	for _, l := range libs {
		if err := layer.addFile(l, l, 0o755); err != nil {
			return PostgresImages{}, err
		}
	}
	// The modules the cluster loads: PL/pgSQL and the snowball
	// dictionaries (initdb installs both), and amcheck (pg_amcheck).
	lib := "/usr/lib/postgresql/" + postgresRelease + "/lib"
	for _, m := range []string{"plpgsql.so", "dict_snowball.so", "amcheck.so"} {
		if err := layer.addFile(filepath.Join(lib, m), filepath.Join(lib, m), 0o755); err != nil {
			return PostgresImages{}, err
		}
	}
	share := "/usr/share/postgresql/" + postgresRelease
	if err := filepath.WalkDir(share, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "man" || d.Name() == "contrib"):
			return filepath.SkipDir
		case d.Type().IsRegular():
			return layer.addFile(path, path, 0o644)
		}
		return nil
	}); err != nil {
		return PostgresImages{}, err
	}
	for _, z := range []string{"/usr/share/zoneinfo/UTC", "/usr/share/zoneinfo/Etc/UTC"} {
		if err := layer.addFile(z, z, 0o644); err != nil {
			return PostgresImages{}, err
		}
	}
	layer.addBytes("/etc/passwd", fmt.Appendf(nil, "root:x:0:0::/root:/bin/sh\npostgres:x:%d:%d::/var/lib/postgresql:/bin/sh\n", uid, gid), 0o644)
	layer.addBytes("/etc/group", fmt.Appendf(nil, "root:x:0:\npostgres:x:%d:\n", gid), 0o644)
	layer.addDir("/tmp", 0o1777|fs.ModeSticky, 0, 0)
	layer.addDir("/var/lib/postgresql", 0o700, uid, gid)

	selfFence, err := os.ReadFile(filepath.Join(binDir, "podhealth-selffence"))
	if err != nil {
		return PostgresImages{}, err
	}
	sidecar := newLayer()
	sidecar.addBytes("/podhealth-selffence", selfFence, 0o755)

	path := filepath.Join(dir, "postgres-images.tar")
	err = writeImageArchive(path, []archivedImage{
		{tag: PostgresImage, layer: layer, config: map[string]any{
			"Entrypoint": []string{"/pgstart"},
			"Env":        []string{"PATH=" + bin + ":/bin", "TZ=UTC", "HOME=/var/lib/postgresql"},
			"User":       fmt.Sprintf("%d:%d", uid, gid),
			"StopSignal": "SIGINT",
		}},
		{tag: SelfFenceImage, layer: sidecar, config: map[string]any{"Entrypoint": []string{"/podhealth-selffence"}}},
	})
	if err != nil {
		return PostgresImages{}, err
	}
	return PostgresImages{Archive: path, UID: uid, GID: gid, Bin: bin, SelfFence: filepath.Join(binDir, "podhealth-selffence")}, nil
}

// sharedLibraries are the files of the shared libraries that programs
// load, with the dynamic loader, as ldd resolves them.
func sharedLibraries(ctx context.Context, programs ...string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", programs...).Output()
	if err != nil {
		return nil, fmt.Errorf("harness: ldd %s: %w", strings.Join(programs, " "), err)
	}
	seen := map[string]bool{}
	s := bufio.NewScanner(bytes.NewReader(out))
	for s.Scan() {
		fields := strings.Fields(s.Text())
		var path string
		switch {
		case len(fields) >= 3 && fields[1] == "=>" && strings.HasPrefix(fields[2], "/"):
			path = fields[2]
		case len(fields) >= 1 && strings.HasPrefix(fields[0], "/") && strings.Contains(fields[0], "ld-linux"):
			path = fields[0]
		case len(fields) >= 2 && fields[1] == "=>" && fields[2] == "not":
			return nil, fmt.Errorf("harness: a library of %s is missing: %s", strings.Join(programs, " "), s.Text())
		}
		if path != "" {
			seen[path] = true
		}
	}
	libs := make([]string, 0, len(seen))
	for l := range seen {
		libs = append(libs, l)
	}
	sort.Strings(libs)
	return libs, nil
}

// layer is an image layer's files, by path in the image.
type layer struct {
	entries map[string]layerEntry
}

type layerEntry struct {
	data     []byte
	mode     fs.FileMode
	dir      bool
	uid, gid int64
}

func newLayer() *layer { return &layer{entries: map[string]layerEntry{}} }

// addFile adds the machine's file from (its target, if a link) at path.
func (l *layer) addFile(path, from string, mode fs.FileMode) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("harness: packing %s: %w", from, err)
	}
	l.addBytes(path, data, mode)
	return nil
}

func (l *layer) addBytes(path string, data []byte, mode fs.FileMode) {
	l.entries[path] = layerEntry{data: data, mode: mode}
}

func (l *layer) addDir(path string, mode fs.FileMode, uid, gid int64) {
	l.entries[path] = layerEntry{dir: true, mode: mode, uid: uid, gid: gid}
}

// tarball writes the layer, every parent directory first, in path order.
func (l *layer) tarball() ([]byte, error) {
	dirs := map[string]bool{}
	for p, e := range l.entries {
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			dirs[d] = true
		}
		if e.dir {
			dirs[p] = true
		}
	}
	paths := make([]string, 0, len(dirs)+len(l.entries))
	for d := range dirs {
		paths = append(paths, d)
	}
	for p, e := range l.entries {
		if !e.dir {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, p := range paths {
		e, ok := l.entries[p]
		h := &tar.Header{Name: p[1:], ModTime: time.Unix(0, 0), Uid: int(e.uid), Gid: int(e.gid)}
		switch {
		case !ok:
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, p[1:]+"/", 0o755
		case e.dir:
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, p[1:]+"/", int64(e.mode.Perm())
			if e.mode&fs.ModeSticky != 0 {
				h.Mode |= 0o1000
			}
		default:
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, int64(e.mode.Perm()), int64(len(e.data))
		}
		if err := w.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := w.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// archivedImage is an image of one layer for writeImageArchive: its tag,
// its layer and its config's "config" object (Entrypoint, Env, ...).
type archivedImage struct {
	tag    string
	layer  *layer
	config map[string]any
}

// writeImageArchive writes images as a docker-archive tarball at path, as
// BuildNodeImages does.
func writeImageArchive(path string, images []archivedImage) error {
	var archive bytes.Buffer
	w := tar.NewWriter(&archive)
	type manifestEntry struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	var manifest []manifestEntry
	for _, img := range images {
		layer, err := img.layer.tarball()
		if err != nil {
			return err
		}
		layerDigest := sha256.Sum256(layer)
		config, err := json.Marshal(map[string]any{
			"architecture": runtime.GOARCH,
			"os":           "linux",
			"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
			"config":       img.config,
			"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(layerDigest[:])}},
		})
		if err != nil {
			return err
		}
		configDigest := sha256.Sum256(config)
		configName := hex.EncodeToString(configDigest[:]) + ".json"
		layerName := hex.EncodeToString(layerDigest[:]) + "/layer.tar"
		if err := addTarFile(w, configName, config); err != nil {
			return err
		}
		if err := addTarFile(w, layerName, layer); err != nil {
			return err
		}
		manifest = append(manifest, manifestEntry{Config: configName, RepoTags: []string{img.tag}, Layers: []string{layerName}})
	}
	manifestJSON, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	if err := addTarFile(w, "manifest.json", manifestJSON); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, archive.Bytes(), 0o644)
}
