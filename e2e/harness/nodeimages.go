package harness

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// The images of the real nodes, as their pods name them. Nothing pulls
// them: each node's containerd imports them from [NodeImages.Archive], and
// pods name them with imagePullPolicy Never.
const (
	// PauseImage is the pod sandbox's image (containerd's pinned sandbox
	// image on every real node).
	PauseImage = "e2e.podhealth.io/pause:v1"
	// WriterImage runs e2e/nodeimages/writer: it appends a line
	// "IDENTITY UID SEQUENCE UNIX_NANOSECONDS" to $WRITES_FILE every
	// $WRITE_INTERVAL (100 ms by default) until SIGTERM.
	WriterImage = "e2e.podhealth.io/writer:v1"
)

// nodeImagePrograms are the packages of the e2e module that the images
// run, each as its image's one file and entrypoint.
var nodeImagePrograms = []struct{ image, pkg, file string }{
	{PauseImage, modulePath + "/nodeimages/pause", "/pause"},
	{WriterImage, modulePath + "/nodeimages/writer", "/writer"},
}

// NodeImages is the image archive that real nodes import.
type NodeImages struct {
	// Archive is a docker-archive tarball (what `docker save` writes)
	// holding PauseImage and WriterImage, each one layer with one static
	// binary.
	Archive string
}

// BuildNodeImages builds the programs of the real nodes' images as static
// binaries and writes them, as images of one layer each, into one archive
// in dir. The archive is written by hand in the format of `docker save`:
// a manifest, a config per image and a layer per image, which
// `ctr images import` takes; go-containerregistry would do the same at
// the cost of a dependency graph that raises modules the other modules
// build.
func BuildNodeImages(ctx context.Context, dir string) (NodeImages, error) {
	binDir := filepath.Join(dir, "image-binaries")
	pkgs := make([]string, 0, len(nodeImagePrograms))
	for _, p := range nodeImagePrograms {
		pkgs = append(pkgs, p.pkg)
	}
	if err := buildStatic(ctx, binDir, pkgs...); err != nil {
		return NodeImages{}, fmt.Errorf("harness: building the node images' programs: %w", err)
	}
	var images []archivedImage
	for _, p := range nodeImagePrograms {
		l := newLayer()
		if err := l.addFile(p.file, filepath.Join(binDir, filepath.Base(p.pkg)), 0o755); err != nil {
			return NodeImages{}, err
		}
		images = append(images, archivedImage{tag: p.image, layer: l, config: map[string]any{"Entrypoint": []string{p.file}}})
	}
	path := filepath.Join(dir, "node-images.tar")
	if err := writeImageArchive(path, images); err != nil {
		return NodeImages{}, err
	}
	return NodeImages{Archive: path}, nil
}

// buildStatic builds pkgs, from the e2e module, as static binaries in
// binDir: the images hold nothing else, not even a C library.
func buildStatic(ctx context.Context, binDir string, pkgs ...string) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	modDir, err := findModuleDir(wd, modulePath)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", stripFlags, "-o", binDir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

func addTarFile(w *tar.Writer, name string, data []byte) error {
	if err := w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}
