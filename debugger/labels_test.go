package debugger_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// cappedLoop returns n events of `def f(): i = 0; while True: i = g(i)` cut off by the event cap
// (no return of f; g's calls return).
func cappedLoop(n int) []schemas.Event {
	evs := []schemas.Event{{Event: "call", Func: "f", File: "m.py", Src: "def f():", Lineno: 4, Frame: 1, Locals: schemas.Locals{}}}
	add := func(e schemas.Event) {
		if len(evs) < n {
			evs = append(evs, e)
		}
	}
	add(schemas.Event{Event: "line", Func: "f", File: "m.py", Src: "    i = 0", Lineno: 5, Frame: 1, Locals: schemas.Locals{}})
	for i, frame := 0, 2; len(evs) < n; i, frame = i+1, frame+1 {
		loc := schemas.Locals{{Name: "i", Value: fmt.Sprint(i)}}
		add(schemas.Event{Event: "line", Func: "f", File: "m.py", Src: "    while True:", Lineno: 6, Frame: 1, Locals: loc})
		add(schemas.Event{Event: "line", Func: "f", File: "m.py", Src: "        i = g(i)", Lineno: 7, Frame: 1, Locals: loc})
		gl := schemas.Locals{{Name: "n", Value: fmt.Sprint(i)}}
		v := fmt.Sprint(i + 1)
		add(schemas.Event{Event: "call", Func: "g", File: "m.py", Src: "def g(n):", Lineno: 1, Frame: frame, Depth: 1, Locals: gl})
		add(schemas.Event{Event: "line", Func: "g", File: "m.py", Src: "    return n + 1", Lineno: 2, Frame: frame, Depth: 1, Locals: gl})
		add(schemas.Event{Event: "return", Func: "g", File: "m.py", Src: "    return n + 1", Lineno: 2, Frame: frame, Depth: 1, Locals: gl, Value: &v})
	}
	return evs
}

const cappedCode = "def g(n):\n    return n + 1\n\ndef f():\n    i = 0\n    while True:\n        i = g(i)\n    return i\n\ndef main():\n    return f()\n"

// breakpointPolicy takes every forward action, breakpoints and step_return most, never reaching
// for a line the trace does not show (BreakpointReachable 0: every draw from the CODE context).
func breakpointPolicy() debugger.Policy {
	p := debugger.PaperPolicy()
	p.Name = "breakpoints"
	p.Forward = []debugger.Component{{Weight: 1, Actions: map[debugger.Action]float64{
		debugger.StepInto: 1, debugger.StepOver: 1, debugger.StepReturn: 3, debugger.Breakpoint: 3, debugger.Continue: 0.1}}}
	p.BreakpointReachable = 0
	return p
}

