package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

// apiServer answers core/v1 requests on 127.0.0.1 from objects in memory,
// as the API server answers them where the tests look: pods (GET; LIST in a
// namespace or all, with labelSelector, limit and continue; DELETE with the
// body's UID precondition and grace period, a grace period other than 0
// only marking the pod, since no kubelet confirms), nodes (GET, LIST),
// claims and namespaces (GET). Errors are Status documents. It records each
// request, and answers a method and resource from fail instead when set.
type apiServer struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	pods     map[string]*corev1.Pod // namespace/name
	nodes    map[string]*corev1.Node
	claims   map[string]*corev1.PersistentVolumeClaim // namespace/name
	spaces   map[string]*corev1.Namespace
	requests []string                          // "METHOD path?query"
	deletes  []metav1.DeleteOptions            // each DELETE's body
	fail     map[string]*apierrors.StatusError // "METHOD resource"
	agents   map[string]bool                   // User-Agent headers seen
}

func newAPIServer(t *testing.T, objs ...any) *apiServer {
	t.Helper()
	s := &apiServer{t: t, pods: map[string]*corev1.Pod{}, nodes: map[string]*corev1.Node{},
		claims: map[string]*corev1.PersistentVolumeClaim{}, spaces: map[string]*corev1.Namespace{},
		fail: map[string]*apierrors.StatusError{}, agents: map[string]bool{}}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Pod:
			s.pods[o.Namespace+"/"+o.Name] = o.DeepCopy()
		case *corev1.Node:
			s.nodes[o.Name] = o.DeepCopy()
		case *corev1.PersistentVolumeClaim:
			s.claims[o.Namespace+"/"+o.Name] = o.DeepCopy()
		case *corev1.Namespace:
			s.spaces[o.Name] = o.DeepCopy()
		default:
			t.Fatalf("apiServer: %T is not served", o)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/pods", s.listPods)
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods", s.listPods)
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods/{name}", s.getPod)
	mux.HandleFunc("DELETE /api/v1/namespaces/{ns}/pods/{name}", s.deletePod)
	mux.HandleFunc("GET /api/v1/nodes", s.listNodes)
	mux.HandleFunc("GET /api/v1/nodes/{name}", s.getNode)
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/persistentvolumeclaims/{name}", s.getClaim)
	mux.HandleFunc("GET /api/v1/namespaces/{name}", s.getNamespace)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
		s.agents[r.UserAgent()] = true
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// config is a REST config for the server, as the kubeconfig would give,
// with the command's rate limits (the conformance suite's concurrent
// deletes would wait on client-go's defaults).
func (s *apiServer) config() *rest.Config {
	return &rest.Config{Host: s.srv.URL, QPS: 50, Burst: 100}
}

func (s *apiServer) cluster(t *testing.T) Cluster {
	t.Helper()
	c, err := NewCluster(s.config())
	require.NoError(t, err)
	return c
}

// kubeconfig writes a kubeconfig for the server, namespace default.
func (s *apiServer) kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q}
users:
- name: u
  user: {token: test}
contexts:
- name: test
  context: {cluster: c, user: u, namespace: default}
