package version_test

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podhealth/podhealth/internal/version"
)

func TestOfNamesTheReleaseTheCommitAndGo(t *testing.T) {
	for _, tt := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"a release installed with go install", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.2.0"}}, "podhealth-controller v0.2.0 (go1.26.8)"},
		{"a build of a dirty checkout", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "7ac102f0123456789abcdef"}, {Key: "vcs.modified", Value: "true"},
		}}, "podhealth-controller (devel) (commit 7ac102f01234, dirty, go1.26.8)"},
		{"no version recorded", debug.BuildInfo{}, "podhealth-controller (devel)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, version.Of("podhealth-controller", &tt.info))
		})
	}
	require.True(t, strings.HasPrefix(version.String("x"), "x "), "the test binary has build information")
}

func TestReleaseNamesABuildThatRecordedNoVersion(t *testing.T) {
	defer func(r string) { version.Release = r }(version.Release)
	version.Release = "v0.3.0"
	for _, tt := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"no VCS stamp: the release set at link time", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "podhealth-controller v0.3.0 (go1.26.8)"},
		{"nothing recorded", debug.BuildInfo{}, "podhealth-controller v0.3.0"},
		{"the go command's version wins", debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, "podhealth-controller v0.2.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, version.Of("podhealth-controller", &tt.info))
		})
	}
}
