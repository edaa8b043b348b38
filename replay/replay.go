// Package replay compares a row's trajectory with what Python's own debugger (bdb) shows when the
// row's actions are replayed on it (docs/debugger.md, "Replay on bdb"): the sandbox request that
// replays a row, and the comparison of every landing state, with the named kinds of difference
// between the paper's tree semantics and pdb's.
package replay

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// Replay kinds: how a replayed row differed from Python's own debugger (schemas.ReplayOutcome.Kind).
// Every kind but Mismatch is a named, documented difference between the paper's tree
// semantics and pdb's (docs/debugger.md, "Replay on bdb"); verify counts each separately.
const (
	// Mismatch: a difference no named kind explains (a tracer or debugger bug, or a row
	// that is not what its item gives).
	Mismatch = "mismatch"
	// Tampered: the replayed code reached for the debugger's machinery, or the replay's
	// sealed stream did not verify. Never an agreement.
	Tampered = "tampered"
	// BreakpointNonLine: a breakpoint whose target in the tree is a call state (a `def`
	// line) or a return or exception state; pdb breaks at line events only.
	BreakpointNonLine = "breakpoint_non_line"
	// Generator: step_over or step_return to, from or across a generator's yield or
	// resumption; pdb's `next` and `return` ignore a generator's return (yield) and call
	// (resumption) events unless stepping.
	Generator = "generator_next_return"
	// ValueRender: the same states and names, but a value that was cut at value_chars or
	// whose repr failed renders differently (the tracer's C renderer bounds containers element by
	// element; the replay renders with repr and cuts).
	ValueRender = "value_render"
	// Limit: the row was cut off by a limit (exit_never) and the replay was not, or the
	// other way round. The replay keeps the tracer's event limit, not its byte or output limits;
	// a repository replay counts the events of the entry's scope only, the tracer those of the
	// whole test.
	Limit = "limit"
	// WrapperScope: the same states and names, but a function or class made by the input
	// expression shows its qualified name as defined inside main() (`main.<locals>.<lambda>`),
	// where the row shows it as the tracer made it, outside any function (`<lambda>`): the tracer
	// evaluates the call at module level and main() is the CODE context's rendering of it, while
	// the replay runs the row's main() itself.
	WrapperScope = "wrapper_scope"
	// Nondeterministic: the same states and names, but a value the row shows as
	// schemas.NondeterministicValue: it differed between the two traced runs of its test
	// (reexecute), and the replay's run shows a value of its own.
	Nondeterministic = "nondeterministic_value"
)

// Kinds lists every kind, in the order verify reports them.
var Kinds = []string{Mismatch, Tampered, BreakpointNonLine, Generator,
	ValueRender, Limit, WrapperScope, Nondeterministic}

// NotInverse is the outcome of an inverse row: it is not replayed.
var NotInverse = schemas.ReplayOutcome{Detail: "an inverse row is not replayed: pdb does not run backwards"}

// Outcome compares a replay's result (res, err) with traj, the trajectory of row, whose first
// state is the replay's first stop (OutcomeLead). Its error is the sandbox's, when the replay
// broke it: whose fault that is, the caller says.
func Outcome(row schemas.Row, traj debugger.Trajectory, res *sandbox.Result, err error) (schemas.ReplayOutcome, error) {
	return OutcomeLead(row, traj, res, err, 0)
}

// OutcomeLead is Outcome for a replay whose first lead stops come before the trajectory's first
// state: Lead(start) for a function-level row's replay that RequestOf made.
func OutcomeLead(row schemas.Row, traj debugger.Trajectory, res *sandbox.Result, err error, lead int) (schemas.ReplayOutcome, error) {
	if err != nil && (res == nil || res.Status == schemas.StatusSandboxError) {
		return schemas.ReplayOutcome{}, fmt.Errorf("replay row %s: %w", row.ID, err)
	}
	if err != nil {
		return schemas.ReplayOutcome{Replayed: true, Kind: Mismatch, Detail: "the replay could not run: " + err.Error()}, nil
	}
	return Compare(traj, res.Events[min(lead, len(res.Events)):], res.Status, res.Detail), nil
}

// Actions is the [action, argument] list of a trajectory's steps.
func Actions(traj debugger.Trajectory) ([][2]string, error) {
	out := make([][2]string, 0, len(traj.Steps))
	for i, s := range traj.Steps {
		if s.Action == "" {
			return nil, fmt.Errorf("step %d has no action", i)
		}
		out = append(out, [2]string{string(s.Action), s.Arg})
	}
	return out, nil
}

