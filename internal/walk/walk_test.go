package walk_test

import (
	"strings"
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
// ratchet on how often it comes back to a file it had left, to a group of
// files it had left, and to a stage it had left. A file's group is its
// name up to the first underscore (classify_quiet.go is the classify
// group's). The stages are classify, evidence, policy, release and report;
// checker.go, which calls them and keeps the check's state, and the files
// of words and state that every stage uses (errors.go, facts.go,
// memory.go, options.go, verdict.go) are no stage. The check is one
// forward pass (issue 49): evidence (the screen), classify, policy, then
// the two turns back that its design keeps, to the evidence for the
// fencers' proof of a dead pod the policy asks about, and to the evidence
// at the end of the check, which gives back what it held. The walks are
// logged, for a reader to see where they turn back.
func TestTheChecksWalkThroughHealthDoesNotTurnBackMore(t *testing.T) {
	r, err := walk.Package("../../health", "(*Checker).Check")
	require.NoError(t, err)
	t.Log(r)
	require.LessOrEqual(t, walk.Total(r.Reentries()), 30, "re-entries of files")

	groups := r.Grouped(groupOf)
	t.Log(groups)
	require.LessOrEqual(t, walk.Total(groups.Reentries()), 19, "re-entries of groups")

	stages := r.Grouped(stageOf)
	t.Log(stages)
	require.LessOrEqual(t, walk.Total(stages.Reentries()), 2, "re-entries of stages")
	require.Equal(t, []string{"evidence", "classify", "policy", "evidence", "release", "report", "evidence"}, stages.Files, "the stages in the order the check passes them")
	for _, f := range r.Entered() {
		if strings.HasPrefix(f, "node") || f == "sightings.go" || f == "shutdown.go" || strings.HasPrefix(f, "fencer") {
			t.Errorf("%s: node evidence, sightings, shutdown taints and fencers are the evidence stage's files (evidence*.go)", f)
		}
	}
}

// groupOf is a file's group: its name up to the first underscore.
func groupOf(file string) string {
	group, _, _ := strings.Cut(strings.TrimSuffix(file, ".go"), "_")
	return group
}

// stageOf is a file's stage, or "" for a file of no stage.
func stageOf(file string) string {
	switch g := groupOf(file); g {
	case "classify", "evidence", "policy", "release", "report":
		return g
	}
	return ""
}

func TestGroupedWalksCountStages(t *testing.T) {
	r, err := walk.Package("testdata/stages", "Run")
	require.NoError(t, err)
	g := r.Grouped(func(f string) string {
		if f == "d.go" {
			return "c.go" // d.go joins c.go's stage: the walk turns back to a and c only
		}
		return f
	})
	require.Equal(t, []string{"a.go", "b.go", "c.go", "a.go", "c.go"}, g.Files)
	require.Equal(t, 2, walk.Total(g.Reentries()))
	require.Len(t, g.Steps, len(r.Steps))

	// A file grouped as "" is left out: without a.go the walk never turns
	// back.
	g = r.Grouped(func(f string) string {
		if f == "a.go" {
			return ""
		}
		return f
	})
	require.Equal(t, []string{"b.go", "c.go", "d.go", "c.go"}, g.Files)
	require.Equal(t, map[string]int{"c.go": 1}, g.Reentries())
	require.Len(t, g.Steps, len(r.Steps)-3)
}
