package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestConformance runs the isolation suite against every registered backend.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite on every backend: long integration test; run without -short")
	}
	for _, name := range sandbox.Backends() {
		t.Run(name, func(t *testing.T) {
			if name == "bwrap" {
				if _, err := exec.LookPath("bwrap"); err != nil {
					t.Skip("bubblewrap is not installed (apt-get install bubblewrap)")
				}
			}
			sandboxtest.Run(t, sandbox.Config{Backend: name})
		})
	}
}

var (
	sharedOnce sync.Once
	sharedSB   *sandbox.Sandbox
	sharedErr  error
)

// TestMain closes the shared sandbox after the tests, so that its cgroup (v1 or v2) is removed.
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedSB != nil {
		sharedSB.Close()
	}
	os.Exit(code)
}

// shared returns one sandbox for the tracer tests of this package.
func shared(t testing.TB) *sandbox.Sandbox {
	t.Helper()
	sharedOnce.Do(func() {
		sharedSB, sharedErr = sandbox.New(context.Background(), sandbox.Config{})
	})
	if sharedErr != nil {
		t.Fatalf("sandbox.New: %v", sharedErr)
	}
	return sharedSB
}

func trace(t *testing.T, code, call string) *sandbox.Result {
	t.Helper()
	res, err := shared(t).Run(context.Background(), sandbox.Request{Code: code, Call: call})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// kinds is the sequence of "event:func:lineno" of a trace, for compact comparisons.
func kinds(evs []schemas.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Event + ":" + e.Func
	}
	return out
}

func count(evs []schemas.Event, event, fn string) int {
	n := 0
	for _, e := range evs {
		if e.Event == event && (fn == "" || e.Func == fn) {
			n++
		}
	}
	return n
}

func local(t *testing.T, e schemas.Event, name string) string {
	t.Helper()
	v, ok := e.Locals.Get(name)
	if !ok {
		t.Fatalf("event %s:%s line %d has no local %q (locals %v)", e.Event, e.Func, e.Lineno, name, e.Locals)
	}
	return v
}

func lastReturn(evs []schemas.Event, fn string) *schemas.Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Event == schemas.EventReturn && evs[i].Func == fn {
			return &evs[i]
		}
	}
	return nil
}

