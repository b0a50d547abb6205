// Command nodefailure plays the node-failure story on the in-memory fake and
// prints what the health checker decides at each step:
//
//  1. a healthy registry pod;
//  2. its node is lost, the taint-eviction controller marks and deletes the
//     pod gracefully, and with no kubelet to confirm it the pod wedges;
//  3. the checker force-deletes it and answers "unhealthy", so the operator
//     creates a replacement;
//  4. healthy again;
//  5. a drain of the new node, which the checker must not cut short.
//
// Run it with: go run ./examples/nodefailure
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nodefailure:", err)
		os.Exit(1)
	}
}

// story holds the cluster and the checker that the steps act on.
type story struct {
	out     io.Writer
	cluster *fake.Pods
	checker *health.Checker
	step    int
}

func run(ctx context.Context, out io.Writer) error {
	cluster := fake.New(fake.Options{}, registryPod("registry-1", "node-a"))
	checker, err := health.New(cluster, cluster, health.Options{})
	if err != nil {
		return err
	}
	s := &story{out: out, cluster: cluster, checker: checker}

	s.say("A registry pod runs on node-a.")
	if err := s.check(ctx); err != nil {
		return err
	}

	s.say("node-a stops heartbeating. The taint-eviction controller marks the pod and deletes it gracefully; no kubelet will ever confirm.")
	if err := s.disrupt(ctx, "registry-1", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint"); err != nil {
		return err
	}
	if err := s.withoutPodhealth(ctx); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}

	s.say("The operator sees (false, nil) and creates a replacement on node-b.")
	if err := cluster.Add(registryPod("registry-2", "node-b")); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}

	s.say("node-b is drained: the Eviction API marks the pod and deletes it gracefully. Its shutdown must not be cut short.")
	if err := s.disrupt(ctx, "registry-2", "EvictionByEvictionAPI", "Eviction API: evicting"); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}

	s.say("The operator creates a replacement on node-c while registry-2 shuts down.")
	if err := cluster.Add(registryPod("registry-3", "node-c")); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}

	deletes := cluster.Deletes()
	forced := 0
	for _, d := range deletes {
		if d.GracePeriodSeconds != nil && *d.GracePeriodSeconds == 0 {
			forced++
			fmt.Fprintf(out, "\nforce delete sent: %s/%s uid=%s grace=0\n", d.Namespace, d.Name, d.UID)
		}
	}
	// The graceful deletes are Kubernetes' own, which disrupt stands for:
	// the taint-eviction controller's of registry-1 and the drain's of
	// registry-2. podhealth sent only the force delete.
	fmt.Fprintf(out, "force deletes: %d (podhealth's), graceful deletes: %d (Kubernetes': the taint eviction's and the drain's)\n", forced, len(deletes)-forced)
	return nil
}

// withoutPodhealth prints what an operator that counts every listed pod
// as present sees: the wedge.
func (s *story) withoutPodhealth(ctx context.Context) error {
	pods, err := s.cluster.ListPods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		state := "Running"
		if p.DeletionTimestamp != nil {
			state = "Terminating, for ever"
		}
		fmt.Fprintf(s.out, "   without podhealth: %s on %s is listed (%s); the operator counts it as present and creates nothing: the workload stays down\n", p.Name, p.Spec.NodeName, state)
	}
	fmt.Fprintln(s.out, "   with podhealth:")
	return nil
}

func (s *story) say(text string) {
	s.step++
	fmt.Fprintf(s.out, "\n%d. %s\n", s.step, text)
}

// check runs the checker and prints its decision for every pod.
func (s *story) check(ctx context.Context) error {
	report, err := s.checker.CheckReport(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
	for _, p := range report.Pods {
		verdict := p.Verdict.State.String()
		if p.Verdict.Rule != "" {
			verdict += " (" + p.Verdict.Rule + ")"
		}
		fmt.Fprintf(w, "   %s\t%s\t%s\t%s\n", p.Pod.Name, p.Pod.Spec.NodeName, verdict, p.Outcome)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(s.out, "   => healthy=%t\n", report.Healthy)
	return nil
}

// disrupt does what Kubernetes does to a pod it disrupts: set
// DisruptionTarget=True with the reason, then delete it gracefully.
func (s *story) disrupt(ctx context.Context, name, reason, message string) error {
	pod, err := s.cluster.Get("registry", name)
	if err != nil {
		return err
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, Message: message,
	})
	if err := s.cluster.Update(pod); err != nil {
		return err
	}
	return s.cluster.Delete(ctx, "registry", name, metav1.DeleteOptions{})
}

func registryPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "registry", Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{"app": "registry"},
		},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "registry", Image: "registry:2"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}
