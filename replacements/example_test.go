package replacements_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/replacements"
)

// An operator's check found no live pod and it created a replacement; the
// next check runs before its cache lists the new pod, then after.
func Example() {
	tracker := replacements.New(replacements.Options{}) // the real clock, a 5-minute TTL

	created := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "registry-x7k2p", UID: "6f1c1d8e-0b7e-4c55-9a53-3f0f7b6a1c11"}}
	tracker.Created("registry", created) // right after a successful Create

	var cached []*corev1.Pod // the cache does not list it yet
	if n := tracker.Pending("registry", cached); n > 0 {
		fmt.Println("waiting for", n, "replacement; creating none")
	}

	cached = append(cached, created.DeepCopy()) // the informer caught up
	fmt.Println("pending:", tracker.Pending("registry", cached))
	// Output:
	// waiting for 1 replacement; creating none
	// pending: 0
}
