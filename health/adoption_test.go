package health_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// client-go's fake clientset does not fill in generateName, so operators'
// own unit tests hold pods without names (and often without UIDs). They are
// judged like any other pod: a healthy workload stays healthy, and a dead
// one is held back and fails the check, so that the test's author sees it.
func TestNamelessPodsAreJudgedLikeAnyOther(t *testing.T) {
	nameless := newPod("")
	nameless.UID = ""
	source := health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return []*corev1.Pod{nameless}, nil })
	deletes := 0
	deleter := health.DeleterFunc(func(context.Context, *corev1.Pod) error { deletes++; return nil })
	checker, err := health.New(source, deleter, health.Options{})
	require.NoError(t, err)

	report, err := checker.CheckReport(context.Background())
	require.NoError(t, err)
	require.True(t, report.Healthy)
	require.Equal(t, health.Alive, report.Pods[0].Verdict.State)

	dead := taintEvicted("")
	dead.UID = ""
	source = health.PodSourceFunc(func(context.Context) ([]*corev1.Pod, error) { return []*corev1.Pod{nameless, dead}, nil })
	checker, err = health.New(source, deleter, health.Options{})
	require.NoError(t, err)
	report, err = checker.CheckReport(context.Background())
	require.ErrorIs(t, err, health.ErrUnidentifiedPod, "a dead pod that cannot be force-deleted safely fails the check: its source is wrong")
	require.False(t, report.Healthy, "a failed check is no answer")
	require.Equal(t, health.Alive, report.Pods[0].Verdict.State)
	require.Equal(t, health.HeldBack, report.Pods[1].Outcome)
	require.Equal(t, health.HeldUnidentified, report.Pods[1].HeldBack.Reason)
	require.Zero(t, deletes, "nothing unsafe is ever sent")
}

// An operator that builds a Checker per reconcile (as OLM builds its
// reconciler per call) must share one Memory between them; then a cache
// that keeps listing a force-deleted pod gets one DELETE in all.
func TestCheckersBuiltPerCallSharingOneMemorySendOneDelete(t *testing.T) {
	tests := []struct {
		name        string
		shared      bool
		wantDeletes int
	}{
		{"one Memory shared by every checker", true, 1},
		{"a Memory per checker forgets, so the lagging cache costs a DELETE per reconcile", false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := fake.New(fake.Options{ListLag: 5}, newPod("alive"), taintEvicted("dead"))
			memory := health.NewMemory(health.MemoryOptions{})
			for range 3 { // three reconciles, each with its own checker
				opts := health.Options{}
				if tt.shared {
					opts.Memory = memory
				}
				healthy, err := newChecker(t, pods, opts).Check(context.Background())
				require.NoError(t, err)
				require.True(t, healthy)
			}
			require.Len(t, pods.Deletes(), tt.wantDeletes)
		})
	}
}

// Options.Logger unset: the logger in the check's context is used, as
// controller-runtime users expect, and objects are logged as
// "namespace/name" in every sink, JSON ones too.
func TestZeroLoggerUsesTheContextLoggerWithObjectReferences(t *testing.T) {
	var lines []map[string]any
	logger := funcr.NewJSON(func(obj string) {
		var line map[string]any
		require.NoError(t, json.Unmarshal([]byte(obj), &line))
		lines = append(lines, line)
	}, funcr.Options{})
	pods := fake.New(fake.Options{}, newPod("alive"), taintEvicted("dead"))
	ctx := logr.NewContext(context.Background(), logger)

	_, err := newChecker(t, pods, health.Options{}).Check(ctx)
	require.NoError(t, err)
	require.Len(t, lines, 1, "one line per force delete")
	require.Equal(t, "force-deleted pod", lines[0]["msg"])
	require.Equal(t, "ns/dead", lines[0]["pod"])
	require.Equal(t, "node-lost", lines[0]["node"])
	require.Equal(t, "uid-dead", lines[0]["uid"])
	require.Equal(t, "TaintEvicted", lines[0]["rule"])
}

// A text sink that prints a value it is given with %v, as logrusr does,
// prints "namespace/name", not the fields of a struct
// ("{dead-pod testns}"): the pod and node values marshal to their names.
func TestLoggedObjectsReadAsTheirNamesInATextSink(t *testing.T) {
	var lines []string
	logger := logr.New(&percentVSink{lines: &lines})
	pods := fake.New(fake.Options{}, newPod("alive"), taintEvicted("dead"))
	_, err := newChecker(t, pods, health.Options{Logger: logger}).Check(context.Background())
	require.NoError(t, err)
	require.Len(t, lines, 1)
	require.Contains(t, lines[0], `pod="ns/dead"`)
	require.Contains(t, lines[0], `node="node-lost"`)
}

// percentVSink prints each value as logrusr's text formatter does: a
// logr.Marshaler's MarshalLog, else the value, with %v.
type percentVSink struct{ lines *[]string }

func (s *percentVSink) Init(logr.RuntimeInfo)                  {}
func (s *percentVSink) Enabled(int) bool                       { return true }
func (s *percentVSink) Error(err error, msg string, kv ...any) { s.Info(0, msg, kv...) }
func (s *percentVSink) WithValues(...any) logr.LogSink         { return s }
func (s *percentVSink) WithName(string) logr.LogSink           { return s }
func (s *percentVSink) Info(_ int, msg string, kv ...any) {
	line := msg
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		if m, ok := v.(logr.Marshaler); ok {
			v = m.MarshalLog()
		}
		line += fmt.Sprintf(" %v=%q", kv[i], fmt.Sprintf("%v", v))
	}
	*s.lines = append(*s.lines, line)
}
