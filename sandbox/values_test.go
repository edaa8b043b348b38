package sandbox_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// valueCase is a program whose call's rendered result is value (or passes check).
type valueCase struct {
	name, code, call, value string
	check                   func(t *testing.T, v string)
	// timer: the value depends on the tracer's repr timer (a replay has none).
	timer bool
	// noDictSlot: a class that replaces its __dict__ descriptor, whose instance dict the replay
	// (in Python) cannot reach while the tracer (in C) does: the replay shows P().
	noDictSlot bool
}

// valuePrelude defines P, an object with the attributes given to it.
const valuePrelude = "class P:\n    def __init__(self, **kw):\n        self.__dict__.update(kw)\n\n"

var vc = sandbox.DefaultLimits.ValueChars

var valueCases = []valueCase{
	{name: "attributes", code: valuePrelude + "def f():\n    p = P(x=1, y=[2])\n    p.s = 'a'\n    return p\n",
		call: "f()", value: "P(x=1, y=[2], s='a')"},
	{name: "empty", code: valuePrelude + "def f():\n    return P()\n", call: "f()", value: "P()"},
	{name: "slots_only", code: "class S:\n    __slots__ = ('a',)\n    def __init__(self):\n        self.a = 1\n\ndef f():\n    return S()\n",
		call: "f()", value: "S()"},
	{name: "nested_class_qualname", code: "class Outer:\n    class In:\n        pass\n\ndef f():\n    o = Outer.In()\n    o.v = (1,)\n    return o\n",
		call: "f()", value: "Outer.In(v=(1,))"},
	{name: "builtins_repr_identical", code: valuePrelude + "def f():\n    return P(a=1.5, b=None, c=b'\\x00', d={'k': {1, 2}}, e=frozenset(), f=True, g=-3, h=2 ** 70, i=1j)\n",
		call: "f()", value: "P(a=1.5, b=None, c=b'\\x00', d={'k': {1, 2}}, e=frozenset(), f=True, g=-3, h=1180591620717411303424, i=1j)"},
	{name: "in_containers", code: valuePrelude + "def f():\n    return [P(x=1), {'k': P()}, (P(y=2),)]\n",
		call: "f()", value: "[P(x=1), {'k': P()}, (P(y=2),)]"},
	{name: "depth", code: valuePrelude + "def f():\n    p = None\n    for i in range(5, 0, -1):\n        p = P(v=i, nxt=p)\n    return p\n",
		call: "f()", value: "P(v=1, nxt=P(v=2, nxt=P(v=3, nxt=P(...))))"},
	{name: "deep_chain", code: valuePrelude + "def f():\n    p = None\n    for i in range(3000):\n        p = P(nxt=p)\n    return p\n",
		call: "f()", value: "P(nxt=P(nxt=P(nxt=P(...))))"},
	{name: "self_cycle", code: valuePrelude + "def f():\n    p = P(a=1)\n    p.me = p\n    return p\n",
		call: "f()", value: "P(a=1, me=P(...))"},
	{name: "mutual_cycle", code: "class A:\n    pass\n\nclass B:\n    pass\n\ndef f():\n    a, b = A(), B()\n    a.b, b.a = b, a\n    return [a, b]\n",
		call: "f()", value: "[A(b=B(a=A(...))), B(a=A(b=B(...)))]"},
	{name: "cycle_through_list", code: valuePrelude + "def f():\n    p = P()\n    p.items = [p, 1]\n    return p\n",
		call: "f()", value: "P(items=[P(...), 1])"},
	{name: "same_object_twice_is_no_cycle", code: valuePrelude + "def f():\n    q = P(v=1)\n    return P(a=q, b=q)\n",
		call: "f()", value: "P(a=P(v=1), b=P(v=1))"},
	{name: "width", code: valuePrelude + "def f():\n    return P(**{'a%d' % i: i for i in range(20)})\n", call: "f()",
		value: "P(a0=0, a1=1, a2=2, a3=3, a4=4, a5=5, a6=6, a7=7, a8=8, a9=9, a10=10, a11=11, a12=12, a13=13, a14=14, a15=15, ...)"},
	{name: "million_attributes", code: valuePrelude + "def f():\n    p = P()\n    p.__dict__.update(dict.fromkeys(map('a{}'.format, range(10 ** 6)), 0))\n    return p\n",
		call: "f()", value: "P(a0=0, a1=0, a2=0, a3=0, a4=0, a5=0, a6=0, a7=0, a8=0, a9=0, a10=0, a11=0, a12=0, a13=0, a14=0, a15=0, ...)"},
	{name: "non_str_names_skipped", code: valuePrelude + "class K(str):\n    pass\n\ndef f():\n    p = P(a=1)\n    p.__dict__[1] = 2\n    p.__dict__[K('k')] = 3\n    p.z = 4\n    return p\n",
		call: "f()", value: "P(a=1, z=4)"},
	{name: "non_str_names_past_the_scan", code: valuePrelude + "def f():\n    p = P()\n    p.__dict__.update(dict.fromkeys(range(10 ** 5)))\n    p.z = 1\n    return p\n",
		call: "f()", value: "P(...)"},
	{name: "budget", code: valuePrelude + "def f():\n    return P(s='x' * 5000, t=1)\n", call: "f()",
		check: func(t *testing.T, v string) {
			if len(v) != vc+3 || !strings.HasPrefix(v, "P(s='xxx") || !strings.HasSuffix(v, "x...") {
				t.Errorf("%d characters: %.40s...%s", len(v), v, v[max(0, len(v)-20):])
			}
		}},
	{name: "budget_many_objects", code: valuePrelude + "def f():\n    return [P(a=i, b=[i] * 5) for i in range(5000)]\n", call: "f()",
		check: func(t *testing.T, v string) {
			if len(v) != vc+3 || !strings.HasPrefix(v, "[P(a=0, b=[0, 0, 0, 0, 0]), P(a=1, ") || !strings.HasSuffix(v, "...") {
				t.Errorf("%d characters: %.60s", len(v), v)
			}
		}},
	{name: "big_int_attribute", code: valuePrelude + "def f():\n    return P(n=1 << 20000)\n", call: "f()", value: "P(n=<int with 20001 bits>)"},
	{name: "repr_raises_inside", code: valuePrelude + "class Bad:\n    def __repr__(self):\n        raise ValueError('no')\n\ndef f():\n    return P(b=Bad(), c=2)\n",
		call: "f()", value: "P(b=<Bad object (repr raised ValueError)>, c=2)"},
	{name: "repr_returns_non_str_inside", code: valuePrelude + "class R:\n    def __repr__(self):\n        return 7\n\ndef f():\n    return P(r=R())\n",
		call: "f()", value: "P(r=<R object (repr returned int)>)"},
	{name: "repr_never_returns_inside", code: valuePrelude + "class Slow:\n    def __repr__(self):\n        while True:\n            pass\n\ndef f():\n    return P(s=Slow(), t=Slow())\n",
		call: "f()", value: "P(s=<Slow object (repr timed out)>, t=<Slow object (repr timed out)>)", timer: true},
	{name: "user_repr_inside", code: valuePrelude + "class U:\n    def __repr__(self):\n        return 'U!'\n\ndef f():\n    return P(u=U())\n",
		call: "f()", value: "P(u=U!)"},
	// A value's repr empties and refills the object's dict and drops the last reference to an
	// attribute value still to be shown: what is shown is the dict as it was, nothing crashes.
	{name: "dict_mutated_while_rendering", code: valuePrelude + "class M:\n    def __repr__(self):\n        o = OWNER[0]\n        o.__dict__.clear()\n" +
		"        o.__dict__.update({'w%d' % i: i for i in range(100)})\n        return 'M!'\n\nOWNER = []\n\n" +
		"def f():\n    p = P(a=1, m=M(), z=P(v=[1, 2]))\n    OWNER.append(p)\n    return 1\n",
		call: "f()", value: "1"},
	{name: "no_code_runs", code: "CALLS = []\n\nclass P:\n    def __getattribute__(self, n):\n        CALLS.append(n)\n        return object.__getattribute__(self, n)\n" +
		"    def __getattr__(self, n):\n        CALLS.append(n)\n        raise AttributeError(n)\n    @property\n    def prop(self):\n        CALLS.append('prop')\n        return 1\n\n" +
		"def f():\n    p = P()\n    p.x = 1\n    q = [p, p]\n    return len(CALLS)\n",
		call: "f()", value: "0"},
	{name: "fake_dict_property", code: "class P:\n    __dict__ = property(lambda self: {'fake': 1})\n    def __init__(self):\n        self.x = 1\n\ndef f():\n    return P()\n",
		call: "f()", value: "P(x=1)", noDictSlot: true},
	{name: "dict_subclass_as_dict", code: valuePrelude + "class D(dict):\n    def __iter__(self):\n        raise RuntimeError('iter')\n" +
		"    def items(self):\n        raise RuntimeError('items')\n    def keys(self):\n        raise RuntimeError('keys')\n" +
		"    def __len__(self):\n        raise RuntimeError('len')\n    def __getitem__(self, k):\n        raise RuntimeError('getitem')\n\n" +
		"def f():\n    p = P()\n    p.__dict__ = D(x=1, y=2)\n    return p\n",
		call: "f()", value: "P(x=1, y=2)"},
	{name: "metaclass_getattribute", code: "class Meta(type):\n    def __getattribute__(cls, n):\n        raise RuntimeError(n)\n\n" +
		"class P(metaclass=Meta):\n    pass\n\ndef f():\n    p = P()\n    p.x = 1\n    return p\n",
		call: "f()", value: "P(x=1)"},
	{name: "qualname_assigned", code: "class P:\n    __qualname__ = 'Q.R'\n\ndef f():\n    p = P()\n    p.x = 1\n    return p\n",
		call: "f()", value: "Q.R(x=1)"},
	{name: "qualname_str_subclass", code: "class S(str):\n    pass\n\nclass P:\n    pass\n\nP.__qualname__ = S('Q')\n\ndef f():\n    p = P()\n    p.x = 1\n    return p\n",
		call: "f()", value: "?(x=1)"},
	{name: "class_assigned", code: "class P:\n    pass\n\nclass Q:\n    pass\n\ndef f():\n    p = P()\n    p.x = 1\n    p.__class__ = Q\n    return p\n",
		call: "f()", value: "Q(x=1)"},
	{name: "class_assigned_while_rendering", code: "class P:\n    pass\n\nclass Q:\n    pass\n\nclass C:\n    def __repr__(self):\n        OWNER[0].__class__ = Q\n        return 'C!'\n\nOWNER = []\n\n" +
		"def f():\n    p = P()\n    p.c = C()\n    OWNER.append(p)\n    return 1\n",
		call: "f()", value: "1"},
	{name: "object_repr_alias", code: "class P:\n    __repr__ = object.__repr__\n\ndef f():\n    p = P()\n    p.x = 1\n    return p\n",
		call: "f()", value: "P(x=1)"},
	{name: "repr_deleted_later", code: "class P:\n    def __repr__(self):\n        return 'mine'\n\ndef f():\n    del P.__repr__\n    p = P()\n    p.x = 1\n    return p\n",
		call: "f()", value: "P(x=1)"},
	// What keeps its own rendering.
	{name: "own_repr_with_object_repr", code: "class P:\n    def __repr__(self):\n        return object.__repr__(self)\n\ndef f():\n    a, b = P(), P()\n    return [a, b, a]\n",
		call: "f()", value: "[<__main__.P object at 0x1>, <__main__.P object at 0x2>, <__main__.P object at 0x1>]"},
	{name: "exception", code: "def f():\n    e = ValueError('x')\n    e.extra = 1\n    return e\n", call: "f()", value: "ValueError('x')"},
	{name: "class_and_function", code: "class P:\n    pass\n\ndef f():\n    return (P, f)\n", call: "f()", value: "(<class '__main__.P'>, <function f at 0x1>)"},
	{name: "builtin_type_default_repr", code: "def f():\n    return [iter([1]), object()]\n", call: "f()",
		value: "[<list_iterator object at 0x1>, <object object at 0x2>]"},
	// Extension modules' types without a repr of their own (heap types: zlib's on 3.11,
	// itertools' too on 3.12+) are no classes of the code's (attacker's review, issue 28).
	{name: "extension_heap_types", code: "import itertools, zlib\ndef f():\n    return [itertools.chain(), zlib.compressobj(), zlib.decompressobj()]\n", call: "f()",
		value: "[<itertools.chain object at 0x1>, <zlib.Compress object at 0x2>, <zlib.Decompress object at 0x3>]"},
	{name: "subclass_of_extension_type", code: "import itertools\nclass C(itertools.chain):\n    pass\n\ndef f():\n    c = C()\n    c.x = 1\n    return [c]\n", call: "f()",
		value: "[C(x=1)]"},
	{name: "builtin_subclass", code: "class L(list):\n    pass\n\ndef f():\n    l = L([1, 2])\n    l.x = 3\n    return l\n", call: "f()", value: "[1, 2]"},
	{name: "module", code: "import math\ndef f():\n    return math\n", call: "f()", value: "<module 'math' (built-in)>"},
}

