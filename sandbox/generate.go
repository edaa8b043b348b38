package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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

// Bounds of a GenerateRequest: PerFunction and Attempts default to DefaultPerFunction and
// DefaultAttempts and are capped at MaxPerFunction and MaxAttempts; Seeds beyond the first
// MaxSeeds, and seeds longer than MaxSeedBytes or not UTF-8, are left out.
const (
	DefaultPerFunction = 4
	MaxPerFunction     = 64
	DefaultAttempts    = 200
	MaxAttempts        = 10000
	MaxSeeds           = 64
	MaxSeedBytes       = 4096
)

// Bounds of what a Generation may hold: a result that breaks one is invalid (the run's code forged
// it, or the generator is broken). Inputs are also bounded by the request's PerFunction.
const (
	MaxGenFunctions = 5000
	MaxGenCallBytes = 4096
	MaxGenLines     = 100_000
	// MaxGenLine is the largest line number a Generation may name.
	MaxGenLine = 10_000_000
	// MaxGenReason bounds a skip or no-input reason; a reason that is longer or not
	// lower_snake_case is reported as GenReasonOther.
	MaxGenReason = 40
	// maxGenResult bounds the result line a generate run writes (the tracer's _PROPOSALS_MAX).
	maxGenResult = 4 << 20
	// maxGenName bounds a qualified name, a module name and an exception type's name.
	maxGenName = 512
)

// GenReasonOther replaces a skip or no-input reason outside the reasons' form.
const GenReasonOther = "other"

// Kinds of FoundFunction.
const (
	GenKindFunction     = "function"
	GenKindMethod       = "method"
	GenKindStaticMethod = "staticmethod"
	GenKindClassMethod  = "classmethod"
)

// genStart is the line a generate item writes before any of its code runs (the tracer's
// _PROPOSALS_START): what follows is the item's, and an exit with a set-up code is its code's.
var genStart = []byte("{\"generate\":\"start\"}\n")

// Generate runs req in a fresh item child of the sandbox (see GenerateRequest). The error is
// non-nil only when the sandbox failed or the request is unusable; whatever the module does is in
// the Generation (its status and reason). Everything the run reports is the traced code's to
// forge: it is checked and capped here, and every input kept is traced again, for real, as its
// own function-level item.
//
// The run is kind "generate" (docs/sandbox.md, "Generating inputs"): an item isolated as a
// function item is, with no tracer, that calls the generator (the tracer module's _gen_main) and
// writes its result on the events pipe. Status is ok when the generator returned (its own
// "invalid", "exception" or "memory" otherwise, and invalid when what it wrote breaks a bound),
// or the supervisor's verdict (timeout, memory, killed, output_limit) as for a call.
func (s *Sandbox) Generate(ctx context.Context, req GenerateRequest) (*Generation, error) {
	if req.Filename == "" {
		req.Filename = "main.py"
	}
	if req.Function != "" && !genQualName(req.Function) {
		return nil, fmt.Errorf("sandbox: generate: function %q is not a name or Class.name", req.Function)
	}
	if req.Module != "" {
		// A module of a bound folder (Config.Binds) runs under the names it has inside.
		req.Filename, req.Dir, req.Paths = s.cfg.inside(req.Filename), s.cfg.inside(req.Dir), s.cfg.insideAll(req.Paths)
		if err := checkModuleRequest(Request{Module: req.Module, Dir: req.Dir, Paths: req.Paths, Filename: req.Filename}); err != nil {
			return nil, err
		}
	} else if filepath.IsAbs(req.Filename) {
		req.Filename = s.cfg.insideTargets([]string{req.Filename})[0]
	}
	req.PerFunction = clampDefault(req.PerFunction, DefaultPerFunction, MaxPerFunction)
	req.Attempts = clampDefault(req.Attempts, DefaultAttempts, MaxAttempts)
	lim := mergeLimits(s.cfg.Limits, req.Limits)
	out := &genOutput{}
	msg := runMsg{Kind: "generate", gen: out, runBody: runBody{Code: req.Code, Filename: req.Filename,
		Targets: []string{req.Filename}, Seed: req.Seed, PythonPath: s.in.PythonPath, Module: req.Module,
		Paths: modulePaths(req.Module, req.Dir, req.Paths), Function: req.Function,
		PerFunction: req.PerFunction, Attempts: req.Attempts, Seeds: genSeeds(req.Seeds),
		BudgetS: max(lim.WallTime.Seconds(), 0.001)}}
	res, _, err := s.exec(ctx, msg, lim)
	g := &Generation{Status: res.Status, Detail: res.Detail, Wall: res.Wall, CPU: res.CPU}
	if err != nil || res.Status != schemas.StatusOK {
		return g, err
	}
	rec, perr := parseGeneration(out.buf[len(genStart):], req.Function, req.PerFunction)
	if perr != nil {
		g.Status, g.Detail = schemas.StatusInvalid, cut("generate: "+oneLine(perr.Error()), MaxDetail)
		return g, nil
	}
	rec.Wall, rec.CPU = g.Wall, g.CPU
	rec.Attempts = min(rec.Attempts, req.Attempts)
	return rec, nil
}

