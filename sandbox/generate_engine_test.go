package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
)

// engineDriver runs the generator engine (tracer/generate.py) standalone, as the yield harness
// does: the module's code is run as a fresh module, the request comes as JSON on stdin and the
// result goes out as JSON on stdout.
const engineDriver = `import json, sys, types, resource
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
job = json.load(sys.stdin)
ns = {"__name__": "_gen_standalone"}
exec(compile(open(job["generate"]).read(), job["generate"], "exec"), ns)
out = sys.stdout
def load_module():
    m = types.ModuleType("genmod")
    m.__file__ = job["req"]["filename"]
    sys.modules["genmod"] = m
    exec(compile(job["req"]["code"], job["req"]["filename"], "exec"), m.__dict__)
    return m
res = ns["_gen_main"](job["req"], load_module)
out.write(json.dumps(res))
out.flush()
import os
os._exit(0)
`

// runEngine runs generate.py on code for function ("" finds) with plain /usr/bin/python3, as
// uid 10001 without network when the test runs as root.
func runEngine(t *testing.T, code, function string, budget float64, seeds ...string) sandbox.Generation {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("tracer", "generate.py"))
	if err != nil {
		t.Fatal(err)
	}
	dir := sandboxtest.HostDir(t) // readable by uid 10001
	sandboxtest.WriteTree(t, dir, map[string]string{"generate.py": string(src), "driver.py": engineDriver})
	job, err := json.Marshal(map[string]any{
		"generate": filepath.Join(dir, "generate.py"),
		"req": map[string]any{
			"function": function, "code": code, "filename": filepath.Join(dir, "mod.py"),
			"per_function": 4, "attempts": 200, "seeds": append([]string{}, seeds...), "seed": 1, "budget_s": budget,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"/usr/bin/python3", "-s", "-B", filepath.Join(dir, "driver.py")}
	if os.Geteuid() == 0 {
		argv = append([]string{"setpriv", "--reuid=10001", "--regid=10001", "--clear-groups"}, argv...)
		if exec.Command("unshare", "-n", "true").Run() == nil {
			argv = append([]string{"unshare", "-n"}, argv...)
		}
	}
	// The budget bounds the run; the wide margin only stops a hung engine from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(budget*float64(time.Second))+60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "PYTHONHASHSEED=0"}
	cmd.Stdin = bytes.NewReader(job)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("generate.py: %v\n%s", err, stderr.String())
	}
	var g sandbox.Generation
	if err := json.Unmarshal(stdout.Bytes(), &g); err != nil {
		t.Fatalf("generate.py's output %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	return g
}

// checkShape checks what holds for every generation: inputs within K, calls of the unit, their
// lines sorted, unique and among the unit's lines, a reason exactly when nothing was kept.
func checkShape(t *testing.T, g sandbox.Generation, function string) {
	t.Helper()
	if len(g.Inputs) > 4 {
		t.Errorf("%d inputs, want at most K=4", len(g.Inputs))
	}
	if (len(g.Inputs) == 0) != (g.Reason != "") {
		t.Errorf("%d inputs with reason %q", len(g.Inputs), g.Reason)
	}
	if !slices.IsSorted(g.Lines) {
		t.Errorf("lines %v not sorted", g.Lines)
	}
	name := function[strings.LastIndex(function, ".")+1:]
	raised := 0
	for _, in := range g.Inputs {
		if !strings.Contains(in.Call, name+"(") || len(in.Call) > 4096 {
			t.Errorf("call %q is not a call of %s", in.Call, function)
		}
		if !slices.IsSorted(in.Lines) || len(slices.Compact(slices.Clone(in.Lines))) != len(in.Lines) {
			t.Errorf("%s: lines %v not sorted and unique", in.Call, in.Lines)
		}
		for _, l := range in.Lines {
			if !slices.Contains(g.Lines, l) {
				t.Errorf("%s: line %d is not among the unit's lines %v", in.Call, l, g.Lines)
			}
		}
		if in.Raised != "" {
			raised++
		}
		switch in.Source {
		case "doctest", "example", "typed", "fuzzed", "llm":
		default:
			t.Errorf("%s: source %q", in.Call, in.Source)
		}
	}
	if raised > 1 {
		t.Errorf("%d raising inputs kept, want at most max(1, K/4) = 1", raised)
	}
}

// covered is the share of the unit's lines its kept inputs reached.
func covered(g sandbox.Generation) float64 {
	seen := map[int]bool{}
	for _, in := range g.Inputs {
		for _, l := range in.Lines {
			seen[l] = true
		}
	}
	if len(g.Lines) == 0 {
		return 1
	}
	return float64(len(seen)) / float64(len(g.Lines))
}

// TestGenerateEngine runs the generator engine standalone on small modules: typed, untyped,
// doctest, method, constructor arguments, raising, nondeterministic and hostile code.
func TestGenerateEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3 on the generator engine; run without -short")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	cases := []struct {
		name, code, function string
		seeds                []string
		// call matches one kept input's call; source is one kept input's source; reason the
		// reason when nothing is kept; minCover the least share of lines covered.
		call, source, reason string
		minCover             float64
	}{
		{name: "typed", function: "clamp", source: "typed", minCover: 1,
			code: "def clamp(x: int, lo: int, hi: int) -> int:\n    if x < lo:\n        return lo\n" +
				"    if x > hi:\n        return hi\n    return x\n"},
		{name: "untyped", function: "shout", call: `^shout\('.*'\)$`, minCover: 1,
			code: "def shout(s):\n    out = []\n    for w in s.split():\n        if w.isdigit():\n" +
				"            out.append(w)\n        else:\n            out.append(w.upper())\n    return out\n"},
		{name: "doctest", function: "double", call: `^double\(21\)$`, source: "doctest", minCover: 1,
			code: "def double(n):\n    \"\"\"Twice n.\n\n    >>> double(21)\n    42\n    \"\"\"\n    return n * 2\n"},
		{name: "method", function: "Stack.push", call: `^Stack\(\)\.push\(.*\)$`, minCover: 1,
			code: "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n" +
				"        self.items.append(x)\n        return len(self.items)\n"},
		{name: "staticmethod", function: "Stack.make", call: `^Stack\.make\(\d+\)$`, minCover: 1,
			code: "class Stack:\n    @staticmethod\n    def make(n: int):\n        return [0] * n\n"},
		{name: "constructor arguments", function: "Point.norm1", call: `^Point\(.+\)\.norm1\(\)$`, minCover: 1,
			code: "class Point:\n    def __init__(self, x: int, y: int):\n        self.x, self.y = x, y\n\n" +
				"    def norm1(self):\n        return abs(self.x) + abs(self.y)\n"},
		{name: "raising", function: "check", minCover: 0.5,
			code: "def check(n: int):\n    if n < 0:\n        raise ValueError('negative')\n    return n\n"},
		{name: "always raising", function: "fail", call: `^fail\(`,
			code: "def fail(s: str):\n    raise KeyError(s)\n"},
		{name: "nondeterministic", function: "now", reason: "nondeterministic",
			code: "import time\n\ndef now():\n    return time.time()\n"},
		{name: "seeded random is deterministic", function: "roll", call: `^roll\(`,
			code: "import random\n\ndef roll(n: int):\n    return random.randint(0, abs(n))\n"},
		{name: "infinite loop", function: "spin", reason: "timeout",
			code: "def spin(n: int):\n    while True:\n        n += 1\n"},
		{name: "loop swallowing every exception", function: "stubborn",
			code: "def stubborn(n: int):\n    while True:\n        try:\n            n += 1\n" +
				"        except BaseException:\n            pass\n"},
		{name: "replaces builtins", function: "evil", call: `^evil\(`,
			code: "import builtins, sys\nbuiltins.len = lambda x: 0\n\ndef evil(s: str):\n" +
				"    builtins.repr = lambda x: 'forged'\n    builtins.isinstance = None\n" +
				"    sys.stdout = None\n    print('x' * 10000)\n    return s\n"},
		{name: "exits", function: "quit_", call: `^quit_\(`,
			code: "import sys\n\ndef quit_(n: int):\n    if n > 0:\n        sys.exit(3)\n    raise KeyboardInterrupt\n"},
		{name: "generator", function: "count_up", call: `^count_up\(`, minCover: 1,
			code: "def count_up(n: int):\n    i = 0\n    while i < n:\n        yield i\n        i += 1\n"},
		{name: "llm seeds", function: "magic", seeds: []string{"'open sesame'", "bad(", "__import__('os')"},
			call: `^magic\('open sesame'\)$`, source: "llm",
			code: "def magic(word):\n    if word == 'open' + ' sesame':\n        return 'door'\n    return None\n"},
		{name: "redefined in branches", function: "pick", call: `^pick\(`, minCover: 1,
			code: "import sys\nif sys.version_info >= (3,):\n    def pick(x):\n        return [x]\nelse:\n    def pick(x):\n        return x\n"},
		{name: "not found", function: "nope", reason: "not_found", code: "def f():\n    return 1\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := runEngine(t, c.code, c.function, 3, c.seeds...)
			if g.Attempts > 200 {
				t.Errorf("%d attempts, want at most 200", g.Attempts)
			}
			if g.Status != "ok" {
				t.Fatalf("status %s (%s)", g.Status, g.Detail)
			}
			checkShape(t, g, c.function)
			if c.reason != "" {
				if len(g.Inputs) != 0 || g.Reason != c.reason {
					t.Fatalf("inputs %+v, reason %q; want none, reason %q", g.Inputs, g.Reason, c.reason)
				}
				return
			}
			if c.call != "" || c.source != "" || c.minCover > 0 {
				if len(g.Inputs) == 0 {
					t.Fatalf("no input kept (reason %q, %d attempts)", g.Reason, g.Attempts)
				}
			}
			if c.call != "" && !slices.ContainsFunc(g.Inputs, func(in sandbox.GeneratedInput) bool {
				return regexp.MustCompile(c.call).MatchString(in.Call)
			}) {
				t.Errorf("no call matches %s in %+v", c.call, g.Inputs)
			}
			if c.source != "" && !slices.ContainsFunc(g.Inputs, func(in sandbox.GeneratedInput) bool {
				return in.Source == c.source
			}) {
				t.Errorf("no input of source %s in %+v", c.source, g.Inputs)
			}
			if cv := covered(g); cv < c.minCover {
				t.Errorf("coverage %.2f of %v, want >= %.2f: %+v", cv, g.Lines, c.minCover, g.Inputs)
			}
		})
	}
}

