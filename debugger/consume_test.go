package debugger_test

import (
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestConsumedTrajectories checks the trees and trajectories of calls whose result the tracer
// consumed (generators, map over a lambda, an iterator class): every resumption is a top-level
// call…return sequence under main's `return list(islice(CALL, 8))` line, main returns the values
// taken, and the inverse tree runs over the consumption back to its first call.
func TestConsumedTrajectories(t *testing.T) {
	count := "class Count:\n    def __init__(self, n):\n        self.i, self.n = 0, n\n    def __iter__(self):\n        return self\n" +
		"    def __next__(self):\n        if self.i >= self.n:\n            raise StopIteration\n        self.i += 1\n        return self.i\n"
	progs := []struct {
		code, call string
		status     schemas.Status
		firstFunc  string // the function of the consumption's first state
	}{
		{"def gen(n):\n    total = 0\n    for i in range(n):\n        total += i\n        yield total\n    return total\n", "gen(4)", schemas.StatusOK, "gen"},
		{"def helper(x):\n    return x * 2\n\ndef gen(n):\n    for i in range(n):\n        yield helper(i)\n", "gen(helper(2))", schemas.StatusOK, "gen"},
		{"def f(xs):\n    return map(lambda x: x * x, xs)\n", "f([1, 2, 3])", schemas.StatusOK, "f.<locals>.<lambda>"},
		{count, "Count(3)", schemas.StatusOK, "Count.__next__"},
		{"def nat():\n    i = 0\n    while True:\n        yield i\n        i += 1\n", "nat()", schemas.StatusOK, "nat"},
		{"def g():\n    yield 1\n    raise ValueError('x')\n", "g()", schemas.StatusException, "g"},
	}
	for i, p := range progs {
		res := traceCode(t, p.code, p.call)
		if res.Status != p.status || res.Consume == nil {
			t.Fatalf("program %d: %s %s, consume %+v", i, res.Status, res.Detail, res.Consume)
		}
		c := res.Consume
		fwd := forward(t, res)
		checkTree(t, i, res, fwd)
		first := fwd.Order[c.Start]
		if first.Parent != nil || first.Kind != debugger.KindCall || first.Event().Func != p.firstFunc {
			t.Fatalf("program %d: the consumption starts at %s of %s (top level: %v)", i, first.Kind, first.Event().Func, first.Parent == nil)
		}
		item := debugger.Item{Code: p.code, Call: p.call, Events: res.Events, Blocks: res.Blocks, Status: res.Status, Consume: c}

		wrapped, code, err := item.Tree(debugger.Forward)
		if err != nil {
			t.Fatal(err)
		}
		checkTree(t, i, nil, wrapped)
		if !strings.HasSuffix(code, "\n\nfrom itertools import islice\n\ndef main():\n    return list(islice("+p.call+", 8))\n") {
			t.Errorf("program %d: CODE context ends %q", i, code[max(0, len(code)-80):])
		}
		line := wrapped.Top[1]
		if line.Event().Src != "    return list(islice("+p.call+", 8))" || len(line.Children) != len(fwd.Top) {
			t.Fatalf("program %d: main's line %q holds %d states", i, line.Event().Src, len(line.Children))
		}
		last := wrapped.Top[len(wrapped.Top)-1]
		if p.status == schemas.StatusOK && (last.Kind != debugger.KindReturn || *last.Event().Value != res.Value || !strings.HasPrefix(res.Value, "[")) {
			t.Errorf("program %d: main returns %v, the run's value is %s", i, last.Event().Value, res.Value)
		}
		// step_over from one resumption's return lands on the next resumption's call.
		for k, n := range line.Children[:len(line.Children)-1] {
			if n.Kind != debugger.KindReturn {
				continue
			}
			next, err := wrapped.Apply(n, debugger.StepOver, "")
			if err != nil || next != line.Children[k+1] || next.Kind != debugger.KindCall {
				t.Fatalf("program %d: step_over from a top-level return went to %v", i, next)
			}
		}
		// step_into alone gives every event, between main's call and line and main's end.
		traj, err := debugger.Sample(wrapped, code, debugger.StepIntoPolicy(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(res.Events) + len(wrapped.Top); len(traj.Steps) != want {
			t.Errorf("program %d: step_into gives %d states, want %d", i, len(traj.Steps), want)
		}

		// Started at the function (forward_start: function): the first state inside main's line,
		// every event then main's return.
		item.Start = schemas.ForwardStartFunction
		fromFunc, fcode, err := item.Tree(debugger.Forward)
		if err != nil {
			t.Fatal(err)
		}
		if fromFunc.Start() != fromFunc.Top[1].Children[0] || fcode != code {
			t.Errorf("program %d: function start at %s %q", i, fromFunc.Start().Kind, fromFunc.Start().Src())
		}
		ftraj, err := debugger.Sample(fromFunc, fcode, debugger.StepIntoPolicy(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(res.Events) + len(wrapped.Top) - 2; len(ftraj.Steps) != want {
			t.Errorf("program %d: step_into from the function gives %d states, want %d", i, len(ftraj.Steps), want)
		}
		item.Start = ""

		inv, _, err := item.Tree(debugger.Inverse)
		if err != nil {
			t.Fatalf("program %d: %v", i, err)
		}
		start := 0
		for k, n := range fwd.Top {
			if n == first {
				start = k
			}
		}
		checkInverse(t, i, fwd, inv, start)
		if end := inv.Top[len(inv.Top)-1]; end.Event().Frame != first.Event().Frame || end.Event().Lineno != first.Event().Lineno {
			t.Errorf("program %d: the inverse ends at %s of %s line %d, not at the consumption's first call", i, end.Kind, end.Event().Func, end.Event().Lineno)
		}
		for seed := uint64(0); seed < 10; seed++ {
			for _, tr := range []*debugger.Tree{wrapped, inv} {
				traj, err := debugger.Sample(tr, code, debugger.PaperPolicy(), seed, nil)
				if err != nil {
					t.Fatal(err)
				}
				checkTrajectory(t, i, tr, traj)
			}
		}
	}
}
