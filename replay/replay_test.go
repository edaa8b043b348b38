package replay_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/replay"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

func TestMainWrapper(t *testing.T) {
	cases := []struct{ code, want string }{
		{"def f(x):\n    return x\n\ndef main():\n    return f(1)\n", "def main():\n    return f(1)\n"},
		{"def main():\n    return f(1)\n", "def main():\n    return f(1)\n"},
		{"def g(n):\n    yield n\n\nfrom itertools import islice\n\ndef main():\n    return list(islice(g(1), 8))\n",
			"from itertools import islice\n\ndef main():\n    return list(islice(g(1), 8))\n"},
		// the item's own main comes first; the wrapper is the last one
		{"def main():\n    return 1\n\ndef main():\n    return main()\n", "def main():\n    return main()\n"},
	}
	for _, c := range cases {
		got, err := replay.MainWrapper(c.code)
		if err != nil || got != c.want {
			t.Errorf("MainWrapper(%q) = %q, %v; want %q", c.code, got, err, c.want)
		}
	}
	if _, err := replay.MainWrapper("def f():\n    pass\n"); err == nil {
		t.Error("a CODE context without main() was accepted")
	}
}

func FuzzMainWrapper(f *testing.F) {
	f.Add("def f(x):\n    return x\n\ndef main():\n    return f(1)\n")
	f.Add("from itertools import islice\n\ndef main():\n    return list(islice(g(1), 8))\n")
	f.Fuzz(func(t *testing.T, code string) {
		w, err := replay.MainWrapper(code)
		if err == nil && (!strings.HasSuffix(code, w) || !strings.Contains(w, "def main():\n")) {
			t.Fatalf("MainWrapper(%q) = %q", code, w)
		}
	})
}

// TestReplayRequestOf checks the action mapping: every action and breakpoint argument goes to
// the sandbox in order.
func TestReplayRequestOf(t *testing.T) {
	traj := debugger.Trajectory{Direction: debugger.Forward, Code: "def f():\n    return 1\n\ndef main():\n    return f()\n",
		Steps: []debugger.Step{{State: debugger.State{Kind: debugger.KindCall, Src: "def main():"}, Action: debugger.StepInto}, {Action: debugger.StepOver}, {Action: debugger.StepReturn},
			{Action: debugger.Breakpoint, Arg: "    return 1"}, {Action: debugger.Continue}}, Exit: debugger.ExitNormal}
	req, err := replay.RequestOf(crawl.Item{Code: "def f():\n    return 1\n", Filename: "main.py", Call: "f()"}, traj, schemas.ForwardStartMain)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"step_into", ""}, {"step_over", ""}, {"step_return", ""}, {"breakpoint", "    return 1"}, {"continue", ""}}
	if len(req.Actions) != len(want) {
		t.Fatalf("actions %v", req.Actions)
	}
	for i, a := range want {
		if req.Actions[i] != a {
			t.Errorf("action %d: %v, want %v", i, req.Actions[i], a)
		}
		if _, ok := sandbox.ReplayActions[a[0]]; !ok {
			t.Errorf("%s has no pdb command", a[0])
		}
	}
	if req.Wrapper != "def main():\n    return f()\n" {
		t.Errorf("wrapper %q", req.Wrapper)
	}
	// A trajectory that starts at the function's call (forward_start: function, the default):
	// main's call and line come first on bdb, passed with step_into.
	traj.Steps[0].State = debugger.State{Kind: debugger.KindCall, Src: "def f():"}
	if replay.Lead("") != 2 || replay.Lead(schemas.ForwardStartFunction) != 2 || replay.Lead(schemas.ForwardStartMain) != 0 {
		t.Errorf("Lead: %d, %d, %d", replay.Lead(""), replay.Lead(schemas.ForwardStartFunction), replay.Lead(schemas.ForwardStartMain))
	}
	if req, err = replay.RequestOf(crawl.Item{Code: "def f():\n    return 1\n", Filename: "main.py", Call: "f()"}, traj, ""); err != nil {
		t.Fatal(err)
	}
	if lead := [][2]string{{"step_into", ""}, {"step_into", ""}}; !reflect.DeepEqual(req.Actions, append(lead, want...)) {
		t.Errorf("function start: actions %v", req.Actions)
	}
	traj.Direction = debugger.Inverse
	if _, err := replay.RequestOf(crawl.Item{}, traj, ""); err == nil {
		t.Error("an inverse trajectory made a replay request")
	}
}

func strp(s string) *string { return &s }

