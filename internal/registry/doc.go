// Package registry keeps the state that objects built per call of a
// constructor share (checkers built per reconcile), keyed by what the
// caller passes every time (its client, its clock), and bounded so that a
// program that builds many keys (a test) does not grow without end.
package registry
