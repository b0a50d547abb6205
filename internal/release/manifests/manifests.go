package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// ReleaseName is the name Chart renders the chart under: the chart's own
// name, so that its objects are named as the kustomize base names them.
const ReleaseName = "podhealth-controller"

// Chart renders the chart in dir as release ReleaseName into namespace,
// with values over its defaults (nil for none), as `helm template` does:
// Helm validates the values against the chart's schema, renders the
// templates and sorts the objects in Helm's install order.
func Chart(dir, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	return ChartAs(dir, ReleaseName, namespace, values)
}

// ChartAs is Chart for the release named release.
func ChartAs(dir, release, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart %s: %w", dir, err)
	}
	if values == nil {
		values = map[string]any{}
	}
	rendered, err := chartutil.ToRenderValues(chrt, values, chartutil.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("the chart's values: %w", err)
	}
	files, err := engine.Render(chrt, rendered)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	// NOTES.txt and partials are not objects.
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasPrefix(filepath.Base(name), "_") {
			delete(files, name)
		}
	}
	hooks, sorted, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sorting the chart's objects: %w", err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("the chart has %d hooks, which a kustomize base cannot hold", len(hooks))
	}
	var objs []*unstructured.Unstructured
	for _, m := range sorted {
		decoded, err := Decode([]byte(m.Content))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		objs = append(objs, decoded...)
	}
	return objs, nil
}

// LintError is what Lint returns: every message of severity warning or
// worse that helm lint found.
type LintError struct {
	Messages []support.Message
}

func (e *LintError) Error() string {
	lines := make([]string, len(e.Messages))
	for i, m := range e.Messages {
		lines[i] = m.Error()
	}
	return "helm lint: " + strings.Join(lines, "; ")
}

// Lint runs helm lint's checks on the chart in dir with values over its
// defaults, strictly: warnings fail it too.
func Lint(dir, namespace string, values map[string]any) error {
	if values == nil {
		values = map[string]any{}
	}
	linter := lint.All(dir, values, namespace, false)
	var failed []support.Message
	for _, m := range linter.Messages {
		if m.Severity >= support.WarningSev {
			failed = append(failed, m)
		}
	}
	if len(failed) > 0 {
		return &LintError{Messages: failed}
	}
	return nil
}

// Kustomize renders the kustomization in dir, as `kubectl kustomize`
// does.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// digestReference is an image reference pinned by a sha256 digest.
var digestReference = regexp.MustCompile(`^[a-z0-9][a-z0-9._:/-]*(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$`)

// ErrImageNotPinned is what Install's error wraps for an image that is not
// pinned by digest: a tag can be moved, and an install file names exactly
// one build.
var ErrImageNotPinned = errors.New("the image is not pinned by a sha256 digest")

// Install renders the install file of a release from the controller's
// config folder: the namespace (config/namespace), then the base, with
// the Deployment's image set to image (REGISTRY/NAME[:TAG]@sha256:...).
func Install(configDir, image string) ([]byte, error) {
	if !digestReference.MatchString(image) {
		return nil, fmt.Errorf("%w: %q", ErrImageNotPinned, image)
	}
	namespace, err := Kustomize(filepath.Join(configDir, "namespace"))
	if err != nil {
		return nil, err
	}
	// The base through an overlay of its own that sets the image, as an
	// admin's `images:` does.
	fs := filesys.MakeFsInMemory()
	files, err := filepath.Glob(filepath.Join(configDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := fs.WriteFile(filepath.Join("/base", filepath.Base(f)), data); err != nil {
			return nil, err
		}
	}
	name, digest, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i] // the digest names the image; a tag beside it is for people only
	}
	overlay := types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Resources: []string{"../base"},
		Images:    []types.Image{{Name: "podhealth-controller", NewName: name, Digest: digest}},
	}
	data, err := yaml.Marshal(overlay)
	if err != nil {
		return nil, err
	}
	if err := fs.WriteFile("/overlay/kustomization.yaml", data); err != nil {
		return nil, err
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/overlay")
	if err != nil {
		return nil, fmt.Errorf("kustomize build of the base with the image: %w", err)
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "# podhealth-controller, %s: kubectl apply --server-side -f install.yaml\n", image)
	for _, obj := range namespace {
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&out, "---\n%s", data)
	}
	for _, r := range resources.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&out, "---\n%s", data)
	}
	return out.Bytes(), nil
}

// Decode reads the objects of a multi-document YAML stream, as kubectl
// apply -f does.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		asJSON, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(asJSON)); s == "null" || s == "{}" {
			continue // a document of comments only
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(asJSON); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
}