// clampDefault returns v, def when v is not positive, at most hi.
func clampDefault(v, def, hi int) int {
	if v <= 0 {
		v = def
	}
	return min(v, hi)
}

// genSeeds returns the seeds a request sends: the first MaxSeeds of those of at most
// MaxSeedBytes of UTF-8.
func genSeeds(seeds []string) []string {
	var out []string
	for _, s := range seeds {
		if len(out) == MaxSeeds {
			break
		}
		if len(s) <= MaxSeedBytes && utf8.ValidString(s) {
			out = append(out, s)
		}
	}
	return out
}

// genOutput is what a generate run wrote on its events pipe.
type genOutput struct {
	buf []byte
}

// read keeps r's bytes until EOF; false when they exceed a result's bound (it then stops).
func (o *genOutput) read(r io.Reader) bool {
	var b bytes.Buffer
	n, _ := b.ReadFrom(io.LimitReader(r, int64(len(genStart)+maxGenResult+2)))
	o.buf = b.Bytes()
	return n <= int64(len(genStart)+maxGenResult+1)
}

// started reports whether the item began its generator (its start line came first).
func (o *genOutput) started() bool { return bytes.HasPrefix(o.buf, genStart) }

// classifyGenerate sets res.Status and res.Detail for a generate run from what Go saw and what the
// zygote reported; ok means the run wrote its start line and a result and exited 0 (the result is
// checked by Generate).
func (s *Sandbox) classifyGenerate(res *Result, out *genOutput, done *ctrlMsg, killStatus schemas.Status, killDetail string, lim Limits, z *zygote) {
	exited := func(code int) bool { return done.ExitCode != nil && *done.ExitCode == code }
	switch {
	case killStatus != "":
		res.Status, res.Detail = killStatus, killDetail
	case done == nil:
		res.Status, res.Detail = schemas.StatusSandboxError, "sandbox died during the run: "+z.why()
		if !s.backendDropsPrivileges() {
			res.Status, res.Detail = schemas.StatusKilled, "the sandbox's supervisor was killed during the run"
		}
	case done.Reason == "timeout":
		res.Status, res.Detail = schemas.StatusTimeout, fmt.Sprintf("wall-clock limit of %v reached", lim.WallTime)
	case done.Reason == "killed":
		res.Status, res.Detail = schemas.StatusKilled, "killed on request"
	case !out.started() && (exited(exitSetup) || exited(exitTracerBug)):
		// Nothing of the item's ran: its set-up failed (stderr says why).
		res.Status, res.Detail = schemas.StatusSandboxError, fmt.Sprintf("generate item failed (exit %d): %s", *done.ExitCode, lastLine(res.Stderr))
	case done.cpuLimitHit(lim):
		res.Status, res.Detail = schemas.StatusTimeout, fmt.Sprintf("CPU-time limit of %v reached", lim.CPUTime)
	case exited(exitNoMemory):
		res.Status, res.Detail = schemas.StatusMemory, "the generate run ran out of memory"
	case exited(exitPipe):
		res.Status, res.Detail = schemas.StatusKilled, "the run's code closed the result channel"
	case exited(0) && out.started() && len(out.buf) > len(genStart):
		res.Status = schemas.StatusOK
	default:
		res.Status, res.Detail = schemas.StatusKilled, done.endedBefore("its result")
	}
	res.Detail = cut(res.Detail, MaxDetail)
}

