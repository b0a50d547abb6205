package readme_test

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/podhealth/podhealth/internal/readme"
)

func TestGlueLinesCountsTheMarkedCodeAndNothingElse(t *testing.T) {
	fsys := fstest.MapFS{
		"a.go": {Data: []byte(`package a

import "fmt" // not podhealth's

// podhealth:begin rbac
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// podhealth:end
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get

func f() {
	fmt.Println()
	// podhealth:begin check
	// a comment is not a line of code

	x := 1
	_ = x
	// podhealth:end
	g() // podhealth: one marked line
}
`)},
		"open.go":   {Data: []byte("// podhealth:begin\nx := 1\n")},
		"stray.go":  {Data: []byte("// podhealth:end\n")},
		"nested.go": {Data: []byte("// podhealth:begin a\n// podhealth:begin b\n// podhealth:end\n")},
	}
	n, err := readme.GlueLines(fsys, "a.go")
	require.NoError(t, err)
	require.Equal(t, 4, n, "the RBAC marker in the block, x := 1, _ = x and g()")
	for _, bad := range []string{"open.go", "stray.go", "nested.go"} {
		_, err := readme.GlueLines(fsys, bad)
		require.Error(t, err, bad)
	}
	_, err = readme.GlueLines(fsys, "missing.go")
	require.Error(t, err)
}
