// Package walk follows a call through one package's source, as a reader
// does: from a root function it visits, in source order, each function of
// the package that the root calls, then the functions those call, each once
// (deferred calls when their function ends). The files that the visits pass
// through, in order, are the walk; a file entered again after the walk left
// it is a re-entry.
//
// It exists to measure how a package reads, in tests: a walk that keeps
// coming back to files it left is code whose stages are not where a reader
// looks for them. It resolves calls with go/types, so it needs the go
// command to find the export data of the package's imports.
//
// A call through an interface, or through a function value, is not
// followed: its target is not known from the source.
package walk
