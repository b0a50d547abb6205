package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts, which manifests and docs rely on.
const (
	// User is the numeric user and group the controller runs as: the
	// nonroot user of distroless images, which the Deployment's
	// securityContext also names.
	User = "65532:65532"
	// Entrypoint is where podhealth-controller's binary is in its image;
	// another program's is "/" and its Name.
	Entrypoint = "/podhealth-controller"
	// DefaultSource is the repository the image's source label names.
	DefaultSource = "https://github.com/podhealth/podhealth"
	// Licenses is the SPDX expression of the image's license label.
	Licenses = "Apache-2.0"
)

// Platform is an operating system and architecture the image is built for.
type Platform struct {
	OS           string
	Architecture string
}

func (p Platform) String() string { return p.OS + "/" + p.Architecture }

// Programs are the programs an image can be built of, each the image's
// Name.
var Programs = []string{"podhealth-controller", "podhealth-selffence"}

// Options is what an image is built from. Every field but Name and Source
// is required; Build refuses a zero one.
type Options struct {
	// Name is the program: one of Programs. Empty means
	// podhealth-controller. The binary is /Name, the image's entrypoint,
	// and Name its title.
	Name string
	// Binaries holds the controller's static binary for each platform.
	Binaries map[Platform][]byte
	// License is the text put at /LICENSE.
	License []byte
	// Version is the release the image is of, "v0.2.0" or "dev".
	Version string
	// Revision is the full commit the binaries were built from.
	Revision string
	// Created is the image's creation time and every file's modification
	// time: the commit's time, so that a rebuild gives the same digest.
	Created time.Time
	// Source is the repository the image's labels name; empty means
	// DefaultSource.
	Source string
}

var (
	revisionPattern = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
	versionPattern  = regexp.MustCompile(`^(dev|v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)$`)
)

// ErrInvalidOptions is what Build's errors for bad Options wrap.
var ErrInvalidOptions = errors.New("invalid image options")

// name is Name, with its default.
func (o Options) name() string {
	if o.Name == "" {
		return Programs[0]
	}
	return o.Name
}

func (o Options) validate() error {
	var errs []error
	if !slices.Contains(Programs, o.name()) {
		errs = append(errs, fmt.Errorf("name %q: want one of %q", o.Name, Programs))
	}
	if len(o.Binaries) == 0 {
		errs = append(errs, errors.New("no binaries: at least one platform is needed"))
	}
	for p, b := range o.Binaries {
		if p.OS == "" || p.Architecture == "" {
			errs = append(errs, fmt.Errorf("platform %q: both OS and architecture are needed", p))
		}
		if len(b) == 0 {
			errs = append(errs, fmt.Errorf("platform %s: the binary is empty", p))
		}
	}
	if len(o.License) == 0 {
		errs = append(errs, errors.New("license: empty"))
	}
	if !versionPattern.MatchString(o.Version) {
		errs = append(errs, fmt.Errorf("version %q: want dev or vMAJOR.MINOR.PATCH", o.Version))
	}
	if !revisionPattern.MatchString(o.Revision) {
		errs = append(errs, fmt.Errorf("revision %q: want a full commit hash", o.Revision))
	}
	if o.Created.IsZero() {
		errs = append(errs, errors.New("created: zero; give the commit's time"))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
}

// Labels are the OCI annotations every image of the index carries as
// labels, and the index as annotations.
func (o Options) Labels() map[string]string {
	source := o.Source
	if source == "" {
		source = DefaultSource
	}
	return map[string]string{
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.licenses": Licenses,
		"org.opencontainers.image.created":  o.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.title":    o.name(),
	}
}

// Build returns the image index: one image per platform of o.Binaries, in
// the order of their names.
func Build(o Options) (v1.ImageIndex, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	platforms := make([]Platform, 0, len(o.Binaries))
	for p := range o.Binaries {
		platforms = append(platforms, p)
	}
	sort.Slice(platforms, func(i, j int) bool { return platforms[i].String() < platforms[j].String() })

	var index v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := buildImage(o, p)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", p, err)
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				MediaType: types.OCIManifestSchema1,
				Platform:  &v1.Platform{OS: p.OS, Architecture: p.Architecture},
			},
		})
	}
	annotated, ok := mutate.Annotations(index, o.Labels()).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("annotating the index gave no index")
	}
	return annotated, nil
}

func buildImage(o Options, p Platform) (v1.Image, error) {
	layerBytes, err := layerTar(o, o.Binaries[p])
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: o.Created.UTC()},
			CreatedBy: "podhealth internal/release/cmd/build-image",
			Comment:   o.name() + " " + o.Version,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("appending the layer: %w", err)
	}
	config, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	config = config.DeepCopy()
	config.OS = p.OS
	config.Architecture = p.Architecture
	config.Created = v1.Time{Time: o.Created.UTC()}
	config.Author = ""
	config.Config.User = User
	config.Config.Entrypoint = []string{"/" + o.name()}
	config.Config.Cmd = nil
	config.Config.WorkingDir = "/"
	config.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	config.Config.Labels = o.Labels()
	img, err = mutate.ConfigFile(img, config)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	return img, nil
}

// layerTar is the layer's uncompressed tar: fixed order, owners, modes and
// times.
func layerTar(o Options, binary []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := o.Created.UTC().Truncate(time.Second)
	entries := []struct {
		name string
		mode int64
		body []byte
		dir  bool
	}{
		{name: "LICENSE", mode: 0o444, body: o.License},
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o444, body: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o444, body: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: o.name(), mode: 0o555, body: binary},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			ModTime: mtime,
			Uid:     0,
			Gid:     0,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar header %s: %w", e.name, err)
		}
		if !e.dir {
			if _, err := tw.Write(e.body); err != nil {
				return nil, fmt.Errorf("tar %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the tar: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteLayout writes the index as an OCI image layout in dir (which must
// not exist yet or be empty), its index.json naming it by refName.
func WriteLayout(dir string, index v1.ImageIndex, refName string) error {
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := path.AppendIndex(index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": refName,
	})); err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return nil
}

// Push writes the index and its images to the registry at ref (a tag or a
// repository), with the credentials of the default keychain (docker's
// config, as docker login leaves it), and returns the reference by digest
// that it pushed.
func Push(ctx context.Context, index v1.ImageIndex, ref string, options ...remote.Option) (name.Digest, error) {
	tag, err := name.ParseReference(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("reference %q: %w", ref, err)
	}
	digest, err := index.Digest()
	if err != nil {
		return name.Digest{}, fmt.Errorf("index digest: %w", err)
	}
	options = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, options...)
	if err := remote.WriteIndex(tag, index, options...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", tag, err)
	}
	return tag.Context().Digest(digest.String()), nil
}