// TestGenerateEngineFind checks a find run: units, kinds, lines and skip reasons; and the runs
// whose module cannot be imported or parsed.
func TestGenerateEngineFind(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3 on the generator engine; run without -short")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	code := `import os
from json import dumps


def plain(x):
    def nested(y):
        return y
    return nested(x)


async def later():
    return 1


def writes(path):
    with open(path, "w") as f:
        f.write("x")


class Box:
    def __init__(self):
        self.v = 1

    @property
    def value(self):
        return self.v

    def get(self):
        return self.v

    @staticmethod
    def make(n):
        return n

    @classmethod
    def build(cls):
        return cls()

    def __repr__(self):
        return "Box()"

    def __init_subclass__(cls):
        pass


class Needy:
    def __init__(self, conn):
        raise RuntimeError("needs a connection")

    def go(self):
        return 1


def gen():
    yield 1


from subprocess import check_output as co


def run(cmd):
    return co(cmd)


def wrapper(x):
    return run(x)
`
	g := runEngine(t, code, "", 5)
	if g.Status != "ok" {
		t.Fatalf("status %s (%s)", g.Status, g.Detail)
	}
	want := map[string][2]string{ // qualname: kind, skip
		"plain": {"function", ""}, "later": {"function", "async"}, "writes": {"function", "needs_io"},
		"Box.value": {"method", "property"}, "Box.get": {"method", ""}, "Box.make": {"staticmethod", ""},
		"Box.build": {"classmethod", ""}, "Box.__repr__": {"method", ""},
		"Box.__init__": {"method", "dunder"}, "Box.__init_subclass__": {"method", "dunder"},
		"Needy.__init__": {"method", "dunder"}, "Needy.go": {"method", "class_needs_arguments"},
		"gen": {"function", ""}, "run": {"function", "needs_io"}, "wrapper": {"function", "needs_io"},
	}
	got := map[string][2]string{}
	for _, f := range g.Functions {
		got[f.QualName] = [2]string{f.Kind, f.Skip}
		if f.Line <= 0 || f.EndLine < f.Line {
			t.Errorf("%s: lines %d..%d", f.QualName, f.Line, f.EndLine)
		}
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: kind, skip %q, want %q", name, got[name], w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected function %s (nested functions and re-exports are no units)", name)
		}
	}
	for _, f := range g.Functions {
		if f.QualName == "Box.value" && f.Line != 24 {
			t.Errorf("Box.value starts at line %d, want 24 (its decorator)", f.Line)
		}
	}

	g = runEngine(t, "import no_such_module_xyz\n\ndef f():\n    return 1\n", "", 3)
	if g.Status != "exception" || g.MissingModule != "no_such_module_xyz" {
		t.Errorf("missing module: status %s, missing %q (%s)", g.Status, g.MissingModule, g.Detail)
	}
	g = runEngine(t, "import no_such_module_xyz\n\ndef f():\n    return 1\n", "f", 3)
	if g.Status != "exception" || g.Reason != "import_failed" || len(g.Inputs) != 0 {
		t.Errorf("missing module, generate: status %s, reason %q", g.Status, g.Reason)
	}
	g = runEngine(t, "class E(Exception):\n    def __str__(self):\n        while True:\n            pass\n\nraise E()\n", "", 3)
	if g.Status != "exception" || g.Detail != "import failed" {
		t.Errorf("import raising an exception whose str never returns: status %s (%s)", g.Status, g.Detail)
	}
	g = runEngine(t, "def f(:\n", "", 3)
	if g.Status != "invalid" {
		t.Errorf("syntax error: status %s, want invalid", g.Status)
	}
	// many functions: at most 5000 are listed; a class whose constructor never returns costs
	// the find run its budget, not more
	var many strings.Builder
	many.WriteString("class Slow:\n    def __init__(self):\n        while True:\n            pass\n\n    def m(self):\n        return 1\n\n")
	for i := range 6000 {
		fmt.Fprintf(&many, "def f%d(x):\n    return x + %d\n", i, i)
	}
	g = runEngine(t, many.String(), "", 5)
	if g.Status != "ok" || len(g.Functions) != 5000 {
		t.Errorf("6001 functions: status %s (%s), %d listed, want 5000", g.Status, g.Detail, len(g.Functions))
	}
	for _, f := range g.Functions {
		if f.QualName == "Slow.m" && f.Skip != "class_needs_arguments" && f.Skip != "" {
			t.Errorf("Slow.m: skip %q", f.Skip)
		}
	}
	g = runEngine(t, "x = "+strings.Repeat("(", 5000)+strings.Repeat(")", 5000)+"\n", "", 3)
	if g.Status != "invalid" {
		t.Errorf("nesting too deep to parse: status %s, want invalid", g.Status)
	}
	g = runEngine(t, "while True:\n    pass\n", "", 2)
	if g.Status != "exception" || !strings.Contains(g.Detail, "timed out") {
		t.Errorf("import that never ends: status %s (%s)", g.Status, g.Detail)
	}
}
