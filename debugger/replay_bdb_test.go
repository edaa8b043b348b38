package debugger_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/replay"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// replayOnBdb renders traj as a row would be, replays the parsed row on bdb in the sandbox and
// compares.
func replayOnBdb(t *testing.T, code, call, start string, traj debugger.Trajectory) schemas.ReplayOutcome {
	return replayOnBdbWith(t, code, call, start, traj, sandbox.Limits{})
}

// replayOnBdbWith is replayOnBdb for a trajectory started at start (a spec's forward_start), with
// limits.
func replayOnBdbWith(t *testing.T, code, call, start string, traj debugger.Trajectory, lim sandbox.Limits) schemas.ReplayOutcome {
	t.Helper()
	text, err := tokenize.Render(traj)
	if err != nil {
		t.Fatal(err)
	}
	row, err := tokenize.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	req, err := replay.RequestOf(crawl.Item{Code: code, Filename: "main.py", Call: call}, row, start)
	if err != nil {
		t.Fatal(err)
	}
	req.Limits = lim
	res, err := sb.Replay(context.Background(), req)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	return replay.CompareFunction(row, res.Events, res.Status, res.Detail, start)
}

// TestReplayOnBdb is issue 16's test 4 (b): the property-test programs (randomProgram) and the
// consumed-iterator programs, traced, their forward trajectories sampled with the paper's policy
// and replayed on Python's bdb: every trajectory agrees, or differs by a named kind
// (docs/debugger.md, "Replay on bdb"), whose counts are pinned so that a new difference, or a
// named one that goes away, is seen.
func TestReplayOnBdb(t *testing.T) {
	if testing.Short() {
		t.Skip("trajectories replayed on bdb: long integration test; run without -short")
	}
	progs := programs(40)
	progs = append(progs,
		[2]string{"def gen(n):\n    total = 0\n    for i in range(n):\n        total += i\n        yield total\n    return total\n", "gen(4)"},
		[2]string{"def f(xs):\n    return map(lambda x: x * x, xs)\n", "f([1, 2, 3])"},
		[2]string{"def g():\n    yield 1\n    raise ValueError('x')\n", "g()"},
		[2]string{"def h(x):\n    try:\n        return 10 // x\n    finally:\n        x = 1\n", "h(0)"},
		[2]string{"import functools\n\ndef deco(*args):\n    def d(fn):\n        @functools.wraps(fn)\n        def w(*a):\n            return fn(*a)\n        return w\n    return d\n\n" +
			"@deco(\n    1,\n)\ndef g(x):\n    return x + 1\n\n@deco()\ndef f(n):\n    return g(n) * 2\n", "f(3)"},
	)
	const seeds = 6
	// The named differences these programs meet: breakpoints whose first future match is a
	// return state (`return map(...)`) or a call (a `def` line), and step_over/step_return at a
	// generator's yield or unwinding return. No mismatch, no tampering. Started at the function's
	// call (forward_start: function), more trajectories run inside the function: more
	// generators' yields, and breakpoints on main's line `return CALL` taken from inside the
	// function, which land on main's return state (pdb breaks at lines only).
	wants := map[string]map[string]int{
		schemas.ForwardStartMain:     {"agreed": 267, replay.BreakpointNonLine: 2, replay.Generator: 7},
		schemas.ForwardStartFunction: {"agreed": 191, replay.BreakpointNonLine: 58, replay.Generator: 27},
	}
	for _, start := range []string{schemas.ForwardStartMain, schemas.ForwardStartFunction} {
		t.Run(start, func(t *testing.T) { replayPrograms(t, progs, seeds, start, wants[start]) })
	}
}

// replayPrograms replays forward paper-policy trajectories of progs started at start, seeds per
// program, on bdb and checks the outcomes' counts against want.
func replayPrograms(t *testing.T, progs [][2]string, seeds uint64, start string, want map[string]int) {
	counts := map[string]int{}
	examples := map[string]string{}
	for i, p := range progs {
		res := traceCode(t, p[0], p[1])
		item := debugger.Item{Code: p[0], Call: p[1], Events: res.Events, Blocks: res.Blocks, Status: res.Status, Consume: res.Consume,
			Start: start}
		tree, code, err := item.Tree(debugger.Forward)
		if err != nil {
			t.Fatalf("program %d: %v", i, err)
		}
		for seed := uint64(0); seed < seeds; seed++ {
			traj, err := debugger.Sample(tree, code, debugger.PaperPolicy(), seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := replayOnBdb(t, p[0], p[1], start, traj)
			if !out.Replayed {
				t.Fatalf("program %d seed %d: not replayed: %s", i, seed, out.Detail)
			}
			k := "agreed"
			if !out.Agreed {
				k = out.Kind
			}
			counts[k]++
			if _, ok := examples[k]; !ok && k != "agreed" {
				examples[k] = fmt.Sprintf("program %d seed %d: %s\n%s", i, seed, out.Detail, p[0])
			}
		}
	}
	var keys []string
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, counts[k])
	}
	t.Logf("%d trajectories: %s", len(progs)*int(seeds), b.String())
	for k, ex := range examples {
		t.Logf("first %s: %s", k, ex)
	}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("replay outcomes %s, want %v", b.String(), want)
	}
}

