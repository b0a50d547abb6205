package readme_test

import (
	"io/fs"
	"os"
	"path"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/podhealth/podhealth/internal/readme"
)

// TestDocSnippetsAreExcerptsOfTheirFiles checks every snippet marker of
// the repository's README.md and of docs/*.md, one subtest per snippet.
// The README must have snippets; a page of docs/ may have none.
func TestDocSnippetsAreExcerptsOfTheirFiles(t *testing.T) {
	root := os.DirFS("../..")
	pages, err := fs.Glob(root, "docs/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, pages, "no docs/*.md")
	for _, page := range append([]string{"README.md"}, pages...) {
		data, err := fs.ReadFile(root, page)
		require.NoError(t, err)
		snippets, err := readme.Parse(string(data))
		require.NoError(t, err, page)
		if page == "README.md" {
			require.NotEmpty(t, snippets, "README.md has no snippet marker")
		}
		seen := map[string]int{}
		for _, s := range snippets {
			t.Run(page+"/"+s.Name, func(t *testing.T) {
				require.Zero(t, seen[s.Name], "snippet %s is also bound at line %d", s.Name, seen[s.Name])
				seen[s.Name] = s.Line
				require.NoError(t, readme.Compare(root, s))
			})
		}
	}
	require.NoError(t, readme.Check(root, "README.md"))
}

// TestEveryTestTheGuaranteesNameExists: each guarantee of
// docs/guarantees.md names the tests that enforce it; a renamed or deleted
// test would leave a guarantee that nothing enforces.
func TestEveryTestTheGuaranteesNameExists(t *testing.T) {
	root := os.DirFS("../..")
	data, err := fs.ReadFile(root, "docs/guarantees.md")
	require.NoError(t, err)
	names := readme.TestNames(string(data))
	require.Greater(t, len(names), 50, "docs/guarantees.md names few tests: %v", names)
	declared, err := readme.DeclaredTests(root)
	require.NoError(t, err)
	var missing []string
	for _, n := range names {
		if !declared[n] {
			missing = append(missing, n)
		}
	}
	require.Empty(t, missing, "tests named in docs/guarantees.md that no _test.go file declares")
}

func TestTestNamesFindsTestsInCodeSpans(t *testing.T) {
	md := "| row | `TestA`, `TestDecisionTable/D10`, `FuzzCheck` (pkg), `BenchmarkX`, `ExampleNew`, `Testing`, `Test`, `health.TestDeleter`, `TestA` |"
	require.Empty(t, cmp.Diff([]string{"TestA", "TestDecisionTable", "FuzzCheck", "BenchmarkX", "ExampleNew"}, readme.TestNames(md)))
	declared, err := readme.DeclaredTests(fstest.MapFS{
		"a/x_test.go":          {Data: []byte("package a\n\nfunc TestA(t *testing.T) {}\nfunc helper() {}\nfunc (s) TestMethod() {}\n")},
		"b/y.go":               {Data: []byte("func TestNotInATestFile(t *testing.T) {}\n")},
		"c/testdata/z_test.go": {Data: []byte("func TestInTestdata(t *testing.T) {}\n")},
	})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"TestA": true}, declared)
}

const source = `package main

func run() {
	// readme:begin wiring
	x := 1
	if x > 0 {
		// readme:begin inner
		x++ // two spaces  inside
		// readme:end inner
	}

	_ = x
	// readme:end wiring
}
`

const wiring = "x := 1\nif x > 0 {\n\tx++ // two spaces  inside\n}\n\n_ = x"

func TestExcerptDedentsKeepsTabsAndDropsOtherMarkers(t *testing.T) {
	tests := []struct {
		name, src, excerpt, want string
	}{
		{"outer", source, "wiring", wiring},
		{"inner", source, "inner", "x++ // two spaces  inside"},
		{"at column zero", "// readme:begin a\nfunc f() {\n\treturn\n}\n// readme:end a\n", "a", "func f() {\n\treturn\n}"},
		{"blank lines with stray indentation become empty", "\t// readme:begin a\n\tx\n\t  \n\ty\n\t// readme:end a\n", "a", "x\n\ny"},
		{"leading and trailing blank lines are dropped", "// readme:begin a\n\n}\n\n// readme:end a\n", "a", "}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readme.Excerpt(tt.src, tt.excerpt)
			require.NoError(t, err)
			require.Empty(t, cmp.Diff(tt.want, got))
		})
	}
}

func TestExcerptRefusesBrokenMarkers(t *testing.T) {
	tests := []struct {
		name, src, wantErr string
	}{
		{"no begin", "x\n// readme:end a\n", `no line "// readme:begin a"`},
		{"no end", "// readme:begin a\nx\n", `no line "// readme:end a"`},
		{"end before begin", "// readme:end a\nx\n// readme:begin a\n", "comes before"},
		{"begin twice", "// readme:begin a\n// readme:begin a\n// readme:end a\n", "twice"},
		{"end twice", "// readme:begin a\n// readme:end a\n// readme:end a\n", "twice"},
		{"a longer name is another excerpt", "// readme:begin ab\n// readme:end ab\n", `no line "// readme:begin a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readme.Excerpt(tt.src, "a")
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestParseFindsEveryMarkedBlock(t *testing.T) {
	md := strings.Join([]string{
		"# title",
		"```sh",
		"go test ./... # not Go: not checked",
		"```",
		"<!-- snippet: wiring cmd/main.go -->",
		"",
		"```go",
		"x := 1",
		"",
		"\ty()",
		"```",
		"text",
		"<!-- snippet: inner cmd/main.go -->",
		"```go",
		"x++",
		"```",
	}, "\n")
	got, err := readme.Parse(md)
	require.NoError(t, err)
	want := []readme.Snippet{
		{Name: "wiring", Path: "cmd/main.go", Line: 5, Body: "x := 1\n\n\ty()"},
		{Name: "inner", Path: "cmd/main.go", Line: 13, Body: "x++"},
	}
	require.Empty(t, cmp.Diff(want, got))
}

func TestParseRefusesBrokenMarkers(t *testing.T) {
	tests := []struct {
		name, md, wantErr string
	}{
		{"no path", "<!-- snippet: a -->\n```go\nx\n```\n", "want"},
		{"not closed", "<!-- snippet: a p.go\n```go\nx\n```\n", "want"},
		{"no block", "<!-- snippet: a p.go -->\ntext\n```go\nx\n```\n", "no ```go block follows"},
		{"another language", "<!-- snippet: a p.go -->\n```sh\nx\n```\n", "no ```go block follows"},
		{"block not closed", "<!-- snippet: a p.go -->\n```go\nx\n", "not closed"},
		{"at the end", "<!-- snippet: a p.go -->\n", "no ```go block follows"},
		{"a go block without a marker", "text\n```go\nx\n```\n", "README line 2: a ```go block without a <!-- snippet: NAME PATH --> marker"},
		{"a second go block after a marked one", "<!-- snippet: a p.go -->\n```go\nx\n```\n```go\ny\n```\n", "README line 5: a ```go block without"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readme.Parse(tt.md)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestCheckFailsOnEveryBrokenPair proves the checker of the real README
// can fail: each case breaks one README-file pair.
func TestCheckFailsOnEveryBrokenPair(t *testing.T) {
	good := "<!-- snippet: wiring cmd/main.go -->\n```go\n" + wiring + "\n```\n"
	tests := []struct {
		name    string
		readme  string
		files   map[string]string
		wantErr []string // empty: Check must pass
	}{
		{"matching pair", good, map[string]string{"cmd/main.go": source}, nil},
		{"a line changed in the README", strings.Replace(good, "x := 1", "x := 2", 1), map[string]string{"cmd/main.go": source},
			[]string{"README line 1: snippet wiring (cmd/main.go)", "at line 1 of the block", `"x := 1"`, `"x := 2"`}},
		{"a line changed in the file", good, map[string]string{"cmd/main.go": strings.Replace(source, "_ = x", "_ = x + 1", 1)},
			[]string{"at line 6 of the block", `"_ = x + 1"`}},
		{"a tab turned into spaces in the README", strings.Replace(good, "\tx++", "    x++", 1), map[string]string{"cmd/main.go": source},
			[]string{"at line 3 of the block"}},
		{"a line missing from the README", strings.Replace(good, "\n_ = x", "", 1), map[string]string{"cmd/main.go": source},
			[]string{"the file has 6 lines, the README 5"}},
		{"the file is missing", good, map[string]string{},
			[]string{"snippet wiring (cmd/main.go)", "file does not exist"}},
		{"the excerpt is missing", good, map[string]string{"cmd/main.go": "package main\n"},
			[]string{`no line "// readme:begin wiring"`}},
		{"no marker at all", "# title\n", map[string]string{"cmd/main.go": source},
			[]string{"no <!-- snippet: NAME PATH --> marker"}},
		{"a go block lost its marker", "```go\n" + wiring + "\n```\n", map[string]string{"cmd/main.go": source},
			[]string{"README line 1: a ```go block without"}},
		{"one good and one broken: the broken one is reported", good + "<!-- snippet: inner cmd/other.go -->\n```go\nx++\n```\n", map[string]string{"cmd/main.go": source},
			[]string{"README line 10: snippet inner (cmd/other.go)", "file does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{"README.md": {Data: []byte(tt.readme)}}
			for path, src := range tt.files {
				fsys[path] = &fstest.MapFile{Data: []byte(src)}
			}
			err := readme.Check(fsys, "README.md")
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tt.wantErr {
				require.ErrorContains(t, err, want)
			}
		})
	}
}

// TestREADMEIsAFrontDoor keeps README.md at most 12 KB, the details in
// docs/, and every relative link of README.md and docs/*.md pointing at a
// file or directory that exists.
func TestREADMEIsAFrontDoor(t *testing.T) {
	root := os.DirFS("../..")
	data, err := fs.ReadFile(root, "README.md")
	require.NoError(t, err)
	require.LessOrEqual(t, len(data), 12_000, "README.md is %d bytes: move details to docs/", len(data))
	pages, err := fs.Glob(root, "docs/*.md")
	require.NoError(t, err)
	for _, page := range append([]string{"README.md"}, pages...) {
		data, err := fs.ReadFile(root, page)
		require.NoError(t, err)
		for _, link := range readme.RelativeLinks(string(data)) {
			target := path.Join(path.Dir(page), link)
			_, err := fs.Stat(root, target)
			require.NoError(t, err, "%s links to %s", page, link)
		}
	}
}
