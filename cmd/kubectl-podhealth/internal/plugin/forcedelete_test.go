package plugin

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// TestForceDelete runs --force-delete over the fixtures: it deletes exactly
// the pods the library calls dead and lets go, each with one DELETE of
// grace period 0 and a UID precondition, only after confirmation, within
// --max-deletes; its output ends with one line per pod; its exit code
// says what happened.
func TestForceDelete(t *testing.T) {
	f := loadFixtures(t)
	base := []k8sruntime.Object{f.nodeHealthy, f.nodeLost, f.alive, f.drained, f.userDeleted}
	stateful := ownedByStatefulSet(renamed(f.taintEvicted, "db-0"), "db")
	failing := func(client *fake.Clientset) {
		client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is unhappy"))
		})
	}
	reused := func(client *fake.Clientset) {
		// Between the scan and the delete, the pod was replaced by a newer
		// one of the same name.
		client.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			p := f.taintEvicted.DeepCopy()
			p.UID = "uid-newer"
			p.DeletionTimestamp = nil
			return true, p, nil
		})
	}
	tests := []struct {
		name    string
		objs    []k8sruntime.Object
		setup   func(*fake.Clientset)
		args    []string
		stdin   string
		want    []types.UID // deleted, in order
		code    int
		results []string // the output's last lines
	}{
		{
			name:    "--yes deletes the dead pod without asking",
			objs:    append(base, f.taintEvicted),
			args:    []string{"--yes"},
			want:    []types.UID{f.taintEvicted.UID},
			code:    ExitDeleted,
			results: []string{"pod default/taint-evicted: force-deleted"},
		},
		{
			name:    "y on stdin confirms",
			objs:    append(base, f.taintEvicted),
			stdin:   "y\n",
			want:    []types.UID{f.taintEvicted.UID},
			code:    ExitDeleted,
			results: []string{"pod default/taint-evicted: force-deleted"},
		},
		{
			name:  "n on stdin declines: nothing deleted",
			objs:  append(base, f.taintEvicted),
			stdin: "n\n",
			code:  ExitDeadPodsLeft,
		},
		{
			name: "no answer on stdin declines: nothing deleted",
			objs: append(base, f.taintEvicted),
			code: ExitDeadPodsLeft,
		},
		{
			name: "the StatefulSet pod is held back while the stateless one goes",
			objs: append(base, f.taintEvicted, stateful),
			args: []string{"--yes"},
			want: []types.UID{f.taintEvicted.UID},
			code: ExitHeldBack,
			results: []string{
				"pod default/db-0: held back: needs fencing evidence (its node gone or out of service, or a fencer's proof): owned by StatefulSet db; once node node-lost is powered off: kubectl taint node node-lost node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
				"pod default/taint-evicted: force-deleted",
			},
		},
		{
			name:    "with the out-of-service taint the StatefulSet pod goes too",
			objs:    []k8sruntime.Object{f.nodeHealthy, outOfService(f.nodeLost), f.taintEvicted, stateful},
			args:    []string{"--yes"},
			want:    []types.UID{stateful.UID, f.taintEvicted.UID},
			code:    ExitDeleted,
			results: []string{"pod default/db-0: force-deleted", "pod default/taint-evicted: force-deleted"},
		},
		{
			name: "--max-deletes bounds the run: the rest are held back by the budget",
			objs: append(base, f.taintEvicted, renamed(f.taintEvicted, "te-2"), renamed(f.taintEvicted, "te-3")),
			args: []string{"--yes", "--max-deletes=1"},
			want: []types.UID{f.taintEvicted.UID},
			code: ExitHeldBack,
			results: []string{
				"pod default/taint-evicted: force-deleted",
				"pod default/te-2: held back: force-delete budget used up: 1 per 24h0m0s; run again to delete more, or raise --max-deletes",
				"pod default/te-3: held back: force-delete budget used up: 1 per 24h0m0s; run again to delete more, or raise --max-deletes",
			},
		},
		{
			name:    "a failed DELETE is an error",
			objs:    append(base, f.taintEvicted),
			setup:   failing,
			args:    []string{"--yes"},
			want:    []types.UID{f.taintEvicted.UID},
			code:    ExitError,
			results: []string{`pod default/taint-evicted: delete failed: podhealth: force-deleting pod default/taint-evicted (uid "3c0c8989-7032-484b-9396-d2330489e1cf"): DELETE pod default/taint-evicted with grace period 0 and UID precondition: Internal error occurred: etcd is unhappy`},
		},
		{
			name:    "a pod replaced by a newer one of the same name after the scan is left alone",
			objs:    append(base, f.taintEvicted),
			setup:   reused,
			args:    []string{"--yes"},
			code:    ExitDeleted,
			results: []string{"pod default/taint-evicted: left alone: a newer pod holds the name"},
		},
		{
			name: "nothing dead: no question, nothing deleted",
			objs: base,
			code: ExitNothingToDo,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(t, tt.objs...)
			if tt.setup != nil {
				tt.setup(client)
			}
			res := run(t, client, runOptions{stdin: tt.stdin}, append([]string{"--force-delete"}, tt.args...)...)
			require.Equal(t, tt.code, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
			var got []types.UID
			for _, d := range deletes(client) {
				opts := d.GetDeleteOptions()
				require.Equal(t, ptr.To[int64](0), opts.GracePeriodSeconds, "grace period of %s", d.GetName())
				require.NotNil(t, opts.Preconditions, "UID precondition of %s", d.GetName())
				got = append(got, *opts.Preconditions.UID)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pods deleted, by UID precondition (-want +got):\n%s", diff)
			}
			for _, w := range writes(client) {
				require.True(t, strings.HasPrefix(w, "delete pods "), "only pod DELETEs are sent, got %q", w)
			}
			if tt.results != nil {
				require.Equal(t, tt.results, lastLines(res.stdout, len(tt.results)), "stdout:\n%s", res.stdout)
			}
			asked := strings.Contains(res.stderr, "[y/N]")
			require.Equal(t, !contains(tt.args, "--yes") && tt.code != ExitNothingToDo, asked, "stderr: %s", res.stderr)
			require.Equal(t, tt.code == ExitError, strings.Contains(res.stderr, "error: a force delete failed"), "stderr: %s", res.stderr)
			if tt.code == ExitDeadPodsLeft {
				require.Contains(t, res.stdout, "force delete", "the list was shown before the question")
			}
		})
	}
}

