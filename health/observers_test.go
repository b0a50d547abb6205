package health_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// namedObserver keeps the outcomes it hears, under a name.
type namedObserver struct {
	name  string
	heard *[]string
}

func (o *namedObserver) Observe(_ context.Context, r health.PodReport) {
	*o.heard = append(*o.heard, o.name+":"+r.Pod.Name+"="+r.Outcome.String())
}

// TestMultiObserverHandsEveryReportToEachObserverInOrder runs a real check
// with two observers and a nil and a typed nil among them: both hear every
// pod, each report in the order given, and the nils are left out instead
// of panicking in the check.
func TestMultiObserverHandsEveryReportToEachObserverInOrder(t *testing.T) {
	var heard []string
	var typedNil *namedObserver
	obs := health.MultiObserver(&namedObserver{"metrics", &heard}, nil, typedNil, &namedObserver{"events", &heard})
	pods := fake.New(fake.Options{}, newPod("alive"), taintEvicted("dead"))
	checker := newChecker(t, pods, health.Options{Observer: obs, Clock: clocktesting.NewFakePassiveClock(deletedAt.Add(time.Hour))})
	_, err := checker.Check(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{
		"metrics:alive=NoAction", "events:alive=NoAction",
		"metrics:dead=ForceDeleted", "events:dead=ForceDeleted",
	}, heard)
}

func TestMultiObserverOfNothingIsNilAndOfOneIsThatOne(t *testing.T) {
	var typedNil *namedObserver
	require.Nil(t, health.MultiObserver())
	require.Nil(t, health.MultiObserver(nil, typedNil))
	var heard []string
	one := &namedObserver{"one", &heard}
	require.Same(t, one, health.MultiObserver(nil, one))

	nested := health.MultiObserver(health.MultiObserver(one, one), one)
	nested.Observe(context.Background(), health.PodReport{Pod: newPod("p")})
	require.Equal(t, []string{"one:p=NoAction", "one:p=NoAction", "one:p=NoAction"}, heard, "a nested MultiObserver is flattened, not lost")
}

// TestNewRefusesLiveNodesWithoutNodes: LiveNodes only confirms that a node
// missing from Nodes is gone, so without Nodes it would never be asked and
// a taint-evicted pod would wait out its deadline with no node evidence.
// New says so, and says what to do, instead of accepting it silently.
func TestNewRefusesLiveNodesWithoutNodes(t *testing.T) {
	live := fake.NewNodes(newNode("node-lost", notReady))
	pods := fake.New(fake.Options{}, taintEvicted("dead"))
	_, err := health.New(pods, pods, health.Options{LiveNodes: live})
	require.ErrorContains(t, err, "Options.LiveNodes without Options.Nodes")
	require.ErrorContains(t, err, "Put the getter in Options.Nodes")

	checker, err := health.New(pods, pods, health.Options{Nodes: live})
	require.NoError(t, err)
	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.Equal(t, health.ForceDeleted, report.Pods[0].Outcome, "live reads in Nodes are node evidence: the pod is dead at once")
}

// One Checker feeds two observers: here two loggers; in an operator, the
// metrics module's Observer and an EventObserver.
func ExampleMultiObserver() {
	pods := fake.New(fake.Options{}, taintEvicted("web-0"))
	nodes := fake.NewNodes(newNode("node-lost", notReady))
	say := func(who string) health.Observer {
		return observerFunc(func(_ context.Context, r health.PodReport) {
			if r.Verdict.State == health.Dead {
				fmt.Println(who, r.Pod.Name, r.Outcome)
			}
		})
	}
	checker, err := health.New(pods, pods, health.Options{Nodes: nodes, Observer: health.MultiObserver(say("metrics:"), say("events:"))})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := checker.Check(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// metrics: web-0 ForceDeleted
	// events: web-0 ForceDeleted
}
