package kube_test

import (
	"context"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

// selectorsOfEveryPod are label selectors that a mistake produces and
// that reach every pod of a namespace: labels.Nothing() renders as "",
// which the API server reads as "everything".
func selectorsOfEveryPod(t *testing.T) map[string]labels.Selector {
	fromNil, err := metav1.LabelSelectorAsSelector(nil)
	require.NoError(t, err)
	fromEmpty, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{})
	require.NoError(t, err)
	parsed, err := labels.Parse("")
	require.NoError(t, err)
	return map[string]labels.Selector{
		"labels.Everything()":                           labels.Everything(),
		"labels.Nothing()":                              labels.Nothing(),
		"metav1.LabelSelectorAsSelector(nil)":           fromNil,
		"metav1.LabelSelectorAsSelector(empty)":         fromEmpty,
		"labels.NewSelector()":                          labels.NewSelector(),
		"labels.SelectorFromSet(nil)":                   labels.SelectorFromSet(nil),
		`labels.Parse("")`:                              parsed,
		"WholeNamespace() stripped by DeepCopySelector": podsource.WholeNamespace().DeepCopySelector(),
	}
}

func TestSourcesAndDeleterRefuseSelectorsThatMatchEverythingOrNothing(t *testing.T) {
	client := fake.NewClientset()
	lister := corelisters.NewPodLister(podIndexer())
	for name, sel := range selectorsOfEveryPod(t) {
		t.Run(name, func(t *testing.T) {
			lsrc, err := kube.NewListerSource(lister, "default", sel)
			require.ErrorContains(t, err, "selects every pod of the namespace")
			require.Nil(t, lsrc)
			csrc, err := kube.NewClientSource(client.CoreV1(), "default", sel)
			require.ErrorContains(t, err, "selects every pod of the namespace")
			require.Nil(t, csrc)
			del, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: sel})
			require.ErrorContains(t, err, "selects every pod of the namespace")
			require.Nil(t, del)
		})
	}
}

func TestDeleterRefusesTheZeroOptions(t *testing.T) {
	del, err := kube.NewDeleter(fake.NewClientset().CoreV1(), "default", kube.DeleterOptions{})
	require.ErrorContains(t, err, "nil label selector")
	require.ErrorContains(t, err, "podsource.WholeNamespace()", "the error names the explicit opt-in")
	require.Nil(t, del)
}

// TestClientSourceWithNothingSelectorNeverListsAnotherWorkload is the bug
// the refusal prevents: a nil metav1.LabelSelector converted to a
// labels.Selector made a ClientSource list the whole namespace, so a
// check answered healthy from another workload's alive pod.
func TestClientSourceWithNothingSelectorNeverListsAnotherWorkload(t *testing.T) {
	other := relabel(loadPod(t, podAlive), "other-alive", map[string]string{"app": "other"})
	client := fake.NewClientset(objects(other)...)
	sel, err := metav1.LabelSelectorAsSelector(nil)
	require.NoError(t, err)

	src, err := kube.NewClientSource(client.CoreV1(), "default", sel)
	if err == nil {
		pods, listErr := src.ListPods(context.Background())
		require.NoError(t, listErr)
		require.Empty(t, pods, "a selector that matches nothing listed another workload's pods")
	}
	require.Error(t, err)
	require.Empty(t, client.Actions(), "requests sent")
}

func TestWholeNamespaceIsAnExplicitOptIn(t *testing.T) {
	mine := loadPod(t, podTaintEvicted)
	theirs := relabel(loadPod(t, podTaintEvicted), "theirs", map[string]string{"app": "other"})
	unlabelled := relabel(loadPod(t, podAlive), "unlabelled", nil)
	elsewhere := loadPod(t, podAlive)
	elsewhere.Namespace, elsewhere.UID = "elsewhere", "00000000-0000-0000-0000-0000000000e1"
	all := []*corev1.Pod{mine, theirs, unlabelled, elsewhere}
	client := fake.NewClientset(objects(all...)...)
	client.PrependReactor("delete", "pods", uidPrecondition(t, client))
	lister := startPodInformer(t, client, "")
	ctx := context.Background()

	lsrc, err := kube.NewListerSource(lister, "default", podsource.WholeNamespace())
	require.NoError(t, err)
	csrc, err := kube.NewClientSource(client.CoreV1(), "default", podsource.WholeNamespace())
	require.NoError(t, err)
	for _, src := range []health.PodSource{lsrc, csrc} {
		pods, err := src.ListPods(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"taint-evicted", "theirs", "unlabelled"}, names(pods), "%T", src)
	}

	del, err := kube.NewDeleter(client.CoreV1(), "default", kube.DeleterOptions{Selector: podsource.WholeNamespace()})
	require.NoError(t, err)
	require.NoError(t, del.ForceDelete(ctx, theirs), "the whole namespace is in scope")
	var scope *podsource.OutOfScopeError
	require.ErrorAs(t, del.ForceDelete(ctx, elsewhere), &scope, "another namespace stays out of scope")
	require.Len(t, deleteActions(client), 1)
}