// TestCompareReplay checks the comparison and the classification of differences.
func TestCompareReplay(t *testing.T) {
	x3 := schemas.Locals{{Name: "x", Value: "3"}}
	call := schemas.Event{Event: "call", Frame: 2, Func: "sq", Src: "def sq(x):", Locals: x3}
	line := schemas.Event{Event: "line", Frame: 2, Func: "sq", Src: "    y = x * x", Locals: x3}
	ret := schemas.Event{Event: "return", Frame: 2, Func: "sq", Src: "    return y", Locals: append(x3, schemas.Var{Name: "y", Value: "9"}), Value: strp("9")}
	st := func(k debugger.Kind, src string, shown schemas.Locals, elided bool, v *string) debugger.State {
		return debugger.State{Kind: k, Src: src, Shown: shown, Elided: elided, Value: v}
	}
	traj := func(exit debugger.Exit, steps ...debugger.Step) debugger.Trajectory {
		return debugger.Trajectory{Direction: debugger.Forward, Code: "def sq(x):\n    y = x * x\n    return y\n", Steps: steps, Exit: exit}
	}
	good := traj(debugger.ExitNormal,
		debugger.Step{State: st(debugger.KindCall, "def sq(x):", x3, false, nil), Action: debugger.StepOver},
		debugger.Step{State: st(debugger.KindLine, "    y = x * x", schemas.Locals{}, true, nil), Action: debugger.StepOver},
		debugger.Step{State: st(debugger.KindReturn, "    return y", nil, false, strp("9")), Action: debugger.StepOver})
	cases := []struct {
		name   string
		traj   debugger.Trajectory
		stops  []schemas.Event
		status schemas.Status
		agreed bool
		kind   string
	}{
		{"agree", good, []schemas.Event{call, line, ret}, schemas.StatusOK, true, ""},
		{"wrong value", good, []schemas.Event{call, line, func() schemas.Event { r := ret; r.Value = strp("10"); return r }()}, schemas.StatusOK, false, replay.Mismatch},
		{"ran to the end early", good, []schemas.Event{call, line}, schemas.StatusOK, false, replay.Mismatch},
		{"stopped past the exit", good, []schemas.Event{call, line, ret, line}, schemas.StatusOK, false, replay.Mismatch},
		{"wrong exit", good, []schemas.Event{call, line, ret}, schemas.StatusException, false, replay.Mismatch},
		{"tampered", good, []schemas.Event{call, line, ret}, schemas.StatusTampered, false, replay.Tampered},
		{"limit", traj(debugger.ExitNever, good.Steps...), []schemas.Event{call, line, ret}, schemas.StatusOK, false, replay.Limit},
		{"cut off where pdb went on", traj(debugger.ExitNever, good.Steps[:2]...), []schemas.Event{call, line, ret}, schemas.StatusOK, false, replay.Limit},
		{"never agrees with a timeout", traj(debugger.ExitNever, good.Steps...), []schemas.Event{call, line, ret}, schemas.StatusTimeout, true, ""},
		{"breakpoint on a return", traj(debugger.ExitNormal,
			debugger.Step{State: st(debugger.KindCall, "def sq(x):", x3, false, nil), Action: debugger.Breakpoint, Arg: "    return y"},
			debugger.Step{State: st(debugger.KindReturn, "    return y", nil, false, strp("9")), Action: debugger.Continue}),
			[]schemas.Event{call}, schemas.StatusOK, false, replay.BreakpointNonLine},
		{"lambda of the input", traj(debugger.ExitNormal,
			debugger.Step{State: st(debugger.KindCall, "def sq(x):", schemas.Locals{{Name: "x", Value: "<function <lambda> at 0x1>"}}, false, nil), Action: debugger.StepOver}),
			[]schemas.Event{{Event: "call", Frame: 2, Func: "sq", Src: "def sq(x):", Locals: schemas.Locals{{Name: "x", Value: "<function main.<locals>.<lambda> at 0x1>"}}}},
			schemas.StatusOK, false, replay.WrapperScope},
		{"lambda of another scope", traj(debugger.ExitNormal,
			debugger.Step{State: st(debugger.KindCall, "def sq(x):", schemas.Locals{{Name: "x", Value: "<function <lambda> at 0x1>"}}, false, nil), Action: debugger.StepOver}),
			[]schemas.Event{{Event: "call", Frame: 2, Func: "sq", Src: "def sq(x):", Locals: schemas.Locals{{Name: "x", Value: "<function g.<locals>.<lambda> at 0x1>"}}}},
			schemas.StatusOK, false, replay.Mismatch},
		{"another value", good, []schemas.Event{call, line, func() schemas.Event { r := ret; r.Value = strp("140001"); return r }()}, schemas.StatusOK, false, replay.Mismatch},
		{"nondeterministic value", traj(debugger.ExitNormal, good.Steps[0], good.Steps[1],
			debugger.Step{State: st(debugger.KindReturn, "    return y", nil, false, strp(schemas.NondeterministicValue)), Action: debugger.StepOver}),
			[]schemas.Event{call, line, func() schemas.Event { r := ret; r.Value = strp("140001"); return r }()}, schemas.StatusOK, false, replay.Nondeterministic},
		{"scrubbed address in a string", traj(debugger.ExitNormal,
			debugger.Step{State: st(debugger.KindCall, "def sq(x):", schemas.Locals{{Name: "x", Value: "['<address 0x1>', <P object at 0x2>]"}}, false, nil), Action: debugger.StepOver}),
			[]schemas.Event{{Event: "call", Frame: 2, Func: "sq", Src: "def sq(x):", Locals: schemas.Locals{{Name: "x", Value: "['0x5', <P object at 0x4>]"}}}},
			schemas.StatusOK, true, ""},
		{"cut value", good, []schemas.Event{call, line, func() schemas.Event { r := ret; r.Value = strp("[1, 2, ..."); return r }()}, schemas.StatusOK, false, replay.ValueRender},
		{"yield", traj(debugger.ExitNormal,
			debugger.Step{State: st(debugger.KindLine, "    for i in range(n):", x3, false, nil), Action: debugger.StepOver},
			debugger.Step{State: st(debugger.KindReturn, "        yield i", nil, false, strp("0")), Action: debugger.Continue}),
			[]schemas.Event{{Event: "line", Frame: 1, Func: "g", Src: "    for i in range(n):", Locals: x3}, {Event: "line", Frame: 1, Func: "g", Src: "    for i in range(n):", Locals: x3}},
			schemas.StatusOK, false, replay.Generator},
	}
	for _, c := range cases {
		out := replay.Compare(c.traj, c.stops, c.status, "")
		if !out.Replayed || out.Agreed != c.agreed || out.Kind != c.kind {
			t.Errorf("%s: %+v, want agreed %v kind %q", c.name, out, c.agreed, c.kind)
		}
		if !out.Agreed && out.Detail == "" {
			t.Errorf("%s: no detail", c.name)
		}
	}
	// A function-level row that starts at the function's call: the replay's first two stops,
	// main's call and line, are skipped.
	mainCall := schemas.Event{Event: "call", Frame: 1, Func: "main", Src: "def main():", Locals: schemas.Locals{}}
	mainLine := schemas.Event{Event: "line", Frame: 1, Func: "main", Src: "    return sq(3)", Locals: schemas.Locals{}}
	if out := replay.CompareFunction(good, []schemas.Event{mainCall, mainLine, call, line, ret}, schemas.StatusOK, "", schemas.ForwardStartFunction); !out.Agreed {
		t.Errorf("function start: %+v", out)
	}
	if out := replay.CompareFunction(good, []schemas.Event{call, line, ret}, schemas.StatusOK, "", schemas.ForwardStartFunction); out.Agreed {
		t.Error("function start: agreed without main's stops")
	}
}

