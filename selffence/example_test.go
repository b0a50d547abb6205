package selffence_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podhealth/podhealth/selffence"
)

// A single writer holds its Lease with a Guard, and writes only within
// the Guard's context. The operator stamps the same settings on the pod
// template, so the pods state the deadline their Guards enforce.
func Example() {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg-1", UID: "4c6f3a4e-uid-of-pg-1"}}
	client := fake.NewClientset(pod)                                               // kubernetes.NewForConfig(config) in a workload
	protocol := selffence.Options{Lease: "pg-primary", Deadline: 10 * time.Second} // the operator's and the workload's
	opts := protocol
	opts.Namespace, opts.Identity, opts.PodUID = pod.Namespace, pod.Name, pod.UID // the pod's, from the downward API
	opts.Exit = func() {}                                                         // in this example only: a workload keeps the default, os.Exit(1)
	guard, err := selffence.New(client, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go guard.Run(ctx) //nolint:errcheck // a workload stops when Run returns, and logs why
	// A missing Lease is claimed at once, but written under only once a
	// holder whose record was deleted would have stopped: 15 s + 10 s +
	// 2 s later. A workload waits for Held, then writes while MayWrite
	// says so, or within Context, which ends when writing must stop.
	fmt.Println("may write:", guard.MayWrite())

	var tmpl corev1.PodTemplateSpec               // the operator's side
	if err := protocol.Stamp(&tmpl); err != nil { // every pod holds under its own name
		fmt.Println(err)
		return
	}
	fmt.Println(tmpl.Annotations)
	// Output:
	// may write: false
	// map[podhealth.io/fence-deadline:10s podhealth.io/fence-lease:pg-primary]
}

// Settings that could not be kept are refused, each named.
func ExampleNew_refused() {
	_, err := selffence.New(fake.NewClientset(), selffence.Options{
		Namespace: "db", Lease: "pg-primary", Identity: "pg-1", PodUID: "4c6f3a4e-uid-of-pg-1",
		Duration: 10 * time.Second, RenewInterval: 10 * time.Second, Deadline: 500 * time.Millisecond,
	})
	fmt.Println(err)
	// Output:
	// selffence: settings that cannot be kept: the renew interval 10s is not below the duration 10s: the Lease would expire before each renewal
	// the deadline 500ms is not longer than the time a stop takes (1s): the stop could not be over by the deadline
}
