package readme_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChangelogReadmeAndManifestsAgreeOnWhetherTheControllerIsReleased:
// the release CHANGELOG.md first lists podhealth-controller in is the one
// its Deployment's image names, and the README says so; while it is
// listed only under Unreleased, the Deployment names no release tag and
// the README calls it unreleased. The Deployment once pinned v0.1.0, a
// release without the controller. The chart's appVersion and image tag
// say the same.
func TestChangelogReadmeAndManifestsAgreeOnWhetherTheControllerIsReleased(t *testing.T) {
	root := filepath.Join("..", "..")
	read := func(path string) string {
		data, err := os.ReadFile(filepath.Join(root, path))
		require.NoError(t, err)
		return string(data)
	}
	changelog, readme, deployment := read("CHANGELOG.md"), read("README.md"), read("cmd/podhealth-controller/config/deployment.yaml")
	chart, values := read("charts/podhealth-controller/Chart.yaml"), read("charts/podhealth-controller/values.yaml")
	field := func(text, pattern string) string {
		m := regexp.MustCompile(`(?m)` + pattern + `\s*"?([^"\s]+)"?`).FindStringSubmatch(text)
		require.NotNil(t, m, pattern)
		return m[1]
	}
	appVersion, valuesTag := field(chart, `^appVersion:`), field(values, `^  tag:`)

	released := "" // the release whose section first adds the controller
	section := ""
	for _, line := range strings.Split(changelog, "\n") {
		if strings.HasPrefix(line, "## [") {
			section = strings.TrimPrefix(strings.SplitN(line, "]", 2)[0], "## [")
		}
		if strings.Contains(line, "`cmd/podhealth-controller` (module)") {
			released = section
		}
	}
	require.NotEmpty(t, released, "CHANGELOG.md never adds cmd/podhealth-controller")

	image := regexp.MustCompile(`(?m)^\s*image:\s*(\S+)`).FindStringSubmatch(deployment)
	require.NotNil(t, image, "the Deployment names no image")
	tag := image[1][strings.LastIndex(image[1], ":")+1:]
	releaseTag := regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
	if released == "Unreleased" {
		require.False(t, releaseTag.MatchString(tag), "the Deployment's image %s names a release, but CHANGELOG.md lists the controller under Unreleased", image[1])
		require.Equal(t, tag, appVersion, "the chart's appVersion")
		require.Equal(t, tag, valuesTag, "the chart's image.tag")
		require.Contains(t, readme, "podhealth-controller (unreleased)", "README.md's install table")
		return
	}
	require.Equal(t, "v"+released, tag, "the Deployment's image names the release that CHANGELOG.md first lists the controller in")
	require.Equal(t, "v"+released, valuesTag, "the chart's image.tag")
	require.Equal(t, "v"+released, appVersion, "the chart's appVersion")
	require.NotContains(t, readme, "podhealth-controller (unreleased)")
}
