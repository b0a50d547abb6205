// Package image builds podhealth-controller's container image without a
// daemon and without pulling a base: an OCI image index with one image per
// platform, each a single layer holding the static binary, LICENSE, the
// nonroot user's passwd and group entries and an empty /tmp, run as user
// 65532 with the binary as entrypoint.
//
// The build is reproducible: given the same binaries, license, version,
// revision and creation time, Build returns an index of the same digest.
// Every file in the layer has the creation time as its modification time,
// owner 0:0 and a fixed mode, in a fixed order, and the layer is compressed
// by the library's own gzip writer at a fixed level.
//
// Build and the values it returns are safe for concurrent use; Options must
// not be changed while Build runs.
package image
