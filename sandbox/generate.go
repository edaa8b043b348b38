package sandbox

import (
	"context"
	"errors"
	"time"

	"github.com/ndtrace/ndtrace/schemas"
)

// GenerateRequest asks for the functions of one module (Function empty: "find"), or for inputs of
// one of them (issue 30). The module is placed as Request places a function item: imported where
// it lives (Module, Dir, Paths; Filename its file, absolute, inside Dir; Code its text), or Code
// run as a standalone file named Filename. Each request is one fresh item child: the attempts made
// for one function share it, two functions never do.
type GenerateRequest struct {
	Code, Filename string
	Module, Dir    string
	Paths          []string
	// Function is the unit whose inputs are generated: "name", "Class.name"; empty: find.
	Function string
	// PerFunction is the most inputs kept (K); Attempts the most candidate executions.
	PerFunction int
	Attempts    int
	// Seeds are candidate argument lists proposed from outside (a language model: source llm),
	// each the text between a call's parentheses ("[1, 2], key='a'"); they are executed and
	// filtered like every other candidate.
	Seeds []string
	// Seed seeds the generator and Python's random module.
	Seed int64
	// Limits bound the whole run (WallTime is the function's generation budget).
	Limits Limits
}

// FoundFunction is one function or method a find run saw in a module.
type FoundFunction struct {
	// QualName is "name" or "Class.name"; Kind function, method, staticmethod or classmethod.
	QualName string `json:"qualname"`
	Kind     string `json:"kind"`
	// Line and EndLine are its first (decorators included) and last lines in the module's file.
	Line    int `json:"line"`
	EndLine int `json:"end_line"`
	// Skip is why it cannot be a unit (async, generator_function?, needs_io, abstract, nested,
	// class_needs_arguments, ...); empty for a unit.
	Skip string `json:"skip,omitempty"`
}

// GeneratedInput is one input kept for a function.
type GeneratedInput struct {
	// Call is the whole call expression, as a function item's Call: "f(1, 'a')",
	// "Cls().meth(2)", "Cls.smeth(1)"; every argument a Python literal.
	Call string `json:"call"`
	// Source is how it was made (schemas.InputSource*).
	Source string `json:"source"`
	// Lines are the lines of the function it reached (sorted, unique).
	Lines []int `json:"lines"`
	// Raised is the exception's type name when the call raised; empty when it returned.
	Raised string `json:"raised,omitempty"`
}

// Generation is the outcome of a GenerateRequest.
type Generation struct {
	// Status says how the run ended (ok, timeout, memory, ... as a call's); Detail why in a line.
	Status schemas.Status `json:"status"`
	Detail string         `json:"detail,omitempty"`
	// MissingModule names the module the import of the module missed, if that is how it failed.
	MissingModule string `json:"missing_module,omitempty"`
	// Functions are what a find run saw, in source order.
	Functions []FoundFunction `json:"functions,omitempty"`
	// Inputs are the inputs kept (at most PerFunction), Lines the function's executable lines
	// (the denominator of its coverage), Attempts the candidates executed, Reason why none was
	// kept (no_candidates, all_raised, nondeterministic, timeout, ...) when Inputs is empty.
	Inputs   []GeneratedInput `json:"inputs,omitempty"`
	Lines    []int            `json:"lines,omitempty"`
	Attempts int              `json:"attempts,omitempty"`
	Reason   string           `json:"reason,omitempty"`
	// Wall and CPU measure the run's process.
	Wall time.Duration `json:"-"`
	CPU  time.Duration `json:"-"`
}

// ErrNoGenerate is returned until the sandbox's generate kind is built.
var ErrNoGenerate = errors.New("sandbox: generate is not built yet")

// Generate runs req in a fresh item child of the sandbox (see GenerateRequest). The error is
// non-nil only when the sandbox failed or the request is unusable; whatever the module does is in
// the Generation (its status and reason). Everything the run reports is the traced code's to
// forge: it is checked and capped here, and every input kept is traced again, for real, as its
// own function-level item.
func (s *Sandbox) Generate(ctx context.Context, req GenerateRequest) (*Generation, error) {
	return nil, ErrNoGenerate
}
