package health_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// matrixFault is one column value of the fault matrix: how the API server,
// or the caller's context, answers every force delete of a dead pod.
type matrixFault struct {
	name string
	// err is the error injected for a delete; nil lets the fake answer.
	// It may end the check's context through cancel.
	err func(ctx context.Context, cancel context.CancelFunc) error
	// beforeCheck ends the context before Check is called.
	beforeCheck bool
	// is reports whether the error is of the injected kind, by apierrors.
	is func(error) bool
	// outcome is the report's outcome of each dead pod attempted.
	outcome health.Outcome
}

var (
	errMatrixNotFound       = apierrors.NewNotFound(podsGR, "dead")
	errMatrixConflict       = apierrors.NewConflict(podsGR, "dead", errors.New("the UID in the precondition does not match the UID in record"))
	errMatrixTooMany        = apierrors.NewTooManyRequests("too many requests, please try again later", 7)
	errMatrixInternal       = apierrors.NewInternalError(errors.New("etcd leader changed"))
	errMatrixServerTimeout  = apierrors.NewServerTimeout(podsGR, "delete", 2)
	errMatrixRequestTimeout = apierrors.NewTimeoutError("request did not complete within 60s", 3)

	injected = func(err error) func(context.Context, context.CancelFunc) error {
		return func(context.Context, context.CancelFunc) error { return err }
	}

	notFound       = matrixFault{name: "NotFound", err: injected(errMatrixNotFound), is: apierrors.IsNotFound, outcome: health.WasAlreadyGone}
	conflict       = matrixFault{name: "Conflict", err: injected(errMatrixConflict), is: apierrors.IsConflict, outcome: health.NameReused}
	tooMany        = matrixFault{name: "429 Retry-After 7", err: injected(errMatrixTooMany), is: apierrors.IsTooManyRequests, outcome: health.DeleteFailed}
	internal       = matrixFault{name: "500", err: injected(errMatrixInternal), is: apierrors.IsInternalError, outcome: health.DeleteFailed}
	serverTimeout  = matrixFault{name: "server timeout", err: injected(errMatrixServerTimeout), is: apierrors.IsServerTimeout, outcome: health.DeleteFailed}
	requestTimeout = matrixFault{name: "504 timeout", err: injected(errMatrixRequestTimeout), is: apierrors.IsTimeout, outcome: health.DeleteFailed}
	cancelInDelete = matrixFault{name: "ctx cancelled during delete", err: func(ctx context.Context, cancel context.CancelFunc) error {
		cancel()
		return fmt.Errorf("Delete \"dead\": %w", ctx.Err())
	}, is: func(err error) bool { return errors.Is(err, context.Canceled) }, outcome: health.DeleteFailed}
	cancelBefore = matrixFault{name: "ctx cancelled before check", beforeCheck: true,
		is: func(err error) bool { return errors.Is(err, context.Canceled) }}
)

// Kinds of error a cell expects.
const (
	noErr = ""
	d5    = "D5"
	d7    = "D7"
)