// TestLeadActions checks the actions a function-level row's replay takes before its first state:
// none from main's call, main's call and line from the function's, and for a method item's row
// that starts at the method's call the constructor's call stepped out of, then the method's call.
func TestLeadActions(t *testing.T) {
	in, ret := string(debugger.StepInto), string(debugger.StepReturn)
	starting := func(src string) debugger.Trajectory {
		return debugger.Trajectory{Steps: []debugger.Step{{State: debugger.State{Kind: debugger.KindCall, Src: src}}}}
	}
	for _, tc := range []struct {
		start, call string
		traj        debugger.Trajectory
		want        []string
	}{
		{schemas.ForwardStartMain, "Cls(1).meth(2)", starting("    def meth(self, b):"), nil},
		{schemas.ForwardStartFunction, "f(1)", starting("def f(x):"), []string{in, in}},
		{"", "f(g(1))", starting("def g(x):"), []string{in, in}},
		{schemas.ForwardStartFunction, "Cls(1).meth(2)", starting("    def meth(self, b):"), []string{in, in, ret, in}},
		// The constructor raised: the row starts at its call.
		{schemas.ForwardStartFunction, "Cls(1).meth(2)", starting("    def __init__(self, a):"), []string{in, in}},
		{schemas.ForwardStartFunction, "Cls.meth(2)", starting("    def meth(b):"), []string{in, in}},
	} {
		var got []string
		for _, a := range replay.LeadActions(tc.start, tc.call, tc.traj) {
			got = append(got, a[0])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q %q: %v, want %v", tc.start, tc.call, got, tc.want)
		}
	}
}