// TestForceDeleteJSONPrintsOneDocumentWithTheResults: with -o json the
// plan goes to stderr and stdout carries one document with each pod's
// result.
func TestForceDeleteJSONPrintsOneDocumentWithTheResults(t *testing.T) {
	f := loadFixtures(t)
	client := newClient(t, f.nodeHealthy, f.nodeLost, f.taintEvicted, ownedByStatefulSet(renamed(f.taintEvicted, "db-0"), "db"))
	res := run(t, client, runOptions{}, "--force-delete", "--yes", "-o", "json")
	require.Equal(t, ExitHeldBack, res.code, res.stderr)
	list := decode(t, res.stdout)
	got := map[string]string{}
	for _, it := range list.Items {
		got[it.Name] = it.Action + " / " + it.Result
	}
	require.Equal(t, map[string]string{"db-0": "held back / ", "taint-evicted": "force delete / force-deleted"}, got)
	require.Contains(t, res.stderr, "NAMESPACE", "the plan is on stderr")
	require.Len(t, deletes(client), 1)
}

// TestForceDeleteAcrossNamespaces: with -A each pod is deleted through a
// deleter of its own namespace, and -l bounds what may be deleted.
func TestForceDeleteAcrossNamespaces(t *testing.T) {
	f := loadFixtures(t)
	inShop := renamed(f.taintEvicted, "shop-dead")
	inShop.Namespace = "shop"
	inShop.Labels = map[string]string{"app": "shop"}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "every namespace", args: []string{"-A"}, want: []string{"default/taint-evicted", "shop/shop-dead"}},
		{name: "every namespace, one app", args: []string{"-A", "-l", "app=shop"}, want: []string{"shop/shop-dead"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(t, f.nodeHealthy, f.nodeLost, f.taintEvicted, inShop)
			res := run(t, client, runOptions{}, append(tt.args, "--force-delete", "--yes")...)
			require.Equal(t, ExitDeleted, res.code, res.stderr)
			var got []string
			for _, d := range deletes(client) {
				got = append(got, d.GetNamespace()+"/"+d.GetName())
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// TestForceDeleteWithoutNodeEvidence: with nodes forbidden, --force-delete
// still removes a taint-evicted pod past its deadline (the no-evidence
// rule), and holds a StatefulSet pod back.
func TestForceDeleteWithoutNodeEvidence(t *testing.T) {
	f := loadFixtures(t)
	client := newClient(t, f.nodeLost, f.taintEvicted, ownedByStatefulSet(renamed(f.taintEvicted, "db-0"), "db"))
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "", errors.New("no RBAC"))
	})
	res := run(t, client, runOptions{}, "--force-delete", "--yes")
	require.Equal(t, ExitHeldBack, res.code, res.stderr)
	require.Equal(t, []string{
		"pod default/db-0: held back: needs fencing evidence (its node gone or out of service, or a fencer's proof): owned by StatefulSet db; once node node-lost is powered off: kubectl taint node node-lost node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
		"pod default/taint-evicted: force-deleted",
	}, lastLines(res.stdout, 2))
	require.Equal(t, 1, strings.Count(res.stderr, "warning: cannot list nodes"), "the warning is said once: %s", res.stderr)
	require.Len(t, deletes(client), 1)
}

