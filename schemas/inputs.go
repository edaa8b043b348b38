package schemas

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Defaults and bounds of Spec.Inputs (InputsSpec).
const (
	DefaultInputsPerFunction = 4
	MaxInputsPerFunction     = 64
	DefaultInputsAttempts    = 200
	MaxInputsAttempts        = 10000
	DefaultInputsTimeout     = "5s"
	MinInputsTimeout         = 100 * time.Millisecond
	MaxInputsTimeout         = 10 * time.Minute
	DefaultLLMProposals      = 8
	MaxLLMProposals          = 64
	DefaultLLMTimeout        = "30s"
	MaxLLMTimeout            = 10 * time.Minute
)

// Bounds of generating inputs for one repository (or group of files): past them, what is left is
// counted in its GenYield's losses, as repository_cap (modules, units, items) or
// repository_budget (time). Workflows size a repository's activity by them (GenerationTime).
const (
	// MaxGenModules bounds the modules searched, MaxGenUnits the units given inputs, and
	// MaxGenItems the function-level items kept (each traced) per repository.
	MaxGenModules = 500
	MaxGenUnits   = 2000
	MaxGenItems   = 2000
	// GenFindTimeout bounds the run that finds one module's functions.
	GenFindTimeout = 30 * time.Second
	// GenSlack is what a run of the sandbox may take past its own limit (start, import, report).
	GenSlack = 5 * time.Second
	// MaxGenTime bounds the finds and generations of one repository together.
	MaxGenTime = 2 * time.Hour
)

// generates reports whether a source of the spec generates inputs (functions: all, or a files
// source).
func (s Spec) generates() bool {
	for _, src := range s.Sources {
		if src.FunctionsAll() || src.Kind == "files" {
			return true
		}
	}
	return false
}

// WithDefaults returns in with every unset field at its default (LLM's too, when set).
func (in InputsSpec) WithDefaults() InputsSpec {
	if in.PerFunction == 0 {
		in.PerFunction = DefaultInputsPerFunction
	}
	if in.Attempts == 0 {
		in.Attempts = DefaultInputsAttempts
	}
	if in.Timeout.IsZero() {
		in.Timeout = parseDuration(DefaultInputsTimeout)
	}
	if in.LLM != nil {
		l := *in.LLM
		if l.Proposals == 0 {
			l.Proposals = DefaultLLMProposals
		}
		if l.Timeout.IsZero() {
			l.Timeout = parseDuration(DefaultLLMTimeout)
		}
		in.LLM = &l
	}
	return in
}

// validate checks the fields of a spec's inputs (after WithDefaults; the zero InputsSpec, when
// nothing generates inputs, is valid), naming the first bad one.
func (in InputsSpec) validate() error {
	if in == (InputsSpec{}) {
		return nil
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("spec: inputs.%s: %s", field, fmt.Sprintf(format, args...))
	}
	if in.PerFunction < 1 || in.PerFunction > MaxInputsPerFunction {
		return bad("per_function", "%d is not between 1 and %d", in.PerFunction, MaxInputsPerFunction)
	}
	if in.Attempts < 1 || in.Attempts > MaxInputsAttempts {
		return bad("attempts", "%d is not between 1 and %d", in.Attempts, MaxInputsAttempts)
	}
	if d, err := in.Timeout.Value(); err != nil || d < MinInputsTimeout || d > MaxInputsTimeout {
		return bad("timeout", "%q is not a duration between %v and %v", in.Timeout.String(), MinInputsTimeout, MaxInputsTimeout)
	}
	if l := in.LLM; l != nil {
		u, err := url.Parse(l.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return bad("llm.url", "%q is not an absolute http or https URL (no credentials, query or fragment)", shownLLMURL(l.URL))
		}
		if l.Model == "" {
			return bad("llm.model", "a model name is required")
		}
		if l.Proposals < 1 || l.Proposals > MaxLLMProposals {
			return bad("llm.proposals", "%d is not between 1 and %d", l.Proposals, MaxLLMProposals)
		}
		if d, err := l.Timeout.Value(); err != nil || d <= 0 || d > MaxLLMTimeout {
			return bad("llm.timeout", "%q is not a positive duration of at most %v", l.Timeout.String(), MaxLLMTimeout)
		}
	}
	return nil
}

