package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTheLayoutGoesOutsideTheCheckoutSoThatTheNextBuildIsAllowed(t *testing.T) {
	root := t.TempDir()
	for _, inside := range []string{root, filepath.Join(root, "oci"), filepath.Join(root, "a", "b")} {
		_, err := outDir(inside, root)
		require.ErrorContains(t, err, "inside the checkout", inside)
	}
	// A sibling whose name starts with the checkout's is outside it.
	sibling := root + "-oci"
	got, err := outDir(sibling, root)
	require.NoError(t, err)
	require.Equal(t, sibling, got)

	// No -out: a new, empty directory outside the checkout.
	got, err = outDir("", root)
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(got) })
	require.False(t, strings.HasPrefix(got, root+string(filepath.Separator)))
	entries, err := os.ReadDir(got)
	require.NoError(t, err)
	require.Empty(t, entries)
}
