package walk

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Step is one function that the walk visited, with the file that holds it.
type Step struct {
	File string // base name
	Func string // as types.Func.FullName prints it, without the package path
}

// Result is one walk.
type Result struct {
	// Steps are the functions visited, in order.
	Steps []Step
	// Files are the files the walk passed through, in order, one entry per
	// visit: a file appears again when the walk came back to it.
	Files []string
}

// Entered returns the files the walk entered, each once, in order.
func (r *Result) Entered() []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range r.Files {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// Reentries returns how many times the walk came back to each file it had
// left, for the files it came back to.
func (r *Result) Reentries() map[string]int {
	out := map[string]int{}
	seen := map[string]bool{}
	for _, f := range r.Files {
		if seen[f] {
			out[f]++
		}
		seen[f] = true
	}
	return out
}

// Grouped returns the walk with each file replaced by its group, as
// group names it: a stage whose files are one group is entered again only
// when the walk comes back to any of them. A file whose group is "" is
// left out, with its steps: a file of shared words that every stage may
// use without leaving itself.
func (r *Result) Grouped(group func(file string) string) *Result {
	out := &Result{}
	for _, s := range r.Steps {
		g := group(s.File)
		if g == "" {
			continue
		}
		out.Steps = append(out.Steps, Step{File: g, Func: s.Func})
		if n := len(out.Files); n == 0 || out.Files[n-1] != g {
			out.Files = append(out.Files, g)
		}
	}
	return out
}

// Total is the sum of the counts in m.
func Total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// String prints the walk's files as arrows, with the counts.
func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", strings.Join(r.Files, " -> "))
	re := r.Reentries()
	names := make([]string, 0, len(re))
	for f := range re {
		names = append(names, f)
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "%d entered, %d re-entries:", len(r.Entered()), Total(re))
	for _, f := range names {
		fmt.Fprintf(&b, " %s %d", f, re[f])
	}
	return b.String()
}

// Package walks the package in dir (its non-test files) from root, a
// function or method declared there, named as "Func", "Type.Method" or
// "(*Type).Method".
func Package(dir, root string) (*Result, error) {
	fset := token.NewFileSet()
	files, err := parseDir(fset, dir)
	if err != nil {
		return nil, err
	}
	exports, err := exportData(dir)
	if err != nil {
		return nil, err
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(file)
	})}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	pkg, err := conf.Check(files[0].Name.Name, fset, files, info)
	if err != nil {
		return nil, fmt.Errorf("type-checking %s: %w", dir, err)
	}
	decls := map[*types.Func]*ast.FuncDecl{}
	var start *types.Func
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn, _ := info.Defs[fd.Name].(*types.Func)
			if fn == nil {
				continue
			}
			decls[fn] = fd
			if name(fn) == root || strings.ReplaceAll(name(fn), "*", "") == strings.ReplaceAll(root, "*", "") {
				start = fn
			}
		}
	}
	if start == nil {
		return nil, fmt.Errorf("no function %q in %s", root, dir)
	}
	w := &walker{fset: fset, pkg: pkg, info: info, decls: decls, visited: map[*types.Func]bool{}}
	w.visit(start)
	return &w.result, nil
}

type walker struct {
	fset    *token.FileSet
	pkg     *types.Package
	info    *types.Info
	decls   map[*types.Func]*ast.FuncDecl
	visited map[*types.Func]bool
	result  Result
}

func (w *walker) visit(fn *types.Func) {
	w.visited[fn] = true
	fd := w.decls[fn]
	file := filepath.Base(w.fset.Position(fd.Pos()).Filename)
	w.result.Steps = append(w.result.Steps, Step{File: file, Func: name(fn)})
	if n := len(w.result.Files); n == 0 || w.result.Files[n-1] != file {
		w.result.Files = append(w.result.Files, file)
	}
	var deferred []*types.Func
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if d, ok := n.(*ast.DeferStmt); ok {
			if callee := w.callee(d.Call); callee != nil {
				deferred = append(deferred, callee)
			}
			for _, a := range d.Call.Args {
				ast.Inspect(a, w.inspectCalls)
			}
			return false
		}
		return w.inspectCalls(n)
	})
	for _, callee := range deferred {
		w.enter(callee)
	}
}

// inspectCalls visits the callee of each call, in source order, arguments
// before the call they are passed to.
func (w *walker) inspectCalls(n ast.Node) bool {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return true
	}
	ast.Inspect(call.Fun, w.inspectCalls)
	for _, a := range call.Args {
		ast.Inspect(a, w.inspectCalls)
	}
	if callee := w.callee(call); callee != nil {
		w.enter(callee)
	}
	return false
}

func (w *walker) enter(callee *types.Func) {
	if w.visited[callee] {
		return
	}
	if _, ok := w.decls[callee]; !ok {
		return
	}
	w.visit(callee)
	// Back in the caller: the walk goes on in the caller's file.
}

func (w *walker) callee(call *ast.CallExpr) *types.Func {
	var id *ast.Ident
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		if sel, ok := w.info.Selections[f]; ok {
			fn, _ := sel.Obj().(*types.Func)
			return w.local(fn)
		}
		id = f.Sel
	case *ast.IndexExpr: // a generic function's instance
		if x, ok := f.X.(*ast.Ident); ok {
			id = x
		}
	}
	if id == nil {
		return nil
	}
	fn, _ := w.info.Uses[id].(*types.Func)
	return w.local(fn)
}

// local returns fn's declaration in the walked package, nil for a function
// of another package or an interface's method.
func (w *walker) local(fn *types.Func) *types.Func {
	if fn == nil || fn.Pkg() != w.pkg {
		return nil
	}
	return fn.Origin()
}

func name(fn *types.Func) string {
	sig := fn.Type().(*types.Signature)
	if sig.Recv() == nil {
		return fn.Name()
	}
	recv := sig.Recv().Type()
	ptr := ""
	if p, ok := recv.(*types.Pointer); ok {
		recv, ptr = p.Elem(), "*"
	}
	tn := recv.(interface{ Obj() *types.TypeName }).Obj().Name()
	if ptr != "" {
		return "(*" + tn + ")." + fn.Name()
	}
	return tn + "." + fn.Name()
}

func parseDir(fset *token.FileSet, dir string) ([]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, n); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, errors.New("no Go files in " + dir)
	}
	return files, nil
}

// exportData maps each package that dir's package depends on to its export
// data file, which the go command builds.
func exportData(dir string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export in %s: %w: %s", dir, err, stderr.String())
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "\t"); ok {
			m[path] = file
		}
	}
	return m, nil
}
