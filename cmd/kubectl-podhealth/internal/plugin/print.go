package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// columns of the table; those of priority 1 show with -o wide only.
var columns = []metav1.TableColumnDefinition{
	{Name: "Namespace", Type: "string"},
	{Name: "Name", Type: "string"},
	{Name: "Node", Type: "string"},
	{Name: "Node State", Type: "string"},
	{Name: "Verdict", Type: "string"},
	{Name: "Rule", Type: "string"},
	{Name: "Action", Type: "string"},
	{Name: "Reason", Type: "string", Priority: 1}, // and the fencer's proof
	{Name: "Held Back", Type: "string", Priority: 1},
	{Name: "Hint", Type: "string", Priority: 1},
}

// table renders the rows as a metav1.Table, the columns and cells that
// printTable lays out.
func table(list *PodHealthList) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: columns}
	for _, r := range list.Items {
		node := r.Node
		if node == "" {
			node = "<none>"
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			r.Namespace, r.Name, node, r.NodeState, r.Verdict, orNone(r.Rule), actionText(r),
			orNone(reasonText(r)), orNone(r.HeldBack), orNone(r.Hint),
		}})
	}
	return t
}

// reasonText is the REASON column: the rule's evidence, and the fencer's
// proof that lets the pod go when one does, so that a force delete is not
// read as one of a NotReady node alone.
func reasonText(r PodHealth) string {
	if r.FencedBy == "" {
		return r.Reason
	}
	return r.Reason + "; fenced: " + r.FencedBy
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// print writes list as -o asks: JSON indented by four spaces and YAML as
// kubectl prints objects, else the table.
func (o *options) print(list *PodHealthList, w io.Writer, namespace string) error {
	switch o.output {
	case "json":
		data, err := json.MarshalIndent(list, "", "    ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(data, '\n'))
		return err
	case "yaml":
		data, err := yaml.Marshal(list)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	return o.printTable(list, w, namespace)
}

// printTable writes the table as kubectl lays out its own: upper-case
// headers, columns three spaces apart, the priority-1 columns with -o wide
// only; or, with no row, a line on stderr.
func (o *options) printTable(list *PodHealthList, w io.Writer, namespace string) error {
	if len(list.Items) == 0 {
		where := "in any namespace"
		if namespace != "" {
			where = fmt.Sprintf("in namespace %s", namespace)
		}
		fmt.Fprintf(o.streams.ErrOut, "No dead, held-back or stuck terminating pods %s (%d pods scanned).\n", where, list.ScannedPods)
		return nil
	}
	t := table(list)
	wide := o.output == "wide"
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
	var line []string
	writeLine := func(cells []string) {
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	for _, c := range t.ColumnDefinitions {
		if wide || c.Priority == 0 {
			line = append(line, strings.ToUpper(c.Name))
		}
	}
	writeLine(line)
	for _, r := range t.Rows {
		line = line[:0]
		for i, cell := range r.Cells {
			if wide || t.ColumnDefinitions[i].Priority == 0 {
				line = append(line, cellText(fmt.Sprint(cell)))
			}
		}
		writeLine(line)
	}
	return tw.Flush()
}

// cellText is s made safe for one cell of a terminal table: cut at its
// first line break (with "..." to show it), and every other control
// character (a tab, an escape sequence's ESC) written as its Go escape, so
// that a pod's or node's text can neither break the columns nor drive the
// terminal.
func cellText(s string) string {
	cut := false
	if i := strings.IndexAny(s, "\n\r\f"); i >= 0 {
		s, cut = s[:i], true
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		var b strings.Builder
		for _, r := range s {
			if unicode.IsControl(r) {
				q := strconv.QuoteRune(r)
				b.WriteString(q[1 : len(q)-1])
				continue
			}
			b.WriteRune(r)
		}
		s = b.String()
	}
	if cut {
		s += "..."
	}
	return s
}