// TestBadInputIsOneLine: bad flags, an unknown context, a namespace that
// does not exist and a forbidden pod list each give exit code 1 and one
// line on stderr, with no usage text and nothing on stdout.
func TestBadInputIsOneLine(t *testing.T) {
	f := loadFixtures(t)
	forbiddenPods := func(client *fake.Clientset) {
		client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New(`User "viewer" cannot list resource "pods" in API group "" in the namespace "default"`))
		})
	}
	unreachable := func(client *fake.Clientset) {
		client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			return true, nil, errors.New(`Get "https://127.0.0.1:1/api/v1/nodes?limit=500": dial tcp 127.0.0.1:1: connect: connection refused`)
		})
	}
	tests := []struct {
		name  string
		args  []string
		setup func(*fake.Clientset)
		want  string
	}{
		{name: "unknown context", args: []string{"--context", "nope"}, want: `error: kubeconfig: context "nope" does not exist`},
		{name: "namespace that does not exist", args: []string{"-n", "nope"}, want: `error: namespace "nope" not found`},
		{name: "no RBAC to list pods", setup: forbiddenPods, want: `error: cannot list pods in namespace default: pods is forbidden: User "viewer" cannot list resource "pods" in API group "" in the namespace "default"`},
		{name: "unreachable API server", setup: unreachable, want: `error: cannot list nodes: Get "https://127.0.0.1:1/api/v1/nodes?limit=500": dial tcp 127.0.0.1:1: connect: connection refused`},
		{name: "bad selector", args: []string{"-l", "app in (a"}, want: `error: invalid selector "app in (a": unable to parse requirement: found '', expected: ',' or ')'`},
		{name: "unknown output", args: []string{"-o", "xml"}, want: `error: unknown output format "xml": use wide, json or yaml`},
		{name: "no deletes allowed", args: []string{"--force-delete", "--max-deletes=0"}, want: "error: --max-deletes must be at least 1, not 0"},
		{name: "--yes alone", args: []string{"--yes"}, want: "error: --yes only confirms --force-delete; add --force-delete, or drop --yes"},
		{name: "unknown flag", args: []string{"--frce-delete"}, want: "error: unknown flag: --frce-delete (see kubectl podhealth --help)"},
		{name: "an argument", args: []string{"pods"}, want: `error: unknown command "pods" for "kubectl podhealth"`},
		{name: "a user extra without a value", args: []string{"--as=jane", "--as-user-extra=scopes"}, want: `error: --as-user-extra "scopes": want key=value`},
		{name: "a bad request timeout", args: []string{"--request-timeout=soon"}, want: `error: kubeconfig: Invalid timeout value. Timeout must be a single integer in seconds, or an integer followed by a corresponding time unit (e.g. 1s | 2m | 3h)`},
		{name: "kubectl's --cache-dir: no cache to point at", args: []string{"--cache-dir=/tmp/kube"}, want: "error: unknown flag: --cache-dir (see kubectl podhealth --help)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(t, f.nodeHealthy, f.nodeLost, namespace("default"), f.taintEvicted)
			if tt.setup != nil {
				tt.setup(client)
			}
			res := run(t, client, runOptions{}, tt.args...)
			require.Equal(t, ExitError, res.code)
			require.Equal(t, tt.want+"\n", res.stderr)
			require.Empty(t, res.stdout)
			require.Empty(t, writes(client))
		})
	}
}