// TestCutTreeAnswerable checks that a tree of a run cut off by a limit offers no action whose
// target lies past the cut: every valid action but continue lands on a recorded state, a
// breakpoint's target is always a line ahead in the recorded trace, and the only exit a
// trajectory reaches, exit_never, follows a continue.
func TestCutTreeAnswerable(t *testing.T) {
	for _, n := range []int{1, 2, 7, 8, 200} {
		evs := cappedLoop(n)
		for _, wrap := range []bool{false, true} {
			// WrapMain takes over fwd's nodes: a tree of its own for each.
			tree, err := debugger.BuildForward(evs, debugger.ExitNever)
			if err != nil {
				t.Fatal(err)
			}
			if wrap {
				tree = debugger.WrapMain(tree, "f()")
			}
			if !tree.Cut() {
				t.Fatal("an exit_never tree is not cut")
			}
			for i, nd := range tree.Order {
				for _, a := range debugger.ForwardActions {
					args := []string{""}
					if a == debugger.Breakpoint {
						args = []string{"    return i", "    return n + 1", "def main():", "no such line"}
					}
					for _, arg := range args {
						next, err := tree.Apply(nd, a, arg)
						switch {
						case !tree.Valid(nd, a) || err != nil:
							if err == nil {
								t.Fatalf("%d events: %s at state %d is invalid but applies", n, a, i)
							}
							if tree.Valid(nd, a) && a != debugger.Breakpoint || !errors.Is(err, debugger.ErrPastCut) && !(a == debugger.StepReturn && nd.Kind == debugger.KindReturn) {
								t.Fatalf("%d events: %s %q at state %d: %v", n, a, arg, i, err)
							}
						case next == nil && a != debugger.Continue:
							t.Fatalf("%d events: %s %q at state %d (%s) crosses the cut", n, a, arg, i, nd.Kind)
						}
					}
				}
			}
			for _, p := range []debugger.Policy{debugger.PaperPolicy(), debugger.StepIntoPolicy(), breakpointPolicy()} {
				for seed := uint64(0); seed < 20; seed++ {
					traj, err := debugger.Sample(tree, cappedCode, p, seed, nil)
					if err != nil {
						t.Fatalf("%d events, %s seed %d: %v", n, p.Name, seed, err)
					}
					last := traj.Steps[len(traj.Steps)-1]
					if traj.Exit != debugger.ExitNever || last.Action != debugger.Continue {
						t.Fatalf("%d events, %s seed %d: ends %s by %s", n, p.Name, seed, traj.Exit, last.Action)
					}
					if p.Name == "step_into" && len(traj.Steps) != len(tree.Order) {
						t.Fatalf("%d events: step_into gives %d states of %d", n, len(traj.Steps), len(tree.Order))
					}
				}
			}
		}
	}
}

