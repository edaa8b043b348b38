package schemas

// How a function-level item's input was made: the row column input_source (issue 30).
const (
	InputSourceCorpus   = "corpus"    // given with the code: a CruxEval row, a python source's call, the examples
	InputSourceTestCall = "test_call" // a call a repository's own tests made
	InputSourceDoctest  = "doctest"   // an example in the function's docstring
	InputSourceExample  = "example"   // the function's default arguments, or a call elsewhere in its module
	InputSourceTyped    = "typed"     // generated from the parameters' annotations and defaults
	InputSourceFuzzed   = "fuzzed"    // guessed from names and uses, mined literals, coverage-guided mutation
	InputSourceLLM      = "llm"       // proposed by a language model (inputs.llm)
)

// InputsSpec configures the generation of inputs for functions that come without them (sources of
// kind files, and repository sources with functions: all).
type InputsSpec struct {
	// PerFunction is K, the most inputs kept per function (default 4, at most 64).
	PerFunction int `yaml:"per_function" json:"per_function,omitempty"`
	// Attempts bounds the candidate executions per function (default 200, at most 10000).
	Attempts int `yaml:"attempts" json:"attempts,omitempty"`
	// Timeout bounds one function's generation, wall time (default 5s, at most 10m).
	Timeout Duration `yaml:"timeout" json:"timeout,omitzero"`
	// LLM, when set, asks an OpenAI-compatible endpoint for more inputs (off by default).
	LLM *LLMSpec `yaml:"llm" json:"llm,omitempty"`
}

// LLMSpec is an OpenAI-compatible chat-completions endpoint that proposes inputs; its proposals go
// through the same execution and filters as every other candidate.
type LLMSpec struct {
	// URL is the endpoint's base URL (".../v1"); Model the model name sent.
	URL   string `yaml:"url" json:"url"`
	Model string `yaml:"model" json:"model"`
	// Proposals bounds the inputs asked for per function (default 8, at most 64).
	Proposals int `yaml:"proposals" json:"proposals,omitempty"`
	// Timeout bounds one request (default 30s).
	Timeout Duration `yaml:"timeout" json:"timeout,omitzero"`
}

// GenYield is what generating inputs gave for one repository or group of files: a part of its
// yield report (RepoYield.Generation).
type GenYield struct {
	// Modules counts the modules searched; Found the functions and methods found in them; Units
	// those that could be run as a unit (the others are in Losses by reason).
	Modules int64 `json:"modules"`
	Found   int64 `json:"found"`
	Units   int64 `json:"units"`
	// WithInput counts the units that kept at least one input; Inputs the inputs kept (each a
	// function-level item); Attempts the candidate executions made.
	WithInput int64 `json:"with_input"`
	Inputs    int64 `json:"inputs"`
	Attempts  int64 `json:"attempts"`
	// Traced counts the kept inputs whose traced run gave a trace (function-level items traced).
	Traced int64 `json:"traced"`
	// Coverage counts the units with an input by the share of their executable lines their kept
	// inputs reached, in ten buckets: [0,10%), [10,20%), ..., [90,100%] (CoverageBuckets).
	Coverage [CoverageBuckets]int64 `json:"coverage"`
	// BySource counts the kept inputs per input source (InputSource*).
	BySource map[string]int64 `json:"by_source,omitempty"`
	// Losses counts the functions that are no unit, or kept no input, by reason (async,
	// needs_arguments, missing_module, no_candidates, all_raised, nondeterministic, timeout, ...).
	Losses map[string]int64 `json:"losses,omitempty"`
}

// CoverageBuckets is the number of coverage buckets of a GenYield.
const CoverageBuckets = 10

// CoverageBucket is the bucket of GenYield.Coverage a unit whose kept inputs reached covered of
// its lines executable lines falls in.
func CoverageBucket(covered, lines int) int {
	if lines <= 0 || covered >= lines {
		return CoverageBuckets - 1
	}
	return min(covered*CoverageBuckets/lines, CoverageBuckets-1)
}

// Add sums o into g.
func (g *GenYield) Add(o *GenYield) {
	if o == nil {
		return
	}
	g.Modules += o.Modules
	g.Found += o.Found
	g.Units += o.Units
	g.WithInput += o.WithInput
	g.Inputs += o.Inputs
	g.Attempts += o.Attempts
	g.Traced += o.Traced
	for i := range g.Coverage {
		g.Coverage[i] += o.Coverage[i]
	}
	for k, n := range o.BySource {
		if g.BySource == nil {
			g.BySource = map[string]int64{}
		}
		g.BySource[k] += n
	}
	for k, n := range o.Losses {
		if g.Losses == nil {
			g.Losses = map[string]int64{}
		}
		g.Losses[k] += n
	}
}

// MedianCoverage is the median unit's coverage bucket's lower bound in percent (0, 10, ..., 90),
// or -1 when no unit kept an input.
func (g *GenYield) MedianCoverage() int {
	var n int64
	for _, c := range g.Coverage {
		n += c
	}
	if n == 0 {
		return -1
	}
	var seen int64
	for i, c := range g.Coverage {
		seen += c
		if 2*seen > n || (2*seen == n && n%2 == 1) {
			return i * 100 / CoverageBuckets
		}
	}
	return 90
}
