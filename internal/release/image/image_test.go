package image_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/require"

	"github.com/podhealth/podhealth/internal/release/image"
)

var (
	amd64 = image.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = image.Platform{OS: "linux", Architecture: "arm64"}
)

func options() image.Options {
	return image.Options{
		Binaries: map[image.Platform][]byte{
			amd64: []byte("\x7fELF amd64 binary"),
			arm64: []byte("\x7fELF arm64 binary"),
		},
		License:  []byte("Apache License\nVersion 2.0\n"),
		Version:  "v0.2.0",
		Revision: strings.Repeat("ab", 20),
		Created:  time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
	}
}

func digest(t *testing.T, o image.Options) v1.Hash {
	t.Helper()
	index, err := image.Build(o)
	require.NoError(t, err)
	d, err := index.Digest()
	require.NoError(t, err)
	return d
}

func TestBuildIsReproducibleAndEveryInputMovesTheDigest(t *testing.T) {
	base := digest(t, options())
	require.Equal(t, base, digest(t, options()), "two builds from the same inputs")

	changes := map[string]func(*image.Options){
		"binary":   func(o *image.Options) { o.Binaries[arm64] = []byte("\x7fELF other") },
		"license":  func(o *image.Options) { o.License = []byte("other") },
		"version":  func(o *image.Options) { o.Version = "v0.2.1" },
		"revision": func(o *image.Options) { o.Revision = strings.Repeat("cd", 20) },
		"created":  func(o *image.Options) { o.Created = o.Created.Add(time.Second) },
		"source":   func(o *image.Options) { o.Source = "https://example.com/fork" },
		"platform": func(o *image.Options) { delete(o.Binaries, arm64) },
		"name":     func(o *image.Options) { o.Name = "podhealth-selffence" },
	}
	for what, change := range changes {
		t.Run(what, func(t *testing.T) {
			o := options()
			change(&o)
			require.NotEqual(t, base, digest(t, o))
		})
	}
}

func TestIndexHoldsOneValidNonRootImagePerPlatformWithOCILabels(t *testing.T) {
	o := options()
	index, err := image.Build(o)
	require.NoError(t, err)
	// validate.Index runs on the index as written and read back (in the
	// layout and push tests): on the one mutate builds in memory, it
	// trips over a nil annotations map that serializes as none.

	manifest, err := index.IndexManifest()
	require.NoError(t, err)
	require.Equal(t, types.OCIImageIndex, manifest.MediaType)
	require.Equal(t, o.Labels(), manifest.Annotations)
	require.Len(t, manifest.Manifests, 2)
	for i, want := range []image.Platform{amd64, arm64} {
		desc := manifest.Manifests[i]
		require.Equal(t, types.OCIManifestSchema1, desc.MediaType)
		require.Equal(t, &v1.Platform{OS: want.OS, Architecture: want.Architecture}, desc.Platform)

		img, err := index.Image(desc.Digest)
		require.NoError(t, err)
		config, err := img.ConfigFile()
		require.NoError(t, err)
		require.Equal(t, want.OS, config.OS)
		require.Equal(t, want.Architecture, config.Architecture)
		require.Equal(t, "65532:65532", config.Config.User)
		require.Equal(t, []string{"/podhealth-controller"}, config.Config.Entrypoint)
		require.Empty(t, config.Config.Cmd)
		require.Equal(t, o.Created, config.Created.UTC())
		require.Equal(t, map[string]string{
			"org.opencontainers.image.source":   "https://github.com/podhealth/podhealth",
			"org.opencontainers.image.version":  "v0.2.0",
			"org.opencontainers.image.revision": o.Revision,
			"org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.created":  "2026-11-30T12:00:00Z",
			"org.opencontainers.image.title":    "podhealth-controller",
		}, config.Config.Labels)

		files := layerFiles(t, img)
		require.Equal(t, string(o.Binaries[want]), files["podhealth-controller"].body)
		require.Equal(t, int64(0o555), files["podhealth-controller"].mode)
		require.Equal(t, string(o.License), files["LICENSE"].body)
		require.Contains(t, files["etc/passwd"].body, "nonroot:x:65532:65532:")
		require.Equal(t, int64(0o1777), files["tmp/"].mode)
		for name, f := range files {
			require.Equal(t, 0, f.uid, name)
			require.Equal(t, 0, f.gid, name)
			require.True(t, f.modTime.Equal(o.Created), "%s: modification time %s", name, f.modTime)
		}
	}
}

