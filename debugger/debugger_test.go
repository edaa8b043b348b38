package debugger_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

var (
	sbOnce sync.Once
	sb     *sandbox.Sandbox
	sbErr  error
)

func traceCode(t testing.TB, code, call string) *sandbox.Result {
	t.Helper()
	sbOnce.Do(func() { sb, sbErr = sandbox.New(context.Background(), sandbox.Config{}) })
	if sbErr != nil {
		t.Fatalf("sandbox: %v", sbErr)
	}
	res, err := sb.Run(context.Background(), sandbox.Request{Code: code, Call: call})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func forward(t testing.TB, res *sandbox.Result) *debugger.Tree {
	t.Helper()
	exit, err := debugger.ExitFor(res.Status)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := debugger.BuildForward(res.Events, exit)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

const sqCode = "def sq(x):\n    y = x * x\n    return y\n\ndef main():\n    a = sq(3)\n    b = a + 1\n    return b\n"

// TestWorkedExample replays the worked example of the paper notes (§4.3) on a real trace.
func TestWorkedExample(t *testing.T) {
	res := traceCode(t, sqCode, "main()")
	tr := forward(t, res)
	traj, err := debugger.Replay(tr, debugger.CodeContext(sqCode, res.Blocks, tr, ""),
		[]debugger.Action{debugger.StepInto, debugger.StepInto, debugger.StepOver, debugger.StepReturn,
			debugger.StepOver, debugger.Breakpoint, debugger.Continue},
		[]string{5: "    return b"})
	if err != nil {
		t.Fatal(err)
	}
	type shown struct {
		kind   debugger.Kind
		src    string
		locals string
		elided bool
		value  string
	}
	want := []shown{
		{debugger.KindCall, "def main():", "[]", false, ""},
		{debugger.KindLine, "    a = sq(3)", "[]", false, ""},
		{debugger.KindCall, "def sq(x):", "[{x 3}]", false, ""},
		{debugger.KindLine, "    y = x * x", "[]", true, ""},
		{debugger.KindReturn, "    return y", "[]", false, "9"},
		{debugger.KindLine, "    b = a + 1", "[{a 9}]", false, ""},
		{debugger.KindLine, "    return b", "[{a 9} {b 10}]", false, ""},
	}
	if len(traj.Steps) != len(want) || traj.Exit != debugger.ExitNormal {
		t.Fatalf("%d steps, exit %s", len(traj.Steps), traj.Exit)
	}
	for i, w := range want {
		s := traj.Steps[i].State
		got := shown{s.Kind, s.Src, fmt.Sprint(s.Shown), s.Elided, ""}
		if s.Value != nil {
			got.value = *s.Value
			got.locals = "[]"
		}
		if got != w {
			t.Errorf("step %d: %+v, want %+v", i, got, w)
		}
	}
	if traj.Code != sqCode {
		t.Errorf("CODE context %q", traj.Code)
	}
}

// programs returns random programs with a call each, and the CruxEval-like fixed ones.
func programs(n int) [][2]string {
	rng := debugger.NewRand(7)
	out := [][2]string{{sqCode, "main()"}}
	for i := 0; i < n; i++ {
		out = append(out, [2]string{randomProgram(rng), fmt.Sprintf("f(%d)", rng.IntN(20))})
	}
	return out
}

// TestTreeProperties checks the MDP's transitions on the traces of many random programs.
func TestTreeProperties(t *testing.T) {
	n := 150
	if testing.Short() {
		n = 20
	}
	for i, p := range programs(n) {
		res := traceCode(t, p[0], p[1])
		if res.Status != schemas.StatusOK && res.Status != schemas.StatusException {
			t.Fatalf("program %d: %s %s\n%s", i, res.Status, res.Detail, p[0])
		}
		fwd := forward(t, res)
		checkTree(t, i, res, fwd)
		wrapped := debugger.WrapMain(forward(t, res), p[1])
		checkTree(t, i, nil, wrapped)
		inv, err := debugger.BuildInverse(forward(t, res))
		if err != nil {
			t.Fatalf("program %d: %v", i, err)
		}
		checkInverse(t, i, fwd, inv, -1)
		// Every policy's trajectories are well formed and reproducible.
		for seed := uint64(0); seed < 5; seed++ {
			for _, tr := range []*debugger.Tree{wrapped, inv} {
				a, err := debugger.Sample(tr, "ctx\n", debugger.PaperPolicy(), seed, nil)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := debugger.Sample(tr, "ctx\n", debugger.PaperPolicy(), seed, nil)
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("program %d seed %d: same seed, different trajectories", i, seed)
				}
				checkTrajectory(t, i, tr, a)
			}
		}
	}
}

// checkTree checks the forward transitions from every node.
func checkTree(t *testing.T, prog int, res *sandbox.Result, tr *debugger.Tree) {
	t.Helper()
	// step_into alone reproduces the recorded event sequence.
	if res != nil {
		traj, err := debugger.Sample(tr, "", debugger.StepIntoPolicy(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(traj.Steps) != len(res.Events) {
			t.Fatalf("program %d: step_into gives %d states for %d events", prog, len(traj.Steps), len(res.Events))
		}
		for i, s := range traj.Steps {
			ev := res.Events[i]
			if string(s.State.Kind) != ev.Event || s.State.Lineno != ev.Lineno || s.State.Frame != ev.Frame ||
				!reflect.DeepEqual(s.State.Locals, ev.Locals) {
				t.Fatalf("program %d: step_into state %d is %s:%d, event is %s:%d", prog, i, s.State.Kind, s.State.Lineno, ev.Event, ev.Lineno)
			}
			// The tree depth is the call-stack depth.
			if s.State.Depth != ev.Depth {
				t.Fatalf("program %d: state %d depth %d, event depth %d", prog, i, s.State.Depth, ev.Depth)
			}
		}
	}
	for idx, n := range tr.Order {
		// step_over never goes deeper.
		if next, _ := tr.Apply(n, debugger.StepOver, ""); next != nil && next.Depth > n.Depth {
			t.Fatalf("program %d: step_over from depth %d went to depth %d", prog, n.Depth, next.Depth)
		}
		// step_return lands on a return of the same call.
		if tr.Valid(n, debugger.StepReturn) {
			next, _ := tr.Apply(n, debugger.StepReturn, "")
			if next == nil {
				if tr.Exit != debugger.ExitNever {
					t.Fatalf("program %d: step_return from %s:%d reached the exit of a complete trace", prog, n.Kind, n.Event().Lineno)
				}
			} else if next.Kind != debugger.KindReturn || next.Event().Frame != n.Event().Frame || next.Depth != n.Depth {
				t.Fatalf("program %d: step_return from frame %d landed on %s of frame %d", prog, n.Event().Frame, next.Kind, next.Event().Frame)
			}
		}
		// breakpoint lands on the first future node with that source, or on the exit.
		for _, target := range []string{n.Event().Src, "    return n", "no such line"} {
			next, _ := tr.Apply(n, debugger.Breakpoint, target)
			var want *debugger.Node
			for _, m := range tr.Order[idx+1:] {
				if m.Event().Src == target {
					want = m
					break
				}
			}
			if next != want {
				t.Fatalf("program %d: breakpoint %q from node %d", prog, target, idx)
			}
		}
		if next, _ := tr.Apply(n, debugger.Continue, ""); next != nil {
			t.Fatal("continue did not exit")
		}
	}
}

// checkInverse checks that the inverse tree agrees with the forward one state for state, over the
// top-level states of fwd from index start on (-1: the entry scope, the last top-level call).
func checkInverse(t *testing.T, prog int, fwd, inv *debugger.Tree, start int) {
	t.Helper()
	// Forward states of the entry scope, in recorded order.
	if start < 0 {
		start = 0
		for i, n := range fwd.Top {
			if n.Kind == debugger.KindCall {
				start = i
			}
		}
	}
	var want []*debugger.Node
	var collect func([]*debugger.Node)
	collect = func(level []*debugger.Node) {
		for _, n := range level {
			want = append(want, n)
			collect(n.Children)
		}
	}
	collect(fwd.Top[start:])
	// The inverse order without the inv_line_call duplicates is the forward order reversed.
	var got []*debugger.Node
	for _, n := range inv.Order {
		if n.Kind != debugger.KindInvLineCall {
			got = append(got, n)
		} else if len(n.Children) == 0 {
			t.Fatalf("program %d: inv_line_call without callees", prog)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("program %d: %d inverse states for %d forward ones", prog, len(got), len(want))
	}
	for i := range got {
		f := want[len(want)-1-i]
		if !reflect.DeepEqual(got[i].Event(), f.Event()) || got[i].Depth != f.Depth {
			t.Fatalf("program %d: inverse state %d (%s) differs from forward %s", prog, i, got[i].Kind, f.Kind)
		}
	}
	if inv.Order[0].Kind != debugger.KindInvReturn || inv.Top[len(inv.Top)-1].Kind != debugger.KindInvCall {
		t.Fatalf("program %d: inverse runs %s ... %s", prog, inv.Order[0].Kind, inv.Top[len(inv.Top)-1].Kind)
	}
	for _, n := range inv.Order {
		// inv_step_call goes to the current call's inv_call, at the same depth.
		if inv.Valid(n, debugger.InvStepCall) {
			next, _ := inv.Apply(n, debugger.InvStepCall, "")
			if next == nil || next.Kind != debugger.KindInvCall || next.Event().Frame != n.Event().Frame {
				t.Fatalf("program %d: inv_step_call from %s", prog, n.Kind)
			}
		}
		if next, _ := inv.Apply(n, debugger.InvStepOver, ""); next != nil && next.Depth > n.Depth {
			t.Fatalf("program %d: inv_step_over went deeper", prog)
		}
	}
}

// checkTrajectory checks a sampled trajectory's shape and its LOCALS rules.
func checkTrajectory(t *testing.T, prog int, tr *debugger.Tree, traj debugger.Trajectory) {
	t.Helper()
	if len(traj.Steps) == 0 || traj.Exit == "" {
		t.Fatalf("program %d: empty trajectory", prog)
	}
	for i, s := range traj.Steps {
		if s.Action == "" {
			t.Fatalf("program %d: step %d without action", prog, i)
		}
		st := s.State
		if st.Kind.HasArgs() != (st.Value != nil) {
			t.Fatalf("program %d: step %d %s value %v", prog, i, st.Kind, st.Value)
		}
		if st.Kind.HasArgs() {
			continue
		}
		full := i == 0 || st.Kind == debugger.KindCall || st.Kind == debugger.KindInvCall ||
			traj.Steps[i-1].Action == debugger.Breakpoint || traj.Steps[i-1].State.Frame != st.Frame
		if full && (st.Elided || !reflect.DeepEqual(st.Shown, append(schemas.Locals{}, st.Locals...))) {
			t.Fatalf("program %d: step %d (%s) should show the full locals: %v vs %v", prog, i, st.Kind, st.Shown, st.Locals)
		}
		// Rebuilding from the previous state's locals and the diff gives the full locals back.
		if !full {
			base := traj.Steps[i-1].State.Locals
			for _, v := range st.Locals {
				got, inDiff := st.Shown.Get(v.Name)
				old, inBase := base.Get(v.Name)
				if inDiff && got != v.Value || !inDiff && (!inBase || old != v.Value) {
					t.Fatalf("program %d: step %d diff loses %s", prog, i, v.Name)
				}
			}
		}
	}
	if tr.Direction == debugger.Forward && traj.Exit == debugger.InvExitEntry || tr.Direction == debugger.Inverse && traj.Exit != debugger.InvExitEntry {
		t.Fatalf("program %d: %s trajectory ends in %s", prog, tr.Direction, traj.Exit)
	}
}

func TestScopeAndEntrySampling(t *testing.T) {
	code := "def leaf(x):\n    return x + 1\n\ndef mid(x):\n    y = leaf(x)\n    return leaf(y)\n\ndef f(n):\n    a = mid(n)\n    b = mid(a)\n    return a + b\n"
	res := traceCode(t, code, "f(1)")
	fwd := forward(t, res)
	counts := map[string]int{}
	rng := debugger.NewRand(1)
	for i := 0; i < 400; i++ {
		sub, err := debugger.SampleEntry(fwd, rng)
		if err != nil {
			t.Fatal(err)
		}
		start := sub.Start()
		counts[start.Event().Func]++
		if start.Kind != debugger.KindCall || start.Depth != 0 || sub.Exit != debugger.ExitNormal {
			t.Fatalf("entry %s at depth %d, exit %s", start.Kind, start.Depth, sub.Exit)
		}
		last := sub.Top[len(sub.Top)-1]
		if last.Kind != debugger.KindReturn || last.Event().Frame != start.Event().Frame {
			t.Fatalf("scope of %s ends with %s", start.Event().Func, last.Kind)
		}
		ctx := debugger.CodeContext(code, res.Blocks, sub, "")
		if start.Event().Func == "leaf" && ctx != "def leaf(x):\n    return x + 1\n" {
			t.Fatalf("CODE context of leaf: %q", ctx)
		}
	}
	// 7 calls: f, 2 x mid, 4 x leaf, drawn uniformly.
	if counts["f"] < 25 || counts["mid"] < 70 || counts["leaf"] < 170 {
		t.Errorf("entry counts %v", counts)
	}
}

func TestExitsAndTruncation(t *testing.T) {
	res := traceCode(t, "def g(x):\n    raise KeyError(x)\n\ndef f(x):\n    return g(x)\n", "f(1)")
	if res.Status != schemas.StatusException {
		t.Fatal(res.Status)
	}
	w := debugger.WrapMain(forward(t, res), "f(1)")
	traj, err := debugger.Sample(w, "", debugger.StepIntoPolicy(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if traj.Exit != debugger.ExitError {
		t.Fatalf("exit %s", traj.Exit)
	}
	// main sees the exception too, then leaves by unwinding.
	n := len(traj.Steps)
	if traj.Steps[n-2].State.Kind != debugger.KindException || traj.Steps[n-2].State.Func != "main" {
		t.Fatalf("main's last states: %v", traj.Steps[n-2].State)
	}

	loop := sandbox.Request{Code: "def f():\n    i = 0\n    while True:\n        i += 1\n", Call: "f()", Limits: sandbox.Limits{TraceEvents: 200}}
	sbOnce.Do(func() { sb, sbErr = sandbox.New(context.Background(), sandbox.Config{}) })
	lres, err := sb.Run(context.Background(), loop)
	if err != nil || lres.Status != schemas.StatusEventLimit {
		t.Fatalf("%v %v", err, lres.Status)
	}
	ft := forward(t, lres)
	if ft.Exit != debugger.ExitNever {
		t.Fatal(ft.Exit)
	}
	// step_return in a call that never returns reaches exit_never.
	next, _ := ft.Apply(ft.Start(), debugger.StepReturn, "")
	if next != nil {
		t.Fatal("step_return found a return in a cut-off call")
	}
	if _, err := debugger.BuildInverse(ft); err != debugger.ErrNoInverse {
		t.Fatalf("inverse of a cut-off run: %v", err)
	}
	for _, s := range []schemas.Status{schemas.StatusKilled, schemas.StatusSandboxError, schemas.StatusInvalid} {
		if _, err := debugger.ExitFor(s); err == nil {
			t.Errorf("ExitFor(%s) gave no error", s)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, p := range []debugger.Policy{debugger.PaperPolicy(), debugger.StepIntoPolicy()} {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	bad := debugger.PaperPolicy()
	bad.Forward[0].Actions[debugger.InvStepCall] = 1
	if err := bad.Validate(); err == nil {
		t.Error("inverse action in a forward component accepted")
	}
	bad = debugger.PaperPolicy()
	bad.Inverse = nil
	if err := bad.Validate(); err == nil {
		t.Error("policy without inverse actions accepted")
	}
	if _, err := debugger.PolicyByName("nope"); err == nil {
		t.Error("unknown policy accepted")
	}
}

// TestPolicyMixture checks the empirical action frequencies against Table A.1's mixture.
func TestPolicyMixture(t *testing.T) {
	res := traceCode(t, "def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n", "f(200)")
	tr := debugger.WrapMain(forward(t, res), "f(200)")
	counts := map[debugger.Action]int{}
	total := 0
	for seed := uint64(0); seed < 300; seed++ {
		traj, err := debugger.Sample(tr, "def f(n):\n", debugger.PaperPolicy(), seed, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range traj.Steps {
			if s.State.Kind != debugger.KindReturn { // step_return is masked at returns
				counts[s.Action]++
				total++
			}
		}
	}
	// Component 1 renormalised (sums to 0.8 in the table) mixed 50/50 with component 2.
	want := map[debugger.Action]float64{debugger.StepInto: 0.5*0.35/0.8 + 0.25, debugger.StepOver: 0.5*0.1/0.8 + 0.25,
		debugger.StepReturn: 0.5 * 0.2 / 0.8, debugger.Breakpoint: 0.5 * 0.1 / 0.8, debugger.Continue: 0.5 * 0.05 / 0.8}
	for a, p := range want {
		got := float64(counts[a]) / float64(total)
		if got < p*0.8 || got > p*1.2 {
			t.Errorf("%s: frequency %.3f, want about %.3f", a, got, p)
		}
	}
}

// TestCaps checks that a capped trajectory is finished as fast as the MDP allows and stays within
// its cap: continue forward; inv_step_call / inv_step_over back to the entry inverse.
func TestCaps(t *testing.T) {
	code := "def g(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n\ndef f(n):\n    t = 0\n    for k in range(n):\n        t += g(k)\n    return t\n"
	res := traceCode(t, code, "f(30)")
	item := debugger.Item{Code: code, Call: "f(30)", Events: res.Events, Blocks: res.Blocks, Status: res.Status}
	p := debugger.StepIntoPolicy()
	p.MaxActions = 10
	fwd, err := item.Sample(debugger.Forward, p, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fwd.Actions() != 10 || fwd.Steps[9].Action != debugger.Continue || fwd.Exit != debugger.ExitNormal {
		t.Fatalf("forward: %d actions, last %s, exit %s", fwd.Actions(), fwd.Steps[len(fwd.Steps)-1].Action, fwd.Exit)
	}
	inv, err := item.Sample(debugger.Inverse, p, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Within the cap plus the walk back up (at most two actions a level).
	if inv.Actions() > 10+2*4 || inv.Exit != debugger.InvExitEntry {
		t.Fatalf("inverse: %d actions, exit %s", inv.Actions(), inv.Exit)
	}
	p = debugger.StepIntoPolicy()
	p.MaxTokens = 100
	cost := func(debugger.Step) int { return 10 }
	fwd, _ = item.Sample(debugger.Forward, p, 0, cost)
	if fwd.Actions() != 11 { // 10 steps of 10 tokens reach the cap; the 11th continues
		t.Fatalf("token cap: %d actions", fwd.Actions())
	}
}