// GenerationBudget is the time generating inputs may take for one repository of a source with
// functions: all (or a group of files) under inputs in (with defaults): a find per module and a
// generation per unit, each with its slack, within MaxGenTime. No run begins past it (what is
// left is counted as repository_budget); the kept items' traced runs are not in it (see
// GenerationItems).
func (in InputsSpec) GenerationBudget() time.Duration {
	in = in.WithDefaults()
	per := in.Timeout.Duration()
	d := time.Duration(MaxGenModules)*(GenFindTimeout+GenSlack) + time.Duration(MaxGenUnits)*(per+GenSlack)
	return min(d, MaxGenTime)
}

// GenerationTime bounds the time generating inputs takes for one repository: its budget, and the
// last runs begun within it (a find, or a language model's request and a generation run given
// what is left of the budget, at least MinInputsTimeout).
func (in InputsSpec) GenerationTime() time.Duration {
	in = in.WithDefaults()
	last := MinInputsTimeout + GenSlack
	if in.LLM != nil {
		last += in.LLM.Timeout.Duration() + GenSlack
	}
	return in.GenerationBudget() + max(GenFindTimeout+GenSlack, last)
}

// GenerationItems is the most function-level items generating inputs for one repository gives
// under inputs in (with defaults): each is traced (twice with reexecute) in the repository's
// activity.
func (in InputsSpec) GenerationItems() int {
	in = in.WithDefaults()
	return min(MaxGenUnits*in.PerFunction, MaxGenItems)
}

// genReasons is the vocabulary of GenYield.Losses: why a module gave no functions, a function is
// no unit, or a unit kept no input. Whatever a run reports is the traced code's to forge, so a
// reason outside it counts as "other" (GenReason): one dataset's counters never grow with what
// its code invents.
var genReasons = map[string]bool{
	// a module (each counts one module)
	"missing_module": true, "import_failed": true, "import_timeout": true, "module_too_large": true,
	"sandbox_error": true, "repository_cap": true, "repository_budget": true, "syntax_error": true,
	"find_failed": true, "not_utf8": true,
	// a function that is no unit
	"async": true, "generator_function": true, "async_generator": true, "needs_io": true,
	"abstract": true, "nested": true, "class_needs_arguments": true, "needs_arguments": true,
	"context_manager": true, "property": true, "dunder": true, "private": true, "lambda": true,
	"decorated": true, "method_decorated": true, "params": true, "no_source": true,
	"not_callable": true, "overload": true, "protocol": true, "test_function": true,
	"invalid_report": true, "duplicate": true, "no_self": true, "too_many_parameters": true,
	"decorated_unknown": true, "redefined": true, "not_found": true, "no_signature": true,
	// a unit that kept no input
	"no_candidates": true, "all_raised": true, "nondeterministic": true, "timeout": true,
	"memory": true, "budget": true, "attempts": true, "no_coverage": true, "unrepresentable": true,
	"input_refused": true, "llm_error": true, "tampered": true, "exception": true, "invalid": true,
	"code_bytes": true, "other": true, "unrenderable": true, "needs_object": true,
	"no_new_lines": true, "generator_error": true,
}

// GenReason is reason when it is one of GenYield.Losses' vocabulary, else "other".
func GenReason(reason string) string {
	if genReasons[reason] {
		return reason
	}
	return "other"
}

// Counters of generating inputs (issue 30), beside GenYield: the inputs a run reported that were
// refused on the Go side (a call that is not of its unit, or whose arguments are not literals),
// those that repeat an input the repository's tests gave, and the language model's failed
// requests.
const (
	CountGenInputsRefused  CountKey = "generation:inputs_refused"
	CountGenTestCallRepeat CountKey = "generation:test_call_repeats"
	CountGenLLMErrors      CountKey = "generation:llm_errors"
)

// shownLLMURL is how an llm.url refused is named in its error: without its credentials, query
// and fragment (an API key put there would reach logs and reports), or "" if it does not parse.
func shownLLMURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	var b strings.Builder
	if u.Scheme != "" {
		b.WriteString(u.Scheme + ":")
	}
	if u.Host != "" || u.User != nil {
		b.WriteString("//")
		if u.User != nil {
			b.WriteString("…@")
		}
		b.WriteString(u.Host)
	}
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteString("?…")
	}
	if u.Fragment != "" {
		b.WriteString("#…")
	}
	return b.String()
}
