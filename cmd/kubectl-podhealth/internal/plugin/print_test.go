package plugin

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A cell of the table is one line of plain text, whatever a pod or node
// holds: a line break cuts it (with "..." to show it), and any other
// control character, an escape sequence's ESC or a tab among them, is
// written as its Go escape, so it can neither break the columns nor drive
// the terminal.
func TestTableCellsCannotBreakTheColumnsOrDriveTheTerminal(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain", "plain"},
		{"", ""},
		{"über-node", "über-node"},
		{"first\nsecond", "first..."},
		{"cr\rlf", "cr..."},
		{"form\ffeed", "form..."},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"tab\there", `tab\there`},
		{"bell\a", `bell\a`},
		{"\x1b]0;title\a\nrest", `\x1b]0;title\a...`},
	} {
		got := cellText(tt.in)
		require.Equal(t, tt.want, got, "%q", tt.in)
		require.False(t, strings.ContainsAny(got, "\n\r\f\t\x1b\a"), "%q", got)
	}
}

// The table lays its columns out as kubectl does: upper-case headers,
// three spaces between columns, the wide columns with -o wide only, and a
// hostile cell cut and escaped.
func TestTheTableKeepsKubectlsLayout(t *testing.T) {
	list := &PodHealthList{Items: []PodHealth{
		{Namespace: "default", Name: "web-1", Node: "n1", NodeState: "NotReady since 5m", Verdict: "Dead", Rule: "TaintEvicted", Action: ActionForceDelete, Reason: "evicted\x1b[2J"},
	}}
	var out, errOut strings.Builder
	o := &options{streams: IOStreams{Out: &out, ErrOut: &errOut}}
	require.NoError(t, o.printTable(list, &out, "default"))
	require.Equal(t, "NAMESPACE   NAME    NODE   NODE STATE          VERDICT   RULE           ACTION\n"+
		"default     web-1   n1     NotReady since 5m   Dead      TaintEvicted   force delete\n", out.String())

	out.Reset()
	o.output = "wide"
	require.NoError(t, o.printTable(list, &out, "default"))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	require.True(t, strings.HasSuffix(lines[0], "   HELD BACK   HINT"), "%q", lines[0])
	require.Contains(t, lines[1], `   evicted\x1b[2J   <none>      <none>`)
	require.Equal(t, strings.Index(lines[0], "REASON"), strings.Index(lines[1], "evicted"), "the escaped cell is aligned by its escaped width")
	require.Equal(t, strings.Index(lines[0], "HELD BACK"), strings.Index(lines[1], "<none>"))
	require.NotContains(t, out.String(), "\x1b")
}
