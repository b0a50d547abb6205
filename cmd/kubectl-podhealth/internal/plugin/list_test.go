package plugin

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/podhealth/podhealth/health"
)

// TestListShowsWhatTheLibraryDecides runs the read-only listing over the
// real-cluster fixtures and variations of them, and checks each listed
// pod's node state, verdict, rule and action, the exit code, and that
// nothing but reads was sent.
func TestListShowsWhatTheLibraryDecides(t *testing.T) {
	f := loadFixtures(t)
	const notReady = "NotReady since 5m"
	lost, healthy := f.nodeLost.Name, f.nodeHealthy.Name
	tests := []struct {
		name     string
		objs     []k8sruntime.Object
		want     []row
		wantCode int
		// wantAction is a substring of the table's ACTION cell of the
		// first row, when set.
		wantAction string
	}{
		{
			name:       "the taint-evicted pod on the lost node is dead and would be force-deleted; the others are left out",
			objs:       []k8sruntime.Object{f.nodeHealthy, f.nodeLost, f.alive, f.taintEvicted, f.drained, f.userDeleted},
			want:       []row{{Pod: "default/taint-evicted", Node: lost, NodeState: notReady, Verdict: "Dead", Rule: "TaintEvicted", Action: ActionForceDelete}},
			wantCode:   ExitDeadPodsLeft,
			wantAction: "force delete",
		},
		{
			name:       "a StatefulSet pod on the lost node is held back for fencing evidence",
			objs:       []k8sruntime.Object{f.nodeHealthy, f.nodeLost, ownedByStatefulSet(f.taintEvicted, "db")},
			want:       []row{{Pod: "default/taint-evicted", Node: lost, NodeState: notReady, Verdict: "Dead", Rule: "TaintEvicted", Action: ActionHeldBack}},
			wantCode:   ExitHeldBack,
			wantAction: "held back: StatefulSet db: needs fencing evidence; taint the node out-of-service once it is powered off",
		},
		{
			name:     "the out-of-service taint is the fencing evidence that lets the StatefulSet pod go",
			objs:     []k8sruntime.Object{f.nodeHealthy, outOfService(f.nodeLost), ownedByStatefulSet(f.taintEvicted, "db")},
			want:     []row{{Pod: "default/taint-evicted", Node: lost, NodeState: "out-of-service, " + notReady, Verdict: "Dead", Rule: "TaintEvicted", Action: ActionForceDelete}},
			wantCode: ExitDeadPodsLeft,
		},
		{
			name:     "a running pod whose node object is gone is dead by NodeGone",
			objs:     []k8sruntime.Object{f.nodeHealthy, onNode(f.alive, "node-deleted")},
			want:     []row{{Pod: "default/alive", Node: "node-deleted", NodeState: "gone", Verdict: "Dead", Rule: "NodeGone", Action: ActionForceDelete}},
			wantCode: ExitDeadPodsLeft,
		},
		{
			name:       "a user's delete on the lost node is listed as terminating: nothing to do yet",
			objs:       []k8sruntime.Object{f.nodeHealthy, f.nodeLost, onNode(f.userDeleted, lost)},
			want:       []row{{Pod: "default/user-deleted", Node: lost, NodeState: notReady, Verdict: "Terminating", Rule: "GracefulDeletion", Action: ActionWait}},
			wantCode:   ExitNothingToDo,
			wantAction: "wait",
		},
		{
			name:     "a drain and a user's delete on a Ready node, and a live pod: nothing listed",
			objs:     []k8sruntime.Object{f.nodeHealthy, f.nodeLost, f.alive, f.drained, f.userDeleted},
			want:     []row{},
			wantCode: ExitNothingToDo,
		},
		{
			name:       "a dead pod that opted out by annotation is held back",
			objs:       []k8sruntime.Object{f.nodeHealthy, f.nodeLost, optedOut(f.taintEvicted)},
			want:       []row{{Pod: "default/taint-evicted", Node: lost, NodeState: notReady, Verdict: "Dead", Rule: "TaintEvicted", Action: ActionHeldBack}},
			wantCode:   ExitHeldBack,
			wantAction: "held back: opted out",
		},
		{
			name: "three of four nodes lost at once open the breaker: every dead pod is held back",
			objs: []k8sruntime.Object{
				f.nodeHealthy, f.nodeLost, namedNode(f.nodeLost, "node-lost-2"), namedNode(f.nodeLost, "node-lost-3"),
				f.taintEvicted, onNode(renamed(f.taintEvicted, "te-2"), "node-lost-2"),
			},
			want: []row{
				{Pod: "default/taint-evicted", Node: lost, NodeState: notReady, Verdict: "Dead", Rule: "TaintEvicted", Action: ActionHeldBack},
				{Pod: "default/te-2", Node: "node-lost-2", NodeState: notReady, Verdict: "Dead", Rule: "TaintEvicted", Action: ActionHeldBack},
			},
			wantCode:   ExitHeldBack,
			wantAction: "held back: breaker open",
		},
		{
			name:     "a pod bound to the healthy node but taint-evicted (a maintenance taint) is left to its kubelet",
			objs:     []k8sruntime.Object{f.nodeHealthy, onNode(f.taintEvicted, healthy)},
			want:     []row{},
			wantCode: ExitNothingToDo,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(t, tt.objs...)
			res := run(t, client, runOptions{}, "-o", "json")
			require.Equal(t, tt.wantCode, res.code, "stderr: %s", res.stderr)
			got := decode(t, res.stdout)
			if diff := cmp.Diff(tt.want, rowsOf(got)); diff != "" {
				t.Errorf("listed pods (-want +got):\n%s", diff)
			}
			require.Empty(t, writes(client), "a listing must send no write")
			require.Empty(t, got.Warnings)

			if tt.wantAction != "" {
				table := run(t, client, runOptions{})
				require.Equal(t, tt.wantCode, table.code)
				lines := strings.Split(strings.TrimSpace(table.stdout), "\n")
				require.Len(t, lines, 1+len(tt.want), "table:\n%s", table.stdout)
				require.Contains(t, lines[1], tt.wantAction, "table:\n%s", table.stdout)
			}
		})
	}
}

