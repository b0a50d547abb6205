package health_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/internal/testutil"
)

// deletedAt is the deletionTimestamp the test pods carry.
var deletedAt = metav1.NewTime(time.Date(2026, 11, 29, 16, 40, 48, 0, time.UTC))

type podOption func(*corev1.Pod)

// newPod returns a running pod bound to node-a; options change it.
func newPod(name string, opts ...podOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func deleting(p *corev1.Pod) {
	p.DeletionTimestamp = &deletedAt
	grace := int64(30)
	p.DeletionGracePeriodSeconds = &grace
}

func disruption(reason string) podOption {
	return condition(corev1.DisruptionTarget, corev1.ConditionTrue, reason)
}

func condition(t corev1.PodConditionType, s corev1.ConditionStatus, reason string) podOption {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason})
	}
}

func phase(ph corev1.PodPhase) podOption { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func onNode(n string) podOption { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

func finalizer(f string) podOption {
	return func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, f) }
}

// taintEvicted is a pod the taint-eviction controller is deleting.
func taintEvicted(name string) *corev1.Pod {
	return newPod(name, onNode("node-lost"), deleting, disruption("DeletionByTaintManager"))
}

// drained is a pod evicted through the Eviction API, shutting down.
func drained(name string) *corev1.Pod {
	return newPod(name, deleting, disruption("EvictionByEvictionAPI"))
}

// fixturePod reads a pod that a real control plane produced.
func fixturePod(t testing.TB, file string) *corev1.Pod { return testutil.LoadPod(t, file) }

// fixtureNode reads a node that a real control plane produced.
func fixtureNode(t testing.TB, file string) *corev1.Node { return testutil.LoadNode(t, file) }