// TestFaultMatrix crosses each delete fault with the alive/dead mixes of the
// decision table. Every cell also holds a draining pod and a finished pod,
// which must never be touched. Two dead pods show that D5 still attempts
// every dead pod and that D7 stops at once.
func TestFaultMatrix(t *testing.T) {
	both := []string{"dead-1", "dead-2"}
	first := []string{"dead-1"}
	cells := []struct {
		fault       matrixFault
		alive, dead int
		wantHealthy bool
		wantErr     string
		wantDeletes []string
	}{
		// fault          alive dead  healthy err    deletes
		{notFound, 0, 0, false, noErr, nil},       // D1
		{notFound, 1, 0, true, noErr, nil},        // D2
		{notFound, 1, 2, true, noErr, both},       // D3: already gone counts as deleted
		{notFound, 0, 2, false, noErr, both},      // D4
		{conflict, 0, 0, false, noErr, nil},       // D1
		{conflict, 1, 0, true, noErr, nil},        // D2
		{conflict, 1, 2, true, noErr, both},       // D3: name reused counts as deleted
		{conflict, 0, 2, false, noErr, both},      // D4
		{tooMany, 0, 0, false, noErr, nil},        // D1
		{tooMany, 1, 0, true, noErr, nil},         // D2
		{tooMany, 1, 2, false, d5, both},          // D5
		{tooMany, 0, 2, false, d5, both},          // D5
		{internal, 0, 0, false, noErr, nil},       // D1
		{internal, 1, 0, true, noErr, nil},        // D2
		{internal, 1, 2, false, d5, both},         // D5
		{internal, 0, 2, false, d5, both},         // D5
		{serverTimeout, 0, 0, false, noErr, nil},  // D1
		{serverTimeout, 1, 0, true, noErr, nil},   // D2
		{serverTimeout, 1, 2, false, d5, both},    // D5
		{serverTimeout, 0, 2, false, d5, both},    // D5
		{requestTimeout, 0, 0, false, noErr, nil}, // D1
		{requestTimeout, 1, 0, true, noErr, nil},  // D2
		{requestTimeout, 1, 2, false, d5, both},   // D5
		{requestTimeout, 0, 2, false, d5, both},   // D5
		{cancelInDelete, 0, 0, false, noErr, nil}, // D1: no delete, nothing to cancel
		{cancelInDelete, 1, 0, true, noErr, nil},  // D2: no delete, nothing to cancel
		{cancelInDelete, 1, 2, false, d7, first},  // D7: stops after the first
		{cancelInDelete, 0, 2, false, d7, first},  // D7
		{cancelBefore, 0, 0, false, d7, nil},      // D7: nothing listed
		{cancelBefore, 1, 0, false, d7, nil},      // D7
		{cancelBefore, 1, 2, false, d7, nil},      // D7
		{cancelBefore, 0, 2, false, d7, nil},      // D7
	}
	for _, cell := range cells {
		name := fmt.Sprintf("%s/alive=%d/dead=%d", cell.fault.name, cell.alive, cell.dead)
		t.Run(name, func(t *testing.T) {
			var untouchable []*corev1.Pod // alive, terminating, finished
			for i := range cell.alive {
				untouchable = append(untouchable, newPod(fmt.Sprintf("alive-%d", i+1)))
			}
			untouchable = append(untouchable, drained("draining"), newPod("finished", phase(corev1.PodSucceeded)))
			seed := append([]*corev1.Pod(nil), untouchable...)
			for i := range cell.dead {
				seed = append(seed, taintEvicted(fmt.Sprintf("dead-%d", i+1)))
			}

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pods := fake.New(fake.Options{Interceptor: fake.Interceptor{
				Delete: func(ctx context.Context, ns, name string, opts metav1.DeleteOptions, next fake.DeleteFunc) error {
					if cell.fault.err != nil {
						return cell.fault.err(ctx, cancel)
					}
					return next(ctx, ns, name, opts)
				},
			}}, seed...)
			if cell.fault.beforeCheck {
				cancel()
			}

			report, err := newChecker(t, pods, health.Options{}).CheckReport(ctx)

			require.Equal(t, cell.wantHealthy, report.Healthy, "healthy")
			switch cell.wantErr {
			case noErr:
				require.NoError(t, err)
			case d5:
				requireD5(t, err, cell.fault, cell.dead)
			case d7:
				require.ErrorIs(t, err, context.Canceled)
			}

			// The deletes: only dead pods, each with its UID and grace 0.
			var names []string
			for _, d := range pods.Deletes() {
				names = append(names, d.Name)
				require.Equal(t, "uid-"+d.Name, string(d.UID), "UID precondition")
				require.NotNil(t, d.GracePeriodSeconds)
				require.Zero(t, *d.GracePeriodSeconds)
			}
			require.Empty(t, cmp.Diff(cell.wantDeletes, names), "deletes sent")

			// Nothing alive, terminating or finished was touched.
			for _, p := range untouchable {
				got, err := pods.Get(p.Namespace, p.Name)
				require.NoError(t, err, "pod %s", p.Name)
				require.Empty(t, cmp.Diff(p, got), "pod %s changed", p.Name)
			}

			// The report tells each dead pod's outcome.
			if cell.fault.beforeCheck {
				require.Empty(t, report.Pods)
				require.Zero(t, pods.Lists(), "a check whose context ended lists nothing")
				return
			}
			var want, got []health.Outcome
			for _, p := range report.Pods {
				if p.Verdict.State != health.Dead {
					require.Equal(t, health.NoAction, p.Outcome, "pod %s", p.Pod.Name)
					continue
				}
				if cell.wantErr == d7 && len(got) > 0 {
					want = append(want, health.NotAttempted) // after the context ended
				} else {
					want = append(want, cell.fault.outcome)
				}
				got = append(got, p.Outcome)
			}
			require.Empty(t, cmp.Diff(want, got), "outcomes of the dead pods")
		})
	}
}

// requireD5 requires the joined error of row D5: one *DeleteError per dead
// pod, each unwrapping to the injected error, which errors.Is, errors.As and
// apierrors reach through the join.
func requireD5(t *testing.T, err error, fault matrixFault, dead int) {
	t.Helper()
	require.Error(t, err)
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "D5 joins one error per failed pod, got %T", err)
	require.Len(t, joined.Unwrap(), dead)
	for i, e := range joined.Unwrap() {
		var de *health.DeleteError
		require.ErrorAs(t, e, &de)
		require.Equal(t, fmt.Sprintf("dead-%d", i+1), de.Pod.Name)
		require.Equal(t, "uid-"+de.Pod.Name, string(de.UID))
		require.True(t, fault.is(de.Err), "DeleteError.Err is the injected error: %v", de.Err)
	}
	require.True(t, fault.is(err), "apierrors reaches the injected error through the join: %v", err)
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	require.True(t, fault.is(status.(error)))

	injectedErr := fault.err(context.Background(), func() {})
	require.ErrorIs(t, err, injectedErr, "errors.Is reaches the very error the server gave")

	delay, ok := apierrors.SuggestsClientDelay(err)
	switch fault.name {
	case tooMany.name:
		require.True(t, ok, "SuggestsClientDelay through the joined error")
		require.Equal(t, 7, delay, "Retry-After")
	case serverTimeout.name:
		require.True(t, ok)
		require.Equal(t, 2, delay)
	case requestTimeout.name:
		require.True(t, ok)
		require.Equal(t, 3, delay)
	default:
		require.False(t, ok, "no delay suggested for %s", fault.name)
	}
}