func optedOut(pod *corev1.Pod) *corev1.Pod {
	p := pod.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[health.AnnotationForceDelete] = "never"
	return p
}

// TestOutputFormats checks the table, -o wide, -o json and -o yaml of the
// same scan: the table's columns, the wide columns with the rule's
// evidence, and documents that parse back to the same pods.
func TestOutputFormats(t *testing.T) {
	f := loadFixtures(t)
	objs := []k8sruntime.Object{f.nodeHealthy, f.nodeLost, f.alive, f.taintEvicted, ownedByStatefulSet(renamed(f.taintEvicted, "db-0"), "db")}
	client := newClient(t, objs...)

	table := run(t, client, runOptions{})
	lines := strings.Split(strings.TrimSpace(table.stdout), "\n")
	require.Len(t, lines, 3, table.stdout)
	require.Equal(t, []string{"NAMESPACE", "NAME", "NODE", "NODE", "STATE", "VERDICT", "RULE", "ACTION"}, strings.Fields(lines[0]))
	require.Contains(t, lines[1], "db-0")
	require.Contains(t, lines[1], "NotReady since 5m")
	require.Contains(t, lines[2], "taint-evicted")
	require.Contains(t, lines[2], "force delete")

	wide := run(t, client, runOptions{}, "-o", "wide")
	wlines := strings.Split(strings.TrimSpace(wide.stdout), "\n")
	require.Len(t, wlines, 3, wide.stdout)
	for _, col := range []string{"REASON", "HELD BACK", "HINT"} {
		require.Contains(t, wlines[0], col)
	}
	require.Contains(t, wlines[2], "DeletionByTaintManager", "the wide table shows the rule's evidence")
	require.Contains(t, wlines[1], "needs fencing evidence (its node gone or out of service, or a fencer's proof): owned by StatefulSet db")
	require.Contains(t, wlines[1], "kubectl taint node node-lost node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")

	js := decode(t, run(t, client, runOptions{}, "-o", "json").stdout)
	yml := run(t, client, runOptions{}, "-o", "yaml")
	var fromYAML PodHealthList
	require.NoError(t, yaml.Unmarshal([]byte(yml.stdout), &fromYAML), yml.stdout)
	require.Equal(t, "podhealth.io/v1alpha1", js.APIVersion)
	require.Equal(t, "PodHealthList", js.Kind)
	require.Equal(t, 3, js.ScannedPods)
	if diff := cmp.Diff(js, fromYAML, cmp.AllowUnexported(PodHealth{})); diff != "" {
		t.Errorf("-o yaml and -o json differ (-json +yaml):\n%s", diff)
	}
	require.Len(t, js.Items, 2)
	te := js.Items[1]
	require.Equal(t, "taint-evicted", te.Name)
	require.Equal(t, f.taintEvicted.UID, te.UID)
	require.Contains(t, te.Reason, "DeletionByTaintManager")
	require.NotNil(t, te.NodeNotReadySince)
	require.Equal(t, "2026-11-29T16:40:16Z", te.NodeNotReadySince.UTC().Format("2006-01-02T15:04:05Z"))
	require.NotNil(t, te.DeletionTimestamp)
}