// RequestOf is the sandbox request that replays traj, a forward function-level trajectory
// of item it started at start (a spec's forward_start: schemas.ForwardStartMain, or else the
// function's call): the item's code, the main() wrapper from the end of traj's CODE context, and
// its actions, after Lead(start) step_into.
func RequestOf(it crawl.Item, traj debugger.Trajectory, start string) (sandbox.ReplayRequest, error) {
	if traj.Direction != debugger.Forward {
		return sandbox.ReplayRequest{}, errors.New("not a forward trajectory")
	}
	wrapper, err := MainWrapper(traj.Code)
	if err != nil {
		return sandbox.ReplayRequest{}, err
	}
	actions, err := Actions(traj)
	if err != nil {
		return sandbox.ReplayRequest{}, err
	}
	if lead := LeadActions(start, it.Call, traj); len(lead) > 0 {
		// The row starts at the function's call: main's call and line (and a method's
		// constructor) come first on bdb.
		actions = append(lead, actions...)
	}
	return sandbox.ReplayRequest{Code: it.Code, Filename: it.Filename, Call: it.Call, Wrapper: wrapper, Actions: actions}, nil
}

// Lead is the number of bdb stops a replay of a function-level row started at start (a spec's
// forward_start) makes before the row's first state: 0 for main (the replay starts at main's
// call too), 2 for the function's call (the default, also for ""): main's call, then its line.
// RequestOf passes them with step_into, which from main's line stops at the first call inside
// it, the row's first state; OutcomeLead and CompareFunction skip them.
func Lead(start string) int {
	if start == schemas.ForwardStartMain {
		return 0
	}
	return 2
}

// LeadActions are the actions a replay of traj, a function-level row of the call expression call
// started at start, takes before the row's first state (Lead(start) step_into), and for a method
// item's row, Cls(args).meth(args) (debugger.MethodCall), that starts at the method's call
// (debugger.StartAtCall) two more: step_return from the constructor's call to its return, then
// step_into to the method's call. Each lands on one stop (OutcomeLeadOf skips them).
func LeadActions(start, call string, traj debugger.Trajectory) [][2]string {
	n := Lead(start)
	if n == 0 {
		return nil
	}
	out := make([][2]string, 0, n+2)
	for range n {
		out = append(out, [2]string{string(debugger.StepInto), ""})
	}
	if _, meth, ok := debugger.MethodCall(call); ok && len(traj.Steps) > 0 {
		if first := traj.Steps[0].State; first.Kind == debugger.KindCall &&
			strings.HasPrefix(strings.TrimSpace(first.Src), "def "+meth+"(") {
			out = append(out, [2]string{string(debugger.StepReturn), ""}, [2]string{string(debugger.StepInto), ""})
		}
	}
	return out
}

const (
	mainDef     = "def main():\n"
	isliceFirst = "from itertools import islice\n\n"
)

// MainWrapper returns the main() wrapper a forward function-level CODE context ends with: from
// its last `def main():` line (and the `from itertools import islice` block before it, for a
// consumed iterator) to the end.
func MainWrapper(code string) (string, error) {
	i := strings.LastIndex(code, "\n"+mainDef)
	switch {
	case i >= 0:
		i++
	case strings.HasPrefix(code, mainDef):
		i = 0
	default:
		return "", errors.New("the CODE context has no main() wrapper")
	}
	if strings.HasSuffix(code[:i], "\n"+isliceFirst) || code[:i] == isliceFirst {
		i -= len(isliceFirst)
	}
	return code[i:], nil
}

// addrOrdinal matches the per-trace address ordinals the tracer and the replay both write; each
// numbers addresses in its own order of first appearance, so they are compared as one. A row
// shows a raw address inside a string as a marked placeholder (`<address 0x3>`, rows.Renumber),
// where the replay shows the ordinal alone: both compare as `0x?`.
var addrOrdinal = regexp.MustCompile(`<address 0x[0-9a-f]+>|0x[0-9a-f]+`)

func normValue(s string) string { return addrOrdinal.ReplaceAllString(s, "0x?") }

// State is the state a replay stop shows, as the trajectory would show it: kind, SRC, the
// value of a return or exception state, else LOCALS full at a call, at the first stop, after a
// breakpoint and when the previous stop was in another frame, otherwise the diff against the
// previous stop (docs/debugger.md, "LOCALS shown").
func State(cur schemas.Event, prev *schemas.Event, a debugger.Action) debugger.State {
	st := debugger.State{Kind: debugger.Kind(cur.Event), Src: cur.Src, Func: cur.Func, Lineno: cur.Lineno,
		Depth: cur.Depth, Frame: cur.Frame, Locals: cur.Locals}
	if st.Kind.HasArgs() {
		v := "None"
		if cur.Value != nil {
			v = *cur.Value
		}
		st.Value = &v
		return st
	}
	if prev == nil || prev.Frame != cur.Frame || st.Kind == debugger.KindCall || a == debugger.Breakpoint {
		st.Shown = append(schemas.Locals{}, cur.Locals...)
		return st
	}
	st.Shown, st.Elided = debugger.Diff(cur.Locals, prev.Locals)
	return st
}

