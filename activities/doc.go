// Package activities holds thin Temporal activity wrappers around the domain packages (sandbox,
// debugger, tokenize, dataset). They are the only glue, with package workflows, between Temporal and
// the domain code.
package activities
