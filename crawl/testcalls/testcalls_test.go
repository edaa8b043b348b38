package testcalls

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
	_ "github.com/ndtrace/ndtrace/store/drivers"
)

func TestParseDef(t *testing.T) {
	tests := []struct {
		src    string
		params string
		ok     bool
		async  bool
		cm     bool
	}{
		{"def f(a, b=[1, 2]):\n    pass", "a b", true, false, false},
		{"def f(a, *args):\n    pass", "", false, false, false},
		{"def f(a, **kw):\n    pass", "", false, false, false},
		{"def f(a, *, b):\n    pass", "", false, false, false},
		{"@dec\ndef f(x=(1, 2)):\n    return x", "x", true, false, false},
		{"def g(a):\n    pass", "", false, false, false}, // not f
		{"def f(a: int, /, b: 'str' = ')', c=\",(\"):  # (\n    pass", "a b c", true, false, false},
		{"def f(\n    a,  # the first, (really)\n    b=2,\n):\n    pass", "a b", true, false, false},
		{"def f():\n    pass", "", true, false, false},
		{"async def f(x):\n    return x", "x", true, true, false},
		{"@contextlib.contextmanager\ndef f(x):\n    yield x", "x", true, false, true},
		{"def f(a b):\n    pass", "", false, false, false},
	}
	for _, tc := range tests {
		d, ok := parseDef(tc.src, "f")
		if got := strings.Join(d.params, " "); ok != tc.ok || ok && (got != tc.params || d.async != tc.async || d.contextManager != tc.cm) {
			t.Errorf("parseDef(%q) = %+v, %v; want %q, %v, async %v, cm %v", tc.src, d, ok, tc.params, tc.ok, tc.async, tc.cm)
		}
	}
}

