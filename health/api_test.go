package health_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxExported is the ceiling on package health's exported identifiers:
// top-level names plus the exported fields and methods of exported types.
// Every name a newcomer meets is one more thing to learn; raise it only for
// a concept the pipeline (Pod → Verdict → Outcome → PodReport) lacks.
// It was 100; the three for replacing pods on unreachable nodes (the
// Unreachable state, Options.ReplaceUnreachable, Options.UnreachableFor)
// raised it to 103: a pod that is neither alive nor dead had no verdict.
// The typed contract raised it to 139: the rule names as constants (10),
// the one reading of a node (NodeState, its six values, Down, Fences,
// String and NodeStateOf: 11), why a pod is held back (HoldReason, its
// seven values and String; Hold, Reason, Detail and String: 13), and the
// evidence that could not be read (ErrNodesUnavailable,
// Report.NodeEvidence: 2), so that no caller parses English.
// MultiObserver raised it to 140: every adopter that sent reports to
// metrics and events at once wrote the same fan-out by hand; Memory.Shed
// to 141: a Memory too small for its cluster was silent. InMaintenance to
// 142: the Breaker, early replacement and a controller's node events must
// agree on which node is being stopped on purpose. ShutdownTaint (its Key
// and After), TaintCloudShutdown and Options.ShutdownTaints to 147: the
// cloud's word that an instance is shut down is fencing evidence that no
// other name could carry. ShutdownTaintOf, Breaker.Tripped and
// DeleteBudget.Take to 150: the controller that applies the out-of-service
// taint must judge a node, and share the limits, exactly as a check does.
// ShutdownWaitLeft and Breaker.Open to 152: that controller must measure
// the wait on the live node it writes exactly as a check measures it, and
// a gauge of the Breaker must read its state, not the last pod's report.
// ErrClaimUnavailable to 153: a claim read that failed must be an error a
// caller can tell from a refused delete, not a silent hold. The Fencer
// contract raised it to 185: the evidence that a pod's containers cannot
// run was closed to the node; opening it takes the interface (Fencer,
// Name, Fence), its question (FenceQuery and its six fields), its answer
// (Fence and its five fields; Proof, its three values and String), the
// record a fencer measures a wait on (Sightings, FirstSeen, Forget), its
// failure (ErrFenceUnavailable; FenceError, its three fields, Error and
// Unwrap) and Options.Fencers. The fencers themselves live in package
// fencing. AnnotationWriters to 186: an access mode says what the storage
// allows, and only the workload can say how many writers it tolerates.
// PodReport.FencedBy, Fence.Fencer and Fence.String to 189: a force
// delete that a fencer's proof let go must say which proof, in the same
// words in events, logs and the plugin, or an admin reads it as a delete
// on a NotReady node alone.
const maxExported = 189

func TestPublicAPIStaysSmall(t *testing.T) {
	names := exportedIdentifiers(t, ".")
	require.LessOrEqual(t, len(names), maxExported, "exported identifiers of package health:\n%s", strings.Join(names, "\n"))
}

// exportedIdentifiers lists the exported top-level names of the non-test
// files in dir, and the exported fields and methods of exported types.
func exportedIdentifiers(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	var names []string
	for _, pkg := range pkgs {
		for _, file := range pkg.Files {
			for _, decl := range file.Decls {
				names = append(names, exportedIn(decl)...)
			}
		}
	}
	sort.Strings(names)
	return names
}

func exportedIn(decl ast.Decl) []string {
	var names []string
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		if d.Recv == nil {
			return []string{d.Name.Name}
		}
		if recv := receiverName(d.Recv); ast.IsExported(recv) {
			return []string{recv + "." + d.Name.Name}
		}
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, n.Name)
					}
				}
			case *ast.TypeSpec:
				if !s.Name.IsExported() {
					continue
				}
				names = append(names, s.Name.Name)
				var fields *ast.FieldList
				switch typ := s.Type.(type) {
				case *ast.StructType:
					fields = typ.Fields
				case *ast.InterfaceType:
					fields = typ.Methods
				}
				if fields == nil {
					continue
				}
				for _, f := range fields.List {
					for _, n := range f.Names {
						if n.IsExported() {
							names = append(names, s.Name.Name+"."+n.Name)
						}
					}
				}
			}
		}
	}
	return names
}

func receiverName(recv *ast.FieldList) string {
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
