// Package nodeimages holds the programs of the two container images that
// the e2e suite's real nodes run, built locally and imported into each
// node's containerd so that nothing is pulled: pause, the pod sandbox's
// process, and writer, a container that appends to a file that stands for
// its volume. [harness.BuildNodeImages] builds both as static binaries and
// writes them as one image archive.
package nodeimages
