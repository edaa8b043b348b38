package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/pipeline"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
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
		got, err := pipeline.MainWrapper(c.code)
		if err != nil || got != c.want {
			t.Errorf("MainWrapper(%q) = %q, %v; want %q", c.code, got, err, c.want)
		}
	}
	if _, err := pipeline.MainWrapper("def f():\n    pass\n"); err == nil {
		t.Error("a CODE context without main() was accepted")
	}
}

func FuzzMainWrapper(f *testing.F) {
	f.Add("def f(x):\n    return x\n\ndef main():\n    return f(1)\n")
	f.Add("from itertools import islice\n\ndef main():\n    return list(islice(g(1), 8))\n")
	f.Fuzz(func(t *testing.T, code string) {
		w, err := pipeline.MainWrapper(code)
		if err == nil && (!strings.HasSuffix(code, w) || !strings.Contains(w, "def main():\n")) {
			t.Fatalf("MainWrapper(%q) = %q", code, w)
		}
	})
}

// TestReplayRequestOf checks the action mapping: every action and breakpoint argument goes to
// the sandbox in order.
func TestReplayRequestOf(t *testing.T) {
	traj := debugger.Trajectory{Direction: debugger.Forward, Code: "def f():\n    return 1\n\ndef main():\n    return f()\n",
		Steps: []debugger.Step{{Action: debugger.StepInto}, {Action: debugger.StepOver}, {Action: debugger.StepReturn},
			{Action: debugger.Breakpoint, Arg: "    return 1"}, {Action: debugger.Continue}}, Exit: debugger.ExitNormal}
	req, err := pipeline.ReplayRequestOf(crawl.Item{Code: "def f():\n    return 1\n", Filename: "main.py", Call: "f()"}, traj)
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
	traj.Direction = debugger.Inverse
	if _, err := pipeline.ReplayRequestOf(crawl.Item{}, traj); err == nil {
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
		{"wrong value", good, []schemas.Event{call, line, func() schemas.Event { r := ret; r.Value = strp("10"); return r }()}, schemas.StatusOK, false, pipeline.ReplayMismatch},
		{"ran to the end early", good, []schemas.Event{call, line}, schemas.StatusOK, false, pipeline.ReplayMismatch},
		{"stopped past the exit", good, []schemas.Event{call, line, ret, line}, schemas.StatusOK, false, pipeline.ReplayMismatch},
		{"wrong exit", good, []schemas.Event{call, line, ret}, schemas.StatusException, false, pipeline.ReplayMismatch},
		{"tampered", good, []schemas.Event{call, line, ret}, schemas.StatusTampered, false, pipeline.ReplayTampered},
		{"limit", traj(debugger.ExitNever, good.Steps...), []schemas.Event{call, line, ret}, schemas.StatusOK, false, pipeline.ReplayLimit},
		{"cut off where pdb went on", traj(debugger.ExitNever, good.Steps[:2]...), []schemas.Event{call, line, ret}, schemas.StatusOK, false, pipeline.ReplayLimit},
		{"never agrees with a timeout", traj(debugger.ExitNever, good.Steps...), []schemas.Event{call, line, ret}, schemas.StatusTimeout, true, ""},
		{"breakpoint on a return", traj(debugger.ExitNormal,
			debugger.Step{State: st(debugger.KindCall, "def sq(x):", x3, false, nil), Action: debugger.Breakpoint, Arg: "    return y"},
			debugger.Step{State: st(debugger.KindReturn, "    return y", nil, false, strp("9")), Action: debugger.Continue}),
			[]schemas.Event{call}, schemas.StatusOK, false, pipeline.ReplayBreakpointNonLine},
		{"lambda of the input", traj(debugger.ExitNormal,
			debugger.Step{State: st(debugger.KindCall, "def sq(x):", schemas.Locals{{Name: "x", Value: "<function <lambda> at 0x1>"}}, false, nil), Action: debugger.StepOver}),
			[]schemas.Event{{Event: "call", Frame: 2, Func: "sq", Src: "def sq(x):", Locals: schemas.Locals{{Name: "x", Value: "<function main.<locals>.<lambda> at 0x1>"}}}},
			schemas.StatusOK, false, pipeline.ReplayWrapperScope},
		{"lambda of another scope", traj(debugger.ExitNormal,
			debugger.Step{State: st(debugger.KindCall, "def sq(x):", schemas.Locals{{Name: "x", Value: "<function <lambda> at 0x1>"}}, false, nil), Action: debugger.StepOver}),
			[]schemas.Event{{Event: "call", Frame: 2, Func: "sq", Src: "def sq(x):", Locals: schemas.Locals{{Name: "x", Value: "<function g.<locals>.<lambda> at 0x1>"}}}},
			schemas.StatusOK, false, pipeline.ReplayMismatch},
		{"cut value", good, []schemas.Event{call, line, func() schemas.Event { r := ret; r.Value = strp("[1, 2, ..."); return r }()}, schemas.StatusOK, false, pipeline.ReplayValueRender},
		{"yield", traj(debugger.ExitNormal,
			debugger.Step{State: st(debugger.KindLine, "    for i in range(n):", x3, false, nil), Action: debugger.StepOver},
			debugger.Step{State: st(debugger.KindReturn, "        yield i", nil, false, strp("0")), Action: debugger.Continue}),
			[]schemas.Event{{Event: "line", Frame: 1, Func: "g", Src: "    for i in range(n):", Locals: x3}, {Event: "line", Frame: 1, Func: "g", Src: "    for i in range(n):", Locals: x3}},
			schemas.StatusOK, false, pipeline.ReplayGenerator},
	}
	for _, c := range cases {
		out := pipeline.CompareReplay(c.traj, c.stops, c.status, "")
		if !out.Replayed || out.Agreed != c.agreed || out.Kind != c.kind {
			t.Errorf("%s: %+v, want agreed %v kind %q", c.name, out, c.agreed, c.kind)
		}
		if !out.Agreed && out.Detail == "" {
			t.Errorf("%s: no detail", c.name)
		}
	}
}

