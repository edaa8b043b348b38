package sandbox_test

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// genModule is a small module for the generate runs: functions, a class with methods, an async
// function, a function of no argument and one that needs some.
const genModule = `import math


def zero():
    x = 1
    return x + 1


def area(r):
    return math.pi * r * r


async def later():
    return 1


class Box:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n

    @staticmethod
    def make():
        return Box()

    @classmethod
    def named(cls, name):
        return cls()


def boom():
    raise ValueError("no")
`

// TestGenerate runs find and input generation (generate.py's engine) on a standalone module and on
// one imported where it lives.
func TestGenerate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sandbox; run without -short")
	}
	ctx := context.Background()
	dir := sandboxtest.HostDir(t)
	sandboxtest.WriteTree(t, dir, map[string]string{"src/pkg/__init__.py": "", "src/pkg/geo.py": genModule,
		"src/pkg/needs.py": "import notinstalled.sub\n\ndef f():\n    return 1\n"})
	sb, err := sandbox.New(ctx, sandbox.Config{ReadOnly: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	src := filepath.Join(dir, "src")
	found := []sandbox.FoundFunction{
		{QualName: "zero", Kind: "function", Line: 4, EndLine: 6},
		{QualName: "area", Kind: "function", Line: 9, EndLine: 10},
		{QualName: "later", Kind: "function", Line: 13, EndLine: 14, Skip: "async"},
		{QualName: "Box.__init__", Kind: "method", Line: 18, EndLine: 19, Skip: "dunder"},
		{QualName: "Box.add", Kind: "method", Line: 21, EndLine: 23},
		{QualName: "Box.make", Kind: "staticmethod", Line: 25, EndLine: 27},
		{QualName: "Box.named", Kind: "classmethod", Line: 29, EndLine: 31},
		{QualName: "boom", Kind: "function", Line: 34, EndLine: 35},
	}
	where := func(r sandbox.GenerateRequest) sandbox.GenerateRequest {
		r.Code, r.Filename, r.Module, r.Dir, r.Paths = genModule, filepath.Join(src, "pkg", "geo.py"), "pkg.geo", dir, []string{src}
		return r
	}
	alone := func(r sandbox.GenerateRequest) sandbox.GenerateRequest {
		r.Code, r.Filename = genModule, "geo.py"
		return r
	}
	for _, tc := range []struct {
		name    string
		req     sandbox.GenerateRequest
		status  schemas.Status
		found   []sandbox.FoundFunction
		calls   []string
		sources []string
		lines   []int
		reason  string
		missing string
	}{
		{name: "find standalone", req: alone(sandbox.GenerateRequest{}), status: schemas.StatusOK, found: found},
		{name: "find where it lives", req: where(sandbox.GenerateRequest{}), status: schemas.StatusOK, found: found},
		{name: "zero-argument function", req: alone(sandbox.GenerateRequest{Function: "zero"}), status: schemas.StatusOK,
			calls: []string{"zero()"}, sources: []string{"example"}, lines: []int{5, 6}},
		{name: "seeds where it lives", req: where(sandbox.GenerateRequest{Function: "area", Seeds: []string{"2", "r=0.5", "][", "x"}}),
			status: schemas.StatusOK, calls: []string{"area(2)"}, sources: []string{"llm"}, lines: []int{10}}, // area(r=0.5) reaches no new line
		{name: "per function bounds the inputs", req: alone(sandbox.GenerateRequest{Function: "area", PerFunction: 1, Seeds: []string{"1", "2", "3"}}),
			status: schemas.StatusOK, calls: []string{"area(1)"}, sources: []string{"llm"}, lines: []int{10}},
		{name: "guessed input", req: alone(sandbox.GenerateRequest{Function: "area"}), status: schemas.StatusOK, calls: []string{"area(3)"},
			sources: []string{"fuzzed"}, lines: []int{10}},
		{name: "an exception path is kept", req: alone(sandbox.GenerateRequest{Function: "boom"}), status: schemas.StatusOK,
			calls: []string{"boom()"}, sources: []string{"example"}, lines: []int{35}},
		{name: "no input", req: sandbox.GenerateRequest{Code: "def g(x):\n    raise TypeError(x)\n", Filename: "g.py", Function: "g"},
			status: schemas.StatusOK, lines: []int{2}, reason: "all_raised"},
		{name: "missing module", req: sandbox.GenerateRequest{Code: "import notinstalled.sub\n\ndef f():\n    return 1\n",
			Filename: filepath.Join(src, "pkg", "needs.py"), Module: "pkg.needs", Dir: dir, Paths: []string{src}},
			status: schemas.StatusException, missing: "notinstalled", reason: "import_failed"},
		{name: "syntax error", req: sandbox.GenerateRequest{Code: "def f(:\n"}, status: schemas.StatusInvalid, reason: "syntax_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := sb.Generate(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if g.Status != tc.status {
				t.Fatalf("status %s (%s), want %s", g.Status, g.Detail, tc.status)
			}
			if g.Wall <= 0 {
				t.Errorf("wall %v", g.Wall)
			}
			if tc.found != nil && !reflect.DeepEqual(g.Functions, tc.found) {
				t.Errorf("functions\n%+v\nwant\n%+v", g.Functions, tc.found)
			}
			var calls, sources []string
			for _, in := range g.Inputs {
				calls, sources = append(calls, in.Call), append(sources, in.Source)
			}
			if !reflect.DeepEqual(calls, tc.calls) || !reflect.DeepEqual(sources, tc.sources) {
				t.Errorf("inputs %v %v, want %v %v", calls, sources, tc.calls, tc.sources)
			}
			if !reflect.DeepEqual(g.Lines, tc.lines) || g.Reason != tc.reason || g.MissingModule != tc.missing {
				t.Errorf("lines %v reason %q missing %q, want %v %q %q", g.Lines, g.Reason, g.MissingModule, tc.lines, tc.reason, tc.missing)
			}
		})
	}
	// A checkout with a hypothesis of its own imports that one, not the copy the zygote preloaded
	// for generate runs (the find runs above preloaded it).
	own := "import os, json, hypothesis\nos.write(3, json.dumps({'status': 'ok', 'detail': hypothesis.__file__}).encode() + b'\\n')\nos._exit(0)\n"
	sandboxtest.WriteTree(t, dir, map[string]string{"src/hypothesis/__init__.py": "", "src/pkg/own.py": own})
	g, err := sb.Generate(ctx, sandbox.GenerateRequest{Code: own, Filename: filepath.Join(src, "pkg", "own.py"), Module: "pkg.own", Dir: dir, Paths: []string{src}})
	if err != nil || g.Status != schemas.StatusOK || g.Detail != filepath.Join(src, "hypothesis", "__init__.py") {
		t.Fatalf("the checkout's own hypothesis: %v %s %q", err, g.Status, g.Detail)
	}
	// A kept input's lines are those it reached.
	g, err = sb.Generate(ctx, alone(sandbox.GenerateRequest{Function: "zero"}))
	if err != nil || len(g.Inputs) != 1 || !reflect.DeepEqual(g.Inputs[0].Lines, []int{5, 6}) {
		t.Fatalf("zero: %v %+v", err, g)
	}
	// Requests that cannot work are refused before anything runs.
	for _, req := range []sandbox.GenerateRequest{
		{Code: genModule, Function: "a.b.c"},
		{Code: genModule, Function: "1x"},
		{Code: genModule, Module: "pkg.geo", Filename: "/elsewhere/geo.py", Dir: dir},
	} {
		if _, err := sb.Generate(ctx, req); err == nil {
			t.Errorf("%+v: no error", req)
		}
	}
}