func TestLiteralArgs(t *testing.T) {
	v := func(vals ...string) schemas.Locals {
		var l schemas.Locals
		for i, s := range vals {
			l = append(l, schemas.Var{Name: string(rune('a' + i)), Value: s})
		}
		return l
	}
	tests := []struct {
		locals schemas.Locals
		want   string
		ok     bool
	}{
		{v("1", "'x'", "[1, 2]"), "1, 'x', [1, 2]", true},
		{v(), "", true},
		{v("<object object at 0x7f>"), "", false},
		{v("[1, 2, 3, ..."), "", false},
		{v("Noisy(3)"), "", false},
		{v("P(x=1, y=[2])"), "", false},
		{v("PosixPath('x')"), "", false},
		{v("typing.Optional[int]"), "", false},
		{v("-1", "(1+2j)", "{'a': {1, 2}}", "b'x' b'y'", "set()"), "-1, (1+2j), {'a': {1, 2}}, b'x' b'y', set()", true},
		{v("'<tag>'"), "'<tag>'", true},
		{v("'<object object at 0x7f0011223344>'"), "", false},
		{v("P(me=P(...))"), "", false},
		{v("[P(...)]"), "", false},
		{v("P(a0=0, a1=1, ...)"), "", false},
	}
	for _, tc := range tests {
		got, ok := literalArgs(tc.locals)
		if got != tc.want || ok != tc.ok {
			t.Errorf("literalArgs(%v) = %q, %v; want %q, %v", tc.locals, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFunctionItems(t *testing.T) {
	dir := t.TempDir()
	mod := "def double(x):\n    return 2 * x\n\n\ndef spread(*xs):\n    return xs\n\n\ndef gen(n, k=1):\n    for i in range(n):\n        yield i * k\n" +
		"\n\nasync def co(x):\n    return x\n\n\n@contextmanager\ndef opened(x):\n    yield x\n"
	os.WriteFile(filepath.Join(dir, "m.py"), []byte(mod), 0o644)
	file := filepath.Join(dir, "m.py")
	frame := 1
	call := func(fn string, locals ...string) schemas.Event {
		frame++
		ev := schemas.Event{Event: schemas.EventCall, Func: fn, File: file, Frame: frame}
		for i := 0; i < len(locals); i += 2 {
			ev.Locals = append(ev.Locals, schemas.Var{Name: locals[i], Value: locals[i+1]})
		}
		return ev
	}
	// gen(3)'s first call shows its parameters; its resumptions (the same frame) show every local.
	genCall := call("gen", "n", "3", "k", "1")
	resume := genCall
	resume.Locals = schemas.Locals{{Name: "n", Value: "3"}, {Name: "k", Value: "1"}, {Name: "i", Value: "0"}}
	traces := []schemas.TestTrace{{
		Test: "tests/test_m.py::test_double",
		Events: []schemas.Event{
			{Event: schemas.EventCall, Func: "test_double", File: filepath.Join(dir, "tests/test_m.py"), Frame: 1},
			call("double", "x", "21"), call("double", "x", "21"), call("double", "x", "4"), call("spread", "xs", "(1,)"),
			call("double", "x", "<object object at 0x1>"),
			genCall, resume, resume,
			call("co", "x", "1"), call("opened", "x", "2"),
			// A call event that lacks a parameter (not one of the tracer's) is no item.
			call("double", "y", "1"),
		},
		Functions: []schemas.FuncSource{
			{File: file, QualName: "double", FirstLine: 1, LastLine: 2, Source: "def double(x):\n    return 2 * x"},
			{File: file, QualName: "spread", FirstLine: 5, LastLine: 6, Source: "def spread(*xs):\n    return xs"},
			{File: file, QualName: "gen", FirstLine: 9, LastLine: 11, Source: "def gen(n, k=1):\n    for i in range(n):\n        yield i * k"},
			{File: file, QualName: "co", FirstLine: 14, LastLine: 15, Source: "async def co(x):\n    return x"},
			{File: file, QualName: "opened", FirstLine: 18, LastLine: 20, Source: "@contextmanager\ndef opened(x):\n    yield x"},
		},
	}}
	it := crawl.Item{Key: "git:u@c", Path: "u", Repo: &crawl.RepoTarget{Resolved: crawl.Resolved{Commit: "c"}}}
	counts := schemas.Counts{}
	items := Items(context.Background(), dir, nil, it, traces, counts)
	var calls []string
	for _, fi := range items {
		calls = append(calls, fi.Call)
		if fi.Code != mod || fi.Func == "" || fi.Path != "m.py" || fi.RepoURL != "u" || fi.Commit != "c" || !strings.HasPrefix(fi.Key, "git:u@c#m.py:") ||
			fi.InputSource != schemas.InputSourceTestCall {
			t.Errorf("item %+v", fi)
		}
	}
	if got := strings.Join(calls, " "); got != "double(21) double(4) gen(3, 1)" {
		t.Errorf("calls %q, want double(21) double(4) gen(3, 1) (test functions, *args, objects, repeats, resumptions, "+
			"async and context managers left out)", got)
	}
	want := schemas.Counts{"functions_skipped:params": 1, "functions_skipped:arguments": 2, "functions_skipped:resume": 2,
		"functions_skipped:async": 1, "functions_skipped:context_manager": 1}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
}

// TestItemsCodeBounded (attacker's review, issue 26): every item found in a module carries the
// module's whole text as its code. A repository whose tests call the functions of one large module
// (padded with a comment) with many inputs gave up to MaxItems items of that text each: 200 copies
// of a 200 MiB module in its trace's JSON, each traced with it. A module larger than
// MaxModuleBytes gives no item, and all the items of one repository hold at most MaxCodeBytes of
// code; both are counted.
func TestItemsCodeBounded(t *testing.T) {
	dir := t.TempDir()
	pad := func(n int) string { return "# " + strings.Repeat("x", n) + "\n" }
	mods := map[string]string{"big.py": "def f(x):\n    return x\n" + pad(MaxModuleBytes)}
	for i := 0; i < 24; i++ {
		mods[fmt.Sprintf("m%02d.py", i)] = "def f(x):\n    return x\n" + pad(MaxModuleBytes*9/10)
	}
	var events []schemas.Event
	var funcs []schemas.FuncSource
	frame := 0
	for _, name := range slices.Sorted(maps.Keys(mods)) {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(mods[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		funcs = append(funcs, schemas.FuncSource{File: file, QualName: "f", FirstLine: 1, LastLine: 2, Source: "def f(x):\n    return x"})
		for k := 0; k < MaxInputsPerFunction; k++ {
			frame++
			events = append(events, schemas.Event{Event: schemas.EventCall, Func: "f", File: file, Frame: frame,
				Locals: schemas.Locals{{Name: "x", Value: fmt.Sprint(k)}}})
		}
	}
	it := crawl.Item{Key: "git:u@c", Path: "u", Repo: &crawl.RepoTarget{Resolved: crawl.Resolved{Commit: "c"}}}
	counts := schemas.Counts{}
	items := Items(context.Background(), dir, nil, it, []schemas.TestTrace{{Test: "tests/test_x.py::test_x", Events: events, Functions: funcs}}, counts)
	total := 0
	for _, fi := range items {
		total += len(fi.Code)
		if fi.Path == "big.py" {
			t.Errorf("an item of big.py, a module of %d bytes", len(fi.Code))
		}
	}
	if total > MaxCodeBytes || len(items) == 0 {
		t.Errorf("%d items holding %d bytes of code, want some, at most %d bytes", len(items), total, MaxCodeBytes)
	}
	if counts[schemas.CountFunctionSkipped("module_too_large")] != MaxInputsPerFunction || counts[schemas.CountFunctionSkipped("code_bytes")] == 0 {
		t.Errorf("counts %v", counts)
	}
}

// TestItemsNoWorkerPath (attacker's review, issue 26): an argument that holds the checkout's
// folder (a test passing os.path.join(os.path.dirname(__file__), "data.txt")) is the worker's
// scratch folder and a random name: an item made of it had another call, key and rows on every run
// and worker. Such calls give no item (functions_skipped:checkout_path).
func TestItemsNoWorkerPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.py")
	if err := os.WriteFile(file, []byte("def load(p):\n    return p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := func(frame int, v string) schemas.Event {
		return schemas.Event{Event: schemas.EventCall, Func: "load", File: file, Frame: frame, Locals: schemas.Locals{{Name: "p", Value: v}}}
	}
	traces := []schemas.TestTrace{{Test: "tests/test_m.py::test_load",
		Events:    []schemas.Event{ev(1, "'"+dir+"/data.txt'"), ev(2, "'data.txt'")},
		Functions: []schemas.FuncSource{{File: file, QualName: "load", FirstLine: 1, LastLine: 2, Source: "def load(p):\n    return p"}}}}
	it := crawl.Item{Key: "git:u@c", Path: "u", Repo: &crawl.RepoTarget{Resolved: crawl.Resolved{Commit: "c"}}}
	counts := schemas.Counts{}
	items := Items(context.Background(), dir, nil, it, traces, counts)
	if len(items) != 1 || items[0].Call != "load('data.txt')" || counts[schemas.CountFunctionSkipped("checkout_path")] != 1 {
		t.Errorf("items %+v, counts %v: want load('data.txt') only", items, counts)
	}
}

// TestAddTraceWorkerPath: in a compact trace (AddTrace) file names are relative to the checkout
// and values name the worker's folders by aliases; a call whose arguments held one of its folders
// (workerPath) gives no item, while an argument that merely reads like an alias ('/checkout', a
// conda path with /envs/ in it) is an ordinary argument (attacker's review of issue 26: matching
// the alias text dropped such calls).
func TestAddTraceWorkerPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.py"), []byte("def load(p):\n    return p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := func(frame int, v string) schemas.Event {
		return schemas.Event{Event: schemas.EventCall, Func: "load", File: "m.py", Frame: frame, Locals: schemas.Locals{{Name: "p", Value: v}}}
	}
	tr := debugger.NewTrace([]schemas.Event{ev(1, "'/checkout/data.txt'"), ev(2, "'/checkout'"), ev(3, "'/opt/conda/envs/py'")})
	funcs := []schemas.FuncSource{{File: "m.py", QualName: "load", FirstLine: 1, LastLine: 2, Source: "def load(p):\n    return p"}}
	it := crawl.Item{Key: "git:u@c", Path: "u", Repo: &crawl.RepoTarget{Resolved: crawl.Resolved{Commit: "c"}}}
	counts := schemas.Counts{}
	f := NewFinder(context.Background(), dir, nil, it, counts)
	f.AddTrace("tests/test_m.py::test_load", funcs, tr, func(i int) bool { return i == 0 })
	var calls []string
	for _, item := range f.Items() {
		calls = append(calls, item.Call)
		if item.Path != "m.py" || item.Code != "def load(p):\n    return p\n" {
			t.Errorf("item %+v: want m.py's", item)
		}
	}
	if !slices.Equal(calls, []string{"load('/checkout')", "load('/opt/conda/envs/py')"}) || counts[schemas.CountFunctionSkipped("checkout_path")] != 1 {
		t.Errorf("calls %q, counts %v: want the two ordinary ones, one checkout_path", calls, counts)
	}
}
