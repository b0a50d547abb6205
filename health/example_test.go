package health_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// examplePod returns a pod on node; a non-empty disruption reason makes it a
// pod that Kubernetes is deleting for that reason.
func examplePod(name, node, disruption string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "operators", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if disruption != "" {
		p.DeletionTimestamp = &metav1.Time{}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: disruption}}
	}
	return p
}

// A registry pod died with its node while a second one still runs: the dead
// one is force-deleted and the workload is healthy (row D3).
func ExampleChecker_Check() {
	pods := fake.New(fake.Options{},
		examplePod("registry-a", "node-1", ""),
		examplePod("registry-b", "node-2", "DeletionByTaintManager"),
	)
	checker, err := health.New(pods, pods, health.Options{})
	if err != nil {
		panic(err)
	}

	healthy, err := checker.Check(context.Background())
	fmt.Println("healthy:", healthy, "err:", err)
	for _, d := range pods.Deletes() {
		fmt.Printf("deleted %s uid=%s grace=%d\n", d.Name, d.UID, *d.GracePeriodSeconds)
	}
	// Output:
	// healthy: true err: <nil>
	// deleted registry-b uid=uid-registry-b grace=0
}

// The report says what each pod is and what was done about it. A drained
// pod is left to shut down gracefully.
func ExampleChecker_CheckReport() {
	pods := fake.New(fake.Options{},
		examplePod("evicted", "node-lost", "DeletionByTaintManager"),
		examplePod("drained", "node-1", "EvictionByEvictionAPI"),
	)
	checker, _ := health.New(pods, pods, health.Options{})

	report, err := checker.CheckReport(context.Background())
	fmt.Println("healthy:", report.Healthy, "err:", err)
	for _, p := range report.Pods {
		fmt.Printf("%s: %s by %q, %s\n", p.Pod.Name, p.Verdict.State, p.Verdict.Rule, p.Outcome)
	}
	// Output:
	// healthy: false err: <nil>
	// drained: Terminating by "GracefulDeletion", NoAction
	// evicted: Dead by "TaintEvicted", ForceDeleted
}

// A dry run says what it would do and calls nothing.
func ExampleOptions_dryRun() {
	pods := fake.New(fake.Options{}, examplePod("evicted", "node-lost", "DeletionByTaintManager"))
	checker, _ := health.New(pods, nil, health.Options{DryRun: true})

	report, _ := checker.CheckReport(context.Background())
	fmt.Println(report.Pods[0].Pod.Name, report.Pods[0].Outcome)
	fmt.Println("deletes sent:", len(pods.Deletes()))
	// Output:
	// evicted WouldForceDelete
	// deletes sent: 0
}

// Rules compose: put an opt-in rule before the defaults.
func ExampleFinishedPodIsDead() {
	rules := append(health.Rules{health.FinishedPodIsDead()}, health.DefaultRules()...)
	done := examplePod("job", "node-1", "")
	done.Status.Phase = corev1.PodSucceeded

	source := fake.New(fake.Options{}, done)
	defaults, _ := health.New(source, source, health.Options{})
	optIn, _ := health.New(source, source, health.Options{Rules: rules})
	ctx := context.Background()
	fmt.Println("default:", defaults.Classify(ctx, done).State)
	fmt.Println("opt-in: ", optIn.Classify(ctx, done).State)
	// Output:
	// default: Finished
	// opt-in:  Dead
}

// The only registry pod runs on a node that stopped heartbeating: the
// node-lifecycle controller marked it Ready=Unknown and tainted it
// unreachable, but the pod tolerates the taint for 300 s. With
// ReplaceUnreachable the pod is Unreachable at once, so the workload needs
// a replacement (row D10); nothing is force-deleted.
func ExampleOptions_replaceUnreachable() {
	lost := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-lost"},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}},
	}
	pods := fake.New(fake.Options{}, examplePod("registry-a", "node-lost", ""))
	checker, err := health.New(pods, pods, health.Options{Nodes: fake.NewNodes(lost), ReplaceUnreachable: true})
	if err != nil {
		panic(err)
	}

	report, err := checker.CheckReport(context.Background())
	fmt.Println("healthy:", report.Healthy, "err:", err)
	for _, p := range report.Pods {
		fmt.Println(p.Pod.Name, p.Verdict.State, p.Verdict.Rule, p.Outcome)
	}
	fmt.Println("deletes:", len(pods.Deletes()))
	// Output:
	// healthy: false err: <nil>
	// registry-a Unreachable NodeUnreachable NoAction
	// deletes: 0
}