// TestCutTreeRealTrace samples trajectories of a real run cut off by the event limit: a
// breakpoint-heavy policy whose every target would be drawn from the CODE context draws only
// lines ahead, and every breakpoint lands on a recorded state.
func TestCutTreeRealTrace(t *testing.T) {
	sbOnce.Do(func() { sb, sbErr = sandbox.New(t.Context(), sandbox.Config{}) })
	if sbErr != nil {
		t.Fatalf("sandbox: %v", sbErr)
	}
	code := "def g(n):\n    return n + 1\n\ndef f():\n    i = 0\n    while True:\n        i = g(i)\n    return i\n"
	res, err := sb.Run(t.Context(), sandbox.Request{Code: code, Call: "f()", Limits: sandbox.Limits{TraceEvents: 50}})
	if err != nil || res.Status != schemas.StatusEventLimit {
		t.Fatalf("%v %s", err, res.Status)
	}
	item := debugger.Item{Code: code, Call: "f()", Events: res.Events, Blocks: res.Blocks, Status: res.Status}
	tree, ctx, err := item.Tree(debugger.Forward)
	if err != nil {
		t.Fatal(err)
	}
	bps := 0
	for seed := uint64(0); seed < 50; seed++ {
		traj, err := debugger.Sample(tree, ctx, breakpointPolicy(), seed, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range traj.Steps {
			if s.Action != debugger.Breakpoint {
				continue
			}
			bps++
			if i+1 >= len(traj.Steps) || traj.Steps[i+1].State.Src != s.Arg {
				t.Fatalf("seed %d: breakpoint %q at step %d did not land on a state of that line", seed, s.Arg, i)
			}
			if s.Arg == "    return i" {
				t.Fatalf("seed %d: a breakpoint on a line the cut run never reached", seed)
			}
		}
	}
	if bps == 0 {
		t.Fatal("no breakpoint drawn")
	}
}

// TestScopeReturnedBeforeCut checks that a repository entry whose call returned before the run was
// cut off is not cut: its exit is normal (error when it unwound) and no trajectory in it ends
// exit_never; an entry the cut fell inside is cut.
func TestScopeReturnedBeforeCut(t *testing.T) {
	fwd, err := debugger.BuildForward(cappedLoop(40), debugger.ExitNever)
	if err != nil {
		t.Fatal(err)
	}
	var g, f *debugger.Node
	for _, n := range fwd.Order {
		if n.Kind == debugger.KindCall && n.Func() == "g" && g == nil {
			g = n
		}
		if n.Kind == debugger.KindCall && n.Func() == "f" {
			f = n
		}
	}
	scope, err := debugger.Scope(fwd, g)
	if err != nil {
		t.Fatal(err)
	}
	if scope.Exit != debugger.ExitNormal || scope.Cut() || len(scope.Order) != 3 {
		t.Fatalf("g's scope: exit %s, %d states", scope.Exit, len(scope.Order))
	}
	for seed := uint64(0); seed < 20; seed++ {
		traj, err := debugger.Sample(scope, "def g(n):\n    return n + 1\n", breakpointPolicy(), seed, nil)
		if err != nil || traj.Exit != debugger.ExitNormal {
			t.Fatalf("seed %d: %v %s", seed, err, traj.Exit)
		}
	}
	if scope, err = debugger.Scope(fwd, f); err != nil || scope.Exit != debugger.ExitNever || !scope.Cut() {
		t.Fatalf("f's scope: %v %v", err, scope.Exit)
	}
	// An entry whose return unwinds an exception, cut later: exit_error.
	v := "None"
	evs := []schemas.Event{
		{Event: "call", Func: "t", Src: "def t():", Frame: 1, Lineno: 1},
		{Event: "line", Func: "t", Src: "    h()", Frame: 1, Lineno: 2},
		{Event: "call", Func: "h", Src: "def h():", Frame: 2, Depth: 1, Lineno: 5},
		{Event: "exception", Func: "h", Src: "    raise E", Frame: 2, Depth: 1, Lineno: 6, Value: &v},
		{Event: "return", Func: "h", Src: "    raise E", Frame: 2, Depth: 1, Lineno: 6, Value: &v, Unwind: true},
		{Event: "exception", Func: "t", Src: "    h()", Frame: 1, Lineno: 2, Value: &v},
		{Event: "line", Func: "t", Src: "    while True: pass", Frame: 1, Lineno: 3},
	}
	fwd, err = debugger.BuildForward(evs, debugger.ExitNever)
	if err != nil {
		t.Fatal(err)
	}
	if scope, err = debugger.Scope(fwd, fwd.Order[2]); err != nil || scope.Exit != debugger.ExitError {
		t.Fatalf("h's scope: %v %v", err, scope.Exit)
	}
}

// TestSampleTruncated checks that a trajectory finished early by a cap says so, and one that ran
// its course does not.
func TestSampleTruncated(t *testing.T) {
	fwd, err := debugger.BuildForward(cappedLoop(200), debugger.ExitNever)
	if err != nil {
		t.Fatal(err)
	}
	p := debugger.StepIntoPolicy()
	traj, err := debugger.Sample(fwd, cappedCode, p, 1, nil)
	if err != nil || traj.Truncated || len(traj.Steps) != 200 {
		t.Fatalf("uncapped: %v, truncated %v, %d steps", err, traj.Truncated, len(traj.Steps))
	}
	p.MaxActions = 10
	traj, err = debugger.Sample(fwd, cappedCode, p, 1, nil)
	if err != nil || !traj.Truncated || len(traj.Steps) != 10 || traj.Steps[9].Action != debugger.Continue {
		t.Fatalf("max_actions 10: %v, truncated %v, %d steps", err, traj.Truncated, len(traj.Steps))
	}
	p = debugger.StepIntoPolicy()
	p.MaxTokens = 50
	traj, err = debugger.Sample(fwd, cappedCode, p, 1, nil)
	if err != nil || !traj.Truncated || len(traj.Steps) >= 200 {
		t.Fatalf("max_tokens 50: %v, truncated %v, %d steps", err, traj.Truncated, len(traj.Steps))
	}
	// SampleAtMost stops without drawing further and says so.
	part, complete, err := debugger.SampleAtMost(fwd, cappedCode, debugger.StepIntoPolicy(), 1, nil, 30)
	if err != nil || complete || len(part.Steps) != 30 {
		t.Fatalf("SampleAtMost 30: %v, complete %v, %d steps", err, complete, len(part.Steps))
	}
	whole, complete, err := debugger.SampleAtMost(fwd, cappedCode, debugger.StepIntoPolicy(), 1, nil, 500)
	if err != nil || !complete || len(whole.Steps) != 200 {
		t.Fatalf("SampleAtMost 500: %v, complete %v, %d steps", err, complete, len(whole.Steps))
	}
}

// TestGeneratorCleanup traces calls after whose return Python closes a generator the entry made
// (a top-level call, GeneratorExit and return of the generator's frame, after the entry's return):
// main returns the entry's value, not the cleanup's None; the cleanup is no state of either tree;
// and a run cut off by the limit during the cleanup is not cut (the entry returned).
func TestGeneratorCleanup(t *testing.T) {
	gen := "def gen():\n    try:\n        yield 1\n    finally:\n        x = 2\n\n"
	progs := []struct {
		code, call, value string
		exit              debugger.Exit
	}{
		{gen + "def f():\n    g = gen()\n    first = next(g)\n    return first\n", "f()", "1", debugger.ExitNormal},
		{gen + "def h(x):\n    return x * 3\n\ndef f(a):\n    g = gen()\n    return next(g) + a\n", "f(h(2))", "7", debugger.ExitNormal},
	}
	for i, p := range progs {
		res := traceCode(t, p.code, p.call)
		// The cleanup is really there: the generator's frame resumed on the top level last.
		last := res.Events[len(res.Events)-1]
		if last.Func != "gen" || last.Depth != 0 || last.Event != "return" {
			t.Fatalf("program %d: the trace does not end with the generator's cleanup: %+v", i, last)
		}
		cut := len(res.Events) - 2 // inside the cleanup: after its GeneratorExit
		for _, c := range []struct {
			events []schemas.Event
			status schemas.Status
		}{{res.Events, res.Status}, {res.Events[:cut], schemas.StatusEventLimit}} {
			item := debugger.Item{Code: p.code, Call: p.call, Events: c.events, Blocks: res.Blocks, Status: c.status}
			tree, code, err := item.Tree(debugger.Forward)
			if err != nil {
				t.Fatal(err)
			}
			if tree.Exit != p.exit {
				t.Fatalf("program %d (%s): exit %s, want %s", i, c.status, tree.Exit, p.exit)
			}
			ret := tree.Top[len(tree.Top)-1]
			if ret.Kind != debugger.KindReturn || ret.Func() != "main" {
				t.Fatalf("program %d (%s): main's last state is %s of %s", i, c.status, ret.Kind, ret.Func())
			}
			if p.exit == debugger.ExitNormal && *ret.Value() != p.value {
				t.Fatalf("program %d (%s): main returns %s, want %s", i, c.status, *ret.Value(), p.value)
			}
			for _, n := range tree.Order {
				if n.Func() == "gen" && n.Depth == 1 {
					t.Fatalf("program %d (%s): the cleanup is a state of main's line: %s %q", i, c.status, n.Kind, n.Src())
				}
			}
			traj, err := debugger.Sample(tree, code, debugger.StepIntoPolicy(), 0, nil)
			if err != nil || traj.Exit != p.exit {
				t.Fatalf("program %d (%s): %v, exit %v", i, c.status, err, traj.Exit)
			}
			inv, _, err := item.Tree(debugger.Inverse)
			if err != nil {
				t.Fatalf("program %d (%s): inverse: %v", i, c.status, err)
			}
			if first := inv.Start(); first.Kind != debugger.KindInvReturn || first.Func() != "f" {
				t.Fatalf("program %d (%s): the inverse starts at %s of %s", i, c.status, first.Kind, first.Func())
			}
		}
	}
}

// TestMainReturnsTheCallsValue traces calls whose entry frame does not return the call's value (a
// class's instantiation runs __init__, which returns None): main returns the run's value
// (Item.Value), not the entry's return; without it (a trace stored before it was kept) the
// entry's return stands in, as before.
func TestMainReturnsTheCallsValue(t *testing.T) {
	code := "class C:\n    def __init__(self, x):\n        self.x = x\n\ndef f(x):\n    return x + 1\n"
	for _, tc := range []struct{ call, want string }{{"C(2)", "C(x=2)"}, {"f(2)", "3"}} {
		res := traceCode(t, code, tc.call)
		if res.Value != tc.want {
			t.Fatalf("%s: the run's value is %q, want %q", tc.call, res.Value, tc.want)
		}
		for _, value := range []string{res.Value, ""} {
			item := debugger.Item{Code: code, Call: tc.call, Events: res.Events, Blocks: res.Blocks, Status: res.Status, Value: value}
			tree, _, err := item.Tree(debugger.Forward)
			if err != nil {
				t.Fatal(err)
			}
			ret := tree.Top[len(tree.Top)-1]
			want := tc.want
			if value == "" && tc.call == "C(2)" {
				want = "None" // __init__'s return
			}
			if ret.Kind != debugger.KindReturn || ret.Func() != "main" || *ret.Value() != want {
				t.Errorf("%s (value %q): main's last state %s of %s returns %v, want %s", tc.call, value, ret.Kind, ret.Func(), *ret.Value(), want)
			}
		}
	}
}

// TestFinalizerCleanup: a callback Python runs as it frees the entry's frame (weakref.finalize's)
// is a top-level call of a new frame after the entry's return. It was taken for the entry (the
// last such call), so the cleanup was kept and main returned the callback's None; the entry is
// the call of the call expression's function.
func TestFinalizerCleanup(t *testing.T) {
	code := "def done(tag):\n    tag = tag + '!'\n\nclass Box:\n    __del__ = lambda self: done('box')\n\ndef f(n):\n    b = Box()\n    return n * 2\n"
	res := traceCode(t, code, "f(21)")
	last := res.Events[len(res.Events)-1]
	if last.Func != "Box.<lambda>" || last.Depth != 0 {
		t.Fatalf("the trace does not end with the finalizer's call on the top level: %+v", last)
	}
	item := debugger.Item{Code: code, Call: "f(21)", Events: res.Events, Blocks: res.Blocks, Status: res.Status}
	tree, _, err := item.Tree(debugger.Forward)
	if err != nil {
		t.Fatal(err)
	}
	ret := tree.Top[len(tree.Top)-1]
	if ret.Kind != debugger.KindReturn || ret.Func() != "main" || *ret.Value() != "42" {
		t.Fatalf("main's last state is %s of %s (%v), want main's return of 42", ret.Kind, ret.Func(), *ret.Value())
	}
	for _, n := range tree.Order {
		if n.Func() == "done" || n.Func() == "Box.<lambda>" {
			t.Fatalf("the finalizer is a state of the tree: %s %q", n.Kind, n.Src())
		}
	}
	inv, _, err := item.Tree(debugger.Inverse)
	if err != nil {
		t.Fatal(err)
	}
	if first := inv.Start(); first.Kind != debugger.KindInvReturn || first.Func() != "f" {
		t.Fatalf("the inverse starts at %s of %s", first.Kind, first.Func())
	}
}

// TestCodeContextCarriageReturns: Python counts a lone "\r" as a line ending (the tracer's blocks
// and states count lines so); the CODE context of a module written with such line endings split
// it at "\n" only, found every block past its one line and showed the wrapper alone, no code.
func TestCodeContextCarriageReturns(t *testing.T) {
	lf := "X = 3\n\ndef g(a):\n    return a + X\n\ndef f(n):\n    s = 0\n    for i in range(n):\n        s += g(i)\n    return s\n"
	var want string
	for _, sep := range []string{"\n", "\r", "\r\n"} {
		code := strings.ReplaceAll(lf, "\n", sep)
		res := traceCode(t, code, "f(3)")
		item := debugger.Item{Code: code, Call: "f(3)", Events: res.Events, Blocks: res.Blocks, Status: res.Status}
		_, ctx, err := item.Tree(debugger.Forward)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ctx, "def f(n):\n    s = 0\n") || !strings.Contains(ctx, "X = 3") || strings.Contains(ctx, "\r") {
			t.Fatalf("line endings %q: CODE context %q lacks the code", sep, ctx)
		}
		if want == "" {
			want = ctx
		} else if ctx != want {
			t.Errorf("line endings %q: CODE context %q, with \"\\n\" %q", sep, ctx, want)
		}
	}
}