// TestEmptyScanSaysSoOnStderr: no pod worth listing prints nothing on
// stdout and one line on stderr, as kubectl get does.
func TestEmptyScanSaysSoOnStderr(t *testing.T) {
	f := loadFixtures(t)
	tests := []struct {
		name, wantStderr string
		args             []string
		objs             []k8sruntime.Object
	}{
		{name: "live pods", objs: []k8sruntime.Object{f.nodeHealthy, f.alive}, wantStderr: "No dead, held-back or stuck terminating pods in namespace default (1 pods scanned).\n"},
		{name: "an empty namespace that exists", objs: []k8sruntime.Object{f.nodeHealthy, namespace("shop")}, args: []string{"-n", "shop"}, wantStderr: "No dead, held-back or stuck terminating pods in namespace shop (0 pods scanned).\n"},
		{name: "every namespace", objs: []k8sruntime.Object{f.nodeHealthy}, args: []string{"-A"}, wantStderr: "No dead, held-back or stuck terminating pods in any namespace (0 pods scanned).\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, newClient(t, tt.objs...), runOptions{}, tt.args...)
			require.Equal(t, ExitNothingToDo, res.code)
			require.Empty(t, res.stdout)
			require.Equal(t, tt.wantStderr, res.stderr)
		})
	}
}