type file struct {
	body     string
	mode     int64
	uid, gid int
	modTime  time.Time
}

func layerFiles(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer func() { require.NoError(t, rc.Close()) }()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = file{body: string(body), mode: h.Mode, uid: h.Uid, gid: h.Gid, modTime: h.ModTime}
	}
}

func TestBuildRefusesEveryMissingOrMalformedInput(t *testing.T) {
	cases := map[string]func(*image.Options){
		"no binaries":      func(o *image.Options) { o.Binaries = nil },
		"empty binary":     func(o *image.Options) { o.Binaries[arm64] = nil },
		"platform w/o OS":  func(o *image.Options) { o.Binaries[image.Platform{Architecture: "amd64"}] = []byte("x") },
		"no license":       func(o *image.Options) { o.License = nil },
		"no version":       func(o *image.Options) { o.Version = "" },
		"version w/o v":    func(o *image.Options) { o.Version = "0.2.0" },
		"short revision":   func(o *image.Options) { o.Revision = "abcdef1" },
		"zero created":     func(o *image.Options) { o.Created = time.Time{} },
		"revision unknown": func(o *image.Options) { o.Revision = "unknown" },
		"unknown program":  func(o *image.Options) { o.Name = "sh" },
	}
	for what, change := range cases {
		t.Run(what, func(t *testing.T) {
			o := options()
			change(&o)
			_, err := image.Build(o)
			require.ErrorIs(t, err, image.ErrInvalidOptions)
		})
	}
}

func TestWriteLayoutNamesTheIndexByItsDigest(t *testing.T) {
	index, err := image.Build(options())
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "oci")
	require.NoError(t, image.WriteLayout(dir, index, "v0.2.0"))

	path, err := layout.FromPath(dir)
	require.NoError(t, err)
	top, err := path.ImageIndex()
	require.NoError(t, err)
	manifest, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, manifest.Manifests, 1)
	want, err := index.Digest()
	require.NoError(t, err)
	require.Equal(t, want, manifest.Manifests[0].Digest)
	require.Equal(t, "v0.2.0", manifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	read, err := top.ImageIndex(want)
	require.NoError(t, err)
	require.NoError(t, validate.Index(read))
	_, err = os.Stat(filepath.Join(dir, "oci-layout"))
	require.NoError(t, err)
}

func TestPushWritesTheIndexThatARegistryThenServesByDigest(t *testing.T) {
	server := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(server.Close)
	host := strings.TrimPrefix(server.URL, "http://")
	require.True(t, strings.HasPrefix(host, "127.0.0.1:"), "the test registry listens on loopback: %s", host)

	index, err := image.Build(options())
	require.NoError(t, err)
	pushed, err := image.Push(context.Background(), index, host+"/podhealth/podhealth-controller:v0.2.0")
	require.NoError(t, err)
	want, err := index.Digest()
	require.NoError(t, err)
	require.Equal(t, want.String(), pushed.DigestStr())

	for _, ref := range []string{pushed.String(), host + "/podhealth/podhealth-controller:v0.2.0"} {
		r, err := name.ParseReference(ref)
		require.NoError(t, err)
		got, err := remote.Index(r)
		require.NoError(t, err)
		d, err := got.Digest()
		require.NoError(t, err)
		require.Equal(t, want, d, ref)
		require.NoError(t, validate.Index(got))
	}
}

// The sidecar's image is the controller's but for its program: its binary
// at /podhealth-selffence, its entrypoint and its title.
func TestTheSidecarsImageHoldsItsOwnProgram(t *testing.T) {
	o := options()
	o.Name = "podhealth-selffence"
	index, err := image.Build(o)
	require.NoError(t, err)
	manifest, err := index.IndexManifest()
	require.NoError(t, err)
	require.Equal(t, "podhealth-selffence", manifest.Annotations["org.opencontainers.image.title"])
	img, err := index.Image(manifest.Manifests[0].Digest)
	require.NoError(t, err)
	config, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"/podhealth-selffence"}, config.Config.Entrypoint)
	files := layerFiles(t, img)
	require.Equal(t, string(o.Binaries[amd64]), files["podhealth-selffence"].body)
	require.NotContains(t, files, "podhealth-controller")
}