// TestGenerateVerdicts: the supervisor's verdicts of a generate run are a call's; anything the
// module prints leaves the result alone.
func TestGenerateVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sandbox; run without -short")
	}
	ctx := context.Background()
	sb := shared(t)
	lim := sandbox.Limits{WallTime: 3 * time.Second, CPUTime: 3 * time.Second}
	for _, tc := range []struct {
		name, code string
		want       []schemas.Status
	}{
		{"prints", "import sys\nprint('x' * 1000)\nsys.stderr.write('{}\\n')\ndef f():\n    pass\n", []schemas.Status{schemas.StatusOK}},
		// The engine bounds an import with its own timers (an exception, "import timed out"): CPU
		// time (SIGPROF) and wall time (SIGALRM); a module that ignores what would stop it meets
		// the supervisor's limit.
		{"sleeps", "import time\ntime.sleep(60)\n", []schemas.Status{schemas.StatusException, schemas.StatusTimeout}},
		{"sleeps past the engine's timer", "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(60)\n", []schemas.Status{schemas.StatusTimeout}},
		{"spins past the engine's timer", "import signal\nsignal.signal(signal.SIGPROF, signal.SIG_IGN)\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass\n", []schemas.Status{schemas.StatusTimeout}},
		{"exits", "import os\nos._exit(3)\n", []schemas.Status{schemas.StatusKilled}},
		{"exits as the set-up", "import os\nos._exit(97)\n", []schemas.Status{schemas.StatusKilled}},
		{"exits cleanly", "import os\nos._exit(0)\n", []schemas.Status{schemas.StatusKilled}},
		{"floods", "import os\nwhile True:\n    os.write(1, b'x' * 65536)\n", []schemas.Status{schemas.StatusOutputLimit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := sb.Generate(ctx, sandbox.GenerateRequest{Code: tc.code, Limits: lim})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.want {
				if g.Status == s {
					if tc.name == "prints" && len(g.Functions) != 1 {
						t.Errorf("functions %+v", g.Functions)
					}
					return
				}
			}
			t.Fatalf("status %s (%s), want %v", g.Status, g.Detail, tc.want)
		})
	}
	// A caller that gives up ends the run: killed.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	g, err := sb.Generate(cctx, sandbox.GenerateRequest{Code: "import time\ntime.sleep(60)\n", Limits: sandbox.Limits{WallTime: 30 * time.Second}})
	if err != nil || g.Status != schemas.StatusKilled {
		t.Fatalf("cancelled: %v %s (%s)", err, g.Status, g.Detail)
	}
	// The generate item shares its sandbox with calls, which it leaves as they were.
	res := trace(t, "def f():\n    return 41 + 1\n", "f()")
	if res.Status != schemas.StatusOK || res.Value != "42" {
		t.Fatalf("a call after generate runs: %s %s %q", res.Status, res.Detail, res.Value)
	}
	if !strings.Contains(sb.Python(), ".") {
		t.Fatalf("python %q", sb.Python())
	}
}

// BenchmarkGenerate measures a find run and an input run of the stub generator on a small module,
// in a sandbox of their own (the zygote preloads hypothesis.strategies before the first).
func BenchmarkGenerate(b *testing.B) {
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	for _, bc := range []struct {
		name string
		req  sandbox.GenerateRequest
	}{
		{"find", sandbox.GenerateRequest{Code: genModule, Filename: "geo.py"}},
		{"inputs", sandbox.GenerateRequest{Code: genModule, Filename: "geo.py", Function: "zero"}},
		{"import_hypothesis", sandbox.GenerateRequest{Code: "import hypothesis.strategies\n" + genModule, Filename: "geo.py"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				g, err := sb.Generate(ctx, bc.req)
				if err != nil || g.Status != schemas.StatusOK {
					b.Fatalf("%v %+v", err, g)
				}
			}
		})
	}
}
