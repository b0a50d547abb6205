package plugin

import (
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
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
	{Name: "Reason", Type: "string", Priority: 1},
	{Name: "Held Back", Type: "string", Priority: 1},
	{Name: "Hint", Type: "string", Priority: 1},
}

// table renders the rows as a metav1.Table for the cli-runtime table
// printer.
func table(list *PodHealthList) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: columns}
	for _, r := range list.Items {
		node := r.Node
		if node == "" {
			node = "<none>"
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			r.Namespace, r.Name, node, r.NodeState, r.Verdict, orNone(r.Rule), actionText(r),
			orNone(r.Reason), orNone(r.HeldBack), orNone(r.Hint),
		}})
	}
	return t
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// print writes the list in the chosen output format.
func (o *options) print(list *PodHealthList, w io.Writer, namespace string) error {
	switch o.output {
	case "json":
		return (&printers.JSONPrinter{}).PrintObj(list, w)
	case "yaml":
		return (&printers.YAMLPrinter{}).PrintObj(list, w)
	}
	return o.printTable(list, w, namespace)
}

// printTable writes the list as a table, or says on stderr that it is empty,
// as kubectl get does.
func (o *options) printTable(list *PodHealthList, w io.Writer, namespace string) error {
	if len(list.Items) == 0 {
		where := "in any namespace"
		if namespace != "" {
			where = fmt.Sprintf("in namespace %s", namespace)
		}
		fmt.Fprintf(o.streams.ErrOut, "No dead, held-back or stuck terminating pods %s (%d pods scanned).\n", where, list.ScannedPods)
		return nil
	}
	p := printers.NewTablePrinter(printers.PrintOptions{Wide: o.output == "wide"})
	return p.PrintObj(table(list), w)
}
