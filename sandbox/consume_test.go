package sandbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// countClass is an iterator class of the traced code: __iter__ returns self, __next__ counts to n.
const countClass = `class Count:
    def __init__(self, n):
        self.i, self.n = 0, n
    def __iter__(self):
        return self
    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i

def count(n):
    return Count(n)
`

// TestConsume traces calls that return generators and other iterators: the tracer takes up to
// sandbox.ConsumeValues values from them, still tracing, and the run's value is their list.
func TestConsume(t *testing.T) {
	tests := []struct {
		name, code, call string
		lim              sandbox.Limits
		status           schemas.Status
		value            string // "" to skip
		consume          *schemas.Consume
		plain            bool // the result is not consumed
		check            func(t *testing.T, res *sandbox.Result)
	}{
		{name: "generator", code: "def gen(n):\n    for i in range(n):\n        yield i * i\n", call: "gen(3)",
			status: schemas.StatusOK, value: "[0, 1, 4]",
			consume: &schemas.Consume{Start: 0, Limit: 8, Values: 3, Exhausted: true, Value: "[0, 1, 4]"},
			check: func(t *testing.T, res *sandbox.Result) {
				// Three resumes that yield and a last one that returns: four call…return pairs of
				// the one frame, all at depth 0.
				if n := count(res.Events, "call", "gen"); n != 4 {
					t.Errorf("%d calls of gen, want 4: %v", n, kinds(res.Events))
				}
				var yields []string
				for _, e := range res.Events {
					if e.Depth != 0 || e.Frame != 1 {
						t.Errorf("event %+v not at depth 0 in frame 1", e)
					}
					if e.Event == "return" {
						yields = append(yields, *e.Value)
					}
				}
				if strings.Join(yields, " ") != "0 1 4 None" {
					t.Errorf("return values %v", yields)
				}
			}},
		{name: "map_lambda", code: "def f(xs):\n    k = 10\n    return map(lambda x: x + k, xs)\n", call: "f([1, 2])",
			status: schemas.StatusOK, value: "[11, 12]",
			consume: &schemas.Consume{Start: 4, Limit: 8, Values: 2, Exhausted: true, Value: "[11, 12]"},
			check: func(t *testing.T, res *sandbox.Result) {
				if n := count(res.Events[4:], "call", "f.<locals>.<lambda>"); n != 2 {
					t.Errorf("%d lambda calls after the call returned: %v", n, kinds(res.Events))
				}
			}},
		{name: "iterator_class", code: countClass, call: "count(2)", status: schemas.StatusOK, value: "[1, 2]",
			check: func(t *testing.T, res *sandbox.Result) {
				c := res.Consume
				if c == nil || c.Values != 2 || !c.Exhausted || res.Events[c.Start].Func != "Count.__next__" {
					t.Fatalf("consume %+v (events %v)", c, kinds(res.Events))
				}
				if n := count(res.Events, "call", "Count.__iter__"); n != 0 {
					t.Errorf("__iter__ was called %d times", n)
				}
				// The last __next__ ends the iteration with StopIteration: an exception and an unwind.
				last := res.Events[len(res.Events)-1]
				if last.Func != "Count.__next__" || !last.Unwind || res.Events[len(res.Events)-2].ExcType != "StopIteration" {
					t.Errorf("last events %+v %+v", res.Events[len(res.Events)-2], last)
				}
			}},
		{name: "infinite_generator", code: "def nat():\n    i = 0\n    while True:\n        yield i\n        i += 1\n", call: "nat()",
			status: schemas.StatusOK, value: "[0, 1, 2, 3, 4, 5, 6, 7]",
			consume: &schemas.Consume{Start: 0, Limit: 8, Values: 8, Value: "[0, 1, 2, 3, 4, 5, 6, 7]"},
			check: func(t *testing.T, res *sandbox.Result) {
				// Eight values and no ninth request: the frame's last event is the eighth yield.
				if n := count(res.Events, "call", "nat"); n != 8 {
					t.Errorf("%d resumes, want 8", n)
				}
			}},
		{name: "next_raises", code: "def g():\n    yield 1\n    yield 2\n    raise ValueError('boom')\n", call: "g()",
			status: schemas.StatusException, value: "ValueError('boom')",
			consume: &schemas.Consume{Start: 0, Limit: 8, Values: 2}},
		{name: "class_next_raises", code: "class It:\n    def __iter__(self):\n        return self\n    def __next__(self):\n        return 1 // 0\n",
			call: "It()", status: schemas.StatusException,
			consume: &schemas.Consume{Start: 0, Limit: 8, Values: 0}},
		{name: "builtin_iterator", code: "def f():\n    return iter([1, 2])\n", call: "f()", status: schemas.StatusOK, value: "[1, 2]",
			consume: &schemas.Consume{Start: 3, Limit: 8, Values: 2, Exhausted: true, Value: "[1, 2]"}},
		{name: "not_an_iterator", code: "def f():\n    return [1, 2]\n", call: "f()", status: schemas.StatusOK, value: "[1, 2]", plain: true},
		{name: "next_without_iter", code: "class X:\n    def __next__(self):\n        return 1\n", call: "X()",
			status: schemas.StatusOK, value: "X()", plain: true},
		{name: "coroutine", code: "async def co(x):\n    return x\n", call: "co(1)", status: schemas.StatusInvalid,
			check: func(t *testing.T, res *sandbox.Result) {
				if !strings.Contains(res.Detail, "coroutine") || len(res.Events) != 0 {
					t.Errorf("detail %q, %d events", res.Detail, len(res.Events))
				}
			}},
		{name: "async_generator", code: "async def ag():\n    yield 1\n", call: "ag()", status: schemas.StatusInvalid,
			check: func(t *testing.T, res *sandbox.Result) {
				if !strings.Contains(res.Detail, "asynchronous generator") {
					t.Errorf("detail %q", res.Detail)
				}
			}},
		// Hostile iterators.
		{name: "next_never_ends", code: "class It:\n    def __iter__(self):\n        return self\n    def __next__(self):\n        while True:\n            pass\n",
			call: "It()", lim: sandbox.Limits{WallTime: 2 * time.Second},
			check: func(t *testing.T, res *sandbox.Result) {
				if res.Status != schemas.StatusTimeout && res.Status != schemas.StatusEventLimit {
					t.Errorf("status %s", res.Status)
				}
			}},
		{name: "next_sleeps", code: "import time\nclass It:\n    def __iter__(self):\n        return self\n    def __next__(self):\n        time.sleep(60)\n",
			call: "It()", lim: sandbox.Limits{WallTime: 2 * time.Second}, status: schemas.StatusTimeout},
		{name: "event_limit", code: "def g():\n    while True:\n        for i in range(100):\n            pass\n        yield i\n", call: "g()",
			lim: sandbox.Limits{TraceEvents: 300}, status: schemas.StatusEventLimit},
		{name: "huge_values", code: "def g():\n    while True:\n        yield 'x' * 10**7\n        yield 7 ** 100000\n", call: "g()",
			status: schemas.StatusOK,
			check: func(t *testing.T, res *sandbox.Result) {
				if len(res.Value) > 2*sandbox.DefaultLimits.ValueChars+16 || res.Consume.Values != 8 {
					t.Errorf("value of %d characters, %d values", len(res.Value), res.Consume.Values)
				}
			}},
		{name: "rebound_builtins", code: "import builtins, itertools\nbuiltins.next = builtins.iter = builtins.list = lambda *a: 42\n" +
			"itertools.islice = None\ndef g():\n    yield 1\n    yield 2\n", call: "g()", status: schemas.StatusOK, value: "[1, 2]"},
		{name: "hostile_repr", code: "class R:\n    def __repr__(self):\n        raise RuntimeError('no')\ndef g():\n    yield R()\n", call: "g()",
			status: schemas.StatusOK, value: "[<R object (repr raised RuntimeError)>]"},
		{name: "pretends_to_be_generator", code: "import types\nclass Fake:\n    __class__ = types.GeneratorType\n" +
			"    def __iter__(self):\n        return iter([99])\n    def __next__(self):\n        return 5\n", call: "Fake()",
			status: schemas.StatusOK, value: "[5, 5, 5, 5, 5, 5, 5, 5]"},
		{name: "generator_resumed_by_itself", code: "def g():\n    me = yield 1\n    yield next(G)\nG = g()\ndef f():\n    return G\n", call: "f()",
			status: schemas.StatusException, value: "ValueError('generator already executing')"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := shared(t).Run(context.Background(), sandbox.Request{Code: tc.code, Call: tc.call, Limits: tc.lim})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tc.status != "" && res.Status != tc.status {
				t.Fatalf("status %s (%s), want %s; events %v", res.Status, res.Detail, tc.status, kinds(res.Events))
			}
			if tc.value != "" && res.Value != tc.value {
				t.Errorf("value %q, want %q", res.Value, tc.value)
			}
			if tc.consume != nil && (res.Consume == nil || *res.Consume != *tc.consume) {
				t.Errorf("consume %+v, want %+v", res.Consume, tc.consume)
			}
			if tc.plain && res.Consume != nil {
				t.Errorf("consume %+v, want none", res.Consume)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}
