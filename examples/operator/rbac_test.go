package main

import (
	"context"
	"encoding/json"
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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/podsource/kube"
)

// manifest is the RBAC objects of rbac.yaml, by kind.
type manifest struct {
	serviceAccounts     []corev1.ServiceAccount
	roles               []rbacv1.Role
	roleBindings        []rbacv1.RoleBinding
	clusterRoles        []rbacv1.ClusterRole
	clusterRoleBindings []rbacv1.ClusterRoleBinding
}

func readManifest(t testing.TB) manifest {
	t.Helper()
	f, err := os.Open("rbac.yaml")
	require.NoError(t, err)
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var m manifest
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		var meta metav1.TypeMeta
		require.NoError(t, json.Unmarshal(raw, &meta))
		var target any
		switch meta.Kind {
		case "ServiceAccount":
			m.serviceAccounts = append(m.serviceAccounts, corev1.ServiceAccount{})
			target = &m.serviceAccounts[len(m.serviceAccounts)-1]
		case "Role":
			m.roles = append(m.roles, rbacv1.Role{})
			target = &m.roles[len(m.roles)-1]
		case "RoleBinding":
			m.roleBindings = append(m.roleBindings, rbacv1.RoleBinding{})
			target = &m.roleBindings[len(m.roleBindings)-1]
		case "ClusterRole":
			m.clusterRoles = append(m.clusterRoles, rbacv1.ClusterRole{})
			target = &m.clusterRoles[len(m.clusterRoles)-1]
		case "ClusterRoleBinding":
			m.clusterRoleBindings = append(m.clusterRoleBindings, rbacv1.ClusterRoleBinding{})
			target = &m.clusterRoleBindings[len(m.clusterRoleBindings)-1]
		default:
			t.Fatalf("rbac.yaml holds an unexpected %q", meta.Kind)
		}
		require.NoError(t, json.Unmarshal(raw, target))
	}
	require.Len(t, m.serviceAccounts, 1, "ServiceAccounts in rbac.yaml")
	require.Len(t, m.roles, 1, "Roles in rbac.yaml")
	require.Len(t, m.roleBindings, 1, "RoleBindings in rbac.yaml")
	require.Len(t, m.clusterRoles, 1, "ClusterRoles in rbac.yaml")
	require.Len(t, m.clusterRoleBindings, 1, "ClusterRoleBindings in rbac.yaml")
	require.Equal(t, "default", m.roles[0].Namespace)
	return m
}

// manifestRole returns the one Role in rbac.yaml.
func manifestRole(t testing.TB) rbacv1.Role { return readManifest(t).roles[0] }

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

// TestRBACManifestClusterRoleIsTheNodeEvidenceRules: node evidence needs
// nodes get, list and watch, cluster-wide, and nothing else; the binding
// gives them to the operator's ServiceAccount, the subject of the Role's
// binding too.
func TestRBACManifestClusterRoleIsTheNodeEvidenceRules(t *testing.T) {
	m := readManifest(t)
	want, _ := kube.EvidencePolicyRules()
	require.Empty(t, cmp.Diff(want, m.clusterRoles[0].Rules), "rbac.yaml ClusterRole rules (-want +got)")

	sa := m.serviceAccounts[0]
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}
	for _, b := range []struct {
		kind     string
		roleRef  rbacv1.RoleRef
		subjects []rbacv1.Subject
		want     rbacv1.RoleRef
	}{
		{"RoleBinding", m.roleBindings[0].RoleRef, m.roleBindings[0].Subjects, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: m.roles[0].Name}},
		{"ClusterRoleBinding", m.clusterRoleBindings[0].RoleRef, m.clusterRoleBindings[0].Subjects, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: m.clusterRoles[0].Name}},
	} {
		require.Equal(t, b.want, b.roleRef, "%s roleRef", b.kind)
		require.Equal(t, subject, b.subjects, "%s subjects", b.kind)
	}
}

// TestRBACManifestAllowsEveryRequestTheControllerSends runs the controller
// as main does, over a pod informer, a node informer and a real event
// broadcaster, until it has force-deleted two dead pods and replaced them,
// and checks each request it sent against rbac.yaml: pods and events in
// the namespace against the Role, nodes cluster-wide against the
// ClusterRole, whose verbs must all be used.
func TestRBACManifestAllowsEveryRequestTheControllerSends(t *testing.T) {
	m := readManifest(t)
	role, clusterRole := m.roles[0], m.clusterRoles[0]
	dead := fixture(t, "pod-taint-evicted.json", "registry")
	// A pod terminating on a node that the node cache does not hold: the
	// check asks the API server for the node (LiveNodes).
	orphan := fixture(t, "pod-user-deleted.json", "registry")
	orphan.Spec.NodeName = "node-deleted"
	healthyNode := testutil.LoadNode(t, "node-healthy.json")
	client := newFakeClient(dead, orphan)
	_, err := client.CoreV1().Nodes().Create(context.Background(), healthyNode, metav1.CreateOptions{})
	require.NoError(t, err)
	client.ClearActions()
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("default")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "podhealth-operator"})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodeFactory := informers.NewSharedInformerFactory(client, 0)
	nodes := nodeFactory.Core().V1().Nodes()
	var c *controller
	startInformer(t, client, func(lister corelisters.PodLister) *controller {
		var err error
		c, err = newController(testConfig(), client, lister, nodes, recorder, logr.Discard())
		require.NoError(t, err)
		t.Cleanup(c.queue.ShutDown)
		_, err = nodes.Informer().AddEventHandler(c.nodeEventHandler())
		require.NoError(t, err)
		nodeFactory.Start(ctx.Done())
		t.Cleanup(nodeFactory.Shutdown)
		require.True(t, cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced))
		return c
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.run(ctx, 1, time.Hour)
	}()

	count := func(verb, resource string) int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == verb && a.GetResource().Resource == resource {
				n++
			}
		}
		return n
	}
	// Three events: two force deletes' and the replacement's.
	require.Eventually(t, func() bool {
		list, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return len(list.Items) == 3 && count("create", "pods") == 1 && count("delete", "pods") == 2
	}, 5*time.Second, 10*time.Millisecond)
	cancel()
	wg.Wait()

	nodeVerbs := map[string]bool{}
	for _, a := range client.Actions() {
		verb, resource := a.GetVerb(), a.GetResource().Resource
		if resource == "events" && verb == "list" {
			continue // the test's own reads
		}
		if resource == "nodes" {
			require.Empty(t, a.GetNamespace(), "%s nodes in a namespace", verb)
			require.True(t, allows(clusterRole.Rules, verb, resource), "rbac.yaml's ClusterRole does not allow %s %s", verb, resource)
			nodeVerbs[verb] = true
			continue
		}
		require.Equal(t, "default", a.GetNamespace(), "%s %s outside the namespace", verb, resource)
		require.True(t, allows(role.Rules, verb, resource), "rbac.yaml's Role does not allow %s %s", verb, resource)
	}
	var granted []string
	for _, r := range clusterRole.Rules {
		granted = append(granted, r.Verbs...)
	}
	var sent []string
	for verb := range nodeVerbs {
		sent = append(sent, verb)
	}
	require.ElementsMatch(t, granted, sent, "node verbs granted by the ClusterRole and sent by the controller")
}