// TestHelpDocumentsTheExitCodes: --help prints the exit codes, with the
// values of the constants.
func TestHelpDocumentsTheExitCodes(t *testing.T) {
	res := run(t, newClient(t), runOptions{}, "--help")
	require.Equal(t, ExitNothingToDo, res.code)
	for _, line := range []string{
		itoa(ExitNothingToDo) + "  nothing to do",
		itoa(ExitError) + "  error",
		itoa(ExitDeleted) + "  deleted",
		itoa(ExitHeldBack) + "  some dead pods are held back",
		itoa(ExitDeadPodsLeft) + "  dead pods were listed and not deleted",
		"kubectl podhealth [flags]",
		"--max-deletes int",
	} {
		require.Contains(t, res.stdout, line)
	}
}

// TestVersionPrintsTheBuildAndSendsNothing: --version names the plugin and
// its build, exits 0 and sends no request.
func TestVersionPrintsTheBuildAndSendsNothing(t *testing.T) {
	client := newClient(t)
	res := run(t, client, runOptions{}, "--version")
	require.Equal(t, ExitNothingToDo, res.code)
	require.True(t, strings.HasPrefix(res.stdout, "kubectl-podhealth "), res.stdout)
	require.Empty(t, client.Actions(), "no request")
}

// TestDashVRunsTheScanNotVersion: `kubectl podhealth -v=6` scans as
// without it (it lists the pods), where it used to print the version.
func TestDashVRunsTheScanNotVersion(t *testing.T) {
	client := newClient(t, namespace("default"))
	res := run(t, client, runOptions{}, "-v=6")
	defer func() { require.NoError(t, setVerbosity(0)) }()
	require.Equal(t, ExitNothingToDo, res.code, res.stderr)
	require.False(t, strings.HasPrefix(res.stdout, "kubectl-podhealth "), res.stdout)
	require.NotEmpty(t, client.Actions(), "it listed")
}

// TestAForbiddenClaimReadListsTheHeldPodAndDeletesNothing: with the read
// of a dead pod's claim forbidden, the pod is listed, held back, the run
// fails with one error line that says why (exit 1), and --force-delete
// deletes nothing, not even the pods that needed no claim: the evidence is
// incomplete. Before, the run printed only the error and listed no pod.
func TestAForbiddenClaimReadListsTheHeldPodAndDeletesNothing(t *testing.T) {
	f := loadFixtures(t)
	db := renamed(f.taintEvicted, "web-db")
	db.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: ptr.To(true)}}
	db.Spec.Volumes = append(db.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
	for _, args := range [][]string{nil, {"--force-delete", "--yes"}} {
		client := newClient(t, f.nodeHealthy, f.nodeLost, f.taintEvicted, db)
		client.PrependReactor("get", "persistentvolumeclaims", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			return true, nil, apierrors.NewForbidden(corev1.Resource("persistentvolumeclaims"), "data", errors.New("no RBAC"))
		})
		res := run(t, client, runOptions{}, args...)
		require.Equal(t, ExitError, res.code, "%v: %s", args, res.stderr)
		require.Contains(t, res.stdout, "web-db", "the held pod is listed")
		require.Contains(t, res.stdout, "held back")
		require.Equal(t, 1, strings.Count(strings.TrimSpace(res.stderr), "\n")+1, "one line: %s", res.stderr)
		require.Contains(t, res.stderr, "error: some evidence could not be read, so nothing was force-deleted")
		require.Contains(t, res.stderr, "forbidden")
		require.Empty(t, deletes(client), "%v", args)
	}
}
