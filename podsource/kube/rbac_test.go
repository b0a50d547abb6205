package kube_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/internal/testutil/informertest"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

// permission is one verb on one resource, at namespace or cluster scope.
type permission struct {
	verb, resource string
	cluster        bool
}

func (p permission) String() string {
	scope := "namespaced"
	if p.cluster {
		scope = "cluster"
	}
	return fmt.Sprintf("%s %s (%s)", p.verb, p.resource, scope)
}

// granted expands rules into permissions.
func granted(rules []rbacv1.PolicyRule, cluster bool) []string {
	var out []string
	for _, r := range rules {
		for _, res := range r.Resources {
			for _, verb := range r.Verbs {
				out = append(out, permission{verb, res, cluster}.String())
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestPolicyRulesGrantExactlyWhatAFullRunSends wires everything this
// package offers over the fake clientset, as a controller with node and
// claim evidence does: pod, node and claim informers, a check that
// force-deletes a dead pod whose node LiveNodes confirms gone and holds
// back a StatefulSet pod, twice, with events recorded through a real
// broadcaster (the held-back event, repeated once its repeat has passed,
// is a patch). Every request it
// sent must be granted by PolicyRules or EvidencePolicyRules, and every
// permission they grant must have been used.
func TestPolicyRulesGrantExactlyWhatAFullRunSends(t *testing.T) {
	lost := testutil.LoadNode(t, testutil.NodeLost)
	stateful := loadPod(t, podTaintEvicted) // on node-lost: held back until fenced
	stateful.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts"}}
	orphan := loadPod(t, podUserDeleted) // on node-healthy, which no longer exists
	client := fake.NewClientset(lost, stateful, orphan)
	client.PrependReactor("delete", "pods", uidPrecondition(t, client))

	namespaced := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("default"))
	cluster := informers.NewSharedInformerFactory(client, 0)
	podLister := namespaced.Core().V1().Pods().Lister()
	claims, err := kube.NewClaimSource(namespaced.Core().V1().PersistentVolumeClaims().Lister())
	require.NoError(t, err)
	nodes, err := kube.NewNodeSource(cluster.Core().V1().Nodes())
	require.NoError(t, err)
	informertest.StartInformers(t, client, namespaced, "pods", "persistentvolumeclaims")
	informertest.StartInformers(t, client, cluster, "nodes")

	source, err := kube.NewListerSource(podLister, "default", registry)
	require.NoError(t, err)
	deleter, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: registry})
	require.NoError(t, err)
	live, err := kube.NewLiveNodes(client.CoreV1())
	require.NoError(t, err)
	eventClock := clocktesting.NewFakePassiveClock(time.Now())
	held, err := podsource.NewHeldEvents(podsource.HeldEventsOptions{Clock: eventClock})
	require.NoError(t, err)
	observer, err := kube.NewEventObserver(newBroadcastRecorder(t, client), kube.EventObserverOptions{HeldEvents: held})
	require.NoError(t, err)
	checker, err := health.New(source, deleter, health.Options{Nodes: nodes, LiveNodes: live, Claims: claims, Observer: observer})
	require.NoError(t, err)
	_, err = kube.DeadPodHandler(checker, func(*corev1.Pod) {})
	require.NoError(t, err)

	for range 2 {
		eventClock.SetTime(eventClock.Now().Add(podsource.DefaultHeldRepeat))
		report, err := checker.CheckReport(context.Background())
		require.NoError(t, err)
		for _, p := range report.Pods {
			if p.Pod.Name == stateful.Name {
				require.Equal(t, health.HeldBack, p.Outcome)
			}
		}
	}
	sent := func() []string {
		var out []string
		for _, a := range client.Actions() {
			p := permission{verb: a.GetVerb(), resource: a.GetResource().Resource, cluster: a.GetNamespace() == ""}
			out = append(out, p.String())
		}
		sort.Strings(out)
		return slices.Compact(out)
	}
	require.Eventually(t, func() bool { return slices.Contains(sent(), "patch events (namespaced)") },
		eventually, tick, "the repeated held-back event was never patched: %v", sent())

	cr, nr := kube.EvidencePolicyRules()
	want := append(granted(append(kube.PolicyRules(), nr...), false), granted(cr, true)...)
	sort.Strings(want)
	require.Empty(t, cmp.Diff(want, sent()), "granted (-) versus sent (+)")
	for _, a := range client.Actions() {
		if a.GetNamespace() != "" {
			require.Equal(t, "default", a.GetNamespace(), "%s %s outside the workload's namespace", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
