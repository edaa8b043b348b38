package debugger_test

import (
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

// startEvents is the trace of f(g(1)) with g's call among the arguments: g's call, line,
// return, then f's call, line, return.
func startEvents() []schemas.Event {
	one, two := "2", "4"
	ev := func(kind, fn, src string, line, frame int, value *string) schemas.Event {
		return schemas.Event{Event: kind, Func: fn, File: "main.py", Src: src, Lineno: line, Frame: frame,
			Locals: schemas.Locals{{Name: "x", Value: "1"}}, Value: value}
	}
	return []schemas.Event{
		ev("call", "g", "def g(x):", 1, 1, nil), ev("line", "g", "    return x + 1", 2, 1, nil), ev("return", "g", "    return x + 1", 2, 1, &one),
		ev("call", "f", "def f(x):", 4, 2, nil), ev("line", "f", "    return x * 2", 5, 2, nil), ev("return", "f", "    return x * 2", 5, 2, &two),
	}
}

// TestStartAtFunction checks where forward trajectories start: at main's call by default, at the
// first call inside main's line with Start function, the tree and the CODE context (with the
// wrapper) being the same either way; and that step_into from the last call's return leads to
// main's return, then to the exit.
func TestStartAtFunction(t *testing.T) {
	code := "def g(x):\n    return x + 1\n\ndef f(x):\n    return x * 2\n"
	blocks := []schemas.Block{{Start: 1, End: 2}, {Start: 4, End: 5}}
	item := debugger.Item{Code: code, Call: "f(g(1))", Events: startEvents(), Blocks: blocks, Status: schemas.StatusOK}
	mainTree, mainCode, err := item.Tree(debugger.Forward)
	if err != nil {
		t.Fatal(err)
	}
	if s := mainTree.Start(); s.Kind != debugger.KindCall || s.Src() != "def main():" {
		t.Fatalf("default start: %s %q", s.Kind, s.Src())
	}
	for _, start := range []string{"", schemas.ForwardStartMain, schemas.ForwardStartFunction} {
		item.Start = start
		tree, code, err := item.Tree(debugger.Forward)
		if err != nil {
			t.Fatal(err)
		}
		if code != mainCode || len(tree.Order) != len(mainTree.Order) {
			t.Errorf("start %q: the CODE context or the tree changed", start)
		}
		want := "def main():"
		if start == schemas.ForwardStartFunction {
			want = "def g(x):" // the first call inside main's line
		}
		s := tree.Start()
		if s.Kind != debugger.KindCall || s.Src() != want {
			t.Errorf("start %q: starts at %s %q, want the call %q", start, s.Kind, s.Src(), want)
		}
		traj, err := debugger.Sample(tree, code, debugger.StepIntoPolicy(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantStates := len(tree.Order)
		if start == schemas.ForwardStartFunction {
			wantStates -= 2 // main's call and line
		}
		if len(traj.Steps) != wantStates || traj.Exit != debugger.ExitNormal {
			t.Errorf("start %q: step_into gives %d states (exit %s), want %d", start, len(traj.Steps), traj.Exit, wantStates)
		}
		first := traj.Steps[0].State
		if start == schemas.ForwardStartFunction && (len(first.Shown) != 1 || first.Shown[0].Name != "x") {
			t.Errorf("start %q: the first state shows %v, want the call's full locals", start, first.Shown)
		}
		last := traj.Steps[len(traj.Steps)-1].State
		if last.Kind != debugger.KindReturn || last.Func != debugger.MainFunc || *last.Value != "4" {
			t.Errorf("start %q: the last state is %s of %s, want main's return of 4", start, last.Kind, last.Func)
		}
	}
	// Inverse trees are not affected.
	item.Start = schemas.ForwardStartFunction
	inv, _, err := item.Tree(debugger.Inverse)
	if err != nil {
		t.Fatal(err)
	}
	if s := inv.Start(); s != inv.Order[0] || s.Kind != debugger.KindInvReturn {
		t.Errorf("inverse start: %s", s.Kind)
	}
}

// TestEntrySource checks how a repository-level entry's function source is found: by file and
// qualified name, or for a lambda the innermost function holding its line, or none.
func TestEntrySource(t *testing.T) {
	funcs := []schemas.FuncSource{
		{File: "/r/m.py", QualName: "C", FirstLine: 1, LastLine: 9, Source: "class C:\n..."},
		{File: "/r/m.py", QualName: "C.run", FirstLine: 2, LastLine: 5, Source: "    def run(self):\n..."},
		{File: "/r/n.py", QualName: "C.run", FirstLine: 2, LastLine: 5, Source: "other"},
	}
	for _, tc := range []struct {
		e    debugger.Entry
		want string
		ok   bool
	}{
		{debugger.Entry{File: "/r/m.py", QualName: "C.run", Line: 2}, "C.run", true},
		{debugger.Entry{File: "/r/m.py", QualName: "C.run.<locals>.<lambda>", Line: 4}, "C.run", true},
		{debugger.Entry{File: "/r/m.py", QualName: "<listcomp>", Line: 7}, "C", true},
		{debugger.Entry{File: "/r/m.py", QualName: "h", Line: 20}, "", false},
		{debugger.Entry{File: "/r/o.py", QualName: "C.run", Line: 2}, "", false},
	} {
		got, ok := debugger.EntrySource(funcs, tc.e)
		if ok != tc.ok || got.QualName != tc.want || (ok && got.File != tc.e.File) {
			t.Errorf("%+v: %s %s %v, want %s %v", tc.e, got.File, got.QualName, ok, tc.want, tc.ok)
		}
	}
}

// TestStartAtFunctionMethod checks that a method item's forward trajectories (call
// Cls(args).meth(args), testcalls' form) start at the method's call, the function under study,
// not at the constructor's that builds its instance first; that the CODE context shows the class
// and main's return the method's value; and that a plain call with a traced argument still starts
// at the argument's call (TestStartAtFunction).
func TestStartAtFunctionMethod(t *testing.T) {
	code := "class Cls:\n    def __init__(self, a):\n        self.a = a\n\n    def meth(self, b):\n        return self.a + b\n"
	blocks := []schemas.Block{{Start: 1, End: 6}}
	none, three := "None", "3"
	ev := func(kind, fn, src string, line, frame int, value *string) schemas.Event {
		return schemas.Event{Event: kind, Func: fn, File: "m.py", Src: src, Lineno: line, Frame: frame,
			Locals: schemas.Locals{{Name: "self", Value: "<Cls>"}}, Value: value}
	}
	events := []schemas.Event{
		ev("call", "Cls.__init__", "    def __init__(self, a):", 2, 1, nil),
		ev("line", "Cls.__init__", "        self.a = a", 3, 1, nil),
		ev("return", "Cls.__init__", "        self.a = a", 3, 1, &none),
		ev("call", "Cls.meth", "    def meth(self, b):", 5, 2, nil),
		ev("line", "Cls.meth", "        return self.a + b", 6, 2, nil),
		ev("return", "Cls.meth", "        return self.a + b", 6, 2, &three),
	}
	for _, call := range []string{"Cls(1).meth(2)", "Cls(a=1).meth(2)", "Cls((1, 2)).meth('x(')"} {
		item := debugger.Item{Code: code, Call: call, Events: events, Blocks: blocks, Status: schemas.StatusOK,
			Value: "3", Start: schemas.ForwardStartFunction}
		tree, ctx, err := item.Tree(debugger.Forward)
		if err != nil {
			t.Fatal(err)
		}
		if s := tree.Start(); s.Kind != debugger.KindCall || s.Func() != "Cls.meth" {
			t.Errorf("%s: starts at %s of %s, want the call of Cls.meth", call, s.Kind, s.Func())
		}
		if !strings.Contains(ctx, "class Cls:") || !strings.Contains(ctx, "def meth(self, b):") {
			t.Errorf("%s: the CODE context does not show the class:\n%s", call, ctx)
		}
		traj, err := debugger.Sample(tree, ctx, debugger.StepIntoPolicy(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		last := traj.Steps[len(traj.Steps)-1].State
		if last.Kind != debugger.KindReturn || last.Func != debugger.MainFunc || *last.Value != "3" {
			t.Errorf("%s: the last state is %s of %s, want main's return of 3", call, last.Kind, last.Func)
		}
	}
}

// TestMethodCall checks how a method item's call expression is split into class and method.
func TestMethodCall(t *testing.T) {
	for _, tc := range []struct {
		call, class, meth string
		ok                bool
	}{
		{"Cls(1).meth(2)", "Cls", "meth", true},
		{"Cls().meth()", "Cls", "meth", true},
		{"Cls(')', \"(\", [1, (2,)]).m_2({'a': ')'})", "Cls", "m_2", true},
		{"Cls('\\')').meth(1)", "Cls", "meth", true},
		{"Cls.meth(1)", "", "", false}, // a static or class method: no constructor
		{"f(g(1))", "", "", false},     // a function
		{"Cls(1).meth(2).x(3)", "", "", false},
		{"Cls(1).meth(2", "", "", false},
		{"Cls(1].meth(2)", "", "", false},
		{"Cls('1).meth(2)", "", "", false},
		{"a.Cls(1).meth(2)", "", "", false},
		{"Cls(1).2m(2)", "", "", false},
		{"", "", "", false},
	} {
		class, meth, ok := debugger.MethodCall(tc.call)
		if class != tc.class || meth != tc.meth || ok != tc.ok {
			t.Errorf("MethodCall(%q) = %q, %q, %v; want %q, %q, %v", tc.call, class, meth, ok, tc.class, tc.meth, tc.ok)
		}
	}
}

// FuzzMethodCall checks that MethodCall never panics and that what it accepts is CLASS(...).METH(...).
func FuzzMethodCall(f *testing.F) {
	for _, s := range []string{"Cls(1).meth(2)", "Cls('(').m(\")\")", "f(g(1))", "C(\\').m()"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, call string) {
		class, meth, ok := debugger.MethodCall(call)
		if ok && (!strings.HasPrefix(call, class+"(") || !strings.HasSuffix(call, ")") || !strings.Contains(call, ")."+meth+"(")) {
			t.Errorf("MethodCall(%q) = %q, %q", call, class, meth)
		}
	})
}
