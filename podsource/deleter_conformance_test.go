package podsource_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

var podsResource = corev1.Resource("pods")

// memStore deletes as the API server does for pods on a lost node.
type memStore struct {
	mu   sync.Mutex
	pods map[types.NamespacedName]*corev1.Pod
}

func newMemStore(pods ...*corev1.Pod) *memStore {
	s := &memStore{pods: map[types.NamespacedName]*corev1.Pod{}}
	for _, p := range pods {
		s.pods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p.DeepCopy()
	}
	return s
}

func (s *memStore) get(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	return p.DeepCopy(), nil
}

func (s *memStore) delete(namespace, name string, uid *types.UID, grace int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := types.NamespacedName{Namespace: namespace, Name: name}
	p, ok := s.pods[key]
	switch {
	case !ok:
		return apierrors.NewNotFound(podsResource, name)
	case uid != nil && *uid != p.UID:
		return apierrors.NewConflict(podsResource, name, fmt.Errorf("precondition uid %s, stored %s", *uid, p.UID))
	case grace == 0:
		delete(s.pods, key)
	default:
		marked := p.DeepCopy()
		now := metav1.Now()
		marked.DeletionTimestamp, marked.DeletionGracePeriodSeconds = &now, &grace
		s.pods[key] = marked
	}
	return nil
}

// memDeleter is an honest deleter over a memStore, unless one of its flags
// breaks one property of the contract.
type memDeleter struct {
	store *memStore

	ignoresPrecondition bool // deletes by name only
	graceful            bool // sends the pod's own grace period instead of 0
	mutates             bool // writes into its pod argument
	swallowsNotFound    bool // answers nil for a missing pod
	ignoresContext      bool // deletes even when ctx is done
	dropsContextError   bool // refuses a done ctx with an error that does not wrap ctx.Err()
	oneAtATime          bool // fails a call made while another is in flight

	inFlight atomic.Int32
	second   chan struct{}
	once     sync.Once
}

func (d *memDeleter) ForceDelete(ctx context.Context, pod *corev1.Pod) error {
	if d.oneAtATime {
		if d.inFlight.Add(1) > 1 {
			d.once.Do(func() { close(d.second) })
			d.inFlight.Add(-1)
			return errors.New("deleter busy")
		}
		defer d.inFlight.Add(-1)
		// The suite's concurrency check names its pods dead-NN: hold
		// those calls until a second one arrives, so that the overlap is
		// certain rather than a matter of scheduling.
		if strings.HasPrefix(pod.Name, "dead-") {
			<-d.second
		}
	}
	if err := ctx.Err(); err != nil && !d.ignoresContext {
		if d.dropsContextError {
			return errors.New("context done")
		}
		return fmt.Errorf("mem: %w", err)
	}
	if d.mutates {
		pod.Annotations = map[string]string{"deleted-by": "mem"}
	}
	var uid *types.UID
	if !d.ignoresPrecondition {
		u := pod.UID
		uid = &u
	}
	grace := int64(0)
	if d.graceful {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	err := d.store.delete(pod.Namespace, pod.Name, uid, grace)
	if d.swallowsNotFound && apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// harness returns a NewDeleterFunc over memStores; configure sets the
// deleter's flags.
func harness(configure func(*memDeleter)) podsource.NewDeleterFunc {
	return func(pods ...*corev1.Pod) (health.Deleter, podsource.GetPodFunc, error) {
		store := newMemStore(pods...)
		d := &memDeleter{store: store, second: make(chan struct{})}
		configure(d)
		return d, store.get, nil
	}
}

func TestTestDeleterAcceptsAnHonestDeleter(t *testing.T) {
	require.NoError(t, podsource.TestDeleter(harness(func(*memDeleter) {})))
}

// Each broken deleter must be caught, with a message that says what broke.
func TestTestDeleterCatchesBrokenDeleters(t *testing.T) {
	tests := []struct {
		name      string
		configure func(*memDeleter)
		wantErr   []string
	}{
		{"ignores the UID precondition", func(d *memDeleter) { d.ignoresPrecondition = true },
			[]string{"want a Conflict", "the newer pod", "no longer stored"}},
		{"graceful instead of grace period 0", func(d *memDeleter) { d.graceful = true },
			[]string{"still stored", "was the grace period not 0?"}},
		{"mutates its pod argument", func(d *memDeleter) { d.mutates = true },
			[]string{"ForceDelete changed its pod argument", "deleted-by"}},
		{"swallows NotFound into nil", func(d *memDeleter) { d.swallowsNotFound = true },
			[]string{"missing pod: force delete of pod default/missing that is not stored: got error <nil>, want a NotFound"}},
		{"ignores a done context", func(d *memDeleter) { d.ignoresContext = true },
			[]string{"canceled context: got error <nil>", "expired context: got error <nil>", "canceled context: pod default/dead is no longer stored"}},
		{"does not wrap ctx.Err()", func(d *memDeleter) { d.dropsContextError = true },
			[]string{"canceled context: got error context done, want one wrapping context canceled"}},
		{"cannot take two calls at once", func(d *memDeleter) { d.oneAtATime = true },
			[]string{"concurrent force deletes", "deleter busy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := podsource.TestDeleter(harness(tt.configure))
			require.Error(t, err)
			for _, want := range tt.wantErr {
				require.ErrorContains(t, err, want)
			}
		})
	}
}

func TestTestDeleterReportsABrokenHarness(t *testing.T) {
	require.ErrorContains(t, podsource.TestDeleter(nil), "nil NewDeleterFunc")
	boom := errors.New("no store")
	err := podsource.TestDeleter(func(...*corev1.Pod) (health.Deleter, podsource.GetPodFunc, error) { return nil, nil, boom })
	require.ErrorIs(t, err, boom)
	err = podsource.TestDeleter(func(...*corev1.Pod) (health.Deleter, podsource.GetPodFunc, error) { return nil, nil, nil })
	require.ErrorContains(t, err, "nil Deleter or GetPodFunc")
}
