package activities

import (
	"context"
	_ "github.com/ndtrace/ndtrace/store/drivers"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/schemas"
)

func TestFilter(t *testing.T) {
	eval := filepath.Join(t.TempDir(), "eval.jsonl")
	os.WriteFile(eval, []byte(`{"code": "def g(x):\n    return -x\n"}`+"\n"), 0o644)
	item := func(key, code, call string) crawl.Item {
		return crawl.Item{Key: key, Path: "src", Code: code, Call: call}
	}
	f1 := "def f(x):\n    return x\n"
	items := []crawl.Item{
		item("a", f1, "f(1)"),
		item("b", "def f(x):  # same\n  return x\n", "f(1)"), // a duplicate of a
		item("c", f1, "f(2)"),                                // another input
		item("d", "def g(x):\n    return -x\n", "g(1)"),      // in the evaluation set
		{Key: "r", Repo: &crawl.RepoTarget{}},                // repositories pass
	}
	tests := []struct {
		name    string
		spec    schemas.Spec
		kept    string
		reasons []string
	}{
		{"dedup and decontaminate", schemas.Spec{Decontaminate: []schemas.EvalSetSpec{{Name: "ev", Path: eval}}}, "a c r", []string{"duplicate of a", "decontaminated: ev"}},
		{"no dedup", schemas.Spec{Dedup: new(bool)}, "a b c d r", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newFilter(context.Background(), tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			kept, rejects := f.items(items)
			var keys []string
			for _, it := range kept {
				keys = append(keys, it.Key)
			}
			if got := strings.Join(keys, " "); got != tc.kept {
				t.Errorf("kept %q, want %q", got, tc.kept)
			}
			if len(rejects) != len(tc.reasons) {
				t.Fatalf("rejects %+v, want %v", rejects, tc.reasons)
			}
			for i, r := range rejects {
				if r.Reason != tc.reasons[i] {
					t.Errorf("reject %d: %q, want %q", i, r.Reason, tc.reasons[i])
				}
			}
		})
	}
	if _, err := newFilter(context.Background(), schemas.Spec{Decontaminate: []schemas.EvalSetSpec{{Name: "x", Path: "/nonexistent.jsonl"}}}); err == nil {
		t.Error("a missing evaluation set gives no error")
	}
}

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
		{v("Noisy(3)"), "Noisy(3)", true}, // traced again on its own: a NameError there is a reject
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
	traces := []testTrace{{
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
	tt := testTrace{Detail: "failed in /s/r/a.py line 3", Events: []schemas.Event{{File: "/s/r/a.py"}, {File: "/usr/lib/x.py"}},
		Functions: []schemas.FuncSource{{File: "/s/r/pkg/b.py"}}}
	relativize(&tt, "/s/r")
	if tt.Events[0].File != "a.py" || tt.Events[1].File != "/usr/lib/x.py" || tt.Functions[0].File != "pkg/b.py" || tt.Detail != "failed in a.py line 3" {
		t.Errorf("%+v", tt)
	}
}

func TestReasonClass(t *testing.T) {
	for reason, want := range map[string]string{
		"timeout":                   "timeout",
		"exception: ValueError":     "exception",
		"duplicate of x":            "duplicate",
		"missing module hypothesis": "missing",
		"":                          "",
	} {
		if got := reasonClass(reason); got != want {
			t.Errorf("reasonClass(%q) = %q, want %q", reason, got, want)
		}
	}
}
