package controllerruntime_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

// exampleObjects are a node that stopped reporting, and two pods of the
// registry: one the taint-eviction controller deleted on that node (and
// that no kubelet will ever confirm), and one alive elsewhere.
func exampleObjects() (lost *corev1.Node, dead, alive *corev1.Pod) {
	lost = &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-lost", UID: "node-lost-uid"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionUnknown},
		}},
	}
	evictedAt := metav1.NewTime(time.Date(2026, 11, 29, 16, 40, 48, 0, time.UTC))
	dead = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: "registry-dead", UID: "dead-uid",
			Labels:            map[string]string{"app": "registry"},
			DeletionTimestamp: &evictedAt,
		},
		Spec: corev1.PodSpec{NodeName: "node-lost"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager"},
		}},
	}
	alive = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "registry-alive", UID: "alive-uid", Labels: map[string]string{"app": "registry"}},
		Spec:       corev1.PodSpec{NodeName: "node-lost"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	return lost, dead, alive
}

// Checkers built once from a manager, at setup, hand out a checker per
// reconcile: its pods from the manager's cache, its force deletes through
// the manager's client, node evidence from the cache and the live reader,
// events through the recorder the Checkers was given, and a Memory that
// every checker of the Checkers shares. Here the manager is a fake over
// fakeapi, which answers deletes as an API server does.
func ExampleCheckers() {
	lost, dead, _ := exampleObjects()
	c, err := fakeapi.NewClient(lost, dead)
	if err != nil {
		fmt.Println(err)
		return
	}
	mgr := &manager{cache: c, live: c}
	recorder := &recordingRecorder{}                                                                                // mgr.GetEventRecorder("podhealth") on controller-runtime v0.23 and later
	checkers, err := controllerruntime.NewCheckers(mgr, controllerruntime.CheckersOptions{EventRecorder: recorder}) // at setup
	if err != nil {
		fmt.Println(err)
		return
	}

	selector := labels.SelectorFromSet(labels.Set{"app": "registry"})
	checker, err := checkers.For("default", selector, controllerruntime.CheckOptions{}) // per reconcile
	if err != nil {
		fmt.Println(err)
		return
	}
	report, err := checker.CheckReport(context.Background())
	fmt.Println("healthy:", report.Healthy, "err:", err)
	for _, p := range report.Pods {
		fmt.Println(p.Pod.Name, p.Verdict.State, p.Verdict.Rule, p.Outcome)
	}
	for _, e := range recorder.recorded() {
		fmt.Println("event:", e.Type, e.Reason, e.Action)
	}
	// Output:
	// healthy: false err: <nil>
	// registry-dead Dead TaintEvicted ForceDeleted
	// event: Warning ForceDeletedDeadPod ForceDelete
}

// DeadPodPredicate on the watch of a workload's pods reconciles the owner
// as soon as one of its pods dies, by the Checker's own rules, even when
// the watch filters out other pod changes.
func ExampleDeadPodPredicate() {
	lost, dead, alive := exampleObjects()
	c, err := fakeapi.NewClient(lost)
	if err != nil {
		fmt.Println(err)
		return
	}
	checkers, err := controllerruntime.NewCheckers(&manager{cache: c, live: c}, controllerruntime.CheckersOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	checker, err := checkers.For("default", labels.SelectorFromSet(labels.Set{"app": "registry"}), controllerruntime.CheckOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	died, err := controllerruntime.DeadPodPredicate(checker)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = builder.WithPredicates(died) // as in Owns(&corev1.Pod{}, builder.WithPredicates(died))

	fmt.Println("alive pod created:", died.Create(event.CreateEvent{Object: alive}))
	fmt.Println("pod became dead:", died.Update(event.UpdateEvent{ObjectOld: alive, ObjectNew: dead}))
	fmt.Println("dead pod changed again:", died.Update(event.UpdateEvent{ObjectOld: dead, ObjectNew: dead}))
	// Output:
	// alive pod created: false
	// pod became dead: true
	// dead pod changed again: false
}
