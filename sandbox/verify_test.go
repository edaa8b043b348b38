package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/schemas"
)

// The golden traces under testdata/verify are real traces of the programs below, recorded by
// TestVerifyGoldenUpdate with the live sandbox:
//
//	go test ./sandbox -run TestVerifyGoldenUpdate -verify.update
//
// Their locals are dropped (verifyTrace does not read them).
var verifyUpdate = flag.Bool("verify.update", false, "re-record the golden traces of testdata/verify with the live sandbox")

const verifyGoldenDir = "testdata/verify"

// verifyCallProgram is a function-level program of the golden set.
type verifyCallProgram struct {
	name, code, call string
	// entry is traceEnd.Entry for the run ("" when the call is not a plain call of a function).
	entry string
	// reject: an honest run verifyTrace rejects by design; the error contains this.
	reject string
}

var verifyCallPrograms = []verifyCallProgram{
	{name: "decorators", entry: "f", call: "f(3)", code: `import functools


def deco(fn):
    @functools.wraps(fn)
    def w(*a):
        return fn(*a)
    return w


@deco
@deco
def f(x):
    return [i * i for i in range(x)]
`},
	{name: "undecorated_entry", entry: "f", call: "f(3)", code: `def f(x):
    total = 0
    for i in range(x):
        total += i
    else:
        total = -total
    return total
`},
	{name: "generators", entry: "f", call: "f()", code: `def g(n):
    for i in range(n):
        yield i
    return 7


def f():
    it = g(2)
    a = next(it)
    b = list(it)
    return a, b
`},
	{name: "generator_close_throw", entry: "f", call: "f()", code: `def g():
    try:
        yield 1
        yield 2
    finally:
        x = 3


def f():
    it = g()
    next(it)
    it.close()
    it2 = g()
    next(it2)
    try:
        it2.throw(ValueError("v"))
    except ValueError:
        pass
    return 1
`},
	{name: "yield_from", entry: "f", call: "f()", code: `def inner():
    yield 1
    yield 2
    return 3


def outer():
    r = yield from inner()
    yield r


def f():
    return list(outer())
`},
	{name: "exception_caught_then_escapes", entry: "f", call: "f()", code: `def h(x):
    if x:
        raise KeyError(x)
    return 1


def f():
    try:
        h(1)
    except KeyError:
        pass
    return h(2)
`},
	{name: "exception_uncaught", entry: "f", call: "f()", code: `def h(x):
    raise KeyError(x)


def f():
    return h(2)
`},
	{name: "exception_through_finally", entry: "f", call: "f()", code: `def f():
    try:
        raise ValueError("a")
    finally:
        try:
            raise KeyError("b")
        except KeyError:
            pass
`},
	{name: "call_expression_raises", entry: "f", call: "f(1, 2)", code: "def f(a):\n    return a\n"},
	{name: "stopiteration_becomes_runtimeerror", call: "list(g())", code: `def g():
    next(iter([]))
    yield 1
`},
	{name: "next_of_empty_generator", call: "next(g())", code: `def g():
    return
    yield
`},
	{name: "nested_lambda_genexpr_class", entry: "f", call: "f(2)", code: `def f(n):
    def g(k):
        return (lambda z: z + 1)(k)
    total = sum(g(i) for i in range(n))
    class C:
        y = 2
        squares = {j: j * j for j in range(2)}
        def m(self):
            return self.y
    return total + C().m()
`},
	{name: "comprehension_on_decorator_line", entry: "f", call: "f()", code: `def deco(x):
    return lambda fn: fn


def f():
    @deco([i for i in range(2)])
    def g():
        return 1
    return g()
`},
	{name: "lambda_on_matmul_continuation_line", entry: "f", call: "f(M())", code: `def f(m):
    return (m
            @ (lambda: 2)())


def g():
    pass


class M:
    def __matmul__(self, o):
        return o
`},
	{name: "recursion_limit", entry: "f", call: "f(0)", code: `import sys


def r(n):
    return r(n + 1)


def f(n):
    sys.setrecursionlimit(90)
    return r(n)
`},
	{name: "recursion_error_in_c_caught", entry: "f", call: "f()", code: `import json


def hook(d):
    return d


def f():
    s = '{"a":' * 3000 + '1' + '}' * 3000
    try:
        json.loads(s, object_hook=hook)
    except RecursionError:
        return "caught"
`},
	{name: "crlf_source", entry: "f", call: "f(1)", code: "def f(x):\r\n    y = x + 1\r\n\r\n    return y\r\n"},
	{name: "cr_source", entry: "f", call: "f(1)", code: "def f(x):\r    y = x + 1\r    return y\r"},
	{name: "non_ascii_source", entry: "f", call: "f('é')", code: "def f(s):\n    ünï = s + 'ß→😀'\n    return ünï\n"},
	{name: "asyncio_run", entry: "f", call: "f()", code: `import asyncio


async def h(x):
    await asyncio.sleep(0)
    return x


async def main():
    return await h(1) + await h(2)


def f():
    return asyncio.run(main())
`},
	{name: "with_try_while_else", entry: "f", call: "f()", code: `class CM:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return True


def f():
    with CM() as c:
        raise ValueError
    try:
        x = 1
    finally:
        x = 2
    i = 0
    while i < 2:
        i += 1
    else:
        i = 10
    return x, i
`},
	{name: "del_after_return", entry: "f", call: "f()", code: `class D:
    def __del__(self):
        x = 1


def f():
    d = D()
    return 5
`},
	{name: "class_call", call: "C(1)", code: `class C:
    def __init__(self, v):
        self.v = v
`},
	{name: "multiline_statements", entry: "f", call: "f(1)", code: `def f(a,
      b=2):
    x = (a +
         b)
    return [
        x,
        a,
    ]
`},
	{name: "sys_exit", entry: "f", call: "f()", code: `import sys


def f():
    sys.exit(3)
`},
	{name: "code_compiled_under_own_name", entry: "f", call: "f()", code: `def f():
    code = compile("\n" * 50 + "def h():\n    return 1\n", "main.py", "exec")
    ns = {}
    exec(code, ns)
    return ns["h"]()
`},
	{name: "decorated_entry_by_traced_wrapper", entry: "f", call: "f(2)", code: `def twice(fn):
    def wrapper(x):
        return fn(fn(x))
    return wrapper


@twice
def f(x):
    return x * 3
`},
	{name: "impure_repr_result", entry: "f", call: "f()", code: `class R:
    def __init__(self):
        self.n = 0

    def __repr__(self):
        self.n += 1
        return "R%d" % self.n


def g():
    return 1


def f():
    r = R()
    a = g()
    return r
`},
	{name: "generator_started_by_module_body", entry: "f", call: "f()", code: `def gen():
    yield 1
    yield 2


G = gen()
next(G)


def f():
    return next(G)
`},
	{name: "generator_closed_after_entry_returns", entry: "f", call: "f()", code: `def gen():
    try:
        yield 1
        yield 2
    finally:
        z = 0


def f():
    g = gen()
    return next(g)
`},
	{name: "signal_handler", entry: "f", call: "f()", code: `import os
import signal


def handler(sig, frame):
    x = sig


def f():
    signal.signal(signal.SIGUSR1, handler)
    os.kill(os.getpid(), signal.SIGUSR1)
    y = 1
    return y
`},
	{name: "gc_collects_cycles_with_del", entry: "f", call: "f()", code: `import gc


class N:
    def __init__(self):
        self.me = self

    def __del__(self):
        k = 1


def f():
    for i in range(3):
        N()
    gc.collect()
    return 1
`},
	{name: "finally_return_overrides_exception", entry: "f", call: "f()", code: `def f():
    try:
        raise ValueError
    finally:
        return 5
`},
	{name: "property_error_caught_by_getattr", entry: "f", call: "f()", code: `class C:
    @property
    def p(self):
        raise AttributeError("no")


def f():
    return getattr(C(), "p", 7)
`},
	{name: "fork", entry: "f", call: "f()", code: `import os


def child():
    return 3


def f():
    pid = os.fork()
    if pid == 0:
        child()
        os._exit(0)
    os.waitpid(pid, 0)
    return child()
`},
	{name: "async_generator", entry: "f", call: "f()", code: `import asyncio


async def agen():
    for i in range(3):
        yield i
        await asyncio.sleep(0)


async def main():
    return [x async for x in agen()]


def f():
    return asyncio.run(main())
`},
	{name: "metaclass_hooks", entry: "f", call: "f()", code: `class Meta(type):
    def __new__(m, name, bases, ns):
        return super().__new__(m, name, bases, ns)


class D:
    def __set_name__(self, owner, name):
        self.name = name


class Base:
    def __init_subclass__(cls, **kw):
        cls.tag = 1


def f():
    class K(Base, metaclass=Meta):
        d = D()
    return K.tag
`},
	{name: "del_raises", entry: "f", call: "f()", code: `class D:
    def __del__(self):
        raise ValueError("in del")


def f():
    D()
    return 2
`},
	{name: "exception_group_star", entry: "f", call: "f()", code: `class MyGroup(ExceptionGroup):
    pass


def f():
    try:
        raise MyGroup("g", [ValueError(1), TypeError(2)])
    except* ValueError:
        pass
`},
	{name: "generators_closed_by_gc", entry: "f", call: "f()", code: `import gc


def gen():
    while True:
        try:
            yield 1
        except GeneratorExit:
            return


def f():
    gs = [gen() for _ in range(3)]
    for g in gs:
        next(g)
    del gs, g
    gc.collect()
    return 0
`},
	{name: "entry_misused_on_generator", entry: "f", call: "list(f())", code: `def f():
    yield 1
`},
	{name: "tabs_formfeed_long_line", entry: "f", call: "f()", code: "def f():\n\tx = 1\n\x0c\n\treturn x + " + strings.Repeat("1 + ", 400) + "1\n"},
	{name: "recursion_error_in_untraced_code_caught", entry: "f", call: "f()", reject: "never returned", code: `import copy
import json


def go():
    x = json.loads("[" * 800 + "]" * 800)
    return len(copy.deepcopy(x))


def f():
    try:
        return go()
    except RecursionError:
        return "caught"
`},
	{name: "tracing_switched_off", entry: "f", call: "f()", reject: "never returned", code: `import sys


def g():
    return 2


def f():
    sys.settrace(None)
    x = g()
    return x
`},
}