// relabel returns pod renamed, with a new UID and the given labels.
func relabel(pod *corev1.Pod, name string, set map[string]string) *corev1.Pod {
	pod.Name, pod.UID, pod.Labels = name, types.UID("00000000-0000-0000-0000-"+name), set
	return pod
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// TestListerAndClientSourcesSelectTheSamePods runs both sources over one
// set of pods: the lister matches in memory, the client sends the
// selector's string to the API server (here the fake clientset, which
// parses it back), so a selector that does not survive the round trip
// would show as a difference.
func TestListerAndClientSourcesSelectTheSamePods(t *testing.T) {
	base := func(name string, set map[string]string) *corev1.Pod {
		return relabel(loadPod(t, podAlive), name, set)
	}
	pods := []*corev1.Pod{
		base("reg-web", map[string]string{"app": "registry", "tier": "web"}),
		base("reg-db", map[string]string{"app": "registry", "tier": "db"}),
		base("mirror-web", map[string]string{"app": "mirror", "tier": "web"}),
		base("mirror", map[string]string{"app": "mirror"}),
		base("bare", nil),
		base("canary", map[string]string{"tier": "cache", "canary": ""}),
	}
	elsewhere := base("reg-elsewhere", map[string]string{"app": "registry", "tier": "web"})
	elsewhere.Namespace = "elsewhere"
	client := fake.NewClientset(objects(append(pods, elsewhere)...)...)
	lister := startPodInformer(t, client, "")

	fromLabelSelector := func(ls *metav1.LabelSelector) labels.Selector {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		require.NoError(t, err)
		return sel
	}
	tests := []struct {
		selector string // labels.Parse syntax, unless sel is set
		sel      labels.Selector
		want     []string
	}{
		{selector: "app=registry", want: []string{"reg-db", "reg-web"}},
		{selector: "app==mirror", want: []string{"mirror", "mirror-web"}},
		{selector: "app!=registry", want: []string{"bare", "canary", "mirror", "mirror-web"}},
		{selector: "app in (registry,mirror)", want: []string{"mirror", "mirror-web", "reg-db", "reg-web"}},
		{selector: "app notin (registry)", want: []string{"bare", "canary", "mirror", "mirror-web"}},
		{selector: "tier", want: []string{"canary", "mirror-web", "reg-db", "reg-web"}},
		{selector: "!tier", want: []string{"bare", "mirror"}},
		{selector: "canary", want: []string{"canary"}},
		{selector: "canary=", want: []string{"canary"}},
		{selector: "app=registry,tier=db", want: []string{"reg-db"}},
		{selector: "app,!tier", want: []string{"mirror"}},
		{selector: "tier in (web),app notin (mirror)", want: []string{"reg-web"}},
		{selector: "app=nobody", want: []string{}},
		{selector: "SelectorFromSet(app=mirror,tier=web)", sel: labels.SelectorFromSet(labels.Set{"app": "mirror", "tier": "web"}), want: []string{"mirror-web"}},
		{selector: "LabelSelector{In, DoesNotExist}", sel: fromLabelSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"mirror", "registry"}},
			{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist},
		}}), want: []string{"mirror"}},
		{selector: "LabelSelector{MatchLabels, NotIn, Exists}", sel: fromLabelSelector(&metav1.LabelSelector{
			MatchLabels: map[string]string{"app": "registry"},
			MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}},
				{Key: "tier", Operator: metav1.LabelSelectorOpExists},
			}}), want: []string{"reg-web"}},
	}
	for _, tt := range tests {
		t.Run(tt.selector, func(t *testing.T) {
			sel := tt.sel
			if sel == nil {
				var err error
				sel, err = labels.Parse(tt.selector)
				require.NoError(t, err)
			}
			lsrc, err := kube.NewListerSource(lister, "default", sel)
			require.NoError(t, err)
			csrc, err := kube.NewClientSource(client.CoreV1(), "default", sel)
			require.NoError(t, err)

			fromCache, err := lsrc.ListPods(context.Background())
			require.NoError(t, err)
			fromServer, err := csrc.ListPods(context.Background())
			require.NoError(t, err)
			require.Empty(t, cmp.Diff(names(fromCache), names(fromServer)), "lister (-) and client (+) sources differ for %q", sel)
			require.Equal(t, tt.want, names(fromCache), "pods selected by %q", sel)
		})
	}
}
