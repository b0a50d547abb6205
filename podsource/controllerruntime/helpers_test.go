package controllerruntime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/controllerruntime/fakeapi"
)

// registry is the selector of the fixtures' workload: every fixture pod is
// labelled app=registry in namespace default.
var registry = labels.SelectorFromSet(labels.Set{"app": "registry"})

// calls counts the requests that reach a client, by verb.
type calls struct {
	mu     sync.Mutex
	counts map[string]int
	// deletes holds the options of every delete.
	deletes []client.DeleteOptions
}

func (c *calls) add(verb string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[verb]++
}

func (c *calls) get(verb string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[verb]
}

// counted wraps c so that every Get, List, Create and Delete is counted.
func counted(c client.WithWatch, n *calls) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			n.add("get")
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			n.add("list")
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			n.add("create")
			return c.Create(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			n.add("delete")
			n.mu.Lock()
			n.deletes = append(n.deletes, *(&client.DeleteOptions{}).ApplyOptions(opts))
			n.mu.Unlock()
			return c.Delete(ctx, obj, opts...)
		},
	})
}

// apiServer returns a fakeapi client holding objs, failing the test if it
// cannot be built.
func apiServer(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	c, err := fakeapi.NewClient(objs...)
	require.NoError(t, err)
	return c
}

func objects(pods ...*corev1.Pod) []client.Object {
	out := make([]client.Object, len(pods))
	for i, p := range pods {
		out[i] = p
	}
	return out
}

// relabel returns a copy of pod with another name, UID and labels.
func relabel(pod *corev1.Pod, name, uid string, lbls map[string]string) *corev1.Pod {
	p := pod.DeepCopy()
	p.Name, p.UID, p.Labels = name, types.UID(uid), lbls
	return p
}

// recordedEvent is one call to a recorder's Eventf.
type recordedEvent struct {
	Regarding, Related         runtime.Object
	Type, Reason, Action, Note string
}

// recordingRecorder is an events.EventRecorder that keeps every event.
type recordingRecorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

var _ events.EventRecorder = (*recordingRecorder)(nil)

func (r *recordingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recordedEvent{regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...)})
}

func (r *recordingRecorder) recorded() []recordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedEvent(nil), r.events...)
}

// manager is a controllerruntime.Manager over fake clients: cache is what
// mgr.GetClient() reads, live what mgr.GetAPIReader() reads.
type manager struct {
	cache    client.Client
	live     client.Reader
	recorder *recordingRecorder
}

func (m *manager) GetClient() client.Client    { return m.cache }
func (m *manager) GetAPIReader() client.Reader { return m.live }

func loadPod(t *testing.T, file string) *corev1.Pod   { return testutil.LoadPod(t, file) }
func loadNode(t *testing.T, file string) *corev1.Node { return testutil.LoadNode(t, file) }

func fakeapiNewClient(objs ...client.Object) (client.WithWatch, error) {
	return fakeapi.NewClient(objs...)
}

func fmtAny(v any) string { return fmt.Sprint(v) }

// oneChecker builds a Checkers over mgr with opts and hands out one
// checker of namespace and selector, as code that builds its checker once
// at startup does.
func oneChecker(mgr crh.Manager, namespace string, selector labels.Selector, opts crh.CheckersOptions) (*health.Checker, error) {
	checkers, err := crh.NewCheckers(mgr, opts)
	if err != nil {
		return nil, err
	}
	return checkers.For(namespace, selector, crh.CheckOptions{})
}
