package kube_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/kube"
)

// examplePod returns a pod of namespace default with label app=app, bound
// to node; dead makes it a pod that the taint-eviction controller is
// deleting after its node was lost.
func examplePod(name, app, node string, dead bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if dead {
		deleting := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		p.DeletionTimestamp = &deleting
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager"}}
	}
	return p
}

func ExampleNewListerSource() {
	client := fake.NewClientset(
		examplePod("registry-0", "registry", "node-a", false),
		examplePod("registry-1", "registry", "node-b", true),
		examplePod("mirror-0", "mirror", "node-a", false),
	)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("default"))
	lister := factory.Core().V1().Pods().Lister()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	selector := labels.SelectorFromSet(labels.Set{"app": "registry"})
	source, err := kube.NewListerSource(lister, "default", selector)
	if err != nil {
		fmt.Println(err)
		return
	}
	pods, err := source.ListPods(ctx) // reads the cache: no request
	if err != nil {
		fmt.Println(err)
		return
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	fmt.Println(names)

	// A selector of every pod would mix in the mirror's pods: refused.
	_, err = kube.NewListerSource(lister, "default", labels.Everything())
	fmt.Println(err != nil)
	// Output:
	// [registry-0 registry-1]
	// true
}

func ExampleNewDeleter() {
	ctx := context.Background()
	dead := examplePod("registry-1", "registry", "node-lost", true)
	mirror := examplePod("mirror-1", "mirror", "node-lost", true)
	client := fake.NewClientset(dead, mirror)

	selector := labels.SelectorFromSet(labels.Set{"app": "registry"})
	deleter, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: selector})
	if err != nil {
		fmt.Println(err)
		return
	}
	// One DELETE with grace period 0 and a precondition on the pod's UID.
	fmt.Println("registry-1:", deleter.ForceDelete(ctx, dead))
	_, err = client.CoreV1().Pods("default").Get(ctx, "registry-1", metav1.GetOptions{})
	fmt.Println("registry-1 gone:", apierrors.IsNotFound(err))

	// Another workload's pod is refused without a request.
	fmt.Println("mirror-1:", deleter.ForceDelete(ctx, mirror))

	// The zero options name no selector: refused.
	_, err = kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{})
	fmt.Println("zero options refused:", err != nil)
	// Output:
	// registry-1: <nil>
	// registry-1 gone: true
	// mirror-1: podsource: refusing to delete pod default/mirror-1 outside the deleter's scope: labels do not match selector "app=registry"
	// zero options refused: true
}

func ExampleDeadPodHandler() {
	client := fake.NewClientset(
		examplePod("registry-0", "registry", "node-a", false),
		examplePod("registry-1", "registry", "node-lost", true),
	)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("default"))
	pods := factory.Core().V1().Pods()
	selector := labels.SelectorFromSet(labels.Set{"app": "registry"})
	source, err := kube.NewListerSource(pods.Lister(), "default", selector)
	if err != nil {
		fmt.Println(err)
		return
	}
	deleter, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: selector})
	if err != nil {
		fmt.Println(err)
		return
	}
	checker, err := health.New(source, deleter, health.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}

	// A controller would add a workqueue key here, and check at once.
	var (
		mu   sync.Mutex
		dead []string
	)
	handler, err := kube.DeadPodHandler(checker, func(p *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		dead = append(dead, p.Name)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	registration, err := pods.Informer().AddEventHandler(handler)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	// Returns once the handler has seen the initial list.
	cache.WaitForCacheSync(ctx.Done(), registration.HasSynced)

	mu.Lock()
	fmt.Println("enqueued:", dead)
	mu.Unlock()
	healthy, err := checker.Check(ctx)
	fmt.Println("healthy:", healthy, err)
	// Output:
	// enqueued: [registry-1]
	// healthy: true <nil>
}