// TestValuesByAttributes checks the rendering of objects whose type has object's own repr
// (docs/tracer-protocol.md, "Values"): their attributes, bounded in depth, width and characters,
// cycles marked, read without running any of the code's own Python; and what keeps its own
// rendering. Each case's value is the call's rendered result (the entry's return event and the
// end record agree).
func TestValuesByAttributes(t *testing.T) {
	if testing.Short() {
		t.Skip("real Python in the sandbox: long integration test; run without -short")
	}
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := shared(t).Run(context.Background(), sandbox.Request{Code: tc.code, Call: tc.call})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != schemas.StatusOK {
				t.Fatalf("status %s (%s) %.200s; stderr %.300s", res.Status, res.Detail, res.Value, res.Stderr)
			}
			if tc.value != "" && res.Value != tc.value {
				t.Errorf("value %q, want %q", res.Value, tc.value)
			}
			if tc.check != nil {
				tc.check(t, res.Value)
			}
		})
	}
}

// TestValuesMutatedWhileRendering checks the locals of the two cases above whose objects change
// while they are rendered: each event shows the dict as the renderer took it.
func TestValuesMutatedWhileRendering(t *testing.T) {
	if testing.Short() {
		t.Skip("real Python in the sandbox: long integration test; run without -short")
	}
	const pt = "class P:\n    def __init__(self, **kw):\n        self.__dict__.update(kw)\n\n"
	res := trace(t, pt+"class M:\n    def __repr__(self):\n        o = OWNER[0]\n        o.__dict__.clear()\n"+
		"        o.__dict__.update({'w%d' % i: i for i in range(3)})\n        return 'M!'\n\nOWNER = []\n\n"+
		"def f():\n    p = P(a=1, m=M(), z=P(v=[1, 2]))\n    OWNER.append(p)\n    return 1\n", "f()")
	var seen []string
	for _, e := range res.Events {
		if v, ok := e.Locals.Get("p"); ok && e.Func == "f" {
			seen = append(seen, v)
		}
	}
	// Before OWNER holds p, M's repr raises; then each rendering shows the dict as it was when
	// taken, M's repr replacing the attributes for the next one.
	want := []string{"P(a=1, m=<M object (repr raised IndexError)>, z=P(v=[1, 2]))", "P(a=1, m=M!, z=P(v=[1, 2]))", "P(w0=0, w1=1, w2=2)"}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("p rendered as %q, want %q", seen, want)
	}
}