// TestNamespacesAndSelectors: -n, the context's namespace, -A and -l pick
// the pods that are scanned.
func TestNamespacesAndSelectors(t *testing.T) {
	f := loadFixtures(t)
	inShop := renamed(f.taintEvicted, "shop-dead")
	inShop.Namespace = "shop"
	inShop.Labels = map[string]string{"app": "shop"}
	objs := []k8sruntime.Object{f.nodeHealthy, f.nodeLost, namespace("default"), namespace("shop"), f.taintEvicted, inShop}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "the context's namespace", want: []string{"default/taint-evicted"}},
		{name: "-n", args: []string{"-n", "shop"}, want: []string{"shop/shop-dead"}},
		{name: "another context's namespace", args: []string{"--context", "shop"}, want: []string{"shop/shop-dead"}},
		{name: "-A", args: []string{"-A"}, want: []string{"default/taint-evicted", "shop/shop-dead"}},
		{name: "-A -l", args: []string{"-A", "-l", "app=shop"}, want: []string{"shop/shop-dead"}},
		{name: "-l that matches the fixture's label", args: []string{"-l", "app=registry"}, want: []string{"default/taint-evicted"}},
		{name: "-l that matches nothing", args: []string{"-l", "app=none"}, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, newClient(t, objs...), runOptions{}, append(tt.args, "-o", "json")...)
			require.Contains(t, []int{ExitDeadPodsLeft, ExitNothingToDo}, res.code, res.stderr)
			got := []string{}
			for _, r := range rowsOf(decode(t, res.stdout)) {
				got = append(got, r.Pod)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// TestForbiddenNodesFallBackToTheNoEvidenceRules: without the right to list
// nodes, the plugin says on one line which rules it cannot apply, and
// judges with the rules that need no node evidence: the taint-evicted pod
// past its deletion deadline is still dead, a StatefulSet pod stays held
// back, and an orphan of a deleted node is not recognised.
func TestForbiddenNodesFallBackToTheNoEvidenceRules(t *testing.T) {
	f := loadFixtures(t)
	tests := []struct {
		name     string
		objs     []k8sruntime.Object
		want     []row
		wantCode int
	}{
		{
			name:     "taint-evicted past its deadline",
			objs:     []k8sruntime.Object{f.taintEvicted, f.alive},
			want:     []row{{Pod: "default/taint-evicted", Node: f.nodeLost.Name, NodeState: "Unknown", Verdict: "Dead", Rule: "TaintEvicted", Action: ActionForceDelete}},
			wantCode: ExitDeadPodsLeft,
		},
		{
			name:     "a StatefulSet pod has no fencing evidence",
			objs:     []k8sruntime.Object{ownedByStatefulSet(f.taintEvicted, "db")},
			want:     []row{{Pod: "default/taint-evicted", Node: f.nodeLost.Name, NodeState: "Unknown", Verdict: "Dead", Rule: "TaintEvicted", Action: ActionHeldBack}},
			wantCode: ExitHeldBack,
		},
		{
			name:     "an orphan of a deleted node is not recognised without NodeGone",
			objs:     []k8sruntime.Object{onNode(f.alive, "node-deleted")},
			want:     []row{},
			wantCode: ExitNothingToDo,
		},
		{
			name:     "a user's delete past its deadline is listed as terminating on an unknown node",
			objs:     []k8sruntime.Object{onNode(f.userDeleted, f.nodeLost.Name)},
			want:     []row{{Pod: "default/user-deleted", Node: f.nodeLost.Name, NodeState: "Unknown", Verdict: "Terminating", Rule: "GracefulDeletion", Action: ActionWait}},
			wantCode: ExitNothingToDo,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(t, append(tt.objs, f.nodeHealthy, f.nodeLost)...)
			client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
				return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "", errors.New(`User "viewer" cannot list resource "nodes" in API group "" at the cluster scope`))
			})
			res := run(t, client, runOptions{}, "-o", "json")
			require.Equal(t, tt.wantCode, res.code, res.stderr)
			if diff := cmp.Diff(tt.want, rowsOf(decode(t, res.stdout))); diff != "" {
				t.Errorf("listed pods (-want +got):\n%s", diff)
			}
			lines := strings.Split(strings.TrimRight(res.stderr, "\n"), "\n")
			require.Len(t, lines, 1, "one warning line: %q", res.stderr)
			require.True(t, strings.HasPrefix(lines[0], "warning: cannot list nodes ("), lines[0])
			require.Contains(t, lines[0], "is forbidden")
			for _, rule := range []string{"NodeGone", "OutOfService", "TerminatingTooLong", "TaintEvicted"} {
				require.Contains(t, lines[0], rule)
			}
			require.Zero(t, countActions(client, "get", "nodes"), "no node is read live without node evidence")
			require.Empty(t, writes(client))
		})
	}
}

// TestPaginatedScan: pods are listed a page at a time, so memory and each
// request stay bounded however many pods the cluster has; every page is
// judged; a terminal gets progress on stderr, a pipe none.
func TestPaginatedScan(t *testing.T) {
	f := loadFixtures(t)
	const live = 1234
	objs := []k8sruntime.Object{f.nodeHealthy, f.nodeLost}
	for i := range live {
		objs = append(objs, renamed(f.alive, "alive-"+padded(i)))
	}
	// Dead pods on the first, a middle and the last page.
	dead := []string{"aaa-dead", "alive-0600-dead", "zzz-dead"}
	for _, name := range dead {
		objs = append(objs, renamed(f.taintEvicted, name))
	}
	tests := []struct {
		name         string
		pageSize     int64
		terminal     bool
		wantLists    int
		wantProgress bool
	}{
		{name: "pages of 500 on a terminal", pageSize: 500, terminal: true, wantLists: 3, wantProgress: true},
		{name: "pages of 500 into a pipe", pageSize: 500, wantLists: 3},
		{name: "the default page size", wantLists: 3, terminal: true, wantProgress: true},
		{name: "one page", pageSize: 5000, terminal: true, wantLists: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(t, objs...)
			res := run(t, client, runOptions{pageSize: tt.pageSize, terminal: tt.terminal}, "-o", "json")
			require.Equal(t, ExitDeadPodsLeft, res.code, res.stderr)
			list := decode(t, res.stdout)
			require.Equal(t, live+len(dead), list.ScannedPods)
			var names []string
			for _, it := range list.Items {
				names = append(names, it.Name)
			}
			require.Equal(t, dead, names)

			var lists []k8stesting.ListActionImpl
			for _, a := range client.Actions() {
				if l, ok := a.(k8stesting.ListActionImpl); ok && l.GetResource().Resource == "pods" {
					lists = append(lists, l)
				}
			}
			require.Len(t, lists, tt.wantLists)
			wantLimit := tt.pageSize
			if wantLimit == 0 {
				wantLimit = DefaultPageSize
			}
			for i, l := range lists {
				require.Equal(t, wantLimit, l.ListOptions.Limit, "LIST %d", i)
				require.Equal(t, i == 0, l.ListOptions.Continue == "", "LIST %d continues the one before", i)
			}
			if tt.wantProgress {
				require.Contains(t, res.stderr, "scanning pods: 500 of about 1237 (1 pages")
				require.Contains(t, res.stderr, "scanning pods: 1000 of about 1237 (2 pages")
				require.True(t, strings.HasSuffix(res.stderr, "\r\x1b[K"), "the progress line is cleared: %q", res.stderr)
			} else {
				require.Empty(t, res.stderr)
			}
		})
	}
}

