package readme

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Snippet is one Go block of a README bound to an excerpt of a file.
type Snippet struct {
	// Name is the excerpt's name and Path the file's path, relative to the
	// repository root, as the marker states them.
	Name, Path string
	// Line is the marker's line number in the README, from 1.
	Line int
	// Body is the block's content, without the fences.
	Body string
}

// markerPrefix and markerSuffix enclose a snippet marker in a README.
const (
	markerPrefix = "<!-- snippet:"
	markerSuffix = "-->"
)

// Parse returns the snippets of readme in their order. It fails, listing
// every problem, on a marker that does not name an excerpt and a file, on
// one that is not followed by a ```go block with its closing fence, and on
// a ```go block without a marker: every Go block of the README must be an
// excerpt.
func Parse(readme string) ([]Snippet, error) {
	lines := strings.Split(readme, "\n")
	var out []Snippet
	var errs []error
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "```go" {
			errs = append(errs, fmt.Errorf("README line %d: a ```go block without a %s NAME PATH %s marker before it", i+1, markerPrefix, markerSuffix))
			continue
		}
		if !strings.HasPrefix(line, markerPrefix) {
			continue
		}
		s := Snippet{Line: i + 1}
		fields := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(line, markerPrefix), markerSuffix))
		if !strings.HasSuffix(line, markerSuffix) || len(fields) != 2 {
			errs = append(errs, fmt.Errorf("README line %d: want %q, got %q", s.Line, markerPrefix+" NAME PATH "+markerSuffix, line))
			continue
		}
		s.Name, s.Path = fields[0], fields[1]
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j == len(lines) || strings.TrimSpace(lines[j]) != "```go" {
			errs = append(errs, fmt.Errorf("README line %d: snippet %s: no ```go block follows the marker", s.Line, s.Name))
			continue
		}
		end := j + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if end == len(lines) {
			errs = append(errs, fmt.Errorf("README line %d: snippet %s: the ```go block is not closed", s.Line, s.Name))
			break
		}
		s.Body = strings.Join(lines[j+1:end], "\n")
		out = append(out, s)
		i = end
	}
	return out, errors.Join(errs...)
}

// Excerpt returns the excerpt name of the Go source src, dedented. It
// fails when the begin or the end marker is missing, out of order or
// given twice.
func Excerpt(src, name string) (string, error) {
	begin, end := "// readme:begin "+name, "// readme:end "+name
	lines := strings.Split(src, "\n")
	from, to := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case begin:
			if from >= 0 {
				return "", fmt.Errorf("%q twice (lines %d and %d)", begin, from, i+1)
			}
			from = i + 1
		case end:
			if to >= 0 {
				return "", fmt.Errorf("%q twice (lines %d and %d)", end, to, i+1)
			}
			to = i + 1
		}
	}
	switch {
	case from < 0:
		return "", fmt.Errorf("no line %q", begin)
	case to < 0:
		return "", fmt.Errorf("no line %q", end)
	case to < from:
		return "", fmt.Errorf("%q (line %d) comes before %q (line %d)", end, to, begin, from)
	}
	var body []string
	for _, l := range lines[from : to-1] {
		if strings.HasPrefix(strings.TrimSpace(l), "// readme:") {
			continue
		}
		body = append(body, l)
	}
	for len(body) > 0 && strings.TrimSpace(body[0]) == "" {
		body = body[1:]
	}
	for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
		body = body[:len(body)-1]
	}
	return dedent(body), nil
}

// dedent removes from every line the leading whitespace that all non-blank
// lines share, and empties blank lines.
func dedent(lines []string) string {
	prefix, first := "", true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = indent, false
			continue
		}
		for !strings.HasPrefix(indent, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			out[i] = strings.TrimPrefix(l, prefix)
		}
	}
	return strings.Join(out, "\n")
}

// Check reads the README at readmePath in fsys and compares each of its
// snippets with its excerpt, read from fsys too. It returns nil when all
// match, and otherwise every problem, one error per snippet (see Compare).
// A README with no snippet at all is an error: the markers were lost.
func Check(fsys fs.FS, readmePath string) error {
	data, err := fs.ReadFile(fsys, readmePath)
	if err != nil {
		return err
	}
	snippets, err := Parse(string(data))
	errs := []error{err}
	if err == nil && len(snippets) == 0 {
		errs = append(errs, fmt.Errorf("%s: no %s NAME PATH %s marker", readmePath, markerPrefix, markerSuffix))
	}
	for _, s := range snippets {
		errs = append(errs, Compare(fsys, s))
	}
	return errors.Join(errs...)
}

// Compare checks one snippet against its excerpt in fsys: the file must
// exist, hold the excerpt, and the excerpt must equal the block. The error
// names the snippet, the README line and the first line that differs.
func Compare(fsys fs.FS, s Snippet) error {
	where := fmt.Sprintf("README line %d: snippet %s (%s)", s.Line, s.Name, s.Path)
	src, err := fs.ReadFile(fsys, s.Path)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	excerpt, err := Excerpt(string(src), s.Name)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if excerpt == s.Body {
		return nil
	}
	want, got := strings.Split(excerpt, "\n"), strings.Split(s.Body, "\n")
	for i := 0; i < len(want) || i < len(got); i++ {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g || i >= len(want) || i >= len(got) {
			return fmt.Errorf("%s: the README's block differs from the file's excerpt at line %d of the block (the file has %d lines, the README %d):\n file:   %q\n README: %q",
				where, i+1, len(want), len(got), w, g)
		}
	}
	return fmt.Errorf("%s: differs", where) // not reached: equal lines mean equal text
}

// TestNames returns the names of the Go tests, fuzz targets, benchmarks and
// examples that the Markdown text md names in code spans (such as
// `TestDecisionTable/D10`), each once, in their order; a subtest's name
// is cut at its first slash.
func TestNames(md string) []string {
	var names []string
	seen := map[string]bool{}
	for _, span := range strings.Split(md, "`")[1:] {
		name, _, _ := strings.Cut(span, "/")
		if !isTestName(name) || seen[name] {
			continue
		}
		seen[name] = true
		names = append(names, name)
	}
	return names
}

func isTestName(s string) bool {
	for _, prefix := range []string{"Test", "Fuzz", "Benchmark", "Example"} {
		// As go test requires, what follows the prefix does not start
		// with a lower-case letter.
		if rest, ok := strings.CutPrefix(s, prefix); ok && rest != "" && !(rest[0] >= 'a' && rest[0] <= 'z') && strings.IndexFunc(rest, func(r rune) bool {
			return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) < 0 {
			return true
		}
	}
	return false
}

// DeclaredTests returns the top-level functions named like tests that the
// _test.go files of fsys declare, in every module of the tree.
func DeclaredTests(fsys fs.FS) (map[string]bool, error) {
	declared := map[string]bool{}
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata"):
			return fs.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(src), "\n") {
			rest, ok := strings.CutPrefix(line, "func ")
			if !ok {
				continue
			}
			if name, _, ok := strings.Cut(rest, "("); ok && isTestName(name) {
				declared[name] = true
			}
		}
		return nil
	})
	return declared, err
}

// RelativeLinks returns the targets of the Markdown links of md that are
// paths in the repository (not URLs, not bare #anchors), without their
// #anchor.
func RelativeLinks(md string) []string {
	var out []string
	for _, part := range strings.Split(md, "](")[1:] {
		target, _, ok := strings.Cut(part, ")")
		if !ok || strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		target, _, _ = strings.Cut(target, "#")
		if target != "" {
			out = append(out, target)
		}
	}
	return out
}