// TestValuesBudgetEdges renders objects of every length around the budget's end (where a
// separator leaves the room negative): each is cut or whole, never a failure.
func TestValuesBudgetEdges(t *testing.T) {
	if testing.Short() {
		t.Skip("real Python in the sandbox: long integration test; run without -short")
	}
	vc := sandbox.DefaultLimits.ValueChars
	res := trace(t, "class P:\n    pass\n\ndef f():\n    for n in range(970, 1000):\n        p = P()\n        p.s = 'x' * n\n        p.longer_name = 1\n        p.t = 2\n    return 1\n", "f()")
	seen := 0
	for _, e := range res.Events {
		v, ok := e.Locals.Get("p")
		if !ok {
			continue
		}
		seen++
		if strings.Contains(v, "(repr ") || len(v) > vc+3 || len(v) > vc && !strings.HasSuffix(v, "...") ||
			!strings.HasSuffix(v, "...") && !strings.HasSuffix(v, ")") {
			t.Errorf("%d characters: ...%s", len(v), v[max(0, len(v)-40):])
		}
	}
	if seen < 30 {
		t.Errorf("%d renderings of p", seen)
	}
}

// TestValuesHostileBounded: objects of 256 attribute values whose reprs never return. A
// rendering stops once value_chars is spent (so one value runs a bounded number of guarded
// reprs) and a repr that timed out is not run again: the run ends ok, its value cut.
func TestValuesHostileBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("real Python in the sandbox: long integration test; run without -short")
	}
	res, err := shared(t).Run(context.Background(), sandbox.Request{
		Code: "class P:\n    pass\n\nclass Slow:\n    def __repr__(self):\n        while True:\n            pass\n\n" +
			"def f():\n    p = P()\n    for i in range(16):\n        q = P()\n        for j in range(16):\n            setattr(q, 'a%d' % j, Slow())\n        setattr(p, 'b%d' % i, q)\n    return p\n",
		Call: "f()", Limits: sandbox.Limits{ReprTimeout: 5 * time.Millisecond, WallTime: 60 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != schemas.StatusOK {
		t.Fatalf("status %s (%s); stderr %.300s", res.Status, res.Detail, res.Stderr)
	}
	if len(res.Value) != sandbox.DefaultLimits.ValueChars+3 || !strings.HasPrefix(res.Value, "P(b0=P(a0=<Slow object (repr timed out)>, ") {
		t.Errorf("value %.120s (%d characters)", res.Value, len(res.Value))
	}
}

// TestValuesReplayAgrees checks that a replay on bdb (docs/debugger.md, "Replay on bdb") renders
// each value case as the tracer does (address ordinals compared as one, as replays compare
// them), plus containers the replay once rendered with repr whole.
func TestValuesReplayAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("real Python in the sandbox: long integration test; run without -short")
	}
	ord := regexp.MustCompile(`0x[0-9a-f]+`)
	cases := append([]valueCase{
		{name: "element_repr_raises", code: "class Bad:\n    def __repr__(self):\n        raise RuntimeError('no')\n\ndef f():\n    return [Bad(), 1]\n", call: "f()"},
		{name: "long_list", code: "def f():\n    return [list(range(i)) for i in range(100)]\n", call: "f()"},
		{name: "nested_too_deep", code: "def f():\n    x = []\n    for i in range(60):\n        x = [x]\n    return x\n", call: "f()"},
		{name: "huge_int", code: "def f():\n    return [7 ** 20000]\n", call: "f()"},
		{name: "long_str_in_dict", code: "def f():\n    return {'k': 'y' * 3000}\n", call: "f()"},
		{name: "str_subclass_repr", code: "class S(str):\n    pass\n\nclass R:\n    def __repr__(self):\n        return S('s!')\n\ndef f():\n    return [R()]\n", call: "f()"},
		{name: "repr_returns_int", code: "class R:\n    def __repr__(self):\n        return 3\n\ndef f():\n    return R()\n", call: "f()"},
	}, valueCases...)
	for _, tc := range cases {
		if tc.timer || tc.noDictSlot {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			tr, err := shared(t).Run(context.Background(), sandbox.Request{Code: tc.code, Call: tc.call})
			if err != nil {
				t.Fatal(err)
			}
			rp, err := shared(t).Replay(context.Background(), sandbox.ReplayRequest{Code: tc.code, Call: tc.call,
				Wrapper: "def main():\n    return " + tc.call + "\n", Actions: [][2]string{{"continue", ""}}})
			if err != nil {
				t.Fatal(err)
			}
			if tr.Status != schemas.StatusOK || rp.Status != schemas.StatusOK {
				t.Fatalf("trace %s (%s), replay %s (%s) %s", tr.Status, tr.Detail, rp.Status, rp.Detail, rp.Stderr)
			}
			if a, b := ord.ReplaceAllString(tr.Value, "0x?"), ord.ReplaceAllString(rp.Value, "0x?"); a != b {
				t.Errorf("trace %q\nreplay %q", a, b)
			}
		})
	}
}

