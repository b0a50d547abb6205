package e2e

import (
	"errors"
	"io/fs"
	"os"
	"strings"
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

// figWriteDocument writes TestFigures' document to FIGURES.md, keeping the
// marked sections of the file as it was.
func figWriteDocument(doc string) error {
	old, err := os.ReadFile(figFiguresFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, s := range figSections(string(old)) {
		doc = strings.TrimRight(doc, "\n") + "\n\n" + s
	}
	return os.WriteFile(figFiguresFile, []byte(doc), 0o644)
}

// figWriteSection writes body as the section name of FIGURES.md: in place
// of the section as it was, or at the end.
func figWriteSection(name, body string) error {
	old, err := os.ReadFile(figFiguresFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	section := figSectionBegin(name) + strings.TrimRight(body, "\n") + "\n" + figSectionEnd(name)
	doc := string(old)
	if i := strings.Index(doc, figSectionBegin(name)); i >= 0 {
		if j := strings.Index(doc[i:], figSectionEnd(name)); j >= 0 {
			doc = doc[:i] + section + doc[i+j+len(figSectionEnd(name)):]
			return os.WriteFile(figFiguresFile, []byte(doc), 0o644)
		}
	}
	doc = strings.TrimRight(doc, "\n") + "\n\n" + section
	return os.WriteFile(figFiguresFile, []byte(doc), 0o644)
}
