// Command render-install writes the install file of a podhealth-controller
// release: the namespace, then the kustomize base with the image pinned by
// digest, one file that `kubectl apply --server-side -f` installs.
//
//	go -C internal/release run ./cmd/render-install -config "$PWD/cmd/podhealth-controller/config" \
//	    -image ghcr.io/podhealth/podhealth-controller:v0.2.0@sha256:... -out "$PWD/install.yaml"
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/podhealth/podhealth/internal/release/manifests"
)

func main() {
	config := flag.String("config", "cmd/podhealth-controller/config", "the controller's kustomize folder")
	image := flag.String("image", "", "the image, pinned by digest: REGISTRY/NAME[:TAG]@sha256:...")
	out := flag.String("out", "install.yaml", "the file to write")
	flag.Parse()
	data, err := manifests.Install(*config, *image)
	if err == nil {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "render-install:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", *out)
}
