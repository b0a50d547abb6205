// Package nodeimages holds the programs of the container images that the
// e2e suite's real nodes run, built locally and imported into each node's
// containerd so that nothing is pulled: pause, the pod sandbox's process,
// and writer, a container that appends to a file that stands for its
// volume, which [harness.BuildNodeImages] builds as static binaries and
// writes as one image archive; and pgstart, the entrypoint of the real
// database's image, which [harness.BuildPostgresImages] packs with
// PostgreSQL from the machine's own files.
package nodeimages