// TestValuesCollectorMutatesFlatContainer: a gc callback (or a __del__) runs when the tracer's
// own allocations start a collection, between fast_repr's check that a flat container holds
// safe scalars only and its rendering of them, and adds an element with a slow repr. The
// renderer must not then call that repr unguarded (nor hold borrowed elements across code that
// can free them): the element shows as timed out, never as what its repr returned after the
// repr timer's deadline (attacker's review, issue 28). The tries shift the collections by
// allocations, frees and skipped collections.
func TestValuesCollectorMutatesFlatContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("real Python in the sandbox: long integration test; run without -short")
	}
	for _, shape := range []struct{ name, make, change, add string }{
		{"dict", "{'a': 1, 'b': 2}", "d['c'] = 3", "S['d'][Evil()] = 0"},
	} {
		t.Run(shape.name, func(t *testing.T) {
			code := "import gc, time\nclass Evil:\n    def __repr__(self):\n        t = time.monotonic() + 0.05\n" +
				"        while time.monotonic() < t:\n            pass\n        return 'EVIL'\n\n" +
				"S = {'armed': False, 'd': None, 'hits': 0, 'skip': 0}\n\n" +
				"def cb(phase, info):\n    if phase == 'start' and S['armed']:\n        if S['skip'] > 0:\n            S['skip'] -= 1\n            return\n" +
				"        S['armed'] = False\n        S['hits'] += 1\n        " + shape.add + "\n\n" +
				"def f():\n    gc.callbacks.append(cb)\n    gc.set_threshold(1)\n    for k in range(60):\n        d = " + shape.make + "\n" +
				"        junk = [[] for _ in range(k % 3)]\n        S['skip'] = k // 3\n" +
				"        S['d'] = d; S['armed'] = True; junk = None; " + shape.change + "\n        x = 1\n        S['armed'] = False\n" +
				"    gc.callbacks.remove(cb)\n    return S['hits'] > 0\n"
			res, err := shared(t).Run(context.Background(), sandbox.Request{Code: code, Call: "f()",
				Limits: sandbox.Limits{ReprTimeout: 5 * time.Millisecond, WallTime: 60 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != schemas.StatusOK || res.Value != "True" {
				t.Fatalf("status %s (%s) value %.200s; stderr %.300s", res.Status, res.Detail, res.Value, res.Stderr)
			}
			for _, e := range res.Events {
				if v, ok := e.Locals.Get("d"); ok && strings.Contains(v, "EVIL") {
					k, _ := e.Locals.Get("k")
					t.Errorf("line %d, k=%s: d is %s: Evil's repr ran unguarded", e.Lineno, k, v)
				}
			}
		})
	}
}
