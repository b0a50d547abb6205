package readme_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheLeaseProtocolStatesItsObligationsAndVouchesForNoWorkload holds
// the self-fencing protocol's docs to what the Lease fencer relies on: the
// three obligations are stated where an operator reads them, and no page
// or package doc says that a named workload keeps them (an operator who
// believed it and annotated that workload's pods would get two writers).
// A workload may be named again only with its code checked, and this
// test changed with it.
func TestTheLeaseProtocolStatesItsObligationsAndVouchesForNoWorkload(t *testing.T) {
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join("..", "..", name))
		require.NoError(t, err)
		return string(data)
	}
	safety := read("docs/safety.md")
	for _, obligation := range []string{
		"It writes only while it holds the Lease",
		"It stops on any failed renewal, whatever its peers say.",
		"The deadline covers the whole stop.",
		"start* of its last",
		"monotonic clock",
		"termination grace period",
	} {
		require.Contains(t, safety, obligation, "docs/safety.md must state the obligation")
	}
	for _, name := range []string{"docs/safety.md", "docs/operators.md", "docs/controller.md", "fencing/lease.go", "fencing/doc.go", "README.md"} {
		text := strings.ToLower(read(name))
		for _, claim := range []string{"cloudnativepg", "self-node-remediation", "have this shape", "has this shape", "watchdog's promise"} {
			require.NotContains(t, text, claim, "%s vouches for a workload's self-fencing", name)
		}
	}
}
