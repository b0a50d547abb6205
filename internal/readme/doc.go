// Package readme checks that the Go snippets of README.md are excerpts of
// files that CI compiles and runs, so that the README, followed as written,
// works.
//
// In README.md, a line
//
//	<!-- snippet: NAME PATH -->
//
// binds the fenced ```go block that follows it (blank lines between are
// allowed) to the excerpt NAME of the file PATH, relative to the repository
// root. In that file, the excerpt is every line between
//
//	// readme:begin NAME
//	// readme:end NAME
//
// (each alone on its line, indented or not), without its leading and
// trailing blank lines (gofmt puts one before a comment that follows a
// function), dedented by the leading whitespace its non-blank lines share;
// tabs are kept as tabs. Lines of
// other excerpts' markers inside it are left out, so excerpts may overlap.
// The block must equal the excerpt byte for byte, and every ```go block of
// the README must have a marker. Blocks in other languages (sh, yaml) are
// not checked.
//
// The package's test checks every marker of the repository's README.md.
// Only the file is read: compiling and running it is the job of the tests
// of the package or module it belongs to.
package readme
