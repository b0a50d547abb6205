package main

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/podhealth/podhealth/podsource/kube"
)

// manifestRole returns the one Role in rbac.yaml.
func manifestRole(t testing.TB) rbacv1.Role {
	t.Helper()
	f, err := os.Open("rbac.yaml")
	require.NoError(t, err)
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var roles []rbacv1.Role
	for {
		var doc rbacv1.Role // other kinds decode into it too; Kind tells them apart
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if doc.Kind == "Role" {
			roles = append(roles, doc)
		}
	}
	require.Len(t, roles, 1, "Roles in rbac.yaml")
	require.Equal(t, "default", roles[0].Namespace)
	return roles[0]
}

func allows(rules []rbacv1.PolicyRule, verb, resource string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func TestRBACManifestIsTheLibraryRolePlusPodCreate(t *testing.T) {
	role := manifestRole(t)
	want := kube.PolicyRules()
	want[0].Verbs = append(want[0].Verbs, "create")
	require.Empty(t, cmp.Diff(want, role.Rules), "rbac.yaml Role rules (-want +got)")
}

// TestRBACManifestAllowsEveryRequestTheControllerSends runs the controller
// over an informer and a real event broadcaster until it has replaced a
// dead pod, and checks each request it sent against rbac.yaml.
func TestRBACManifestAllowsEveryRequestTheControllerSends(t *testing.T) {
	role := manifestRole(t)
	dead := fixture(t, "pod-taint-evicted.json", "registry")
	client := newFakeClient(dead)
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("default")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "podhealth-operator"})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c *controller
	startInformer(t, client, func(lister corelisters.PodLister) *controller {
		var err error
		c, err = newController(testConfig(), client, lister, recorder, logr.Discard())
		require.NoError(t, err)
		t.Cleanup(c.queue.ShutDown)
		return c
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.run(ctx, 1, time.Hour)
	}()

	seen := func(verb, resource string) bool {
		for _, a := range client.Actions() {
			if a.GetVerb() == verb && a.GetResource().Resource == resource {
				return true
			}
		}
		return false
	}
	// Two events: the force delete's and the replacement's.
	require.Eventually(t, func() bool {
		list, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return len(list.Items) == 2 && seen("create", "pods") && seen("delete", "pods")
	}, 5*time.Second, 10*time.Millisecond)
	cancel()
	wg.Wait()

	for _, a := range client.Actions() {
		if a.GetResource().Resource == "events" && a.GetVerb() == "list" {
			continue // the test's own reads
		}
		require.Equal(t, "default", a.GetNamespace(), "%s %s outside the namespace", a.GetVerb(), a.GetResource().Resource)
		require.True(t, allows(role.Rules, a.GetVerb(), a.GetResource().Resource), "rbac.yaml does not allow %s %s", a.GetVerb(), a.GetResource().Resource)
	}
}
