// Package rows turns a traced item into its rows (a trajectory per direction and draw, rendered
// in the neural-debugger grammar and tokenized) or into the one reject that says why it gives
// none, and reports what each repository yielded.
package rows
