package e2e

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FIGURES.md holds TestFigures' document, followed by sections that other
// figure tests own, each between an opening and a closing marker. A test
// rewrites its own section only; TestFigures keeps the sections when it
// rewrites its document.

func figSectionBegin(name string) string { return "<!-- begin " + name + " -->\n" }
func figSectionEnd(name string) string   { return "<!-- end " + name + " -->\n" }

// figSections returns the marked sections of doc, markers included, in
// their order.
func figSections(doc string) []string {
	var out []string
	rest := doc
	for {
		i := strings.Index(rest, "<!-- begin ")
		if i < 0 {
			return out
		}
		rest = rest[i:]
		name, _, ok := strings.Cut(strings.TrimPrefix(rest, "<!-- begin "), " -->")
		if !ok {
			return out
		}
		end := strings.Index(rest, figSectionEnd(name))
		if end < 0 {
			return out
		}
		end += len(figSectionEnd(name))
		out = append(out, rest[:end])
		rest = rest[end:]
	}
}

// figWriteDocument writes TestFigures' document to the figures file at
// path, keeping the marked sections of the file as it was.
func figWriteDocument(path, doc string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, s := range figSections(string(old)) {
		doc = strings.TrimRight(doc, "\n") + "\n\n" + s
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// figWriteSection writes body as the section name of the figures file at
// path: in place of the section as it was, or at the end.
func figWriteSection(path, name, body string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	section := figSectionBegin(name) + strings.TrimRight(body, "\n") + "\n" + figSectionEnd(name)
	doc := string(old)
	if i := strings.Index(doc, figSectionBegin(name)); i >= 0 {
		if j := strings.Index(doc[i:], figSectionEnd(name)); j >= 0 {
			doc = doc[:i] + section + doc[i+j+len(figSectionEnd(name)):]
			return os.WriteFile(path, []byte(doc), 0o644)
		}
	}
	doc = strings.TrimRight(doc, "\n") + "\n\n" + section
	return os.WriteFile(path, []byte(doc), 0o644)
}

// TestFigSectionsSurviveRewrites: a section is written at the end, then
// replaced in place; TestFigures' document rewrite keeps it, and changes
// nothing else.
func TestFigSectionsSurviveRewrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "FIGURES.md")
	steps := []struct {
		name  string
		write func() error
		want  string
	}{
		{"document into a new file", func() error { return figWriteDocument(path, "# Figures\n\nv1\n") }, "# Figures\n\nv1\n"},
		{"a section at the end", func() error { return figWriteSection(path, "scan", "s1") }, "# Figures\n\nv1\n\n<!-- begin scan -->\ns1\n<!-- end scan -->\n"},
		{"a second section", func() error { return figWriteSection(path, "other", "o1\n") }, "# Figures\n\nv1\n\n<!-- begin scan -->\ns1\n<!-- end scan -->\n\n<!-- begin other -->\no1\n<!-- end other -->\n"},
		{"the first section replaced in place", func() error { return figWriteSection(path, "scan", "s2") }, "# Figures\n\nv1\n\n<!-- begin scan -->\ns2\n<!-- end scan -->\n\n<!-- begin other -->\no1\n<!-- end other -->\n"},
		{"the document rewritten", func() error { return figWriteDocument(path, "# Figures\n\nv2\n") }, "# Figures\n\nv2\n\n<!-- begin scan -->\ns2\n<!-- end scan -->\n\n<!-- begin other -->\no1\n<!-- end other -->\n"},
	}
	for _, s := range steps {
		if err := s.write(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != s.want {
			t.Fatalf("%s: file is\n%q\nwant\n%q", s.name, got, s.want)
		}
	}
}
