package readme

import (
	"bufio"
	"fmt"
	"io/fs"
	"strings"
)

// GlueLines counts the lines that podhealth adds to an adopter's code or
// changes in it, by the rule of docs/operators.md ("Counting the glue"),
// in the files named (paths in fsys), as the examples mark them: every
// line between a "// podhealth:begin" line (a name may follow) and a
// "// podhealth:end" line, and every line whose code ends with a
// "// podhealth:" comment, that is neither blank nor a comment. The RBAC
// markers of kubebuilder ("// +kubebuilder:") inside a block count: the
// adopter copies them.
func GlueLines(fsys fs.FS, files ...string) (int, error) {
	n := 0
	for _, name := range files {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return 0, err
		}
		in := false
		s := bufio.NewScanner(strings.NewReader(string(data)))
		for i := 1; s.Scan(); i++ {
			line := strings.TrimSpace(s.Text())
			switch {
			case strings.HasPrefix(line, "// podhealth:begin"):
				if in {
					return 0, fmt.Errorf("%s:%d: podhealth:begin inside another", name, i)
				}
				in = true
			case line == "// podhealth:end":
				if !in {
					return 0, fmt.Errorf("%s:%d: podhealth:end without podhealth:begin", name, i)
				}
				in = false
			case line == "":
			case strings.HasPrefix(line, "// +kubebuilder:"):
				if in {
					n++
				}
			case strings.HasPrefix(line, "//"):
			case in || strings.Contains(line, "// podhealth:"):
				n++
			}
		}
		if in {
			return 0, fmt.Errorf("%s: podhealth:begin without podhealth:end", name)
		}
	}
	return n, nil
}