// TestReplayCruxEvalOnBdb replays one forward paper-policy trajectory of each of the 800
// CruxEval functions on bdb, started at main's call and at the function's (forward_start): named
// kinds are expected, with pinned counts; an unexplained mismatch or tampering is not.
func TestReplayCruxEvalOnBdb(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	rows := cruxeval.Rows(t)
	n := len(rows)
	starts := []string{schemas.ForwardStartMain, schemas.ForwardStartFunction}
	counts := map[string]map[string]int{}
	for _, start := range starts {
		counts[start] = map[string]int{}
	}
	for i, r := range rows[:n] {
		call := sandbox.CallFromInput("f", r.Input)
		res := traceCode(t, r.Code, call)
		for _, start := range starts {
			item := debugger.Item{Code: r.Code, Call: call, Events: res.Events, Blocks: res.Blocks, Status: res.Status, Consume: res.Consume,
				Start: start}
			traj, err := item.Sample(debugger.Forward, debugger.PaperPolicy(), uint64(i), nil)
			if err != nil {
				t.Fatalf("row %d: %v", i, err)
			}
			out := replayOnBdb(t, r.Code, call, start, traj)
			k := "agreed"
			if !out.Agreed {
				k = out.Kind
			}
			counts[start][k]++
			if k == replay.Mismatch || k == replay.Tampered {
				t.Errorf("row %d, start %s: %s: %s\n%s", i, start, k, out.Detail, r.Code)
			}
		}
	}
	t.Logf("%d CruxEval trajectories per start: %v", n, counts)
	// Measured: breakpoints on a `return` line taken at that line, or on a `def` line, and one
	// step_return in a generator expression. Started at the function's call (the default), more
	// breakpoints target main's line `return f(...)` from inside f (landing on main's return), and
	// two rows show a lambda of the input as the tracer made it (wrapper_scope).
	want := map[string]map[string]int{
		schemas.ForwardStartMain:     {"agreed": 730, replay.BreakpointNonLine: 69, replay.Generator: 1},
		schemas.ForwardStartFunction: {"agreed": 688, replay.BreakpointNonLine: 107, replay.Generator: 3, replay.WrapperScope: 2},
	}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("replay outcomes %v, want %v", counts, want)
	}
}

// TestReplayCutOff replays trajectories of runs cut off by the trace's event limit: the replay
// counts the item's events as the tracer does and ends at the same event (exit_never).
func TestReplayCutOff(t *testing.T) {
	sbOnce.Do(func() { sb, sbErr = sandbox.New(context.Background(), sandbox.Config{}) })
	if sbErr != nil {
		t.Fatalf("sandbox: %v", sbErr)
	}
	lim := sandbox.Limits{TraceEvents: 200}
	progs := [][2]string{
		{"def f():\n    i = 0\n    while True:\n        i += 1\n", "f()"},
		{"def g(n):\n    return n + 1\n\ndef f():\n    i = 0\n    while True:\n        i = g(i)\n", "f()"},
	}
	for i, p := range progs {
		res, err := sb.Run(context.Background(), sandbox.Request{Code: p[0], Call: p[1], Limits: lim})
		if err != nil || res.Status != schemas.StatusEventLimit {
			t.Fatalf("program %d: %v %s", i, err, res.Status)
		}
		item := debugger.Item{Code: p[0], Call: p[1], Events: res.Events, Blocks: res.Blocks, Status: res.Status}
		tree, code, err := item.Tree(debugger.Forward)
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(0); seed < 8; seed++ {
			traj, err := debugger.Sample(tree, code, debugger.PaperPolicy(), seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			if traj.Exit != debugger.ExitNever {
				t.Fatalf("program %d seed %d: exit %s", i, seed, traj.Exit)
			}
			// A cut tree draws every breakpoint among the lines ahead, `def` lines included: the
			// breakpoint lands on a call, which bdb does not stop at (a named difference).
			if out := replayOnBdbWith(t, p[0], p[1], schemas.ForwardStartMain, traj, lim); !out.Agreed && out.Kind != replay.BreakpointNonLine {
				t.Errorf("program %d seed %d: %+v", i, seed, out)
			}
		}
	}
}
