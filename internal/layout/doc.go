// Package layout holds the test of the house's import rules (layout_test.go): which package may
// depend on which, as DEVELOPERS.md's Layout draws them. It has no code of its own.
package layout
