package testcalls

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestMethodItems: methods called by the tests give items when their instance can be rebuilt from
// a constructor call of the same trace whose self renders as the method's self (or when they
// are static or class methods); others are counted.
func TestMethodItems(t *testing.T) {
	dir := t.TempDir()
	mod := "class Acc:\n    def __init__(self, start):\n        self.total = start\n\n" +
		"    def add(self, x):\n        self.total += x\n        return self.total\n\n" +
		"    @staticmethod\n    def twice(x):\n        return 2 * x\n\n" +
		"    @classmethod\n    def zero(cls, n):\n        return cls(n)\n\n" +
		"    @property\n    def value(self):\n        return self.total\n"
	file := filepath.Join(dir, "acc.py")
	if err := os.WriteFile(file, []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	frame := 1
	ev := func(kind, fn string, fr int, locals ...string) schemas.Event {
		e := schemas.Event{Event: kind, Func: fn, File: file, Frame: fr}
		for i := 0; i < len(locals); i += 2 {
			e.Locals = append(e.Locals, schemas.Var{Name: locals[i], Value: locals[i+1]})
		}
		return e
	}
	next := func() int { frame++; return frame }
	i1, m1, s1, c1, p1, m2, i2, m3 := next(), next(), next(), next(), next(), next(), next(), next()
	events := []schemas.Event{
		{Event: schemas.EventCall, Func: "test_acc", File: filepath.Join(dir, "tests/test_acc.py"), Frame: 1},
		ev(schemas.EventCall, "Acc.__init__", i1, "self", "Acc()", "start", "1"),
		ev(schemas.EventReturn, "Acc.__init__", i1, "self", "Acc(total=1)", "start", "1"),
		// its state as built: Acc(1).add(2)
		ev(schemas.EventCall, "Acc.add", m1, "self", "Acc(total=1)", "x", "2"),
		ev(schemas.EventReturn, "Acc.add", m1, "self", "Acc(total=3)", "x", "2"),
		ev(schemas.EventCall, "Acc.twice", s1, "x", "4"),
		ev(schemas.EventCall, "Acc.zero", c1, "cls", "<class 'acc.Acc'>", "n", "0"),
		ev(schemas.EventCall, "Acc.value", p1, "self", "Acc(total=3)"),
		// its state changed since: no constructor call built it
		ev(schemas.EventCall, "Acc.add", m2, "self", "Acc(total=3)", "x", "5"),
		// built with an argument that is no literal: no instance to rebuild
		ev(schemas.EventCall, "Acc.__init__", i2, "self", "Acc()", "start", "Decimal('1')"),
		ev(schemas.EventReturn, "Acc.__init__", i2, "self", "Acc(total=Decimal('1'))", "start", "Decimal('1')"),
		ev(schemas.EventCall, "Acc.add", m3, "self", "Acc(total=Decimal('1'))", "x", "1"),
	}
	fs := func(q string, first, last int, src string) schemas.FuncSource {
		return schemas.FuncSource{File: file, QualName: q, FirstLine: first, LastLine: last, Source: src}
	}
	traces := []schemas.TestTrace{{Test: "tests/test_acc.py::test_acc", Events: events, Functions: []schemas.FuncSource{
		fs("Acc.__init__", 2, 3, "    def __init__(self, start):\n        self.total = start"),
		fs("Acc.add", 5, 7, "    def add(self, x):\n        self.total += x\n        return self.total"),
		fs("Acc.twice", 9, 11, "    @staticmethod\n    def twice(x):\n        return 2 * x"),
		fs("Acc.zero", 13, 15, "    @classmethod\n    def zero(cls, n):\n        return cls(n)"),
		fs("Acc.value", 17, 19, "    @property\n    def value(self):\n        return self.total"),
	}}}
	it := crawl.Item{Key: "git:u@c", Path: "u", Repo: &crawl.RepoTarget{Resolved: crawl.Resolved{Commit: "c"}}}
	counts := schemas.Counts{}
	var calls []string
	for _, item := range Items(context.Background(), dir, nil, it, traces, counts) {
		calls = append(calls, item.Call)
		if item.Module != "acc" || item.Path != "acc.py" || item.InputSource != schemas.InputSourceTestCall {
			t.Errorf("%s: module %q, path %q, input source %q", item.Call, item.Module, item.Path, item.InputSource)
		}
	}
	if want := []string{"Acc(1).add(2)", "Acc.twice(4)", "Acc.zero(0)"}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	want := schemas.Counts{"functions_skipped:method_decorated": 1, "functions_skipped:method_instance": 2}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("counts %v, want %v", counts, want)
			break
		}
	}
}
