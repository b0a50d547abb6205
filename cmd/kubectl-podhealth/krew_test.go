package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// krewManifest is the part of a krew Plugin manifest that krew validates.
type krewManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		ShortDescription string `json:"shortDescription"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestKrewManifestIsWellFormed: the manifest names the plugin podhealth
// (so it runs as kubectl podhealth), has one platform per os/arch with an
// archive, a sha256 of 64 hex digits and the binary, and marks every value
// that a release fills in.
func TestKrewManifestIsWellFormed(t *testing.T) {
	data, err := os.ReadFile("krew/podhealth.yaml")
	require.NoError(t, err)
	var m krewManifest
	require.NoError(t, yaml.Unmarshal(data, &m))
	require.Equal(t, "krew.googlecontainertools.github.com/v1alpha2", m.APIVersion)
	require.Equal(t, "Plugin", m.Kind)
	require.Equal(t, "podhealth", m.Metadata.Name)
	require.Regexp(t, `^v\d+\.\d+\.\d+$`, m.Spec.Version)
	require.NotEmpty(t, m.Spec.ShortDescription)
	require.Less(t, len(m.Spec.ShortDescription), 80)
	require.NotEmpty(t, m.Spec.Platforms)
	seen := map[string]bool{}
	hex := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, p := range m.Spec.Platforms {
		key := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		require.False(t, seen[key], "platform %s twice", key)
		seen[key] = true
		require.Regexp(t, hex, p.SHA256, key)
		require.True(t, strings.HasPrefix(p.URI, "https://"), key)
		require.Contains(t, p.URI, m.Spec.Version, "%s: the archive of the manifest's version", key)
		wantBin := "kubectl-podhealth"
		if p.Selector.MatchLabels["os"] == "windows" {
			wantBin += ".exe"
		}
		require.Equal(t, wantBin, p.Bin, key)
	}
	// Every value a release fills in is marked on its line.
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "uri:") || strings.HasPrefix(trimmed, "sha256:") || strings.HasPrefix(trimmed, "version:") {
			require.Contains(t, line, "# RELEASE-TIME PLACEHOLDER", "unmarked release value: %s", trimmed)
		}
	}
}