// genRecordStatuses are the statuses a generate run's result may give (the supervisor gives the
// others).
var genRecordStatuses = map[string]schemas.Status{"ok": schemas.StatusOK, "invalid": schemas.StatusInvalid,
	"exception": schemas.StatusException, "memory": schemas.StatusMemory}

// genSources are the input sources a generated input may have; an input of any other is dropped.
var genSources = map[string]bool{schemas.InputSourceDoctest: true, schemas.InputSourceExample: true,
	schemas.InputSourceTyped: true, schemas.InputSourceFuzzed: true, schemas.InputSourceLLM: true}

var genKinds = map[string]bool{GenKindFunction: true, GenKindMethod: true, GenKindStaticMethod: true, GenKindClassMethod: true}

// genReasonForm is the form of a skip or no-input reason.
var genReasonForm = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// genReason maps a reason the run gave to itself ("" stays "") or GenReasonOther.
func genReason(r string) string {
	if r == "" || (len(r) <= MaxGenReason && genReasonForm.MatchString(r)) {
		return r
	}
	return GenReasonOther
}

// genIdent reports whether s is a Python identifier (letters as Unicode has them).
func genIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r):
		case i > 0 && (unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) || unicode.Is(unicode.Pc, r)):
		default:
			return false
		}
	}
	return true
}

// genQualName reports whether s is "name" or "Class.name".
func genQualName(s string) bool {
	if len(s) > maxGenName || !utf8.ValidString(s) {
		return false
	}
	a, b, dotted := strings.Cut(s, ".")
	return genIdent(a) && (!dotted || genIdent(b))
}

// genTypeName reports whether s is an exception type's qualified name: identifiers and
// "<locals>" joined by dots.
func genTypeName(s string) bool {
	if len(s) > maxGenName || !utf8.ValidString(s) {
		return false
	}
	parts := strings.Split(s, ".")
	for i, p := range parts {
		if !genIdent(p) && (p != "<locals>" || i == 0 || i == len(parts)-1) {
			return false
		}
	}
	return true
}

// genLines checks a list of line numbers: at most MaxGenLines, each in 1..MaxGenLine, sorted and
// unique.
func genLines(lines []int) error {
	if len(lines) > MaxGenLines {
		return fmt.Errorf("%d lines, more than %d", len(lines), MaxGenLines)
	}
	for i, l := range lines {
		if l < 1 || l > MaxGenLine {
			return fmt.Errorf("line %d out of 1..%d", l, MaxGenLine)
		}
		if i > 0 && l <= lines[i-1] {
			return fmt.Errorf("lines not sorted and unique (%d after %d)", l, lines[i-1])
		}
	}
	return nil
}

// genText is a text of the run's made one line of valid UTF-8, at most MaxDetail bytes.
func genText(s string) string { return cut(oneLine(strings.ToValidUTF8(s, "\uFFFD")), MaxDetail) }

// oneLine replaces control characters (line breaks included) by spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// checkCall checks a generated input's call expression: UTF-8 of at most MaxGenCallBytes, one
// line without control characters, a call of function (for "Class.name": the class's or its
// own) ending with its closing parenthesis.
func checkCall(call, function string) error {
	if call == "" || len(call) > MaxGenCallBytes || !utf8.ValidString(call) {
		return fmt.Errorf("a call of %d bytes, or not UTF-8 (at most %d bytes)", len(call), MaxGenCallBytes)
	}
	if strings.IndexFunc(call, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return errors.New("a call with a control character")
	}
	cls, _, method := strings.Cut(function, ".")
	if !strings.HasSuffix(call, ")") || !(strings.HasPrefix(call, function+"(") || (method && strings.HasPrefix(call, cls+"("))) {
		return fmt.Errorf("call %.80q is not a call of %s", call, function)
	}
	return nil
}