current-context: test
`, s.srv.URL)
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

func (s *apiServer) failing(method, resource string) *apierrors.StatusError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fail[method+" "+resource]
}

func (s *apiServer) answer(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(obj); err != nil {
		s.t.Errorf("apiServer: encoding the answer: %v", err)
	}
}

func (s *apiServer) answerError(w http.ResponseWriter, err *apierrors.StatusError) {
	status := err.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	s.answer(w, int(status.Code), status)
}

// served is whether the request may go on; else its error was answered.
func (s *apiServer) served(w http.ResponseWriter, r *http.Request, resource string) bool {
	if err := s.failing(r.Method, resource); err != nil {
		s.answerError(w, err)
		return false
	}
	return true
}

func (s *apiServer) listPods(w http.ResponseWriter, r *http.Request) {
	if !s.served(w, r, "pods") {
		return
	}
	q := r.URL.Query()
	sel, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		s.answerError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	s.mu.Lock()
	var keys []string
	for k, p := range s.pods {
		if (r.PathValue("ns") == "" || p.Namespace == r.PathValue("ns")) && sel.Matches(labels.Set(p.Labels)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	start, _ := strconv.Atoi(q.Get("continue"))
	end := len(keys)
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	if limit, _ := strconv.Atoi(q.Get("limit")); limit > 0 && start+limit < len(keys) {
		end = start + limit
		list.Continue = strconv.Itoa(end)
	}
	for _, k := range keys[start:end] {
		list.Items = append(list.Items, *s.pods[k].DeepCopy())
	}
	s.mu.Unlock()
	s.answer(w, http.StatusOK, list)
}

func (s *apiServer) getPod(w http.ResponseWriter, r *http.Request) {
	if !s.served(w, r, "pods") {
		return
	}
	s.mu.Lock()
	p, ok := s.pods[r.PathValue("ns")+"/"+r.PathValue("name")]
	if ok {
		p = p.DeepCopy()
	}
	s.mu.Unlock()
	if !ok {
		s.answerError(w, apierrors.NewNotFound(corev1.Resource("pods"), r.PathValue("name")))
		return
	}
	p.APIVersion, p.Kind = "v1", "Pod"
	s.answer(w, http.StatusOK, p)
}

func (s *apiServer) deletePod(w http.ResponseWriter, r *http.Request) {
	if !s.served(w, r, "pods") {
		return
	}
	var opts metav1.DeleteOptions
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &opts); err != nil {
		s.answerError(w, apierrors.NewBadRequest("the DELETE's body is no DeleteOptions: "+err.Error()))
		return
	}
	key := r.PathValue("ns") + "/" + r.PathValue("name")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes = append(s.deletes, opts)
	p, ok := s.pods[key]
	switch {
	case !ok:
		s.answerError(w, apierrors.NewNotFound(corev1.Resource("pods"), r.PathValue("name")))
	case opts.Preconditions != nil && opts.Preconditions.UID != nil && *opts.Preconditions.UID != p.UID:
		s.answerError(w, apierrors.NewConflict(corev1.Resource("pods"), p.Name,
			fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", *opts.Preconditions.UID, p.UID)))
	case opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds == 0:
		delete(s.pods, key)
		s.answer(w, http.StatusOK, p)
	default:
		if p.DeletionTimestamp == nil {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		s.answer(w, http.StatusOK, p)
	}
}

func (s *apiServer) listNodes(w http.ResponseWriter, r *http.Request) {
	if !s.served(w, r, "nodes") {
		return
	}
	s.mu.Lock()
	list := &corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}}
	for _, name := range slices.Sorted(maps.Keys(s.nodes)) {
		list.Items = append(list.Items, *s.nodes[name].DeepCopy())
	}
	s.mu.Unlock()
	s.answer(w, http.StatusOK, list)
}

func (s *apiServer) getNode(w http.ResponseWriter, r *http.Request) {
	getOne(s, w, r, "nodes", s.nodes, r.PathValue("name"))
}

func (s *apiServer) getClaim(w http.ResponseWriter, r *http.Request) {
	getOne(s, w, r, "persistentvolumeclaims", s.claims, r.PathValue("ns")+"/"+r.PathValue("name"))
}

func (s *apiServer) getNamespace(w http.ResponseWriter, r *http.Request) {
	getOne(s, w, r, "namespaces", s.spaces, r.PathValue("name"))
}

// getOne answers a GET of resource with the object objs holds at key, or
// the API server's NotFound.
func getOne[T any](s *apiServer, w http.ResponseWriter, r *http.Request, resource string, objs map[string]T, key string) {
	if !s.served(w, r, resource) {
		return
	}
	s.mu.Lock()
	obj, ok := objs[key]
	s.mu.Unlock()
	if !ok {
		s.answerError(w, apierrors.NewNotFound(corev1.Resource(resource), r.PathValue("name")))
		return
	}
	s.answer(w, http.StatusOK, obj)
}

// TestTheRESTClusterDeleterPassesTheDeleterConformanceSuite: the deleter
// the command uses, over the REST client of a real HTTP exchange, honours
// health.Deleter's contract as podsource.TestDeleter checks it.
func TestTheRESTClusterDeleterPassesTheDeleterConformanceSuite(t *testing.T) {
	selector := labels.SelectorFromSet(labels.Set{podsource.DeleterTestLabelKey: podsource.DeleterTestLabelValue})
	require.NoError(t, podsource.TestDeleter(func(pods ...*corev1.Pod) (health.Deleter, podsource.GetPodFunc, error) {
		objs := make([]any, len(pods))
		for i, p := range pods {
			objs[i] = p
		}
		srv := newAPIServer(t, objs...)
		cluster, err := NewCluster(srv.config())
		if err != nil {
			return nil, nil, err
		}
		return namespacedDeleter{cluster: cluster, selector: selector}, cluster.GetPod, nil
	}))
}

// TestTheRESTClusterSendsWhatTheClientsetWould: each call is one request
// to core/v1's path for it, with the list options in the query, and the
// DELETE's body carries grace period 0 and the UID precondition; answers
// decode into the objects served, and errors reach apierrors.
func TestTheRESTClusterSendsWhatTheClientsetWould(t *testing.T) {
	f := loadFixtures(t)
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}
	srv := newAPIServer(t, f.alive, f.taintEvicted, f.nodeHealthy, f.nodeLost, claim, namespace("default"))
	cluster := srv.cluster(t)
	ctx := context.Background()

	_, err := cluster.ListPods(ctx, "default", metav1.ListOptions{LabelSelector: "app=web", Limit: 1, Continue: "0"})
	require.NoError(t, err)
	all, err := cluster.ListPods(ctx, "", metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, all.Items, 2)
	pod, err := cluster.GetPod(ctx, "default", f.taintEvicted.Name)
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(f.taintEvicted, pod, ignoreTypeMeta()))
	nodes, err := cluster.ListNodes(ctx, metav1.ListOptions{Limit: 500})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 2)
	node, err := cluster.GetNode(ctx, f.nodeLost.Name)
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(f.nodeLost, node, ignoreTypeMeta()))
	gotClaim, err := cluster.GetClaim(ctx, "default", "data")
	require.NoError(t, err)
	require.Equal(t, claim.Spec.AccessModes, gotClaim.Spec.AccessModes)
	_, err = cluster.GetNamespace(ctx, "default")
	require.NoError(t, err)
	_, err = cluster.GetNamespace(ctx, "missing")
	require.True(t, apierrors.IsNotFound(err), "a missing namespace is the server's NotFound: %v", err)
	require.NoError(t, cluster.DeletePod(ctx, "default", f.taintEvicted.Name, podsource.ForceDeleteOptions(f.taintEvicted.UID)))

	require.Equal(t, []string{
		"GET /api/v1/namespaces/default/pods?continue=0&labelSelector=app%3Dweb&limit=1",
		"GET /api/v1/pods",
		"GET /api/v1/namespaces/default/pods/" + f.taintEvicted.Name,
		"GET /api/v1/nodes?limit=500",
		"GET /api/v1/nodes/" + f.nodeLost.Name,
		"GET /api/v1/namespaces/default/persistentvolumeclaims/data",
		"GET /api/v1/namespaces/default",
		"GET /api/v1/namespaces/missing",
		"DELETE /api/v1/namespaces/default/pods/" + f.taintEvicted.Name,
	}, srv.requests)
	require.Empty(t, cmp.Diff([]metav1.DeleteOptions{podsource.ForceDeleteOptions(f.taintEvicted.UID)}, srv.deletes, ignoreTypeMeta()))
	require.Len(t, srv.agents, 1)
	for agent := range srv.agents {
		require.NotEmpty(t, agent, "requests carry a User-Agent")
	}
}

// ignoreTypeMeta leaves out of a comparison the kind and apiVersion that
// travel with an object (the typed clients send and drop them too), and the
// managed fields, whose FieldsV1 holds its JSON in another form once
// decoded.
func ignoreTypeMeta() cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool {
		last := p.Last().String()
		return last == ".TypeMeta" || last == ".ManagedFields"
	}, cmp.Ignore())
}

// TestLiveNodesOverTheRESTClusterTellNoNodeReadableFromAGoneNode: a 403 and
// a server that does not answer say no node can be read (the error wraps
// health.ErrNodesUnavailable, and the API error still reaches
// apierrors); a 404 says this node is gone, and is not wrapped.
func TestLiveNodesOverTheRESTClusterTellNoNodeReadableFromAGoneNode(t *testing.T) {
	ctx := context.Background()
	srv := newAPIServer(t)
	live := liveNodes{cluster: srv.cluster(t)}

	_, err := live.GetNode(ctx, "gone")
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	require.False(t, errors.Is(err, health.ErrNodesUnavailable), "a gone node is not 'no node readable': %v", err)

	srv.fail["GET nodes"] = apierrors.NewForbidden(corev1.Resource("nodes"), "n1", errors.New("no RBAC"))
	_, err = live.GetNode(ctx, "n1")
	require.ErrorIs(t, err, health.ErrNodesUnavailable)
	require.True(t, apierrors.IsForbidden(err), "%v", err)

	closed := newAPIServer(t)
	unreachable := liveNodes{cluster: closed.cluster(t)}
	closed.srv.Close()
	_, err = unreachable.GetNode(ctx, "n1")
	require.ErrorIs(t, err, health.ErrNodesUnavailable)
}

// TestTheCommandReachesTheAPIServerThroughTheKubeconfig: with Env's zero
// NewCluster, a run resolves --kubeconfig, talks to the server it names
// and force-deletes the dead pod there, by its UID.
func TestTheCommandReachesTheAPIServerThroughTheKubeconfig(t *testing.T) {
	f := loadFixtures(t)
	srv := newAPIServer(t, f.nodeHealthy, f.nodeLost, f.alive, f.taintEvicted, namespace("default"))
	var stdout, stderr strings.Builder
	code := Main(context.Background(), []string{"--kubeconfig=" + srv.kubeconfig(t), "--force-delete", "--yes"},
		IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr}, Env{Clock: clocktesting.NewFakePassiveClock(now)})
	require.Equal(t, ExitDeleted, code, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
	require.Empty(t, cmp.Diff([]metav1.DeleteOptions{podsource.ForceDeleteOptions(f.taintEvicted.UID)}, srv.deletes, ignoreTypeMeta()))
	_, err := srv.cluster(t).GetPod(context.Background(), "default", f.taintEvicted.Name)
	require.True(t, apierrors.IsNotFound(err), "the dead pod is gone: %v", err)
	_, err = srv.cluster(t).GetPod(context.Background(), "default", f.alive.Name)
	require.NoError(t, err, "the live pod is left alone")
}