// verifyRepoProgram is a repository whose tests the golden set traces.
type verifyRepoProgram struct {
	name, runner string
	files        map[string]string
	binary       map[string][]byte // files that are not UTF-8
	reject       map[string]string // test id -> expected error of an honest run rejected by design
}

var verifyRepoPrograms = []verifyRepoProgram{
	{name: "repo_imports", runner: "pytest", files: map[string]string{
		"pkg/__init__.py": "",
		"pkg/lazy.py": `"""Imported inside a test, so its module body is traced."""
import functools


def deco(*a):
    def w(fn):
        return fn
    return w


@deco([i for i in range(2)])
def f(x):
    return x + 1


class K:
    z = [j for j in range(2)]

    def m(self):
        return 3


g = lambda: 4
GEN = (i for i in range(3))
next(GEN)
`,
		"tests/__init__.py": "",
		"tests/conftest.py": `import pytest


@pytest.fixture
def res():
    v = [1]
    yield v
    v.append(2)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    out = yield
`,
		"tests/test_lazy.py": `import os
import threading


def test_import(res):
    from pkg import lazy
    assert lazy.f(1) == 2
    assert lazy.K().m() == 3
    assert lazy.g() == 4
    assert next(lazy.GEN) == 1


def helper():
    return 5


def test_thread():
    t = threading.Thread(target=helper)
    t.start()
    t.join()
    assert helper() == 5


def test_code_compiled_under_another_file_name():
    p = os.path.join(os.path.dirname(__file__), "template.txt")
    code = compile("\n" * 40 + "def h():\n    return 1\n", p, "exec")
    ns = {}
    exec(code, ns)
    assert ns["h"]() == 1
`,
		"tests/template.txt": "hello\n{{ x }}\n",
	}},
	{name: "repo_encodings", runner: "pytest", files: map[string]string{
		"crlf.py":   "def a(x):\r\n    y = x\r\n\r\n    return y\r\n",
		"cr.py":     "def b(x):\r    y = x\r    return y\r",
		"bom.py":    "\ufeffdef d():\n    return 1\n",
		"utf8.py":   "def e():\n    s = 'é→😀'\n    return s\n",
		"nonl.py":   "def h():\n    return 8",
		"second.py": "#!/usr/bin/env python3\n# -*- coding: latin-1 -*-\ndef k():\n    return 'ok'\n",
		"tests/test_enc.py": `from bom import d
from cr import b
from crlf import a
from cp1252 import w
from lat import c
from nonl import h
from second import k
from utf8 import e


def test_all():
    assert a(1) == 1
    assert b(2) == 2
    assert c() == '\xe9'
    assert d() == 1
    assert e()
    assert h() == 8
    assert k() == 'ok'
    assert w() == '\u20ac'
`,
	}, binary: map[string][]byte{
		"lat.py":    []byte("# -*- coding: latin-1 -*-\ndef c():\n    s = '\xe9'\n    return s\n"),
		"cp1252.py": []byte("# coding: cp1252\ndef w():\n    s = '\x80'\n    return s\n"),
	}},
	{name: "repo_outcomes", runner: "pytest", files: map[string]string{
		"calc.py": `def div(a, b):
    return a / b


def safe_div(a, b):
    try:
        return div(a, b)
    except ZeroDivisionError:
        return None


class Acc:
    def __init__(self):
        self.items = []

    @property
    def size(self):
        return len(self.items)

    @staticmethod
    def make():
        return Acc()

    def add(self, *xs):
        for x in xs:
            self.items.append(x)
        return self
`,
		"tests/test_calc.py": `import asyncio

import pytest

from calc import Acc, div, safe_div


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


@pytest.fixture
def acc():
    a = Acc.make()
    yield a
    a.items.clear()


@pytest.mark.parametrize("a,b", [(x, x + 1) for x in range(2)])
def test_param(a, b):
    assert safe_div(a, b) == a / b


def test_zero():
    assert safe_div(1, 0) is None


def test_fails():
    assert div(1, 0) == 1


def test_fixture_error(broken):
    pass


class TestAcc:
    def test_add(self, acc):
        assert acc.add(1, 2).size == 2

    def test_async(self):
        async def two():
            await asyncio.sleep(0)
            return 2
        assert asyncio.run(two()) == 2
`,
	}},
	{name: "repo_unittest", runner: "unittest", files: map[string]string{
		"mod.py":            "def double(x):\n    return 2 * x\n",
		"tests/__init__.py": "",
		"tests/test_mod.py": `import unittest

from mod import double


class T(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.k = 2

    def setUp(self):
        self.v = 1

    def test_ok(self):
        self.assertEqual(double(self.v), self.k)

    def test_bad(self):
        self.assertEqual(double(2), 5)

    def test_sub(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertEqual(double(i), 2 * i)

    def tearDown(self):
        self.v = None
`,
	}},
}

