package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// PollInterval is how often the Wait and Consistently helpers read the
// object they watch.
const PollInterval = 200 * time.Millisecond

// BoundPod returns a Pod already bound to nodeName (spec.nodeName set), so it
// needs no scheduler. It tolerates the node.kubernetes.io/not-ready and
// node.kubernetes.io/unreachable NoExecute taints for tolerationSeconds
// only, so the taint-eviction controller deletes it that long after its node
// is tainted. Its container is never run: there is no kubelet.
func BoundPod(namespace, name, nodeName string, tolerationSeconds int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			Labels:    map[string]string{"app": name},
		},
		Spec: corev1.PodSpec{
			NodeName: nodeName,
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.invalid/app:v1",
			}},
			Tolerations: []corev1.Toleration{
				{
					Key:               corev1.TaintNodeNotReady,
					Operator:          corev1.TolerationOpExists,
					Effect:            corev1.TaintEffectNoExecute,
					TolerationSeconds: ptr.To(tolerationSeconds),
				},
				{
					Key:               corev1.TaintNodeUnreachable,
					Operator:          corev1.TolerationOpExists,
					Effect:            corev1.TaintEffectNoExecute,
					TolerationSeconds: ptr.To(tolerationSeconds),
				},
			},
		},
	}
}

// CreatePod creates pod and returns it as the API server stored it. It stops
// the test with t.Fatal on error, so it must be called from the test's
// goroutine.
func (cp *ControlPlane) CreatePod(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	cp.t.Helper()
	created, err := cp.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		cp.t.Fatalf("harness: creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return created
}

// PodPredicate is a condition on a pod. The pod is nil if it does not exist.
type PodPredicate func(pod *corev1.Pod) bool

// PodHasCondition is true of a pod with a condition of type condType and the
// given status, and, unless reason is empty, reason.
func PodHasCondition(condType corev1.PodConditionType, status corev1.ConditionStatus, reason string) PodPredicate {
	return func(pod *corev1.Pod) bool {
		if pod == nil {
			return false
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == condType {
				return c.Status == status && (reason == "" || c.Reason == reason)
			}
		}
		return false
	}
}

// PodTerminating is true of a pod that exists and has a deletionTimestamp.
func PodTerminating(pod *corev1.Pod) bool {
	return pod != nil && pod.DeletionTimestamp != nil
}

// PodGone is true when the pod does not exist.
func PodGone(pod *corev1.Pod) bool { return pod == nil }

// PodAll is true of a pod when every one of preds is.
func PodAll(preds ...PodPredicate) PodPredicate {
	return func(pod *corev1.Pod) bool {
		for _, p := range preds {
			if !p(pod) {
				return false
			}
		}
		return true
	}
}

// WaitForPod reads the pod every PollInterval until pred is true of it, and
// returns the pod as last read (nil if it did not exist). It gives up when
// ctx is done, with an error that describes the pod as last seen; give ctx a
// deadline.
func WaitForPod(ctx context.Context, c kubernetes.Interface, namespace, name string, pred PodPredicate) (*corev1.Pod, error) {
	var last *corev1.Pod
	var lastErr error
	err := poll(ctx, func() bool {
		last, lastErr = getPod(ctx, c, namespace, name)
		return lastErr == nil && pred(last)
	})
	if err != nil {
		return last, fmt.Errorf("waiting for pod %s/%s: %w; last read: %s", namespace, name, err, describePod(last, lastErr))
	}
	return last, nil
}

// ConsistentlyPod reads the pod every PollInterval for duration d and
// returns an error as soon as pred is false of it or it cannot be read. It
// returns the pod as last read.
func ConsistentlyPod(ctx context.Context, c kubernetes.Interface, namespace, name string, d time.Duration, pred PodPredicate) (*corev1.Pod, error) {
	deadline := time.Now().Add(d)
	for {
		pod, err := getPod(ctx, c, namespace, name)
		if err != nil || !pred(pod) {
			return pod, fmt.Errorf("pod %s/%s no longer as expected after %v: %s", namespace, name, d-time.Until(deadline), describePod(pod, err))
		}
		if !time.Now().Before(deadline) {
			return pod, nil
		}
		select {
		case <-ctx.Done():
			return pod, ctx.Err()
		case <-time.After(PollInterval):
		}
	}
}

// getPod reads a pod; a missing pod is (nil, nil).
func getPod(ctx context.Context, c kubernetes.Interface, namespace, name string) (*corev1.Pod, error) {
	pod, err := c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return pod, nil
}

func describePod(pod *corev1.Pod, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if pod == nil {
		return "not found"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s node=%s", pod.Status.Phase, pod.Spec.NodeName)
	if pod.DeletionTimestamp != nil {
		fmt.Fprintf(&b, " deletionTimestamp=%s", pod.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	for _, c := range pod.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
		if c.Reason != "" {
			fmt.Fprintf(&b, "(%s)", c.Reason)
		}
	}
	return b.String()
}

// poll calls done every PollInterval until it returns true or ctx is done.
func poll(ctx context.Context, done func() bool) error {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		if done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