// TestTracerReplay replays real rows, built by the pipeline from a traced item, through
// Tracer.Replay (the method verify calls): forward rows agree, inverse rows are not replayed,
// and a row whose text was altered is caught with the first differing state.
func TestTracerReplay(t *testing.T) {
	code := "def helper(a):\n    return a * 2\n\ndef f(n):\n    total = 0\n    for i in range(n):\n        total += helper(i)\n    return total\n"
	it := item(t, code, "f(4)")
	opts := pipeline.RowOptions{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), TracerVersion: sandbox.TracerVersion}
	pool := pipeline.NewSandboxPool(sandbox.Config{}, 1)
	defer pool.Close()
	trc := &pipeline.Tracer{Sandboxes: pool}
	spec := schemas.Spec{}.WithDefaults()
	citem := crawl.Item{Key: "t#0", Code: code, Filename: "main.py", Call: "f(4)"}
	for seed := uint64(0); seed < 8; seed++ {
		row, err := buildRow(t, it, debugger.Forward, seed, opts)
		if err != nil {
			t.Fatal(err)
		}
		out, err := trc.Replay(context.Background(), citem, row, spec)
		if err != nil {
			t.Fatal(err)
		}
		if !out.Replayed || !out.Agreed {
			t.Errorf("seed %d: %+v\n%s", seed, out, row.Text)
		}
		if seed == 0 {
			bad := row
			bad.Text = strings.Replace(row.Text, `<|arg_sep|>"12"`, `<|arg_sep|>"13"`, 1)
			if bad.Text == row.Text {
				t.Fatalf("the test's alteration did not apply:\n%s", row.Text)
			}
			out, err := trc.Replay(context.Background(), citem, bad, spec)
			if err != nil {
				t.Fatal(err)
			}
			if out.Agreed || out.Kind != pipeline.ReplayMismatch || !strings.Contains(out.Detail, `"13"`) || !strings.Contains(out.Detail, `"12"`) {
				t.Errorf("altered row: %+v", out)
			}
		}
	}
	// A program that looks at its caller's frame traces normally but cannot be replayed
	// honestly: the verdict fails closed.
	hostile := "import sys\ndef f(n):\n    up = sys._getframe(1).f_code.co_name\n    return n\n"
	hrow, err := buildRow(t, item(t, hostile, "f(4)"), debugger.Forward, 2, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := trc.Replay(context.Background(), crawl.Item{Code: hostile, Filename: "main.py", Call: "f(4)"}, hrow, spec)
	if err != nil || out.Agreed || out.Kind != pipeline.ReplayTampered {
		t.Errorf("hostile row: %+v %v", out, err)
	}
	// Rows that are not replayed say why.
	for _, c := range []struct {
		it  crawl.Item
		row schemas.Row
	}{
		{crawl.Item{Repo: &crawl.RepoTarget{}}, schemas.Row{Level: "repository", Direction: "forward"}},
		{crawl.Item{Code: code, Call: "f(4)", RepoURL: "https://example.invalid/r"}, schemas.Row{Level: "function", Direction: "forward"}},
	} {
		out, err := trc.Replay(context.Background(), c.it, c.row, spec)
		if err != nil || out.Replayed || out.Detail == "" {
			t.Errorf("%+v: %+v %v", c.row, out, err)
		}
	}
	inv, err := buildRow(t, it, debugger.Inverse, 1, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err = trc.Replay(context.Background(), citem, inv, spec)
	if err != nil || out.Replayed || out.Detail == "" {
		t.Errorf("inverse row: %+v %v", out, err)
	}
}