// verifyGoldenProgram is the first line of a golden file: the program.
type verifyGoldenProgram struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Code   string `json:"code,omitempty"`
	Call   string `json:"call,omitempty"`
	Entry  string `json:"entry,omitempty"`
	Dir    string `json:"dir,omitempty"` // the checkout's path when the traces were recorded
	Runner string `json:"runner,omitempty"`
	// Files and Binary are the checkout's files by slash-separated relative path (Binary: those
	// that are not UTF-8).
	Files  map[string]string `json:"files,omitempty"`
	Binary map[string][]byte `json:"binary,omitempty"`
}

// verifyGoldenRun is one traced run of a golden file's program.
type verifyGoldenRun struct {
	Test      string               `json:"test,omitempty"`
	Status    schemas.Status       `json:"status"`
	Value     string               `json:"value"`
	ExcType   string               `json:"exc_type"`
	Reject    string               `json:"reject,omitempty"`
	Events    []schemas.Event      `json:"-"`
	Blocks    []schemas.Block      `json:"-"`
	Functions []schemas.FuncSource `json:"-"`
}

// verifyGoldenLine is one line of a golden file (JSON Lines): exactly one field is set. The
// program comes first, then each run followed by its blocks, function records and events.
type verifyGoldenLine struct {
	Program  *verifyGoldenProgram `json:"program,omitempty"`
	Run      *verifyGoldenRun     `json:"run,omitempty"`
	Block    *schemas.Block       `json:"block,omitempty"`
	Function *schemas.FuncSource  `json:"function,omitempty"`
	Event    *schemas.Event       `json:"event,omitempty"`
}

type verifyGolden struct {
	path string
	prog verifyGoldenProgram
	runs []*verifyGoldenRun
}

