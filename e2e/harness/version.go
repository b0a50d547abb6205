package harness

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KubernetesVersion returns the version of the k8s.io/kubernetes module the
// control plane is built from, as the e2e module's go.mod requires it (such
// as "v1.37.2"). The binaries report no version of their own: building them
// with go build stamps none. The e2e module is located as in
// [BuildBinaries].
func KubernetesVersion() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	dir, err := findModuleDir(wd, modulePath)
	if err != nil {
		return "", err
	}
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(s.Text()), "require "))
		if len(fields) >= 2 && fields[0] == "k8s.io/kubernetes" {
			return fields[1], nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("harness: %s/go.mod requires no k8s.io/kubernetes", dir)
}