// sameState reports whether the row's state r and the replay's p show the same thing; values
// are compared with address ordinals normalised.
func sameState(r, p debugger.State) bool {
	if r.Kind != p.Kind || r.Src != p.Src {
		return false
	}
	if r.Kind.HasArgs() {
		return r.Value != nil && p.Value != nil && normValue(*r.Value) == normValue(*p.Value)
	}
	if r.Elided != p.Elided || len(r.Shown) != len(p.Shown) {
		return false
	}
	for i, v := range r.Shown {
		if v.Name != p.Shown[i].Name || normValue(v.Value) != normValue(p.Shown[i].Value) {
			return false
		}
	}
	return true
}

// exitOf is the exit a replay that ended with status st shows.
func exitOf(st schemas.Status) (debugger.Exit, bool) {
	switch st {
	case schemas.StatusOK:
		return debugger.ExitNormal, true
	case schemas.StatusException, schemas.StatusMemory:
		return debugger.ExitError, true
	case schemas.StatusTimeout, schemas.StatusEventLimit, schemas.StatusOutputLimit:
		return debugger.ExitNever, true
	}
	return "", false
}

// CompareFunction is Compare for the replay of a function-level row started at start that
// RequestOf made: its first Lead(start) stops, main's before the row's first state, are skipped.
func CompareFunction(traj debugger.Trajectory, stops []schemas.Event, status schemas.Status, detail, start string) schemas.ReplayOutcome {
	return Compare(traj, stops[min(Lead(start), len(stops)):], status, detail)
}

// Compare compares a forward trajectory with the stops of its replay on bdb (stops[0] is
// the state the trajectory starts at, stops[i] the landing of action i) and the replay's end
// status: Agreed when every landing state and the exit match, else the first difference,
// classified (Kinds). A tampered replay is never an agreement.
func Compare(traj debugger.Trajectory, stops []schemas.Event, status schemas.Status, detail string) schemas.ReplayOutcome {
	out := schemas.ReplayOutcome{Replayed: true}
	if status == schemas.StatusTampered {
		out.Kind, out.Detail = Tampered, "the replay was tampered with: "+detail
		return out
	}
	n := len(traj.Steps)
	for j := 0; j <= n; j++ {
		var a debugger.Action
		var from *debugger.State
		if j > 0 {
			a, from = traj.Steps[j-1].Action, &traj.Steps[j-1].State
		}
		var want *debugger.State
		if j < n {
			want = &traj.Steps[j].State
		}
		var got *debugger.State
		if j < len(stops) {
			var prev *schemas.Event
			if j > 0 {
				prev = &stops[j-1]
			}
			g := State(stops[j], prev, a)
			got = &g
		}
		switch {
		case want != nil && got != nil:
			if sameState(*want, *got) {
				continue
			}
		case want == nil && got == nil:
			ex, ok := exitOf(status)
			if ok && ex == traj.Exit {
				out.Agreed = true
				return out
			}
			out.Kind = Mismatch
			if traj.Exit == debugger.ExitNever || ex == debugger.ExitNever {
				out.Kind = Limit
			}
			out.Detail = fmt.Sprintf("action %d (%s): the row exits %s; pdb's run ended %s %s", j-1, actionText(a, traj, j),
				traj.Exit, status, detail)
			return out
		}
		out.Kind = classify(traj.Code, a, from, want, got, stops, j)
		if want == nil && traj.Exit == debugger.ExitNever {
			// The row was cut off by a limit where pdb went on: the replay has no output or
			// trace-size limit, and a repository replay counts only the entry's scope's events.
			out.Kind = Limit
		}
		out.Detail = fmt.Sprintf("state %d, after action %d (%s): the row shows %s; pdb %s", j, j-1, actionText(a, traj, j),
			showState(want, "the exit "+string(traj.Exit)), pdbShows(got, status, detail))
		return out
	}
	return out
}

func actionText(a debugger.Action, traj debugger.Trajectory, j int) string {
	if a == "" {
		return "start"
	}
	if a == debugger.Breakpoint {
		return fmt.Sprintf("breakpoint %q", traj.Steps[j-1].Arg)
	}
	return string(a)
}

func showState(s *debugger.State, none string) string {
	if s == nil {
		return none
	}
	text, err := tokenize.RenderState(*s)
	if err != nil {
		return fmt.Sprintf("%s %q", s.Kind, s.Src)
	}
	return text
}

