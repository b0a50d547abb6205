// Package manifests renders what an admin installs podhealth-controller
// from: the Helm chart (charts/podhealth-controller), as `helm template`
// and `helm lint` do, through Helm's own Go module; the kustomize base and
// components (cmd/podhealth-controller/config), through kustomize's; and
// the single install file of a release, the namespace and the base with
// the image pinned by digest.
//
// The functions are safe for concurrent use; each reads the files anew.
package manifests
