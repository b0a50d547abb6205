package kube_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

// TestDeleterPassesTheDeleterConformanceSuite runs the suite against the
// Deleter over client-go's fake clientset, whose tracker deletes whatever
// it is asked to: reactors make it answer as the API server does for a pod
// on a lost node (UID precondition enforced, a graceful delete only marks
// the pod).
func TestDeleterPassesTheDeleterConformanceSuite(t *testing.T) {
	selector := labels.SelectorFromSet(labels.Set{podsource.DeleterTestLabelKey: podsource.DeleterTestLabelValue})
	err := podsource.TestDeleter(overFakeClientset(t, func(client *fake.Clientset) (health.Deleter, error) {
		return kube.NewDeleter(client.CoreV1(), podsource.DeleterTestNamespace, kube.DeleterOptions{Selector: selector})
	}))
	require.NoError(t, err)
}

// The harness above would prove nothing if the fake clientset accepted
// what the API server refuses: a deleter that sends a plain graceful
// DELETE without a precondition must fail the suite over it.
func TestDeleterConformanceHarnessCatchesAGracefulDeleteWithoutPrecondition(t *testing.T) {
	err := podsource.TestDeleter(overFakeClientset(t, func(client *fake.Clientset) (health.Deleter, error) {
		return gracefulDeleter{client}, nil
	}))
	require.ErrorContains(t, err, "was the grace period not 0?")
	require.ErrorContains(t, err, "want a Conflict")
}

type gracefulDeleter struct{ client *fake.Clientset }

func (g gracefulDeleter) ForceDelete(ctx context.Context, pod *corev1.Pod) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return g.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
}

// overFakeClientset returns a podsource.NewDeleterFunc that stores the pods
// in a new fake clientset and builds the deleter over it with build.
func overFakeClientset(t *testing.T, build func(*fake.Clientset) (health.Deleter, error)) podsource.NewDeleterFunc {
	return func(pods ...*corev1.Pod) (health.Deleter, podsource.GetPodFunc, error) {
		client := fake.NewClientset(objects(pods...)...)
		client.PrependReactor("delete", "pods", gracefulDeleteOnlyMarks(client))
		client.PrependReactor("delete", "pods", uidPrecondition(t, client))
		get := func(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
			return client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		}
		d, err := build(client)
		return d, get, err
	}
}

// gracefulDeleteOnlyMarks returns a reactor that answers a DELETE with a
// grace period other than 0 as the API server does when no kubelet will
// confirm it: the pod stays, with deletionTimestamp and
// deletionGracePeriodSeconds set. A force delete passes on to the tracker.
func gracefulDeleteOnlyMarks(client *fake.Clientset) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		del := action.(k8stesting.DeleteActionImpl)
		opts := del.GetDeleteOptions()
		if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds == 0 {
			return false, nil, nil
		}
		obj, err := client.Tracker().Get(del.GetResource(), del.GetNamespace(), del.GetName())
		if err != nil {
			return false, nil, nil // let the tracker answer NotFound
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = *pod.Spec.TerminationGracePeriodSeconds
		}
		if opts.GracePeriodSeconds != nil {
			grace = *opts.GracePeriodSeconds
		}
		if pod.DeletionTimestamp == nil {
			now := metav1.Now()
			pod.DeletionTimestamp = &now
		}
		pod.DeletionGracePeriodSeconds = &grace
		return true, nil, client.Tracker().Update(del.GetResource(), pod, del.GetNamespace())
	}
}
