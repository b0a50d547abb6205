package walk_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/podhealth/podhealth/internal/walk"
)

// The walk visits each function of the package once, in source order,
// deferred calls when their function ends, and follows neither interfaces
// nor function values; a file entered again after the walk left it is a
// re-entry.
func TestTheWalkFollowsCallsInSourceOrder(t *testing.T) {
	r, err := walk.Package("testdata/stages", "Run")
	require.NoError(t, err)
	want := []walk.Step{
		{File: "a.go", Func: "Run"},
		{File: "a.go", Func: "first"},
		{File: "b.go", Func: "(*box).second"},
		{File: "c.go", Func: "helper"},
		{File: "d.go", Func: "back"},
		{File: "a.go", Func: "cleanup"},
		{File: "c.go", Func: "fourth"},
	}
	require.Empty(t, cmp.Diff(want, r.Steps))
	require.Equal(t, []string{"a.go", "b.go", "c.go", "d.go", "a.go", "c.go"}, r.Files)
	require.Equal(t, []string{"a.go", "b.go", "c.go", "d.go"}, r.Entered())
	require.Equal(t, map[string]int{"a.go": 1, "c.go": 1}, r.Reentries())
	require.Equal(t, 2, walk.Total(r.Reentries()))
}

func TestTheWalkRefusesAnUnknownRoot(t *testing.T) {
	_, err := walk.Package("testdata/stages", "Missing")
	require.ErrorContains(t, err, `no function "Missing"`)
	_, err = walk.Package("testdata/none", "Run")
	require.Error(t, err)
}

// The walk of one check through package health, from Checker.Check: a
// ratchet on how often it comes back to a file it had left, lowered as the
// package is reshaped into one forward pass (issue 49). The walk is
// logged, for a reader to see where it turns back.
func TestTheChecksWalkThroughHealthDoesNotTurnBackMore(t *testing.T) {
	r, err := walk.Package("../../health", "(*Checker).Check")
	require.NoError(t, err)
	t.Log(r)
	require.LessOrEqual(t, len(r.Entered()), 19, "files entered")
	require.LessOrEqual(t, walk.Total(r.Reentries()), 36, "re-entries")
}
