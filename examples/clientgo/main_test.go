package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/internal/testutil/informertest"
)

const (
	ns  = "default"
	app = "registry" // the label of the pods in testdata/real-cluster
)

// cluster is a fake clientset that, like the API server, names the pods
// created with generateName and gives them a UID, and whose pod watch
// holds back every event of a created pod while lagging is set: an
// informer that has not yet seen the pod it was just told was created.
type cluster struct {
	client  *fake.Clientset
	watched chan struct{} // closed once the informer's watch runs

	mu      sync.Mutex
	lagging bool
	held    []watch.Event
	out     chan watch.Event
	creates atomic.Int32
}

func newCluster(t *testing.T, pods ...*corev1.Pod) *cluster {
	t.Helper()
	c := &cluster{client: fake.NewClientset(testutil.Objects(pods...)...), watched: make(chan struct{})}
	var once sync.Once
	c.client.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w := action.(k8stesting.WatchActionImpl)
		inner, err := c.client.Tracker().Watch(w.GetResource(), w.GetNamespace(), w.ListOptions)
		if err != nil {
			return true, nil, err
		}
		out := make(chan watch.Event, 100)
		proxy := watch.NewProxyWatcher(out)
		c.mu.Lock()
		c.out = out
		c.mu.Unlock()
		go func() {
			<-proxy.StopChan()
			inner.Stop()
		}()
		go func() {
			for ev := range inner.ResultChan() {
				c.mu.Lock()
				if pod, ok := ev.Object.(*corev1.Pod); ok && c.lagging && pod.GenerateName != "" {
					c.held = append(c.held, ev)
				} else {
					select {
					case out <- ev:
					case <-proxy.StopChan():
					}
				}
				c.mu.Unlock()
			}
		}()
		once.Do(func() { close(c.watched) })
		return true, proxy, nil
	})
	c.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		// A pod created before the informer's watch runs would never reach
		// the fake's watch, which cannot resume from a resourceVersion.
		<-c.watched
		create := action.(k8stesting.CreateAction)
		pod := create.GetObject().(*corev1.Pod).DeepCopy()
		i := c.creates.Add(1)
		pod.Name = fmt.Sprintf("%sr%d", pod.GenerateName, i)
		pod.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		if err := c.client.Tracker().Create(create.GetResource(), pod, create.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, pod, nil
	})
	return c
}

// lag holds back the events of created pods until catchUp.
func (c *cluster) lag() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lagging = true
}

// catchUp delivers the held events, in order, and stops holding any.
func (c *cluster) catchUp() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range c.held {
		c.out <- ev
	}
	c.held, c.lagging = nil, false
}

func (c *cluster) podVerbs(verb string) int {
	n := 0
	for _, a := range c.client.Actions() {
		if a.GetResource().Resource == "pods" && a.GetVerb() == verb {
			n++
		}
	}
	return n
}

// touch updates pod, as a kubelet does while a pod terminates: an event the
// informer delivers, which enqueues the workload.
func (c *cluster) touch(t *testing.T, name string, i int) {
	t.Helper()
	pod, err := c.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	pod.Annotations = map[string]string{"touched": fmt.Sprint(i)}
	_, err = c.client.CoreV1().Pods(ns).Update(context.Background(), pod, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// start runs the controller until the test ends and requires that it
// stops cleanly.
func (c *cluster) start(t *testing.T, opts health.Options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	newPod := func() *corev1.Pod { return replacement(ns, app, "registry:2") }
	go func() { done <- run(ctx, c.client, ns, app, newPod, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err, "run did not stop cleanly")
		case <-time.After(30 * time.Second):
			t.Error("run did not return after its context ended")
		}
	})
	select {
	case <-c.watched:
	case <-time.After(informertest.WatchTimeout):
		t.Fatal("the controller's informer never started its watch")
	}
}

// checks counts the checks through the Observer: each check reports each
// pod it lists once, and the tests keep one pod in every list.
type checks struct{ n atomic.Int32 }

func (c *checks) Observe(context.Context, health.PodReport) { c.n.Add(1) }

// waitForAnotherCheck waits until a check starts after this call.
func (c *checks) waitForAnotherCheck(t *testing.T, trigger func()) {
	t.Helper()
	before := c.n.Load()
	trigger()
	require.Eventually(t, func() bool { return c.n.Load() > before }, 10*time.Second, time.Millisecond, "no check after the trigger")
}

