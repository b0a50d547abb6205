package fencertest_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/health/fencertest"
)

// powerFencer is a fencing tool's fencer: the node is stopped when the
// tool's label says that it cut the node's power.
type powerFencer struct{}

func (powerFencer) Name() string { return "power" }

func (powerFencer) Fence(_ context.Context, q health.FenceQuery) (health.Fence, error) {
	if q.Pod == nil || q.Node == nil || q.Node.Labels["fencing.example.com/power"] != "off" {
		return health.Fence{}, nil
	}
	return health.Fence{Proves: health.NodeStopped, By: "fencing.example.com"}, nil
}

func ExampleTestFencer() {
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-0", UID: "u"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	off := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"fencing.example.com/power": "off"}}}
	on := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}

	err := fencertest.TestFencer(powerFencer{},
		fencertest.Case{Name: "power off", Query: health.FenceQuery{Pod: pod, Node: off, Now: now}, Want: health.NodeStopped},
		fencertest.Case{Name: "power on", Query: health.FenceQuery{Pod: pod, Node: on, Now: now}, Want: health.NoProof},
	)
	fmt.Println("conforms:", err == nil)
	// Output: conforms: true
}