func readVerifyGolden(t testing.TB, path string) *verifyGolden {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g := &verifyGolden{path: path}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	var run *verifyGoldenRun
	for n := 1; sc.Scan(); n++ {
		var l verifyGoldenLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		switch {
		case l.Program != nil:
			g.prog = *l.Program
		case l.Run != nil:
			run = l.Run
			g.runs = append(g.runs, run)
		case run == nil:
			t.Fatalf("%s:%d: a trace line before any run", path, n)
		case l.Block != nil:
			run.Blocks = append(run.Blocks, *l.Block)
		case l.Function != nil:
			run.Functions = append(run.Functions, *l.Function)
		case l.Event != nil:
			run.Events = append(run.Events, *l.Event)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return g
}

func writeVerifyGolden(t testing.TB, path string, g *verifyGolden) {
	t.Helper()
	var b bytes.Buffer
	put := func(l verifyGoldenLine) {
		line, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	put(verifyGoldenLine{Program: &g.prog})
	for _, r := range g.runs {
		put(verifyGoldenLine{Run: r})
		for i := range r.Blocks {
			put(verifyGoldenLine{Block: &r.Blocks[i]})
		}
		for i := range r.Functions {
			put(verifyGoldenLine{Function: &r.Functions[i]})
		}
		for i := range r.Events {
			e := r.Events[i]
			e.Locals = nil
			put(verifyGoldenLine{Event: &e})
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readVerifyGoldens(t testing.TB) []*verifyGolden {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(verifyGoldenDir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no golden traces in %s", verifyGoldenDir)
	}
	var out []*verifyGolden
	for _, p := range paths {
		out = append(out, readVerifyGolden(t, p))
	}
	return out
}

// verifyCase is one golden run ready to verify: a test run's checkout is laid out anew and its
// paths rewritten.
type verifyCase struct {
	name      string
	events    []schemas.Event
	functions []schemas.FuncSource
	blocks    []schemas.Block
	src       traceSource
	end       *traceEnd
	reject    string
	dir       string // test runs: the checkout
}

// verifyCases turns the golden files into cases. Each case has its own copy of the trace.
func verifyCases(t testing.TB) []*verifyCase {
	t.Helper()
	var out []*verifyCase
	for _, g := range readVerifyGoldens(t) {
		dir := ""
		if g.prog.Kind == "test" {
			dir = filepath.Join(t.TempDir(), g.prog.Name)
			for rel, content := range g.prog.Files {
				writeVerifyFile(t, dir, rel, []byte(content))
			}
			for rel, content := range g.prog.Binary {
				writeVerifyFile(t, dir, rel, content)
			}
		}
		for _, r := range g.runs {
			c := &verifyCase{name: g.prog.Name, blocks: slices.Clone(r.Blocks), functions: slices.Clone(r.Functions),
				events: slices.Clone(r.Events), reject: r.Reject, dir: dir,
				end: &traceEnd{Status: r.Status, Value: r.Value, ExcType: r.ExcType, Kind: g.prog.Kind, Entry: g.prog.Entry}}
			if g.prog.Kind == "test" {
				c.name += "/" + r.Test
				move := func(p string) string {
					if rel, ok := strings.CutPrefix(p, g.prog.Dir+"/"); ok {
						return dir + "/" + rel
					}
					return p
				}
				for i := range c.events {
					c.events[i].File = move(c.events[i].File)
				}
				for i := range c.functions {
					c.functions[i].File = move(c.functions[i].File)
				}
				c.src = dirSource(dir, 1<<20, 100)
			} else {
				c.src = codeSource("main.py", g.prog.Code)
			}
			out = append(out, c)
		}
	}
	return out
}

func writeVerifyFile(t testing.TB, dir, rel string, content []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (c *verifyCase) verify() error {
	return verifyTrace(c.events, c.functions, c.blocks, c.src, c.end)
}

// TestVerifyGolden verifies the recorded honest traces: none is rejected, but for the runs
// rejected by design (tracing switched off by the code itself).
func TestVerifyGolden(t *testing.T) {
	cases := verifyCases(t)
	events := 0
	for _, c := range cases {
		events += len(c.events)
		t.Run(c.name, func(t *testing.T) {
			err := c.verify()
			switch {
			case c.reject == "" && err != nil:
				t.Fatalf("honest trace rejected: %v", err)
			case c.reject != "" && (err == nil || !strings.Contains(err.Error(), c.reject)):
				t.Fatalf("got %v, want an error containing %q", err, c.reject)
			case err != nil && !errors.Is(err, errTraceInconsistent):
				t.Fatalf("error %v does not wrap errTraceInconsistent", err)
			case c.reject == "never returned" && !errors.Is(err, errTraceCut):
				t.Fatalf("error %v does not wrap errTraceCut", err)
			}
			// Any prefix of an honest trace is what a run cut by a limit leaves.
			if c.reject == "" {
				for _, n := range []int{0, 1, len(c.events) / 3, len(c.events) / 2, len(c.events) - 1} {
					if n < 0 || n > len(c.events) {
						continue
					}
					end := &traceEnd{Status: schemas.StatusTimeout, Kind: c.end.Kind}
					if err := verifyTrace(c.events[:n], c.functions, c.blocks, c.src, end); err != nil {
						t.Fatalf("prefix of %d events rejected: %v", n, err)
					}
				}
			}
		})
	}
	t.Logf("%d golden runs, %d events", len(cases), events)
}

// verifyCaseNamed returns a fresh copy of the golden case named name.
func verifyCaseNamed(t *testing.T, name string) *verifyCase {
	t.Helper()
	for _, c := range verifyCases(t) {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no golden case %q", name)
	return nil
}

// findEvent returns the index of the n-th (from 0) event matching pred.
func findEvent(t *testing.T, evs []schemas.Event, n int, pred func(e *schemas.Event) bool) int {
	t.Helper()
	for i := range evs {
		if pred(&evs[i]) {
			if n == 0 {
				return i
			}
			n--
		}
	}
	t.Fatalf("no such event")
	return -1
}

func strp(s string) *string { return &s }

// textLines returns every line of t.
func textLines(t *traceText) []string {
	out := make([]string, t.numLines())
	for i := range out {
		out[i] = t.line(i + 1)
	}
	return out
}

// TestVerifyForgeries mutates honest traces the way traced code could and checks that each
// forgery is rejected, with the error saying why.
func TestVerifyForgeries(t *testing.T) {
	isEvent := func(kind, fn string) func(e *schemas.Event) bool {
		return func(e *schemas.Event) bool { return e.Event == kind && (fn == "" || e.Func == fn) }
	}
	for _, tc := range []struct {
		name, golden, want string
		mutate             func(t *testing.T, c *verifyCase)
	}{
		{"change a src", "generators", `the event says "    yield 2"`, func(t *testing.T, c *verifyCase) {
			c.events[findEvent(t, c.events, 0, isEvent("line", "g"))].Src = "    yield 2"
		}},
		{"src of a line with the text of another", "generators", `line 8 of main.py is`, func(t *testing.T, c *verifyCase) {
			c.events[findEvent(t, c.events, 0, func(e *schemas.Event) bool { return e.Lineno == 8 })].Src = "    b = list(it)"
		}},
		{"shift a lineno", "generators", "line 3 of main.py is", func(t *testing.T, c *verifyCase) {
			c.events[findEvent(t, c.events, 0, isEvent("line", "g"))].Lineno++
		}},
		{"shift a line into another function", "generators", "no single top-level statement holds", func(t *testing.T, c *verifyCase) {
			i := findEvent(t, c.events, 0, isEvent("line", "g"))
			c.events[i].Lineno, c.events[i].Src = 10, "    b = list(it)"
		}},
		{"line past the end of the file", "generators", "main.py has no line 99", func(t *testing.T, c *verifyCase) {
			c.events[findEvent(t, c.events, 0, isEvent("line", "f"))].Lineno = 99
		}},
		{"drop a return", "exception_caught_then_escapes", "is the innermost running frame", func(t *testing.T, c *verifyCase) {
			i := findEvent(t, c.events, 0, isEvent("return", "h"))
			c.events = slices.Delete(c.events, i, i+1)
		}},
		{"drop the last return", "generators", "never returned", func(t *testing.T, c *verifyCase) {
			c.events = c.events[:len(c.events)-1]
		}},
		{"insert a line event of another frame", "generators", "frame 2 (g) is the innermost running frame", func(t *testing.T, c *verifyCase) {
			i := findEvent(t, c.events, 0, isEvent("line", "g"))
			fake := c.events[1] // a line event of f
			c.events = slices.Insert(c.events, i+1, fake)
		}},
		{"insert a line event of a new frame", "generators", "the first event of frame 2 is a line event", func(t *testing.T, c *verifyCase) {
			fake := c.events[1]
			fake.Frame = 2
			c.events = slices.Insert(c.events, 2, fake)
		}},
		{"skip a frame number", "generators", "a new frame is numbered 2", func(t *testing.T, c *verifyCase) {
			for i := range c.events {
				if c.events[i].Frame == 2 {
					c.events[i].Frame = 5
				}
			}
		}},
		{"change a depth", "generators", "runs at depth 1, the event says 0", func(t *testing.T, c *verifyCase) {
			c.events[findEvent(t, c.events, 0, isEvent("line", "g"))].Depth = 0
		}},
		{"change a call's depth", "generators", "is called at depth 0, but 1 traced frames are running", func(t *testing.T, c *verifyCase) {
			i := findEvent(t, c.events, 0, isEvent("call", "g"))
			for j := i; j < len(c.events); j++ {
				if c.events[j].Frame == c.events[i].Frame {
					c.events[j].Depth = 0
				}
			}
		}},
		{"insert an event after the final return", "generators", "which returned at event", func(t *testing.T, c *verifyCase) {
			c.events = append(c.events, c.events[len(c.events)-2]) // f's last line event
		}},
		{"resume a plain frame that is running", "generators", "which is running since event", func(t *testing.T, c *verifyCase) {
			c.events = slices.Insert(c.events, 2, c.events[0])
		}},
		{"rename a frame's function", "generators", "frame 2 is g in main.py, the event says f in main.py", func(t *testing.T, c *verifyCase) {
			c.events[findEvent(t, c.events, 0, isEvent("line", "g"))].Func = "f"
		}},
		{"return value disagrees with the end record", "undecorated_entry", "the end record says", func(t *testing.T, c *verifyCase) {
			c.end.CompareValue = true
			c.events[len(c.events)-1].Value = strp("42")
		}},
		{"end value disagrees with the return", "decorators", "the end record says", func(t *testing.T, c *verifyCase) {
			c.end.Entry, c.end.CompareValue = "deco.<locals>.w", true
			c.end.Value = "[0, 1]"
		}},
		{"status ok although the entry frame unwound", "exception_uncaught", "left by an exception", func(t *testing.T, c *verifyCase) {
			c.end.Status, c.end.ExcType = schemas.StatusOK, ""
		}},
		{"status exception although the entry frame returned", "undecorated_entry", "saw no such exception", func(t *testing.T, c *verifyCase) {
			c.end.Status, c.end.ExcType = schemas.StatusException, "ValueError"
		}},
		{"exception type rewritten", "exception_uncaught", "the run ended with KeyError", func(t *testing.T, c *verifyCase) {
			for i := range c.events {
				if c.events[i].Event == "exception" {
					c.events[i].ExcType = "IndexError"
				}
			}
		}},
		{"unwind without an exception", "generators", "does not follow its exception event", func(t *testing.T, c *verifyCase) {
			i := findEvent(t, c.events, 0, isEvent("return", "g"))
			c.events[i].Unwind, c.events[i].Value = true, strp("None")
		}},
		{"value on a line event", "generators", "a line event with a value", func(t *testing.T, c *verifyCase) {
			c.events[1].Value = strp("1")
		}},
		{"unknown event kind", "generators", `unknown event kind "c_call"`, func(t *testing.T, c *verifyCase) {
			c.events[1].Event = "c_call"
		}},
		{"event of another file", "generators", `"other.py" is not a file this run may trace`, func(t *testing.T, c *verifyCase) {
			c.events[1].File = "other.py"
		}},
		{"blocks record removed", "generators", "has no blocks record", func(t *testing.T, c *verifyCase) {
			c.blocks = nil
		}},
		{"blocks overlap", "generators", "overlap or precede", func(t *testing.T, c *verifyCase) {
			c.blocks = append(c.blocks, c.blocks[0])
		}},
		{"block past the end", "generators", "which has 11 lines", func(t *testing.T, c *verifyCase) {
			c.blocks[len(c.blocks)-1].End = 12
		}},
		{"function record with altered source", "repo_outcomes/tests/test_calc.py::test_zero", "the record says", func(t *testing.T, c *verifyCase) {
			c.functions[0].Source = strings.Replace(c.functions[0].Source, "1, 0", "1, 1", 1)
		}},
		{"function record past the end of its file", "repo_outcomes/tests/test_calc.py::test_zero", "which has", func(t *testing.T, c *verifyCase) {
			c.functions[0].LastLine += 1000
		}},
		{"function records overlapping", "repo_outcomes/tests/test_calc.py::test_zero", "overlap without nesting", func(t *testing.T, c *verifyCase) {
			f := c.functions[0]
			f.FirstLine, f.LastLine = f.FirstLine+1, f.LastLine+1
			f.Source = "x"
			txt, _ := c.src(f.File)
			f.Source, _ = txt.block(f.FirstLine, f.LastLine)
			c.functions = append(c.functions, f)
		}},
		{"event outside every function record", "repo_outcomes/tests/test_calc.py::test_zero", "which no single function record holds", func(t *testing.T, c *verifyCase) {
			i := findEvent(t, c.events, 0, isEvent("line", "test_zero"))
			txt, _ := c.src(c.events[i].File)
			c.events[i].Lineno = 1
			c.events[i].Src = txt.line(1)
		}},
		{"file outside the checkout", "repo_outcomes/tests/test_calc.py::test_zero", `"/etc/passwd" is not a file this run may trace`, func(t *testing.T, c *verifyCase) {
			c.events[0].File = "/etc/passwd"
		}},
		{"dot-dot path out of the checkout", "repo_outcomes/tests/test_calc.py::test_zero", "is not a file this run may trace", func(t *testing.T, c *verifyCase) {
			writeVerifyFile(t, filepath.Dir(c.dir), "outside/tests/test_calc.py", mustRead(t, filepath.Join(c.dir, "tests/test_calc.py")))
			for i := range c.events {
				if strings.HasSuffix(c.events[i].File, "/tests/test_calc.py") {
					c.events[i].File = c.dir + "/../outside/tests/test_calc.py"
				}
			}
		}},
		{"function record of a file outside the checkout", "repo_outcomes/tests/test_calc.py::test_zero", "function record 0", func(t *testing.T, c *verifyCase) {
			c.functions[0].File = c.dir + "/../x.py"
		}},
		{"tracing switched off in a test", "repo_outcomes/tests/test_calc.py::test_zero", "never returned", func(t *testing.T, c *verifyCase) {
			c.events = c.events[:len(c.events)-3]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := verifyCaseNamed(t, tc.golden)
			if err := c.verify(); err != nil {
				t.Fatalf("the honest trace is rejected: %v", err)
			}
			tc.mutate(t, c)
			err := c.verify()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if !errors.Is(err, errTraceInconsistent) {
				t.Fatalf("error %v does not wrap errTraceInconsistent", err)
			}
		})
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDirSource checks which files a test run's source hands out.
func TestDirSource(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "repo")
	writeVerifyFile(t, dir, "a.py", []byte("x = 1\n"))
	writeVerifyFile(t, dir, "sub/b.py", []byte("y = 2\n"))
	writeVerifyFile(t, dir, "big.py", bytes.Repeat([]byte("#\n"), 600))
	writeVerifyFile(t, root, "outside.py", []byte("z = 3\n"))
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(root, "outside.py"), filepath.Join(dir, "escape.py")))
	must(os.Symlink(filepath.Join(root), filepath.Join(dir, "up")))
	must(os.Symlink("sub/b.py", filepath.Join(dir, "inside.py")))
	must(os.Symlink("sub", filepath.Join(dir, "sublink")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo.py"), 0o644))
	for _, tc := range []struct {
		file string
		ok   bool
	}{
		{dir + "/a.py", true},
		{dir + "/sub/b.py", true},
		{dir + "/sub/../a.py", true},
		{dir + "/./sub//b.py", true},
		{dir + "/inside.py", true},
		{dir + "/sublink/b.py", true},
		{dir + "/sublink/../a.py", true}, // .. after a link within the checkout: dir/a.py
		{dir + "/../outside.py", false},
		{dir + "/sub/../../outside.py", false},
		{dir + "/escape.py", false},
		{dir + "/up/outside.py", false},
		{dir + "/up/repo/a.py", true}, // the link leaves and comes back: the file is inside
		{dir + "/missing.py", false},
		{dir + "/sub", false},
		{dir + "/fifo.py", false},
		{dir + "/big.py", false},
		{"a.py", false},
		{"", false},
		{dir + "/a.py\x00", false},
		{root + "/outside.py", false},
		{dir + "x/a.py", false},
	} {
		src := dirSource(dir, 1000, 10)
		done := make(chan bool)
		go func() {
			_, ok := src(tc.file)
			done <- ok
		}()
		select {
		case ok := <-done:
			if ok != tc.ok {
				t.Errorf("dirSource(%q) ok = %v, want %v", tc.file, ok, tc.ok)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("dirSource(%q) blocks", tc.file)
		}
	}
	src := dirSource(dir, 1000, 2)
	if _, ok := src(dir + "/a.py"); !ok {
		t.Fatal("a.py refused")
	}
	if _, ok := src(dir + "/missing.py"); ok {
		t.Fatal("missing.py accepted")
	}
	if _, ok := src(dir + "/sub/b.py"); ok {
		t.Fatal("a third file accepted with maxFiles 2")
	}
	if txt, ok := src(dir + "/a.py"); !ok || txt.line(1) != "x = 1" {
		t.Fatal("a cached file refused")
	}
}

// TestCodeSource checks the function-level source: one file, invalid UTF-8 replaced per byte as
// the request's JSON encoding replaces it.
func TestCodeSource(t *testing.T) {
	src := codeSource("main.py", "a = '\xff\xfe'\r\nb\rc\n\nd")
	if _, ok := src("other.py"); ok {
		t.Fatal("other.py accepted")
	}
	txt, ok := src("main.py")
	if !ok {
		t.Fatal("main.py refused")
	}
	want := []string{"a = '\ufffd\ufffd'", "b", "c", "", "d"}
	if got := textLines(txt); !slices.Equal(got, want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
	if b, _ := txt.block(1, 3); b != "a = '\ufffd\ufffd'\r\nb\rc" {
		t.Fatalf("block %q", b)
	}
}

// pythonSourceSamples are files whose decoding TestPythonSourceText checks against Python itself.
var pythonSourceSamples = [][]byte{
	[]byte(""),
	[]byte("\n"),
	[]byte("a\n"),
	[]byte("a\nb"),
	[]byte("a\r\nb\r\n"),
	[]byte("a\rb\r"),
	[]byte("a\n\r\n\rb"),
	[]byte("\xef\xbb\xbfdef f():\n    return 'é'\n"),
	[]byte("\xef\xbb\xbf"),
	[]byte("\xef\xbb\xbf# coding: latin-1\nx = 1\n"),
	[]byte("\xef\xbb\xbf# coding: utf-8\nx = 1\n"),
	[]byte("\xef\xbb\xbf# coding: utf8\nx = 1\n"),
	[]byte("# -*- coding: latin-1 -*-\ns = '\xe9'\n"),
	[]byte("#!/usr/bin/python\n# vim: set fileencoding=iso-8859-1 :\ns = '\xe9'\n"),
	[]byte("x = 1\n# coding: latin-1\ns = '\xe9'\n"),
	[]byte("\n# coding=latin_1\ns = '\xe9'\r\n"),
	[]byte("# coding: Latin-1-foo\ns = '\xe9'\n"),
	[]byte("# coding: ISO_8859_1\ns = '\xe9'\n"),
	[]byte("# coding: l1\ns = '\xe9'\n"),
	[]byte("# coding: ascii\ns = 'x'\n"),
	[]byte("# coding: ascii\ns = '\xe9'\n"),
	[]byte("# coding: us-ascii\ns = 'x'\n"),
	[]byte("# coding: cp1252\ns = '\x80'\nt = 'x'\n"),
	[]byte("# coding: no-such-codec\ns = 'x'\n"),
	[]byte("# coding: utf-8\ns = '\xe9'\n"),
	[]byte("s = '\xe9'\n"),
	[]byte("# \xe9\n# coding: latin-1\n"),
	[]byte("x = '\xed\xa0\x80'\n"), // an encoded surrogate: not UTF-8
	[]byte("x = '→😀'\n"),
	[]byte("# hello\r# coding: latin-1\rs = '\xe9'\r"), // the cookie "line" runs to the first \n
	[]byte("\f# coding: latin-1\ns = '\xe9'\n"),
	[]byte("x = 1\x0cy\x1c\u0085 \u2028z\n"),
}

// TestPythonSourceText compares pythonSourceText with Python's own decoding of source files (the
// tracer's): tokenize.detect_encoding, bytes.decode, split on \r\n, \r and \n.
func TestPythonSourceText(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	var in bytes.Buffer
	for _, s := range pythonSourceSamples {
		b, _ := json.Marshal(s)
		in.Write(b)
		in.WriteByte('\n')
	}
	cmd := exec.Command(py, "-c", `import base64, io, json, re, sys, tokenize
for line in sys.stdin:
    data = base64.b64decode(json.loads(line))
    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(enc)
    except Exception:
        print(json.dumps(None))
        continue
    lines = re.split(r"\r\n|\r|\n", text)
    if lines[-1] == "":
        lines.pop()
    print(json.dumps({"enc": enc, "lines": lines}))`)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	results := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(results) != len(pythonSourceSamples) {
		t.Fatalf("%d results for %d samples", len(results), len(pythonSourceSamples))
	}
	for i, s := range pythonSourceSamples {
		var want *struct {
			Enc   string   `json:"enc"`
			Lines []string `json:"lines"`
		}
		if err := json.Unmarshal([]byte(results[i]), &want); err != nil {
			t.Fatal(err)
		}
		got := pythonSourceText(s)
		switch {
		case want == nil:
			// An unknown codec is read as a foreign one (every line may read as "").
			if !got.unreadable && !got.foreignCodec {
				t.Errorf("%q: Python cannot decode it, got lines %q", s, textLines(got))
			}
		case got.unreadable:
			t.Errorf("%q: unreadable, Python decodes it as %s: %q", s, want.Enc, want.Lines)
		case got.foreignCodec:
			// Only the line count and the ASCII lines are known.
			if got.numLines() != len(want.Lines) {
				t.Errorf("%q: %d lines, Python has %d", s, got.numLines(), len(want.Lines))
				continue
			}
			for j, l := range textLines(got) {
				if _, ok := got.srcMatches(j+1, want.Lines[j]); !ok {
					t.Errorf("%q: line %d %q does not accept Python's %q", s, j+1, l, want.Lines[j])
				}
			}
		case !slices.Equal(textLines(got), want.Lines):
			t.Errorf("%q: lines %q, Python's (%s) %q", s, textLines(got), want.Enc, want.Lines)
		}
	}
}

// FuzzVerifyTrace checks that verifyTrace never panics, whatever the events, records, blocks and
// source bytes.
func FuzzVerifyTrace(f *testing.F) {
	f.Add([]byte("def f(x):\n    return x\n"), []byte{0, 1, 0, 1, 0, 1, 1, 1, 0, 2, 0, 1, 2, 1, 0, 2, 0, 1})
	f.Add([]byte("\xef\xbb\xbf# coding: latin-1\n\xe9"), []byte("\x00\x01\x00\x00\x00\x00\x03\x07\x80\xff\x7f"))
	f.Add([]byte("a\rb\r\nc"), bytes.Repeat([]byte{0, 1, 0, 1, 1, 1, 3, 1, 0, 1, 1, 1}, 20))
	f.Fuzz(func(t *testing.T, code, trace []byte) {
		if len(trace) > 1<<14 {
			return
		}
		srcs := []traceSource{
			codeSource("main.py", string(code)),
			func(file string) (*traceText, bool) {
				if file == "main.py" || file == "other.py" {
					return pythonSourceText(code), true
				}
				return nil, false
			},
		}
		at := 0
		next := func() int {
			if at >= len(trace) {
				return 0
			}
			at++
			return int(trace[at-1])
		}
		kinds := []string{"call", "line", "return", "exception", "c_call"}
		files := []string{"main.py", "other.py", "/etc/passwd", ""}
		funcs := []string{"f", "g", "<module>", ""}
		txt := pythonSourceText(code)
		line := func(n int) string {
			if txt.inRange(n) {
				return txt.line(n)
			}
			return ""
		}
		var blocks []schemas.Block
		for k := next() % 4; k > 0; k-- {
			blocks = append(blocks, schemas.Block{File: files[next()%2], Start: next() - 8, End: next() - 8})
		}
		var fns []schemas.FuncSource
		for k := next() % 4; k > 0; k-- {
			a, b := next()-8, next()-8
			s := ""
			if a >= 1 && b >= a && txt.inRange(b) {
				s, _ = txt.block(a, b)
			}
			fns = append(fns, schemas.FuncSource{File: files[next()%2], QualName: funcs[next()%4], FirstLine: a, LastLine: b, Source: s})
		}
		var evs []schemas.Event
		for at < len(trace) {
			e := schemas.Event{Event: kinds[next()%5], Frame: next() - 2, Depth: next() - 2, Lineno: next() - 8,
				File: files[next()%4], Func: funcs[next()%4]}
			if next()%8 == 0 {
				e.Frame = 1 << 40
			}
			switch next() % 3 {
			case 0:
				e.Src = line(e.Lineno)
			case 1:
				e.Src = "x"
			}
			switch flags := next(); {
			case flags&1 != 0:
				e.Value = strp("None")
			case flags&2 != 0:
				e.Value = strp("1")
			}
			if next()%2 == 1 {
				e.Unwind = true
			}
			if next()%3 == 1 {
				e.ExcType = "ValueError"
			}
			evs = append(evs, e)
		}
		statuses := []schemas.Status{schemas.StatusOK, schemas.StatusException, schemas.StatusTimeout}
		for _, src := range srcs {
			for _, end := range []*traceEnd{nil,
				{Status: statuses[len(code)%3], Value: "1", ExcType: "ValueError", Kind: "call", Entry: "f"},
				{Status: statuses[len(trace)%3], Kind: "test"}} {
				_ = verifyTrace(evs, fns, blocks, src, end)
			}
		}
	})
}

// BenchmarkVerifyTrace verifies a synthetic honest trace of 100k events: a loop in f calling g.
func BenchmarkVerifyTrace(b *testing.B) {
	code := "def f(n):\n    t = 0\n    for i in range(n):\n        t += g(i)\n    return t\n\n\ndef g(x):\n    return x * 2\n"
	txt := newTraceText(code)
	ev := func(kind string, frame, depth int, fn string, line int) schemas.Event {
		e := schemas.Event{Event: kind, Frame: frame, Depth: depth, Func: fn, File: "main.py", Lineno: line, Src: txt.line(line)}
		if kind == "return" {
			e.Value = strp("0")
		}
		return e
	}
	evs := []schemas.Event{ev("call", 1, 0, "f", 1), ev("line", 1, 0, "f", 2)}
	for frame := 2; len(evs) < 100000-4; frame++ {
		evs = append(evs, ev("line", 1, 0, "f", 3), ev("line", 1, 0, "f", 4), ev("call", frame, 1, "g", 8),
			ev("line", frame, 1, "g", 9), ev("return", frame, 1, "g", 9))
	}
	evs = append(evs, ev("line", 1, 0, "f", 3), ev("line", 1, 0, "f", 5), ev("return", 1, 0, "f", 5))
	blocks := []schemas.Block{{File: "main.py", Start: 1, End: 5}, {File: "main.py", Start: 8, End: 9}}
	src := codeSource("main.py", code)
	end := &traceEnd{Status: schemas.StatusOK, Value: "0", Kind: "call", Entry: "f"}
	if err := verifyTrace(evs, nil, blocks, src, end); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := verifyTrace(evs, nil, blocks, src, end); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs))*1e5/1e6, "ms/100k-events")
}

// TestVerifyCruxEvalLive traces every CruxEval function as f(<input>) in the live sandbox and
// checks that verifyTrace accepts every trace (zero false positives).
func TestVerifyCruxEvalLive(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	rows := cruxeval.Rows(t)
	const workers = 2
	errs := make([]error, len(rows))
	statuses := make([]schemas.Status, len(rows))
	nevents := make([]int, len(rows))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		sb, err := New(context.Background(), Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(rows); i += workers {
				res, err := sb.Run(context.Background(), Request{Code: rows[i].Code, Call: CallFromInput("f", rows[i].Input)})
				if res == nil {
					errs[i] = err
					continue
				}
				statuses[i], nevents[i] = res.Status, len(res.Events)
				end := &traceEnd{Status: res.Status, Value: res.Value, ExcType: res.ExcType, Kind: "call", Entry: "f", CompareValue: true}
				errs[i] = verifyTrace(res.Events, res.Functions, res.Blocks, codeSource("main.py", rows[i].Code), end)
			}
		}()
	}
	wg.Wait()
	byStatus := map[schemas.Status]int{}
	events := 0
	for i := range rows {
		byStatus[statuses[i]]++
		events += nevents[i]
		if errs[i] != nil {
			t.Errorf("%s: %v", rows[i].ID, errs[i])
		}
	}
	t.Logf("CruxEval: %d traces (%v), %d events verified", len(rows), byStatus, events)
}

// TestVerifyTestReposLive runs every test of the repository fixtures (internal/testrepos) traced
// in the live sandbox and checks that verifyTrace accepts every trace.
func TestVerifyTestReposLive(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	names := testrepos.Names()
	dirs := make([]string, len(names))
	for i, n := range names {
		dirs[i] = testrepos.Dir(t, n)
	}
	sb, err := New(context.Background(), Config{ReadOnly: dirs})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ctx := context.Background()
	runs, events := 0, 0
	for i, name := range names {
		c, err := sb.CollectTests(ctx, CollectRequest{Dir: dirs[i]})
		if err != nil {
			t.Fatal(err)
		}
		for _, test := range c.Tests {
			r, err := sb.RunTest(ctx, TestRequest{Dir: dirs[i], Runner: c.Runner, Test: test, Traced: true,
				Limits: Limits{WallTime: 3 * time.Second}})
			if err != nil {
				t.Fatalf("%s %s: %v", name, test, err)
			}
			res := r.Result
			runs++
			events += len(res.Events)
			end := &traceEnd{Status: res.Status, Value: res.Value, ExcType: res.ExcType, Kind: "test"}
			if err := verifyTrace(res.Events, res.Functions, res.Blocks, dirSource(dirs[i], 8<<20, 10000), end); err != nil {
				t.Errorf("%s %s (%s): %v", name, test, res.Status, err)
			}
		}
	}
	if runs == 0 {
		t.Fatal("no test ran")
	}
	t.Logf("%d repositories, %d traced tests, %d events verified", len(names), runs, events)
}

// TestVerifyGoldenUpdate re-records testdata/verify from the programs above (with -verify.update).
func TestVerifyGoldenUpdate(t *testing.T) {
	if !*verifyUpdate {
		t.Skip("run with -verify.update to re-record the golden traces")
	}
	ctx := context.Background()
	if err := os.MkdirAll(verifyGoldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(verifyGoldenDir, "*.jsonl"))
	for _, p := range old {
		os.Remove(p)
	}
	root := testrepos.MountableDir(t)
	dirs := map[string]string{}
	var mounts []string
	for _, p := range verifyRepoPrograms {
		d := filepath.Join(root, p.name)
		for rel, content := range p.files {
			writeVerifyFile(t, d, rel, []byte(content))
		}
		for rel, content := range p.binary {
			writeVerifyFile(t, d, rel, content)
		}
		dirs[p.name] = d
		mounts = append(mounts, d)
	}
	sb, err := New(ctx, Config{ReadOnly: mounts})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, p := range verifyCallPrograms {
		res, err := sb.Run(ctx, Request{Code: p.code, Call: p.call})
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		g := &verifyGolden{prog: verifyGoldenProgram{Name: p.name, Kind: "call", Code: p.code, Call: p.call, Entry: p.entry},
			runs: []*verifyGoldenRun{{Status: res.Status, Value: res.Value, ExcType: res.ExcType, Reject: p.reject,
				Events: res.Events, Blocks: res.Blocks, Functions: res.Functions}}}
		writeVerifyGolden(t, filepath.Join(verifyGoldenDir, p.name+".jsonl"), g)
		t.Logf("%s: %s, %d events", p.name, res.Status, len(res.Events))
	}
	for _, p := range verifyRepoPrograms {
		dir := dirs[p.name]
		c, err := sb.CollectTests(ctx, CollectRequest{Dir: dir, Runner: p.runner})
		if err != nil || c.Status != schemas.StatusOK || len(c.Errors) > 0 {
			t.Fatalf("%s: collection %v %s %s %q", p.name, err, c.Status, c.Detail, c.Errors)
		}
		g := &verifyGolden{prog: verifyGoldenProgram{Name: p.name, Kind: "test", Dir: dir, Runner: c.Runner,
			Files: p.files, Binary: p.binary}}
		tests := slices.Clone(c.Tests)
		sort.Strings(tests)
		for _, test := range tests {
			r, err := sb.RunTest(ctx, TestRequest{Dir: dir, Runner: c.Runner, Test: test, Traced: true})
			if err != nil {
				t.Fatalf("%s %s: %v", p.name, test, err)
			}
			res := r.Result
			g.runs = append(g.runs, &verifyGoldenRun{Test: test, Status: res.Status, Value: res.Value, ExcType: res.ExcType,
				Reject: p.reject[test], Events: res.Events, Blocks: res.Blocks, Functions: res.Functions})
			t.Logf("%s %s: %s %s, %d events, %d functions", p.name, test, res.Status, r.Outcome, len(res.Events), len(res.Functions))
		}
		writeVerifyGolden(t, filepath.Join(verifyGoldenDir, p.name+".jsonl"), g)
	}
	fmt.Fprintln(os.Stderr, "golden traces written to", verifyGoldenDir)
}