func TestRunCreatesTheFirstPodOfAnEmptyWorkloadAtStart(t *testing.T) {
	c := newCluster(t)
	c.start(t, health.Options{})
	require.Eventually(t, func() bool { return c.podVerbs("create") == 1 }, 10*time.Second, time.Millisecond,
		"no pod was created for a workload that never had one")
	list, err := c.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	require.Equal(t, map[string]string{"app": app}, list.Items[0].Labels)
}

// TestRunCreatesOneReplacementDuringADrainDespiteALaggingCache: a drained
// pod terminates gracefully (not alive, not dead: the workload is down),
// and while the informer has not yet seen the replacement, the drained pod
// changes twice, and each change triggers a check that finds no live pod.
// The tracker makes those checks create nothing. When its TTL has ended
// before the checks, as if nothing remembered the replacement, the same
// checks create a second one: the scenario does create two without it.
func TestRunCreatesOneReplacementDuringADrainDespiteALaggingCache(t *testing.T) {
	for _, tt := range []struct {
		name        string
		ttlElapsed  bool
		wantCreates int
	}{
		{name: "remembered", wantCreates: 1},
		{name: "forgotten: the TTL ended before the checks", ttlElapsed: true, wantCreates: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			drained := testutil.LoadPod(t, "pod-drained.json")
			c := newCluster(t, drained)
			c.lag()
			clk := testingclock.NewFakeClock(time.Now())
			counted := &checks{}
			c.start(t, health.Options{Clock: clk, Observer: counted})
			require.Eventually(t, func() bool { return c.podVerbs("create") == 1 }, 10*time.Second, time.Millisecond,
				"no replacement for the drained pod")
			// This check starts after the iteration that created the
			// replacement ended, so after it told the tracker.
			counted.waitForAnotherCheck(t, func() { c.touch(t, drained.Name, 0) })
			if tt.ttlElapsed {
				clk.Step(5*time.Minute + time.Second)
			}
			counted.waitForAnotherCheck(t, func() { c.touch(t, drained.Name, 1) })
			require.Eventually(t, func() bool { return c.podVerbs("create") >= tt.wantCreates }, 10*time.Second, time.Millisecond)
			require.Equal(t, tt.wantCreates, c.podVerbs("create"), "replacements created while the cache lagged")

			// The cache catches up: the workload is healthy and stays so.
			c.catchUp()
			counted.waitForAnotherCheck(t, func() { c.touch(t, drained.Name, 2) })
			require.Equal(t, tt.wantCreates, c.podVerbs("create"), "created once the cache listed the replacement")
		})
	}
}

// TestRunChecksAgainWhenTheBudgetAllowsTheNextDelete: with a budget of one
// force delete per 200 ms, the first check deletes one of two dead pods and
// holds the other back; the controller must check again after
// Report.RetryAfter rather than at the next resync (30 s), which no test
// here waits for.
func TestRunChecksAgainWhenTheBudgetAllowsTheNextDelete(t *testing.T) {
	dead := testutil.LoadPod(t, "pod-taint-evicted.json") // its deletionTimestamp has passed: dead without node evidence
	dead2 := dead.DeepCopy()
	dead2.Name, dead2.UID = dead.Name+"-2", dead.UID+"-2"
	c := newCluster(t, dead, dead2)
	budget, err := health.NewDeleteBudget(1, 200*time.Millisecond)
	require.NoError(t, err)
	c.start(t, health.Options{Budget: budget})

	require.Eventually(t, func() bool { return c.podVerbs("delete") == 2 }, 10*time.Second, 5*time.Millisecond,
		"the dead pod held back by the budget was not deleted once the budget allowed it")
	require.Eventually(t, func() bool { return c.podVerbs("create") == 1 }, 10*time.Second, 5*time.Millisecond)
	list, err := c.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1, "pods left: the replacement only")
}

func TestStartRefusesMissingFlags(t *testing.T) {
	for _, tt := range []struct{ app, image string }{{"", "registry:2"}, {"registry", ""}} {
		require.ErrorContains(t, start("", ns, tt.app, tt.image), "required")
	}
}
