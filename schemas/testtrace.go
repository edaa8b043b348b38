package schemas

// NondeterministicValue is what a repository trace shows in place of a value (a local, a return
// value or an exception) that differed between two traced runs of the same test (the source's
// reexecute): exactly this string.
const NondeterministicValue = "<nondeterministic>"

// TestTrace is the trace of one test of a repository, as stored: its outcome under the runner,
// how its traced run ended, its events and the source of every function they visited.
type TestTrace struct {
	Test      string       `json:"test"`
	Outcome   string       `json:"outcome"`
	Status    Status       `json:"status"`
	Detail    string       `json:"detail,omitempty"`
	Events    []Event      `json:"events,omitempty"`
	Functions []FuncSource `json:"functions,omitempty"`
	// Modules are the module-level definitions (imports, constants, class headers) of the visited
	// functions' files that those functions name (ModuleDef), in file order. Traces stored before
	// it existed have none: their CODE contexts are the functions alone, as then.
	Modules []ModuleDef `json:"modules,omitempty"`
	// Ref is, for a trace kept apart (its Events and Functions not here), the key of the object
	// that holds it whole.
	Ref string `json:"ref,omitempty"`
}