// parseGeneration checks and decodes a generate run's result line (what follows its start line):
// one JSON object and a newline, nothing more. The arrays are decoded one element at a time, so
// no more than their bounds is ever held. function and perFunction are the request's.
func parseGeneration(data []byte, function string, perFunction int) (*Generation, error) {
	line, ok := bytes.CutSuffix(data, []byte("\n"))
	if !ok || len(line) == 0 {
		return nil, errors.New("no result line")
	}
	if bytes.IndexByte(line, '\n') >= 0 {
		return nil, errors.New("more than one line after the start line")
	}
	if len(line) > maxGenResult {
		return nil, fmt.Errorf("a result of more than %d bytes", maxGenResult)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := genDelim(dec, '{'); err != nil {
		return nil, err
	}
	g := &Generation{}
	seen := map[string]bool{}
	var status string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
		key, _ := t.(string)
		if seen[key] {
			return nil, fmt.Errorf("result: key %q twice", key)
		}
		seen[key] = true
		switch key {
		case "status":
			err = dec.Decode(&status)
		case "detail":
			err = dec.Decode(&g.Detail)
			g.Detail = genText(g.Detail)
		case "missing_module":
			if err = dec.Decode(&g.MissingModule); err == nil && g.MissingModule != "" &&
				(len(g.MissingModule) > maxGenName || !moduleName.MatchString(g.MissingModule)) {
				err = fmt.Errorf("missing module %.80q is not a dotted name", g.MissingModule)
			}
		case "functions":
			err = genArray(dec, MaxGenFunctions, "functions", func() error {
				var f FoundFunction
				if err := dec.Decode(&f); err != nil {
					return err
				}
				if err := checkFound(f); err != nil {
					return err
				}
				f.Skip = genReason(f.Skip)
				g.Functions = append(g.Functions, f)
				return nil
			})
		case "inputs":
			n := 0
			err = genArray(dec, min(perFunction, MaxPerFunction), "inputs", func() error {
				var in GeneratedInput
				if err := dec.Decode(&in); err != nil {
					return err
				}
				n++
				if function == "" {
					return errors.New("inputs in a find run")
				}
				if err := checkCall(in.Call, function); err != nil {
					return err
				}
				if err := genLines(in.Lines); err != nil {
					return fmt.Errorf("input %d: %w", n, err)
				}
				if in.Raised != "" && !genTypeName(in.Raised) {
					in.Raised = "?"
				}
				if genSources[in.Source] {
					g.Inputs = append(g.Inputs, in)
				}
				return nil
			})
		case "lines":
			err = genArray(dec, MaxGenLines, "lines", func() error {
				var l int
				if err := dec.Decode(&l); err != nil {
					return err
				}
				g.Lines = append(g.Lines, l)
				return nil
			})
			if err == nil {
				err = genLines(g.Lines)
			}
		case "attempts":
			if err = dec.Decode(&g.Attempts); err == nil && g.Attempts < 0 {
				err = fmt.Errorf("attempts %d", g.Attempts)
			}
		case "reason":
			err = dec.Decode(&g.Reason)
			g.Reason = genReason(g.Reason)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, fmt.Errorf("result: %s: %w", key, err)
		}
	}
	if err := genDelim(dec, '}'); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("result: more after its object")
	}
	st, ok := genRecordStatuses[status]
	if !ok {
		return nil, fmt.Errorf("result: status %.40q", status)
	}
	g.Status = st
	return g, nil
}

// genDelim reads the delimiter want.
func genDelim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return fmt.Errorf("result: %w", err)
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("result: %v where %v was due", t, want)
	}
	return nil
}

// genArray reads a JSON array (or null) of at most most elements, each with elem.
func genArray(dec *json.Decoder, most int, what string, elem func() error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("%s is not a list", what)
	}
	for n := 0; dec.More(); n++ {
		if n == most {
			return fmt.Errorf("more than %d %s", most, what)
		}
		if err := elem(); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// checkFound checks a function a find run reports.
func checkFound(f FoundFunction) error {
	switch {
	case !genQualName(f.QualName):
		return fmt.Errorf("qualname %.80q is not a name or Class.name", f.QualName)
	case !genKinds[f.Kind]:
		return fmt.Errorf("%s: kind %.40q", f.QualName, f.Kind)
	case f.Line < 1 || f.EndLine < f.Line || f.EndLine > MaxGenLine:
		return fmt.Errorf("%s: lines %d..%d", f.QualName, f.Line, f.EndLine)
	case f.Kind == GenKindFunction && strings.Contains(f.QualName, "."),
		f.Kind != GenKindFunction && !strings.Contains(f.QualName, "."):
		return fmt.Errorf("%s: a %s", f.QualName, f.Kind)
	}
	return nil
}
