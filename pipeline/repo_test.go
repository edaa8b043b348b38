package pipeline

import (
	_ "github.com/ndtrace/ndtrace/store/drivers"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/schemas"
)

func TestPlainParams(t *testing.T) {
	for src, want := range map[string]bool{
		"def f(a, b=[1, 2]):\n    pass":        true,
		"def f(a, *args):\n    pass":           false,
		"def f(a, **kw):\n    pass":            false,
		"def f(a, *, b):\n    pass":            false,
		"@dec\ndef f(x=(1, 2)):\n    return x": true,
		"def g(a):\n    pass":                  false, // not f
	} {
		if got := plainParams(src, "f"); got != want {
			t.Errorf("plainParams(%q) = %v, want %v", src, got, want)
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
		{v("Noisy(3)"), "Noisy(3)", true}, // TracedItem again on its own: a NameError there is a reject
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
	mod := "def double(x):\n    return 2 * x\n\n\ndef spread(*xs):\n    return xs\n"
	os.WriteFile(filepath.Join(dir, "m.py"), []byte(mod), 0o644)
	file := filepath.Join(dir, "m.py")
	call := func(fn, arg string) schemas.Event {
		return schemas.Event{Event: schemas.EventCall, Func: fn, File: file, Locals: schemas.Locals{{Name: "x", Value: arg}}}
	}
	traces := []TestTrace{{
		Test: "tests/test_m.py::test_double",
		Events: []schemas.Event{
			{Event: schemas.EventCall, Func: "test_double", File: filepath.Join(dir, "tests/test_m.py")},
			call("double", "21"), call("double", "21"), call("double", "4"), call("spread", "1"),
			call("double", "<object object at 0x1>"),
		},
		Functions: []schemas.FuncSource{
			{File: file, QualName: "double", FirstLine: 1, LastLine: 2, Source: "def double(x):\n    return 2 * x"},
			{File: file, QualName: "spread", FirstLine: 5, LastLine: 6, Source: "def spread(*xs):\n    return xs"},
		},
	}}
	it := crawl.Item{Key: "git:u@c", Path: "u", Repo: &crawl.RepoTarget{Resolved: crawl.Resolved{Commit: "c"}}}
	items := functionItems(dir, it, traces)
	var calls []string
	for _, fi := range items {
		calls = append(calls, fi.Call)
		if fi.Code != mod || fi.Func == "" || fi.Path != "m.py" || fi.RepoURL != "u" || fi.Commit != "c" || !strings.HasPrefix(fi.Key, "git:u@c#m.py:double:") {
			t.Errorf("item %+v", fi)
		}
	}
	if got := strings.Join(calls, " "); got != "double(21) double(4)" {
		t.Errorf("calls %q, want double(21) double(4) (test functions, *args, objects and repeats left out)", got)
	}
}

func TestRelativize(t *testing.T) {
	tt := TestTrace{Detail: "failed in /s/r/a.py line 3", Events: []schemas.Event{{File: "/s/r/a.py"}, {File: "/usr/lib/x.py"}},
		Functions: []schemas.FuncSource{{File: "/s/r/pkg/b.py"}}}
	relativize(&tt, "/s/r")
	if tt.Events[0].File != "a.py" || tt.Events[1].File != "/usr/lib/x.py" || tt.Functions[0].File != "pkg/b.py" || tt.Detail != "failed in a.py line 3" {
		t.Errorf("%+v", tt)
	}
}
