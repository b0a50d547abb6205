package registry_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/podhealth/podhealth/examples/registry"
)

// An operator creates one Factory and one informer at setup, and builds a
// Reconciler per call.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset() // kubernetes.NewForConfig(config) in a real operator
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods()
	lister := pods.Lister()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	reconcilers, err := registry.NewFactory(client, lister, klog.Background()) // one per operator
	if err != nil {
		fmt.Println(err)
		return
	}

	source := registry.CatalogSource{Name: "operatorhubio", Namespace: "olm", Image: "quay.io/operatorhubio/catalog:latest"}
	reconcile := func() error {
		return reconcilers.Reconciler().EnsureRegistryServer(ctx, source)
	}
	if err := reconcile(); err != nil {
		fmt.Println(err)
		return
	}
	list, err := client.CoreV1().Pods("olm").List(ctx, metav1.ListOptions{LabelSelector: source.Selector().String()})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range list.Items {
		fmt.Printf("generateName=%s labels=%v image=%s current=%t\n", p.GenerateName, p.Labels, p.Spec.Containers[0].Image, source.Current(&p))
	}
	// Output:
	// generateName=operatorhubio- labels=map[olm.catalogSource:operatorhubio] image=quay.io/operatorhubio/catalog:latest current=true
}
