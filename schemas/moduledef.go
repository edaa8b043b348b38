package schemas

// ModuleDef is one module-level definition of a file a repository test visited, which the visited
// functions may need in their CODE context: an import, an assignment (a constant), a compound
// statement that binds names (try: import x / except: x = None), or a class's header. Defs are
// collected from the checkout when the test's trace is (execute), for the names the visited
// functions' sources use (and, one level on, the names those definitions use) and the classes of
// the visited methods; the debugger picks the ones a trajectory's functions need.
type ModuleDef struct {
	// File is the file as FuncSource.File names it.
	File string `json:"file"`
	// Kind is "import", "assign", "class" or "compound" (pylex.StmtKind).
	Kind string `json:"kind"`
	// Names are the names the statement binds at module level (a class's name for a class).
	Names []string `json:"names"`
	// Parts are the statement's lines, exactly as in the file: one part for most statements; for
	// a class, its class line (decorators included) and each class-level statement that is not a
	// method (its attributes), in order. nil when the statement was longer than the collection's
	// cap (Chars tells its length): it then counts as left out wherever it is needed.
	Parts []DefPart `json:"parts,omitempty"`
	// Chars is the length of the parts' text in bytes.
	Chars int `json:"chars"`
}

// DefPart is a range of lines of a ModuleDef.
type DefPart struct {
	// FirstLine and LastLine are 1-based and inclusive.
	FirstLine int `json:"first_line"`
	LastLine  int `json:"last_line"`
	// Source is the text of those lines exactly as in the file, line endings included except the
	// last line's.
	Source string `json:"source"`
}
