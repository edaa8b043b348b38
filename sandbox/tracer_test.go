package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
)

// TestTracerInterpreters runs the tracer on every CPython at hand (3.11 and later), in this
// process's namespace rather than the sandbox (the tracer's --unsandboxed-item, with programs of our
// own: the sandbox can only use an interpreter its uid can read, which pyenv builds under /root
// are not), and checks each trace with the Go decoder and verifier. The C tracer declares the
// CPython API by hand and harden_frames checks the frame tables it patches: every supported
// version must trace, with the same values.
func TestTracerInterpreters(t *testing.T) {
	if testing.Short() {
		t.Skip("every supported interpreter: long integration test; run without -short")
	}
	helper, err := nativeHelper()
	if err != nil {
		t.Skip(err)
	}
	pythons := []string{"/usr/bin/python3"}
	more, _ := filepath.Glob("/root/.pyenv/versions/3.1[1-9]*/bin/python3")
	pythons = append(pythons, more...)
	programs := []struct{ code, call, status, value string }{
		{`import sys
def g(n):
    for i in range(n):
        yield i * 2

def deco(f):
    return f

class P:
    pass

@deco
def f(x):
    a = [p for p in g(x)]
    try:
        b = {1: 'x', 'y': [1, 2.5, None]}
        raise KeyError(x)
    except KeyError as e:
        c = str(e)
    o = P(); s = 'caf\u00e9 \U0001F600 \n'
    return (a, b, c, o, s, sys.gettrace() is not None)
`, "f(3)", "ok", `([0, 2, 4], {1: 'x', 'y': [1, 2.5, None]}, '3', P(), 'café 😀 \n', True)`},
		{`import asyncio
async def h(n):
    await asyncio.sleep(0)
    return n + 1
def f(n):
    return asyncio.run(h(n))
`, "f(1)", "ok", "2"},
		{`def f(n):
    if n == 0:
        raise ValueError("deep")
    return f(n - 1)
`, "f(50)", "exception", "ValueError('deep')"},
		// 3.12+ re-enable tracing inside sys.call_tracing: a __repr__ the tracer renders must not
		// re-enter it.
		{`import sys
def g(n):
    return [n] * 3
class R:
    def __repr__(self):
        sys.call_tracing(g, (5,))
        return "R()"
def f():
    r = R()
    b = g(1)
    return len(b)
`, "f()", "ok", "3"},
		// Objects by their attributes: the instance dict as each version keeps it (3.11's and
		// 3.12's managed dicts, 3.13's inline values), materialised or not, replaced by a dict
		// subclass, after a deletion, with slots.
		{`class P:
    def __init__(self, x):
        self.x = x
        self.y = [x]
class S:
    __slots__ = ("a",)
class D(dict):
    def __iter__(self):
        raise RuntimeError
def f():
    a, b, c, d = P(1), P(2), P(3), P(4)
    del b.x
    b.z = 5
    c.__dict__["w"] = 6
    d.__dict__ = D(k=7)
    a.me = a
    return [a, b, c, d, S()]
`, "f()", "ok", "[P(x=1, y=[1], me=P(...)), P(y=[2], z=5), P(x=3, y=[3], w=6), P(k=7), S()]"},
		// Types of C extension modules without a repr of their own keep <T object at 0xN> on
		// every version, though 3.12 made many of them heap types (attacker's review, issue 28):
		// they are not classes of the code's, and their state is not in an instance dict.
		{`import itertools, zlib
def f():
    return [itertools.chain(), itertools.groupby([]), zlib.compressobj()]
`, "f()", "ok", "[<itertools.chain object at 0x1>, <itertools.groupby object at 0x2>, <zlib.Compress object at 0x3>]"},
		// A .pyc under the interpreter's prefix unmarshals (its bytes proven by the audit hook,
		// read again: 3.13's f_locals is a proxy), crafted bytes do not (issue 29).
		{`import colorsys, marshal, importlib._bootstrap_external as be
def f():
    data = open(colorsys.__cached__, "rb").read()
    name = be._compile_bytecode(memoryview(data)[16:], bytecode_path=colorsys.__cached__).co_name
    try:
        be._compile_bytecode(marshal.dumps(compile("X = 42", "x", "exec")))
    except ImportError as e:
        return name, str(e)[:8]
`, "f()", "ok", "('<module>', 'ndtrace:')"},
		// Calls that return iterators are consumed (the frames the tracer resumes are at depth 0,
		// called from its C code: every version must allow them there).
		{"def f(n):\n    for i in range(n):\n        yield i * 2\n", "f(3)", "ok", "[0, 2, 4]"},
		{"def f(xs):\n    return map(lambda x: x + 1, xs)\n", "f([1, 2])", "ok", "[2, 3]"},
		{"class C:\n    def __init__(self):\n        self.i = 0\n    def __iter__(self):\n        return self\n" +
			"    def __next__(self):\n        self.i += 1\n        if self.i > 2:\n            raise StopIteration\n        return self.i\n" +
			"def f():\n    return C()\n", "f()", "ok", "[1, 2]"},
	}
	// The tracer's files, run by the zygote's own -c program (from another folder).
	dir := t.TempDir()
	for i, name := range tracerFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(tracerParts[i]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bootstrap := bootstrapFor(dir)
	ran := 0
	for _, py := range pythons {
		out, err := exec.Command(py, "-c", "import sys; print(sys.version_info >= (3, 11))").Output()
		if err != nil || strings.TrimSpace(string(out)) != "True" {
			continue
		}
		ran++
		t.Logf("%s: %d programs", py, len(programs))
		for i, p := range programs {
			key := make([]byte, 32)
			rand.Read(key)
			body, _ := json.Marshal(runBody{Key: hex.EncodeToString(key), Code: p.code, Filename: "main.py", Call: p.call,
				Targets: []string{"main.py"}})
			evR, evW, _ := os.Pipe()
			reqR, reqW, _ := os.Pipe()
			cmd := exec.Command(py, "-s", "-B", "-P", "-c", bootstrap, "--unsandboxed-item", `{"id":1}`, "--native", helper)
			cmd.ExtraFiles = []*os.File{evW, reqR}
			cmd.Dir = t.TempDir()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			evW.Close()
			reqR.Close()
			reqW.Write(body)
			reqW.Close()
			dec := newDecoder(key, decodeLimitsOf(DefaultLimits))
			outcome, why := dec.read(context.Background(), evR)
			evR.Close()
			werr := cmd.Wait()
			if outcome != outcomeOK || werr != nil || dec.end == nil {
				t.Errorf("%s, program %d: %v %s, exit %v, end %+v; stderr %s", py, i, outcome, why, werr, dec.end, stderr.String())
				continue
			}
			if string(dec.end.status) != p.status || dec.end.value != p.value {
				t.Errorf("%s, program %d: %s %q, want %s %q", py, i, dec.end.status, dec.end.value, p.status, p.value)
			}
			end := &traceEnd{Status: dec.end.status, Value: dec.end.value, ExcType: dec.end.excType, Kind: "call", Entry: "f"}
			if dec.consume != nil {
				end.Entry = "" // as verifyRun: the run's value is the values taken
			}
			if err := verifyTrace(dec.events, dec.functions, dec.blocks, codeSource("main.py", p.code), end); err != nil {
				t.Errorf("%s, program %d: the verifier rejects the trace: %v", py, i, err)
			}
			if len(dec.events) == 0 {
				t.Errorf("%s, program %d: no events", py, i)
			}
		}
	}
	if ran == 0 {
		t.Skip("no CPython 3.11+ at hand")
	}
}

// TestDegraded checks items on machines that lack a part of the isolation: without Landlock they
// get no /proc at all (nothing else would keep them from their own memory); where the IPC
// sysctls cannot be set they may not create System V IPC objects. Either way they trace as usual.
func TestDegraded(t *testing.T) {
	code := `import os, sys, subprocess
def f():
    probe = "import ctypes; l = ctypes.CDLL(None, use_errno=True); r = l.shmget(0, 4096, 0o1600); print(r < 0 and -ctypes.get_errno() or 0)"
    shm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip()
    return os.listdir("/proc") == [], shm
`
	for _, tc := range []struct{ simulate, want string }{
		{"no-landlock", "(True, '0')"}, // no /proc; SysV allowed (bounded)
		{"ro-sysctl", "(False, '-1')"}, // a /proc of its own; SysV refused (EPERM)
	} {
		t.Run(tc.simulate, func(t *testing.T) {
			simulate = []string{tc.simulate}
			defer func() { simulate = nil }()
			ctx := context.Background()
			sb, err := New(ctx, Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			res, err := sb.Run(ctx, Request{Code: code, Call: "f()"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != schemas.StatusOK || res.Value != tc.want || len(res.Events) == 0 {
				t.Fatalf("%s %s %s (%d events); want ok %s", res.Status, res.Value, res.Detail, len(res.Events), tc.want)
			}
		})
	}
}

// TestRecursionLimit checks runs that reach the recursion limit, in traced code and in untraced
// code: the program's own RecursionError is reported as such, and a program that catches it goes
// on, traced (the tracer is a C function: it needs no recursion depth of the program's).
func TestRecursionLimit(t *testing.T) {
	code := `import copy
def f(n):
    if n == 0:
        return [0]
    return sorted(f(n - 1), key=lambda x: -x)

def g(n):
    if n == 0:
        return 0
    return max([g(n - 1)], key=lambda x: x)

def h():
    try:
        return f(100000)
    except RecursionError:
        return "caught"

def k():
    x = []
    for _ in range(800):
        x = [x]
    try:
        copy.deepcopy(x)
    except RecursionError:
        return "caught deepcopy"
    return "no"
`
	ctx := context.Background()
	sb, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, tc := range []struct {
		call  string
		want  schemas.Status
		value string
	}{{"f(100000)", schemas.StatusException, ""}, {"g(100000)", schemas.StatusException, ""},
		{"h()", schemas.StatusOK, "'caught'"}, {"k()", schemas.StatusOK, "'caught deepcopy'"}} {
		res, err := sb.Run(ctx, Request{Code: code, Call: tc.call})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != tc.want || res.Value != tc.value && tc.value != "" {
			t.Errorf("%s: %s %s (%s), want %s %s", tc.call, res.Status, res.Value, res.Detail, tc.want, tc.value)
		}
		if tc.want == schemas.StatusException && res.ExcType != "RecursionError" {
			t.Errorf("%s: %s, want RecursionError", tc.call, res.ExcType)
		}
	}
}