func TestTracer(t *testing.T) {
	tests := []struct {
		name   string
		code   string
		call   string
		status schemas.Status
		value  string
		check  func(t *testing.T, res *sandbox.Result)
	}{
		{name: "loop", code: "def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n",
			call: "f(4)", status: schemas.StatusOK, value: "6",
			check: func(t *testing.T, res *sandbox.Result) {
				evs := res.Events
				if evs[0].Event != "call" || evs[0].Src != "def f(n):" || local(t, evs[0], "n") != "4" || evs[0].Depth != 0 {
					t.Fatalf("first event %+v", evs[0])
				}
				// The loop header is a line event on every iteration, plus the exit check.
				if n := count(evs, "line", "f"); n != 1+5+4+1 {
					t.Errorf("%d line events, want 11: %v", n, kinds(evs))
				}
				// Locals are full at every event and in f_locals order (arguments first).
				last := evs[len(evs)-1]
				if last.Event != "return" || *last.Value != "6" {
					t.Fatalf("last event %+v", last)
				}
				if got := last.Locals; len(got) != 3 || got[0].Name != "n" || got[1].Name != "s" || got[2].Name != "i" {
					t.Errorf("locals at return: %v", got)
				}
				// A line event shows locals before its line runs.
				for _, e := range evs {
					if e.Event == "line" && e.Src == "    return s" && local(t, e, "s") != "6" {
						t.Errorf("s before return = %s", local(t, e, "s"))
					}
				}
			}},
		{name: "recursion", code: "def fact(n):\n    if n <= 1:\n        return 1\n    return n * fact(n - 1)\n",
			call: "fact(5)", status: schemas.StatusOK, value: "120",
			check: func(t *testing.T, res *sandbox.Result) {
				if n := count(res.Events, "call", "fact"); n != 5 {
					t.Errorf("%d calls", n)
				}
				maxDepth := 0
				for _, e := range res.Events {
					maxDepth = max(maxDepth, e.Depth)
				}
				if maxDepth != 4 {
					t.Errorf("max depth %d, want 4", maxDepth)
				}
				// Each recursive frame has its own number and its own locals.
				frames := map[int]string{}
				for _, e := range res.Events {
					if e.Event == "call" {
						frames[e.Frame] = local(t, e, "n")
					}
				}
				if len(frames) != 5 {
					t.Errorf("frames %v", frames)
				}
			}},
		{name: "caught_exception", code: "def f(x):\n    try:\n        y = 1 // x\n    except ZeroDivisionError as e:\n        y = -1\n    return y\n",
			call: "f(0)", status: schemas.StatusOK, value: "-1",
			check: func(t *testing.T, res *sandbox.Result) {
				var exc *schemas.Event
				for i := range res.Events {
					if res.Events[i].Event == "exception" {
						exc = &res.Events[i]
					}
				}
				if exc == nil || exc.ExcType != "ZeroDivisionError" || !strings.Contains(*exc.Value, "division") {
					t.Fatalf("exception event %+v", exc)
				}
			}},
		{name: "uncaught_exception", code: "def g(x):\n    raise ValueError('bad ' + str(x))\n\ndef f(x):\n    return g(x) + 1\n",
			call: "f(3)", status: schemas.StatusException,
			check: func(t *testing.T, res *sandbox.Result) {
				if res.ExcType != "ValueError" || res.ExcMessage != "bad 3" {
					t.Errorf("exception %s: %s", res.ExcType, res.ExcMessage)
				}
				// The exception passes through both frames; each is left by an unwinding return.
				if count(res.Events, "exception", "") != 2 {
					t.Errorf("events %v", kinds(res.Events))
				}
				for _, e := range res.Events {
					if e.Event == "return" && !e.Unwind {
						t.Errorf("return of %s not marked unwind", e.Func)
					}
				}
			}},
		{name: "generator", code: "def gen(n):\n    for i in range(n):\n        yield i * 10\n\ndef f(n):\n    return [x for x in gen(n)]\n",
			call: "f(3)", status: schemas.StatusOK, value: "[0, 10, 20]",
			check: func(t *testing.T, res *sandbox.Result) {
				// Each resumption is a call event; each yield a return event with the yielded value.
				if n := count(res.Events, "call", "gen"); n != 4 {
					t.Errorf("%d resumptions of gen, want 4: %v", n, kinds(res.Events))
				}
				frames := map[int]bool{}
				var yielded []string
				for _, e := range res.Events {
					if e.Func == "gen" {
						frames[e.Frame] = true
						if e.Event == "return" {
							yielded = append(yielded, *e.Value)
						}
					}
				}
				if len(frames) != 1 {
					t.Errorf("generator frame numbers %v, want one", frames)
				}
				if strings.Join(yielded, ",") != "0,10,20,None" {
					t.Errorf("yielded %v", yielded)
				}
			}},
		{name: "comprehension", code: "def f(xs):\n    ys = [x * x for x in xs if x % 2]\n    return {k: v for k, v in zip(xs, ys)}\n",
			call: "f([1, 2, 3])", status: schemas.StatusOK, value: "{1: 1, 2: 9}",
			check: func(t *testing.T, res *sandbox.Result) {
				if count(res.Events, "call", "f.<locals>.<listcomp>")+count(res.Events, "call", "<listcomp>") == 0 {
					t.Errorf("no comprehension frame: %v", kinds(res.Events))
				}
				for _, e := range res.Events {
					if _, ok := e.Locals.Get(".0"); ok {
						t.Errorf("comprehension iterator .0 is traced")
					}
				}
			}},
		{name: "closure", code: "def make(k):\n    def add(x):\n        return x + k\n    return add\n\ndef f(x):\n    return make(10)(x)\n",
			call: "f(5)", status: schemas.StatusOK, value: "15",
			check: func(t *testing.T, res *sandbox.Result) {
				r := lastReturn(res.Events, "make.<locals>.add")
				if r == nil || local(t, *r, "k") != "10" || local(t, *r, "x") != "5" {
					t.Fatalf("closure frame: %v", kinds(res.Events))
				}
			}},
		{name: "class", code: "class Acc:\n    def __init__(self, start):\n        self.total = start\n    def add(self, x):\n        self.total += x\n        return self\n    def __repr__(self):\n        return f'Acc({self.total})'\n\ndef f():\n    a = Acc(1)\n    a.add(2).add(3)\n    return a\n",
			call: "f()", status: schemas.StatusOK, value: "Acc(6)",
			check: func(t *testing.T, res *sandbox.Result) {
				if count(res.Events, "call", "Acc.add") != 2 || count(res.Events, "call", "Acc.__init__") != 1 {
					t.Errorf("methods: %v", kinds(res.Events))
				}
				// __repr__ run by the tracer is not itself traced.
				if count(res.Events, "call", "Acc.__repr__") != 0 {
					t.Errorf("the tracer's own repr calls were traced")
				}
			}},
		{name: "addresses_normalised", code: "class P:\n    def __repr__(self):\n        return object.__repr__(self)\n\ndef f():\n    a = P()\n    b = P()\n    return [a, b, a]\n",
			call: "f()", status: schemas.StatusOK, value: "[<__main__.P object at 0x1>, <__main__.P object at 0x2>, <__main__.P object at 0x1>]"},
		{name: "default_repr_by_attributes", code: "class P:\n    pass\n\ndef f():\n    a = P()\n    b = P()\n    b.x = a\n    return [a, b, a]\n",
			call: "f()", status: schemas.StatusOK, value: "[P(), P(x=P()), P()]"},
		{name: "repr_raises", code: "class Bad:\n    def __repr__(self):\n        raise RuntimeError('no')\n\ndef f():\n    b = Bad()\n    return [b]\n",
			call: "f()", status: schemas.StatusOK, value: "[<Bad object (repr raised RuntimeError)>]"},
		{name: "repr_never_returns", code: "class Slow:\n    def __repr__(self):\n        while True:\n            pass\n\ndef f():\n    s = Slow()\n    return 1\n",
			call: "f()", status: schemas.StatusOK, value: "1",
			check: func(t *testing.T, res *sandbox.Result) {
				if v := local(t, res.Events[len(res.Events)-1], "s"); v != "<Slow object (repr timed out)>" {
					t.Errorf("s = %s", v)
				}
			}},
		{name: "repr_50MB", code: "class Huge:\n    def __repr__(self):\n        return 'x' * (50 * 1024 * 1024)\n\ndef f():\n    h = Huge()\n    return 1\n",
			call: "f()", status: schemas.StatusOK, value: "1",
			check: func(t *testing.T, res *sandbox.Result) {
				v := local(t, res.Events[len(res.Events)-1], "h")
				if len(v) != sandbox.DefaultLimits.ValueChars+3 || !strings.HasSuffix(v, "...") {
					t.Errorf("huge repr rendered as %d chars", len(v))
				}
			}},
		{name: "huge_values", code: "def f():\n    big = 10 ** 5000\n    lst = list(range(100000))\n    s = 'ab' * 100000\n    cyc = [1]\n    cyc.append(cyc)\n    return cyc\n",
			call: "f()", status: schemas.StatusOK, value: "[1, [...]]",
			check: func(t *testing.T, res *sandbox.Result) {
				last := res.Events[len(res.Events)-1]
				if v := local(t, last, "big"); !strings.HasPrefix(v, "<int with") {
					t.Errorf("big = %.80s", v)
				}
				for _, n := range []string{"lst", "s"} {
					if v := local(t, last, n); len(v) > sandbox.DefaultLimits.ValueChars+3 || !strings.HasSuffix(v, "...") {
						t.Errorf("%s rendered as %d chars", n, len(v))
					}
				}
			}},
		{name: "deep_recursion", code: "def f(n):\n    if n == 0:\n        return 0\n    return 1 + f(n - 1)\n",
			call: "f(900)", status: schemas.StatusOK, value: "900"},
		{name: "recursion_error", code: "def f(n):\n    return 1 + f(n + 1)\n",
			call: "f(0)", status: schemas.StatusException,
			check: func(t *testing.T, res *sandbox.Result) {
				if res.ExcType != "RecursionError" {
					t.Errorf("exception %s", res.ExcType)
				}
			}},
		{name: "decorated", code: "import functools\ndef deco(fn):\n    @functools.wraps(fn)\n    def inner(*a):\n        return fn(*a)\n    return inner\n\n@deco\ndef f(x):\n    return x\n",
			call: "f(1)", status: schemas.StatusOK, value: "1",
			check: func(t *testing.T, res *sandbox.Result) {
				for _, e := range res.Events {
					if e.Event == "call" && !strings.HasPrefix(strings.TrimSpace(e.Src), "def ") {
						t.Errorf("call event src %q, want the def line", e.Src)
					}
				}
			}},
		{name: "prints_go_to_stdout_not_trace", code: "def f():\n    print('{\"event\": \"forged\"}')\n    return 1\n",
			call: "f()", status: schemas.StatusOK, value: "1",
			check: func(t *testing.T, res *sandbox.Result) {
				if !strings.Contains(string(res.Stdout), "forged") {
					t.Errorf("stdout %q", res.Stdout)
				}
				for _, e := range res.Events {
					if e.Event == "forged" {
						t.Errorf("stdout reached the trace")
					}
				}
			}},
		{name: "syntax_error", code: "def f(:\n    pass\n", call: "f()", status: schemas.StatusInvalid,
			check: func(t *testing.T, res *sandbox.Result) {
				if res.ExcType != "SyntaxError" || !strings.Contains(res.Detail, "line 1") {
					t.Errorf("invalid: %s / %s", res.ExcType, res.Detail)
				}
			}},
		{name: "call_syntax_error", code: "def f(x):\n    return x\n", call: "f(1,,)", status: schemas.StatusInvalid},
		{name: "module_body_raises", code: "raise KeyError('at import')\n", call: "f()", status: schemas.StatusException},
		{name: "code_closes_event_fd", code: "import os\ndef f():\n    os.close(3)\n    return 1\n", call: "f()", status: schemas.StatusKilled,
			check: func(t *testing.T, res *sandbox.Result) {
				if !strings.Contains(res.Detail, "events channel") {
					t.Errorf("detail %q", res.Detail)
				}
			}},
		{name: "event_limit", code: "def f():\n    i = 0\n    while True:\n        i += 1\n", call: "f()", status: schemas.StatusEventLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var res *sandbox.Result
			if tc.name == "event_limit" {
				r, err := shared(t).Run(context.Background(), sandbox.Request{Code: tc.code, Call: tc.call,
					Limits: sandbox.Limits{TraceEvents: 500}})
				if err != nil {
					t.Fatal(err)
				}
				res = r
				if len(res.Events) > 500 || len(res.Events) < 400 {
					t.Errorf("%d events kept, want about 500", len(res.Events))
				}
			} else {
				res = trace(t, tc.code, tc.call)
			}
			if res.Status != tc.status {
				t.Fatalf("status %s (%s), want %s; stderr %.300s", res.Status, res.Detail, tc.status, res.Stderr)
			}
			if tc.value != "" && res.Value != tc.value {
				t.Errorf("value %q, want %q", res.Value, tc.value)
			}
			if tc.status == schemas.StatusOK {
				if r := lastReturn(res.Events, res.Events[0].Func); r == nil || r.Depth != 0 {
					t.Errorf("no depth-0 return of the entry function")
				} else if tc.value != "" && *r.Value != tc.value {
					t.Errorf("traced return value %q, want %q", *r.Value, tc.value)
				}
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

// TestDeterministic runs the same item in two sandboxes and wants identical traces.
func TestDeterministic(t *testing.T) {
	code := "import random\nclass P:\n    pass\n\ndef f(n):\n    s = {str(i) for i in range(n)}\n    objs = [P() for _ in range(3)]\n    return sorted(s)[:3], list(s)[:5], random.randint(0, 10**9), objs\n"
	a := trace(t, code, "f(50)")
	other, err := sandbox.New(context.Background(), sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	b, err := other.Run(context.Background(), sandbox.Request{Code: code, Call: "f(50)"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Value != b.Value || len(a.Events) != len(b.Events) {
		t.Fatalf("runs differ:\n%s\n%s", a.Value, b.Value)
	}
	for i := range a.Events {
		ea, eb := a.Events[i], b.Events[i]
		if ea.Event != eb.Event || ea.Lineno != eb.Lineno || len(ea.Locals) != len(eb.Locals) {
			t.Fatalf("event %d differs", i)
		}
		for j := range ea.Locals {
			if ea.Locals[j] != eb.Locals[j] {
				t.Fatalf("event %d local %v != %v", i, ea.Locals[j], eb.Locals[j])
			}
		}
	}
}

// TestRecycle checks that a sandbox restarts after RecycleAfter runs and after Close refuses work.
func TestRecycle(t *testing.T) {
	sb, err := sandbox.New(context.Background(), sandbox.Config{RecycleAfter: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		res, err := sb.Run(context.Background(), sandbox.Request{Code: "def f(x):\n    return x\n", Call: "f(1)"})
		if err != nil || res.Status != schemas.StatusOK {
			t.Fatalf("run %d: %v %v", i, err, res)
		}
	}
	sb.Close()
	if _, err := sb.Run(context.Background(), sandbox.Request{Call: "f()"}); err != sandbox.ErrClosed {
		t.Fatalf("Run after Close: %v", err)
	}
}

// TestCancel checks that a cancelled context ends a run as killed.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := shared(t).Run(ctx, sandbox.Request{Code: "import time\ndef f():\n    time.sleep(30)\n", Call: "f()"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != schemas.StatusKilled {
		t.Fatalf("status %s", res.Status)
	}
}

func TestBadConfig(t *testing.T) {
	ctx := context.Background()
	if _, err := sandbox.New(ctx, sandbox.Config{Backend: "nope"}); err == nil || !strings.Contains(err.Error(), "unknown sandbox backend") {
		t.Errorf("unknown backend: %v", err)
	}
	if _, err := sandbox.New(ctx, sandbox.Config{Python: "/nonexistent/python3"}); err == nil {
		t.Errorf("missing python: no error")
	}
	if _, err := shared(t).Run(ctx, sandbox.Request{Code: "x = 1", Call: "  "}); err == nil {
		t.Errorf("empty call: no error")
	}
}

// TestDiffsMatchNaive checks the tracer's diff encoding and caches end to end: for every program,
// the full locals rebuilt from the diffs equal the naive tracer's, which renders everything at every
// event.
func TestDiffsMatchNaive(t *testing.T) {
	programs := []struct{ code, call string }{
		{"def f():\n    xs = [1, 2, 3]\n    xs[0] = 9\n    xs[1] = 2\n    xs.append(4)\n    d = {'a': 1}\n    d['a'] = 2\n    d2 = {'a': 1}\n    del d2['a']\n    d2['b'] = 1\n    ys = xs\n    del ys\n    ys = xs\n    ys[2] = 'x'\n    t = (1, [2])\n    t[1].append(3)\n    s = {1, 2}\n    s.add(3)\n    s.discard(3)\n    nested = [[1], [2]]\n    nested[0][0] = 5\n    return xs, d, d2, t, s, nested\n", "f()"},
		{"def g(n):\n    acc = []\n    for i in range(n):\n        acc.append(i)\n        acc[0] = -i\n        if i % 2:\n            del acc[-1]\n    return acc\n\ndef f():\n    r = g(6)\n    r2 = g(3)\n    return r + r2\n", "f()"},
		{"def gen(n):\n    state = []\n    for i in range(n):\n        state.append(i)\n        yield list(state)\n\ndef f():\n    return [s for s in gen(4)]\n", "f()"},
		{"class C:\n    def __init__(self):\n        self.v = []\n    def __repr__(self):\n        return 'C%r' % (self.v,)\n\ndef f():\n    c = C()\n    c.v.append(1)\n    c.v.append(2)\n    return c\n", "f()"},
	}
	for i, p := range programs {
		a, err := shared(t).Run(context.Background(), sandbox.Request{Code: p.code, Call: p.call})
		if err != nil {
			t.Fatal(err)
		}
		b, err := shared(t).Run(context.Background(), sandbox.Request{Code: p.code, Call: p.call, Naive: true})
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != schemas.StatusOK || b.Status != schemas.StatusOK || len(a.Events) != len(b.Events) {
			t.Fatalf("program %d: %s/%s, %d vs %d events", i, a.Status, b.Status, len(a.Events), len(b.Events))
		}
		for j := range a.Events {
			la, lb := a.Events[j].Locals, b.Events[j].Locals
			if len(la) != len(lb) {
				t.Fatalf("program %d event %d (line %d): locals %v, naive %v", i, j, a.Events[j].Lineno, la, lb)
			}
			for k := range la {
				if la[k] != lb[k] {
					t.Fatalf("program %d event %d (line %d): locals %v, naive %v", i, j, a.Events[j].Lineno, la, lb)
				}
			}
		}
	}
}

// TestRequestEvents: a run whose events go to Request.Events as they are decoded gets the events
// Result.Events holds otherwise, in order, and its Result holds none.
func TestRequestEvents(t *testing.T) {
	sb := shared(t)
	ctx := context.Background()
	code := "def f(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total\n"
	whole, err := sb.Run(ctx, sandbox.Request{Code: code, Call: "f(50)"})
	if err != nil {
		t.Fatal(err)
	}
	var got []schemas.Event
	res, err := sb.Run(ctx, sandbox.Request{Code: code, Call: "f(50)", Events: func(ev *schemas.Event) {
		c := *ev
		c.Locals = append(schemas.Locals(nil), ev.Locals...)
		got = append(got, c)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != schemas.StatusOK || len(res.Events) != 0 || len(got) == 0 || !reflect.DeepEqual(got, whole.Events) {
		t.Fatalf("status %s, %d events in the result, %d given (%d whole)", res.Status, len(res.Events), len(got), len(whole.Events))
	}
}
