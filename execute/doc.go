// Package execute runs one item in the sandbox and gives its trace: a function call in a
// sandbox of the worker's pool, or a repository (checkout, environment, its tests untraced and
// traced, the functions its tests call) in sandboxes with its own mounts. It also replays rows on
// Python's own debugger where they ran (Tracer.Replay, a RepoSession for a repository's rows).
//
// A TracedItem is what it gives, the record stored between tracing and building rows. An error
// is for what a retry may fix; what the code does (it raises, hangs, exhausts its limits) is data.
// ErrItem marks the errors the item itself caused, ErrBadInput those no retry can fix.
package execute