func padded(i int) string {
	s := "000" + itoa(i)
	return s[len(s)-4:]
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// TestExpiredContinueTokenGoesOnFromWhereTheServerSays: when a scan
// outlives its continue token, the API server answers 410 with a token
// that goes on at the current state; the scan takes it, says so once, and
// still judges every page. A 410 without such a token is an error.
func TestExpiredContinueTokenGoesOnFromWhereTheServerSays(t *testing.T) {
	f := loadFixtures(t)
	objs := []k8sruntime.Object{f.nodeHealthy, f.nodeLost}
	for i := range 1200 {
		objs = append(objs, renamed(f.alive, "alive-"+padded(i)))
	}
	objs = append(objs, renamed(f.taintEvicted, "zzz-dead"))
	tests := []struct {
		name      string
		withToken bool
		wantCode  int
	}{
		{name: "410 with a token to go on", withToken: true, wantCode: ExitDeadPodsLeft},
		{name: "410 without one", wantCode: ExitError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(t, objs...)
			expireLaterPageOnce(client, "pods", tt.withToken)
			res := run(t, client, runOptions{pageSize: 500}, "-o", "json")
			require.Equal(t, tt.wantCode, res.code, res.stderr)
			if !tt.withToken {
				require.Contains(t, res.stderr, "error: cannot list pods in namespace default: The provided continue parameter is too old")
				return
			}
			list := decode(t, res.stdout)
			require.Equal(t, 1201, list.ScannedPods)
			require.Equal(t, []row{{Pod: "default/zzz-dead", Node: f.nodeLost.Name, NodeState: "NotReady since 5m", Verdict: "Dead", Rule: "TaintEvicted", Action: ActionForceDelete}}, rowsOf(list))
			require.Equal(t, "warning: the pod list took longer than the API server keeps a consistent snapshot; the rest of it was read at a later state\n", res.stderr)
			require.Len(t, list.Warnings, 1)
		})
	}
}

// TestExpiredContinueTokenOnALaterPageOfNodesGoesOn: a node list that
// outlives its continue token is recovered as the pod list is: the scan
// goes on from where the API server says, warns once, and still lists the
// dead pod with node evidence. A 410 without a token stays an error.
func TestExpiredContinueTokenOnALaterPageOfNodesGoesOn(t *testing.T) {
	f := loadFixtures(t)
	objs := []k8sruntime.Object{f.nodeLost, renamed(f.taintEvicted, "zzz-dead")}
	for i := range 5 {
		n := f.nodeHealthy.DeepCopy()
		n.Name, n.ResourceVersion = "healthy-"+padded(i), ""
		objs = append(objs, n)
	}
	tests := []struct {
		name      string
		withToken bool
		wantCode  int
	}{
		{name: "410 with a token to go on", withToken: true, wantCode: ExitDeadPodsLeft},
		{name: "410 without one", wantCode: ExitError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(t, objs...)
			expired := expireLaterPageOnce(client, "nodes", tt.withToken)
			res := run(t, client, runOptions{pageSize: 2}, "-o", "json")
			require.Equal(t, tt.wantCode, res.code, res.stderr)
			require.True(t, *expired, "a later page of nodes was refused")
			if !tt.withToken {
				require.Contains(t, res.stderr, "error: cannot list nodes: The provided continue parameter is too old")
				return
			}
			list := decode(t, res.stdout)
			require.Equal(t, []row{{Pod: "default/zzz-dead", Node: f.nodeLost.Name, NodeState: "NotReady since 5m", Verdict: "Dead", Rule: "TaintEvicted", Action: ActionForceDelete}}, rowsOf(list))
			require.Equal(t, "warning: the node list took longer than the API server keeps a consistent snapshot; the rest of it was read at a later state\n", res.stderr)
		})
	}
}

