package schemas

// FuncSource is the source of one function a trace visited: the CODE context of repository-level
// trajectories is made of these (the functions visited, not whole files).
//
// The tracer writes one for every code object with a traced call event, in first-call order,
// without repeating a block. A function or class is its own def block, decorators included; a
// nested function is its own def block too. A lambda, comprehension or generator expression has no
// block of its own: it maps to its innermost enclosing def or class (so it adds nothing when that
// one was already visited), or, at module level, to the top-level statement that holds it
// (QualName "<module>"). A module's own code ("<module>") is the whole file.
type FuncSource struct {
	// File is the code object's file name (an absolute path for repository files).
	File string `json:"file"`
	// QualName is the function's qualified name (f, Cls.meth, f.<locals>.g), or "<module>".
	QualName string `json:"qualname"`
	// FirstLine and LastLine are the block's lines, 1-based and inclusive; FirstLine is the first
	// decorator's line for a decorated function.
	FirstLine int `json:"first_line"`
	LastLine  int `json:"last_line"`
	// Source is the text of those lines exactly as in the file, line endings included except the
	// last line's.
	Source string `json:"source"`
}
