package podsource_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/fake"
)

// An operator in the style of OLM runs one registry pod per catalog
// source, and during a rollout its label selector also matches the pods of
// the previous image or spec. Filter narrows the cached pods to those that
// run the catalog's current image and spec hash, without a second list.
func ExampleFilter() {
	const (
		image    = "registry.example.com/catalog:v2"
		specHash = "7f9c2b"
	)
	registryPod := func(name, image, hash string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "olm",
				Name:      name,
				Labels:    map[string]string{"olm.catalogSource": "example", "olm.pod-spec-hash": hash},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "registry-server", Image: image}}},
		}
	}
	// In an operator this is the informer-backed source of the catalog
	// source's pods, e.g. from kube.NewListerSource.
	cache := fake.New(fake.Options{},
		registryPod("example-4kq2m", image, specHash),
		registryPod("example-8wz7d", "registry.example.com/catalog:v1", "1d04aa"), // previous image
		registryPod("example-c5r9x", image, "0be6e1"),                             // current image, old spec
		registryPod("example-x2p8n", image, specHash),
	)

	current := func(p *corev1.Pod) bool {
		if p.Labels["olm.pod-spec-hash"] != specHash {
			return false
		}
		for _, c := range p.Spec.Containers {
			if c.Name == "registry-server" {
				return c.Image == image
			}
		}
		return false
	}
	src, err := podsource.Filter(cache, current)
	if err != nil {
		fmt.Println(err)
		return
	}

	pods, err := src.ListPods(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range pods {
		fmt.Println(p.Name, p.Spec.Containers[0].Image)
	}
	// Output:
	// example-4kq2m registry.example.com/catalog:v2
	// example-x2p8n registry.example.com/catalog:v2
}
