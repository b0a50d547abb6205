// Package version tells which build of a podhealth program is running, from
// the build information the Go toolchain records in every binary: the
// module's version (a release tag for `go install ...@v0.2.0`, "(devel)"
// for a build from a work tree) and, when built from a git checkout, the
// commit.
package version

import (
	"runtime/debug"
	"strings"
)

// Release is the release a build names when the go command recorded no
// version of the main module ("(devel)": a build with -buildvcs=false, as
// in a container image's build stage). The build sets it at link time:
//
//	go build -ldflags "-X github.com/podhealth/podhealth/internal/version.Release=v0.2.0"
//
// The Dockerfile passes its VERSION build argument so.
var Release string

// String is "NAME VERSION" for the running binary, followed by the commit
// and "dirty" when the build recorded them, and the Go version.
func String(name string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return name + " (no build information)"
	}
	return Of(name, info)
}

// Of is String for the given build information.
func Of(name string, info *debug.BuildInfo) string {
	version := info.Main.Version
	if version == "" || version == "(devel)" {
		version = "(devel)"
		if Release != "" {
			version = Release
		}
	}
	var extra []string
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if settings["vcs.modified"] == "true" {
			rev += ", dirty"
		}
		extra = append(extra, "commit "+rev)
	}
	if info.GoVersion != "" {
		extra = append(extra, info.GoVersion)
	}
	if len(extra) == 0 {
		return name + " " + version
	}
	return name + " " + version + " (" + strings.Join(extra, ", ") + ")"
}