// TestBlankSelectorIsRefusedBeforeAnyPrompt: -l with a selector that
// selects every pod (blank, or only spaces) is an error before anything is
// read or asked, instead of a scan of every pod whose deletes are then
// refused one by one.
func TestBlankSelectorIsRefusedBeforeAnyPrompt(t *testing.T) {
	f := loadFixtures(t)
	for _, sel := range []string{"", " ", "\t"} {
		t.Run(fmt.Sprintf("%q", sel), func(t *testing.T) {
			client := newClient(t, f.nodeLost, f.taintEvicted)
			res := run(t, client, runOptions{stdin: "y\n"}, "-l", sel, "--force-delete")
			require.Equal(t, ExitError, res.code)
			require.Contains(t, res.stderr, "selects every pod")
			require.NotContains(t, res.stdout+res.stderr, "[y/N]", "no prompt")
			require.Empty(t, client.Actions(), "nothing was read or sent")
		})
	}
}

// expireLaterPageOnce makes the first LIST of resource that carries a
// continue token fail with 410 Expired, as an API server does when the
// token outlived its snapshot; withToken puts in the status the token that
// goes on at the current state. It returns whether that happened.
func expireLaterPageOnce(client *fake.Clientset, resource string, withToken bool) *bool {
	expired := new(bool)
	client.PrependReactor("list", resource, func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).ListOptions
		if opts.Continue == "" || *expired {
			return false, nil, nil
		}
		*expired = true
		err := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result.")
		if withToken {
			err.ErrStatus.Continue = opts.Continue
		}
		return true, nil, err
	})
	return expired
}

// A pod that a fencer's proof lets go says so: -o wide's REASON and -o
// json's fencedBy name the proof, so that the delete is not read as one of
// a NotReady node alone; a pod let go without one claims none. (The
// plugin asks no fencer beyond the library's built-ins, whose evidence its
// rules already name in the verdict, so the report here carries a proof
// as a Checker with fencers hands it over.)
func TestAFencedPodShowsItsProofInWideAndJSON(t *testing.T) {
	f := loadFixtures(t)
	pod := ownedByStatefulSet(f.taintEvicted, "db")
	proof := &health.Fence{Fencer: "lease", Proves: health.PodStopped, By: "lease default/db", Detail: "unrenewed for 27s"}
	report := health.PodReport{Pod: pod, Verdict: health.Verdict{State: health.Dead, Rule: health.RuleTaintEvicted, Reason: "node node-lost is not Ready"},
		Outcome: health.WouldForceDelete, FencedBy: proof}
	row := describe(report, nodeView{state: "NotReady since 5m"})
	require.Equal(t, "fencer lease: lease default/db proves PodStopped: unrenewed for 27s", row.FencedBy)

	var out strings.Builder
	o := &options{streams: IOStreams{Out: &out, ErrOut: &out}, output: "wide"}
	require.NoError(t, o.print(&PodHealthList{Items: []PodHealth{row}}, &out, ""))
	require.Contains(t, out.String(), "node node-lost is not Ready; fenced: fencer lease: lease default/db proves PodStopped: unrenewed for 27s")
	out.Reset()
	o.output = "json"
	require.NoError(t, o.print(&PodHealthList{Items: []PodHealth{row}}, &out, ""))
	require.Contains(t, out.String(), `"fencedBy": "fencer lease: lease default/db proves PodStopped: unrenewed for 27s"`)

	report.Outcome = health.ForceDeleted
	require.Equal(t, "force-deleted; fenced: fencer lease: lease default/db proves PodStopped: unrenewed for 27s", resultText(report))

	js := decode(t, run(t, newClient(t, f.nodeHealthy, f.nodeLost, f.taintEvicted), runOptions{}, "-o", "json").stdout)
	require.Len(t, js.Items, 1)
	require.Empty(t, js.Items[0].FencedBy, "a stateless pod needs no proof, and none is claimed")
}