func pdbShows(s *debugger.State, status schemas.Status, detail string) string {
	if s == nil {
		return fmt.Sprintf("ran to the end (%s %s)", status, detail)
	}
	return fmt.Sprintf("stopped at %s (function %s, line %d, depth %d)", showState(s, ""), s.Func, s.Lineno, s.Depth)
}

// isGeneratorStep reports whether a state is a generator's yield (a return on a yield line) or a
// resumption (a call state whose SRC is not a def line).
func isGeneratorStep(s *debugger.State) bool {
	if s == nil {
		return false
	}
	trimmed := strings.TrimSpace(s.Src)
	switch s.Kind {
	case debugger.KindReturn:
		return strings.Contains(s.Src, "yield")
	case debugger.KindCall:
		return !strings.HasPrefix(trimmed, "def ") && !strings.HasPrefix(trimmed, "async def ") &&
			!strings.HasPrefix(trimmed, "@") && !strings.HasPrefix(trimmed, "class ")
	}
	return false
}

// classify names the first difference of a replay: action a taken from state from, where the
// row shows want (nil: the exit) and pdb got (nil: the end of the run).
func classify(code string, a debugger.Action, from, want, got *debugger.State, stops []schemas.Event, j int) string {
	if a == debugger.Breakpoint && want != nil && want.Kind != debugger.KindLine {
		return BreakpointNonLine
	}
	if a == debugger.StepOver || a == debugger.StepReturn {
		if isGeneratorStep(from) || isGeneratorStep(want) || isGeneratorStep(got) {
			return Generator
		}
		if j > 0 && j-1 < len(stops) && generatorFunc(code, stops[j-1].Func) {
			return Generator
		}
	}
	if want != nil && got != nil && want.Kind == got.Kind && want.Src == got.Src {
		if differOnlyBy(*want, *got, valueCut) {
			return ValueRender
		}
		if differOnlyBy(*want, *got, wrapperScoped) {
			return WrapperScope
		}
		if differOnlyBy(*want, *got, nondeterministic) {
			return Nondeterministic
		}
	}
	return Mismatch
}

// differOnlyBy reports whether the row's state r and pdb's p show the same names and differ only
// in values that excuse accepts (the row's value, pdb's), at least one of them.
func differOnlyBy(r, p debugger.State, excuse func(rv, pv string) bool) bool {
	if r.Kind.HasArgs() {
		return r.Value != nil && p.Value != nil && excuse(*r.Value, *p.Value)
	}
	if len(r.Shown) != len(p.Shown) || r.Elided != p.Elided {
		return false
	}
	excused := false
	for i, v := range r.Shown {
		w := p.Shown[i]
		if v.Name != w.Name {
			return false
		}
		if normValue(v.Value) != normValue(w.Value) {
			if !excuse(v.Value, w.Value) {
				return false
			}
			excused = true
		}
	}
	return excused
}

// valueCut excuses a pair of values one of which was cut or whose repr failed (ValueRender).
func valueCut(rv, pv string) bool {
	odd := func(v string) bool { return strings.HasSuffix(v, "...") || strings.Contains(v, " object (repr ") }
	return odd(rv) || odd(pv)
}

// nondeterministic excuses a row's value that reads schemas.NondeterministicValue (Nondeterministic).
func nondeterministic(rv, _ string) bool { return rv == schemas.NondeterministicValue }

// wrapperScope is the qualified-name prefix of what the input expression defines when main() runs
// it.
const wrapperScope = "main.<locals>."

// wrapperScoped excuses pdb's value showing wrapperScope where the row's is the same without it
// (WrapperScope).
func wrapperScoped(rv, pv string) bool {
	return strings.Contains(pv, wrapperScope) && normValue(rv) == normValue(strings.ReplaceAll(pv, wrapperScope, ""))
}

var yieldWord = regexp.MustCompile(`\byield\b`)

// generatorFunc reports whether the function qualname (its last component) is a generator
// expression or is defined in code with a yield in its body: a generator, whose yield and resumption events pdb's next and return
// ignore.
func generatorFunc(code, qualname string) bool {
	name := qualname[strings.LastIndex(qualname, ".")+1:]
	if name == "<genexpr>" {
		return true
	}
	if name == "" || strings.HasPrefix(name, "<") {
		return false
	}
	lines := strings.Split(code, "\n")
	for i, l := range lines {
		t := strings.TrimLeft(l, " \t")
		if !strings.HasPrefix(t, "def "+name+"(") && !strings.HasPrefix(t, "async def "+name+"(") {
			continue
		}
		ind := len(l) - len(t)
		for _, b := range lines[i+1:] {
			bt := strings.TrimLeft(b, " \t")
			if bt != "" && len(b)-len(bt) <= ind {
				break
			}
			if yieldWord.MatchString(bt) {
				return true
			}
		}
	}
	return false
}
