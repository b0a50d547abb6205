package readme_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPackageDocsStateTheirModulesOwnFloors: the package doc that a user of
// each library module reads first names that module's own floors, as its
// go.mod states them: its go directive and the oldest release of each
// dependency a user meets. The adapter's doc once said its floors were
// the root module's, which has no controller-runtime.
func TestPackageDocsStateTheirModulesOwnFloors(t *testing.T) {
	if os.Getenv("PODHEALTH_UPGRADED_COPY") != "" {
		t.Skip("a copy upgraded to the newest releases: its go.mod states no floors")
	}
	root := filepath.Join("..", "..")
	tests := []struct {
		module, doc string
		floors      map[string]string // module path in go.mod -> how the doc names it
	}{
		{".", "health/doc.go", map[string]string{"k8s.io/api": "k8s.io", "github.com/go-logr/logr": "logr"}},
		{"podsource/controllerruntime", "podsource/controllerruntime/doc.go", map[string]string{
			"sigs.k8s.io/controller-runtime": "controller-runtime", "k8s.io/api": "k8s.io", "github.com/podhealth/podhealth": "root module",
		}},
		{"metrics", "metrics/doc.go", map[string]string{"github.com/prometheus/client_golang": "client_golang", "k8s.io/api": "k8s.io", "github.com/podhealth/podhealth": "root module"}},
	}
	for _, tt := range tests {
		t.Run(tt.module, func(t *testing.T) {
			mod, err := os.ReadFile(filepath.Join(root, tt.module, "go.mod"))
			require.NoError(t, err)
			data, err := os.ReadFile(filepath.Join(root, tt.doc))
			require.NoError(t, err)
			doc := strings.Join(strings.Fields(strings.ReplaceAll(string(data), "//", " ")), " ")
			i := strings.Index(doc, "floors (go.mod):")
			require.GreaterOrEqual(t, i, 0, "%s states no floors", tt.doc)
			stated := doc[i:min(len(doc), i+300)]
			goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
			require.NotNil(t, goVersion)
			require.Contains(t, stated, "Go "+string(goVersion[1]), "%s: the go directive", tt.doc)
			for path, name := range tt.floors {
				v := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(path) + ` (v\S+)`).FindSubmatch(mod)
				require.NotNil(t, v, "%s requires no %s", tt.module, path)
				require.Contains(t, stated, name+" "+string(v[1]), "%s: the floor of %s", tt.doc, path)
			}
		})
	}
}
