package controllerruntime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/testutil"
	"github.com/podhealth/podhealth/podsource"
	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
)

func TestEventObserverRecordsWhatKubesObserverRecords(t *testing.T) {
	pod := loadPod(t, testutil.PodTaintEvicted)
	verdict := health.Verdict{State: health.Dead, Rule: "TaintEvicted", Reason: "node lost"}
	tests := []struct {
		outcome    health.Outcome
		heldBack   health.Hold
		err        error
		wantReason string // empty: nothing recorded
		wantAction string
		wantInNote string
	}{
		{outcome: health.ForceDeleted, wantReason: podsource.ReasonForceDeleted, wantAction: podsource.ActionForceDelete, wantInNote: "Force-deleted dead pod default/taint-evicted"},
		{outcome: health.WasAlreadyGone, wantReason: podsource.ReasonForceDeleted, wantAction: podsource.ActionForceDelete, wantInNote: "outcome WasAlreadyGone"},
		{outcome: health.NameReused, wantReason: podsource.ReasonForceDeleted, wantAction: podsource.ActionForceDelete, wantInNote: "outcome NameReused"},
		{outcome: health.DeleteFailed, err: errors.New("boom"), wantReason: podsource.ReasonForceDeleteFailed, wantAction: podsource.ActionForceDelete, wantInNote: ": boom"},
		{outcome: health.WouldForceDelete, wantReason: podsource.ReasonWouldForceDelete, wantAction: podsource.ActionForceDelete, wantInNote: "(dry run)"},
		{outcome: health.HeldBack, heldBack: health.Hold{Reason: health.HeldByBudget, Detail: "3 per 1m0s"}, wantReason: podsource.ReasonHeldBack, wantAction: podsource.ActionHoldBack, wantInNote: "not force-deleted: force-delete budget used up: 3 per 1m0s"},
		{outcome: health.NoAction},
		{outcome: health.NotAttempted},
		{outcome: health.DeletedEarlier},
		{outcome: health.BlockedByFinalizers},
	}
	for _, tc := range tests {
		t.Run(tc.outcome.String(), func(t *testing.T) {
			rec := &recordingRecorder{}
			o, err := crh.NewEventObserver(rec, crh.EventObserverOptions{})
			require.NoError(t, err)
			arg := pod.DeepCopy()
			o.Observe(context.Background(), health.PodReport{Pod: arg, Verdict: verdict, Outcome: tc.outcome, HeldBack: tc.heldBack, Err: tc.err})
			require.Empty(t, cmp.Diff(pod, arg), "Observe changed the pod")
			events := rec.recorded()
			if tc.wantReason == "" {
				require.Empty(t, events)
				return
			}
			require.Len(t, events, 1)
			e := events[0]
			require.Equal(t, corev1.EventTypeWarning, e.Type)
			require.Equal(t, tc.wantReason, e.Reason)
			require.Equal(t, tc.wantAction, e.Action)
			require.Contains(t, e.Note, tc.wantInNote)
			require.Equal(t, podsource.PodReference(pod), e.Regarding, "the event regards a reference to the pod, never the pod")
			require.Nil(t, e.Related)
		})
	}
}

func TestEventObserverKeepsNotesWithinTheAPILimitAndNeverFormatsThem(t *testing.T) {
	rec := &recordingRecorder{}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "registry"}}
	o, err := crh.NewEventObserver(rec, crh.EventObserverOptions{Object: owner})
	require.NoError(t, err)
	pod := loadPod(t, testutil.PodTaintEvicted)
	long := errors.New("%s %d %!" + strings.Repeat("x", 2000))
	o.Observe(context.Background(), health.PodReport{Pod: pod, Outcome: health.DeleteFailed, Err: long})
	o.Observe(context.Background(), health.PodReport{Pod: nil, Outcome: health.ForceDeleted})
	events := rec.recorded()
	require.Len(t, events, 1, "a report without a pod records nothing")
	require.LessOrEqual(t, len(events[0].Note), 1024)
	require.True(t, strings.HasSuffix(events[0].Note, "..."))
	require.Contains(t, events[0].Note, "%s %d %!", "the message was used as a format")
	require.Same(t, owner, events[0].Regarding)
	require.Equal(t, podsource.PodReference(pod), events[0].Related)
}

// TestEventObserverCutsALongNoteOnACharacterBoundary: a message of
// multi-byte characters (a pod or node name in another script, an error
// from a webhook) is cut before the character that would cross the limit,
// so the note stays valid UTF-8 within 1,024 bytes, whatever the offset.
func TestEventObserverCutsALongNoteOnACharacterBoundary(t *testing.T) {
	pod := loadPod(t, testutil.PodTaintEvicted)
	for pad := 0; pad < 4; pad++ {
		rec := &recordingRecorder{}
		o, err := crh.NewEventObserver(rec, crh.EventObserverOptions{})
		require.NoError(t, err)
		msg := errors.New(strings.Repeat("x", pad) + strings.Repeat("节点", 400)) // 3 bytes a character
		o.Observe(context.Background(), health.PodReport{Pod: pod, Outcome: health.DeleteFailed, Err: msg})
		note := rec.recorded()[0].Note
		require.LessOrEqual(t, len(note), 1024, "pad %d", pad)
		require.True(t, utf8.ValidString(note), "pad %d: the note was cut inside a character", pad)
		require.True(t, strings.HasSuffix(note, "..."))
		require.Greater(t, len(note), 1024-utf8.UTFMax-len("..."), "pad %d: cut no more than one character short", pad)
	}
}
