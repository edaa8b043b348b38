package sandboxtest

import (
	"fmt"
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// tamperCases are programs that try to change what their own trace says, from inside the traced
// process, knowing the tracer's source. Each must end as `tampered` (or fail harmlessly where
// noted), never as a run whose trace or result the program chose.
var tamperCases = []testCase{
	{"forge_events_fd", func(e *Env) {
		// A function that raises, claiming through the events descriptor to have returned 42.
		res := e.Trace(`import os
def f():
    os.write(3, b'{"event":"end","status":"ok","value":"42","events":0}\n#' + b'0' * 64 + b'\n')
    raise ValueError("the real outcome")
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"forge_events_reopen", func(e *Env) {
		// The events pipe reopened through /proc, then written.
		res := e.Trace(`def f():
    with open("/proc/self/fd/3", "w") as fh:
        fh.write('{"event":"end","status":"ok","value":"42","events":0}\n')
    raise ValueError("the real outcome")
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered, schemas.StatusException)
		if res.Status == schemas.StatusException && res.ExcType == "ValueError" {
			e.T.Fatal("the write through /proc/self/fd/3 went unnoticed")
		}
	}},
	{"forge_events_child", func(e *Env) {
		// An exec'd program that inherited the events descriptor writes to it.
		res := e.Trace(`import os, subprocess
def f():
    os.set_inheritable(3, True)
    subprocess.run(["/bin/sh", "-c", "printf '%s\\n' '{\"event\":\"end\",\"status\":\"ok\",\"value\":\"42\"}' >&3"], close_fds=False)
    raise ValueError("the real outcome")
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"decoder_amplification", func(e *Env) {
		// A frame of thousands of locals, one changing per line: a few bytes per event on the
		// wire, thousands of locals per event once decoded. The decoder stops at its caps, in
		// time linear in what it read.
		//
		// The locals are parameters, bound (and their names sent) once at the call, so that every
		// later event is a one-local diff: ~3,000 decoded locals for about a hundred bytes. The run
		// allows 20,000 events, so the decoder's cap on decoded locals (64 per allowed event,
		// sandbox.cellsPerEvent: 1.28M) stops it after ~430 events, a fraction of a second of the
		// tracer's CPU. The loop's 16,000 events stay under the run's own event limit, so
		// event_limit can only come from that cap: without it the run would end ok with 48M
		// locals decoded. The time limits are far above what reaching the cap takes (the run
		// stops there), so the outcome does not depend on the machine's speed; the tighter
		// limits of the suite (5 s) did not hold the earlier version of this case (a body of
		// 3,000 assignments, each sending the grown names list: 31 MB on the wire) on slower
		// machines.
		const locals, iterations, events = 3000, 8000, 20_000
		var b strings.Builder
		b.WriteString("def f(")
		for i := 0; i < locals; i++ {
			fmt.Fprintf(&b, "v%d=%d, ", i, i)
		}
		fmt.Fprintf(&b, "):\n    for i in range(%d):\n        v0 = i\n    return 0\n", iterations)
		res := e.Trace(b.String(), "f()", sandbox.Limits{WallTime: 120 * time.Second, CPUTime: 120 * time.Second,
			TraceEvents: events})
		e.want(res, schemas.StatusEventLimit)
		if !strings.Contains(res.Detail, "locals") {
			e.T.Fatalf("event_limit for %q, want the decoder's cap on decoded locals", res.Detail)
		}
		// What was kept is bounded by that cap however the events share their locals.
		var cells int64
		for _, ev := range res.Events {
			cells += int64(len(ev.Locals))
		}
		if max := int64(64 * events); cells > max {
			e.T.Fatalf("%d locals decoded in %d events, more than the cap of %d", cells, len(res.Events), max)
		}
		e.T.Logf("%s (%s): %d events, %d locals decoded, %d trace bytes, %v wall", res.Status, res.Detail, len(res.Events), cells, res.TraceBytes, res.Wall)
		// And a flood of bytes the tracer did not write.
		res = e.Trace("import os\ndef f():\n    for _ in range(64):\n        os.write(3, b'{\"event\":\"line\"' + b' ' * (1 << 17) + b'}\\n')\n    return 1\n", "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"frames_from_repr", func(e *Env) {
		// A __repr__ (the tracer calls it to render a local) walking down the stack: it finds the
		// traced code's frames and the item's bottom frames, never a frame of the tracer (the
		// tracer is C: it has none).
		res := e.Trace(`import sys
class Spy:
    def __repr__(self):
        f = sys._getframe()
        found = []
        while f is not None:
            found.extend(k for k in f.f_locals if k in ("buf", "key", "seal_prev", "flush", "limit_reached"))
            f = f.f_back
        return "Spy(%s)" % found
def f():
    s = Spy()
    return 1
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		e.wantLocal(res, "s", "Spy([])")
	}},
	{"frames_from_generator", func(e *Env) {
		// A generator suspended before the tracer runs and resumed from inside it (by a __repr__
		// and by a __del__): its f_back is then whatever called it, never a frame of the tracer.
		res := e.Trace(`import sys
def g():
    while True:
        fr, names = me.f_back, []
        while fr is not None:
            names.append(fr.f_code.co_filename + ":" + fr.f_code.co_name)
            fr = fr.f_back
        seen.append(names)
        yield
seen = []
gen = g()
me = gen.gi_frame
class Spy:
    def __repr__(self):
        next(gen)
        return "Spy()"
class Evil:
    __repr__ = object.__repr__
    def __del__(self):
        next(gen)
def f():
    s = Spy()
    e = Evil()
    del e
    y = 1
    return sorted(set(n.split(":")[0] for names in seen for n in names))
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if res.Value != "['<call>', '<string>', 'main.py']" {
			e.T.Fatalf("frames below a generator resumed inside the tracer: %s", res.Value)
		}
	}},
	{"steer_bottom_frame", func(e *Env) {
		// The item's bottom frames (the tracer module's) given a trace function that rewrites their locals
		// (the call expression, its result), or a jump: frames' tracing attributes are read-only.
		for _, code := range []string{`import sys
def hook(frame, event, arg):
    if "result" in frame.f_locals:
        frame.f_locals["result"] = 42
    return hook
def f(x):
    sys._getframe(2).f_trace = hook
    return x + 1
`, `import sys
def f(x):
    sys._getframe(2).f_trace_lines = False
    return x + 1
`, `import sys
def f(x):
    type(sys._getframe()).f_trace.__set__(sys._getframe(2), lambda *a: None)
    return x + 1
`, `import sys
def f(x):
    object.__setattr__(sys._getframe(), "f_trace_lines", False)
    return x + 1
`} {
			res := e.Trace(code, "f(3)", sandbox.Limits{})
			e.want(res, schemas.StatusException, schemas.StatusTampered)
			if res.Status == schemas.StatusException && res.ExcType != "AttributeError" && res.ExcType != "TypeError" {
				e.T.Fatalf("setting a frame's tracing attribute: %s %s", res.ExcType, res.ExcMessage)
			}
		}
	}},
	{"jump_from_repr", func(e *Env) {
		// A __repr__ runs inside the tracer's line event (a trace callback, where CPython allows
		// jumps): it tries to move its caller past the raise.
		res := e.Trace(`import sys
class J:
    def __repr__(self):
        fr = sys._getframe(1)
        try:
            fr.f_lineno = fr.f_lineno + 2
        except Exception as exc:
            return "J(%s)" % type(exc).__name__
        return "J(jumped)"
def f():
    j = J()
    raise ValueError("the real outcome")
    return "skipped the raise"
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusException)
		if res.ExcType != "ValueError" {
			e.T.Fatalf("jumped: %s %s %s", res.Status, res.Value, res.ExcType)
		}
		e.wantLocal(res, "j", "J(AttributeError)")
	}}, {"frames_from_signal", func(e *Env) {
		// A signal handler firing all the time: it must only ever be handed frames of the traced
		// code, never one of the tracer's.
		res := e.Trace(`import signal, sys
seen = set()
running = []
def handler(signum, frame):
    if running:
        return
    running.append(1)
    while frame is not None:
        seen.add(frame.f_code.co_name)
        frame = frame.f_back
    running.clear()
def f():
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
    total = 0
    for i in range(20000):
        total += i % 7
    signal.setitimer(signal.ITIMER_REAL, 0)
    return sorted(seen)
`, "f()", sandbox.Limits{TraceEvents: 1 << 20, TraceBytes: 1 << 30})
		e.want(res, schemas.StatusOK)
		for _, name := range []string{"trace", "entry", "global_trace", "render", "guarded", "flush"} {
			if strings.Contains(res.Value, "'"+name+"'") {
				e.T.Fatalf("a signal handler was handed a frame of the tracer: %s", res.Value)
			}
		}
	}},
	{"gc_introspection", func(e *Env) {
		res := e.Trace(`import gc
def f():
    lists = [o for o in gc.get_objects() if type(o) is list and o and type(o[0]) is str and o[0].startswith('{"event"')]
    for l in lists:
        l.clear()
    return len(lists)
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"settrace_off", func(e *Env) {
		res := e.Trace(`import sys
def hidden():
    return "nobody saw this"
def f():
    sys.settrace(None)
    return hidden()
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"settrace_threads", func(e *Env) {
		res := e.Trace(`import sys, threading
def f():
    threading.settrace(lambda *a: None)
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    return 1
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"call_trace_function", func(e *Env) {
		// The tracer has no Python trace function to call: frames carry none, and sys.gettrace()
		// returns a stand-in that records nothing, from any thread.
		res := e.Trace(`import sys
def f():
    fr = sys._getframe()
    fr.f_trace(fr, "return", 42)
    raise ValueError("the real outcome")
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusException)
		if res.ExcType != "TypeError" {
			e.T.Fatalf("calling frame.f_trace: %s %s", res.ExcType, res.ExcMessage)
		}
		res = e.Trace(`import sys, threading
def f():
    g = sys.gettrace()
    out = [g(sys._getframe(), "return", 42)]
    t = threading.Thread(target=lambda: out.append(g(sys._getframe(), "call", None)))
    t.start()
    t.join()
    return out
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if res.Value != "[None, None]" {
			e.T.Fatalf("sys.gettrace() stand-in: %s", res.Value)
		}
		for _, ev := range res.Events {
			if ev.Event == "return" && ev.Value != nil && *ev.Value == "42" {
				e.T.Fatal("a return the traced code forged reached the trace")
			}
		}
	}}, {"hide_lines", func(e *Env) {
		// A frame drops its trace function or its line events, then goes on: refused.
		for _, stmt := range []string{"sys._getframe().f_trace = None", "sys._getframe().f_trace_lines = False",
			"sys._getframe().f_trace_opcodes = True"} {
			res := e.Trace("import sys\ndef g():\n    return 2\ndef f():\n    "+stmt+"\n    x = g()\n    return x\n", "f()", sandbox.Limits{})
			e.want(res, schemas.StatusException)
			if res.ExcType != "AttributeError" {
				e.T.Fatalf("%s: %s %s", stmt, res.ExcType, res.ExcMessage)
			}
		}
	}}, {"rebind_tracer_globals", func(e *Env) {
		// The tracer's module globals and the builtins, rebound by the traced code: the trace
		// stays the real one (the tracer uses none of them at run time).
		res := e.Trace(`import sys, builtins, json
def f():
    g = sys._getframe(2).f_globals
    g["_enc"] = lambda s: '"forged"'
    g["EVENTS_FD"] = 1
    g["_qualname"] = lambda tp: "forged"
    json.encoder.encode_basestring_ascii = lambda s: '"forged"'
    real = builtins.repr
    builtins.repr = lambda o: "forged"
    x = [1, 2, 3]
    y = {"a": x}
    builtins.repr = real
    return len(y)
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		for _, ev := range res.Events {
			for _, v := range ev.Locals {
				if strings.Contains(v.Value, "forged") {
					e.T.Fatalf("a rebound global changed the trace: %s = %s", v.Name, v.Value)
				}
			}
		}
		if res.Value != "1" {
			e.T.Fatalf("value %q", res.Value)
		}
	}},
	{"replay_bottom_code", func(e *Env) {
		// The item's own code (the tracer module, reachable through the bottom frame's globals) run again,
		// or the tracer's functions called directly: tampering.
		res := e.Trace(`import sys
def f():
    g = sys._getframe(2).f_globals
    g["_run_call"]({"code": "def f():\n    return 42\n", "filename": "main.py", "call": "f()"})
    return 1
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
		res = e.Trace(`import sys
def f():
    g = sys._getframe(2).f_globals
    g["_N"].tracer_end("ok")
    return 1
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
		// The tracer's own functions made to call it: a module it uses patched, or one of its
		// functions called from a __repr__ the tracer renders at the end.
		for _, code := range []string{`import os, sys
def f():
    g = sys._getframe(2).f_globals
    os.close = g["_N"].tracer_end
    g["_close_all"](["ok"])
    raise ValueError("the real outcome")
`, `import sys, types
class Boom(Exception):
    def __repr__(self):
        f = sys._getframe()
        while f.f_back is not None:
            f = f.f_back
        g = f.f_globals
        g["_test_records"]({"kind": "collect", "dir": "/", "pythonpath": []}, "pytest",
                           types.SimpleNamespace(tests=[], errors=[], excs=[], fatal=None),
                           g["_N"].tracer_end, g["_N"].exc_message)
        return "Boom()"
def f():
    raise Boom()
`} {
			res = e.Trace(code, "f()", sandbox.Limits{})
			e.want(res, schemas.StatusTampered)
		}
	}},
	{"bootstrap_code", func(e *Env) {
		// An attacker's review of the -c bootstrap (sandbox.tracerBootstrap), whose code is
		// trusted with the tracer module's: the bottom frames' code objects (the bootstrap's, the
		// tracer module's) run again under the tracer's globals, from the traced code and as the
		// __repr__ of the returned value (which the tracer renders with only its own frames below),
		// steered by sys.argv into main()'s unsandboxed item (which would write a run of its
		// choosing);
		// and the tracer's files in /.ndtrace (sandbox.tracerFiles) joined and compiled again
		// under "<string>", given the helper, and called.
		// Each reaches the helper only through code that is not trusted, or imports it: tampering.
		prelude := `import sys, types
def bottom():
    f, fs = sys._getframe(), []
    while f is not None:
        fs.append(f)
        f = f.f_back
    return fs[::-1]
TRACER_FILES = ("common.py", "ctracer.py", "item.py", "replay.py", "testrun.py", "runners.py", "generate.py", "zygote.py")
def steer():
    sys.argv = ["-c", "--unsandboxed-item", '{"kind":"call","code":"def f():\\n    return 42\\n","filename":"main.py","call":"f()"}',
                "--native", "/.ndtrace/_ndtrace_native.so"]
`
		for _, c := range []struct{ name, code string }{
			{"bootstrap again", `def f():
    b = bottom()
    if b[0].f_code.co_filename != "<string>" or b[1].f_code.co_filename != "<string>":
        raise AssertionError("the bottom frames are not the bootstrap's and the tracer's")
    steer()
    exec(b[0].f_code, b[0].f_globals)
    return 1
`},
			{"bootstrap as a function", `def f():
    b = bottom()
    steer()
    types.FunctionType(b[0].f_code, b[0].f_globals)()
    return 1
`},
			{"tracer module again", `def f():
    b = bottom()
    steer()
    exec(b[1].f_code, b[1].f_globals)
    return 1
`},
			{"tracer compiled again", `def f():
    g = bottom()[0].f_globals
    ns = {"__name__": "ndtrace_copy"}
    src = b"".join(open("/.ndtrace/" + name, "rb").read() for name in TRACER_FILES)
    exec(compile(src, "<string>", "exec"), ns)
    ns["_N"] = g["_N"]
    ns["_run_call"]({"code": "def f():\n    return 42\n", "filename": "main.py", "call": "f()"})
    return 1
`},
		} {
			// The item cannot even read /.ndtrace (Landlock), and main() run again finds the helper
			// sealed: the attack fails with PermissionError (SystemExit(97) from main()'s set-up).
			res := e.Trace(prelude+c.code, "f()", sandbox.Limits{})
			if res.Status != schemas.StatusTampered && (res.Status != schemas.StatusException ||
				(res.ExcType != "PermissionError" && res.ExcType != "SystemExit")) {
				e.T.Errorf("%s: status %s %q (%s), want tampered or refused; stderr: %.300s", c.name, res.Status, res.Value, res.Detail, res.Stderr)
			}
		}
		for _, c := range []struct{ name, code string }{
			{"bootstrap as a __repr__", `class R:
    pass
def f():
    b = bottom()
    steer()
    R.__repr__ = staticmethod(types.FunctionType(b[0].f_code, b[0].f_globals))
    return R()
`},
			{"tracer module as a __repr__", `class R:
    pass
def f():
    b = bottom()
    steer()
    R.__repr__ = staticmethod(types.FunctionType(b[1].f_code, b[1].f_globals))
    return R()
`},
		} {
			res := e.Trace(prelude+c.code, "f()", sandbox.Limits{})
			if res.Status != schemas.StatusTampered && (res.Status != schemas.StatusOK || !strings.Contains(res.Value, "repr raised")) {
				e.T.Errorf("%s: status %s %q (%s); stderr: %.300s", c.name, res.Status, res.Value, res.Detail, res.Stderr)
			}
		}
	}},
	{"support_dir_readonly", func(e *Env) {
		// The support directory (the tracer's files the zygote runs, the helper, the seccomp
		// programs) is out of the item's reach: nothing a later item or a restarted zygote reads
		// from it can be changed (nor is it read: Landlock).
		res := e.Trace(`import os
def f():
    out = []
    fns = [lambda: open("/.ndtrace/new.py", "w"), lambda: os.mkdir("/.ndtrace/d"),
           lambda: os.symlink("/tmp/x", "/.ndtrace/x")]
    for name in ("common.py", "ctracer.py", "item.py", "replay.py", "testrun.py", "runners.py", "generate.py", "zygote.py"):
        p = "/.ndtrace/" + name
        fns += [lambda p=p: open(p, "r+b"), lambda p=p: os.rename(p, "/.ndtrace/old.py"), lambda p=p: os.unlink(p),
                lambda p=p: os.chmod(p, 0o666), lambda p=p: os.utime(p)]
    for fn in fns:
        try:
            fn()
            out.append("done")
        except OSError as e:
            out.append(type(e).__name__)
    return out
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if strings.Contains(res.Value, "done") {
			e.T.Fatalf("the support directory: %s", res.Value)
		}
	}},
	{"code_under_traced_name", func(e *Env) {
		// Code compiled at run time under the traced file's name: its events would carry the
		// file's real source lines (the verifier could not tell) for code that is not there.
		res := e.Trace(`def f():
    ns = {}
    exec(compile("def f():\n    x = 42\n    return x\n", "main.py", "exec"), ns)
    return ns["f"]()
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
		// Running the item's own code objects again, under other globals, is honest.
		res = e.Trace(`import types
def g():
    return y
def f():
    return types.FunctionType(g.__code__, {"y": 7})()
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
	}},
	{"native_modules", func(e *Env) {
		// Extension modules that hand Python raw memory (the interpreter's dist-packages holds
		// _cffi_backend, and the standard library its test modules): with one, the tracer's key
		// and buffer would be the code's. They load only from the standard library's own
		// directory and the configured mounts, whatever the path or name they are loaded under;
		// SQLite may not load extensions (native code loaded without an import).
		res := e.Trace(`import glob, importlib.util, os, sys
def load(name, path):
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        importlib.util.module_from_spec(spec)
        return "loaded"
    except ImportError as exc:
        return "refused" if "ndtrace" in str(exc) else "other: %s" % exc
def f():
    out = []
    for d in sys.path:
        if d.endswith(("dist-packages", "site-packages")):
            for so in sorted(glob.glob(d + "/*.so"))[:3]:
                name = os.path.basename(so).split(".")[0]
                out.append(load(name, so))
                os.symlink(so, "/tmp/" + os.path.basename(so))
                out.append(load(name, "/tmp/" + os.path.basename(so)))
    dyn = [d for d in sys.path if d.endswith("lib-dynload")][0]
    for so in glob.glob(dyn + "/_testcapi*.so") + glob.glob(dyn + "/_ctypes.*.so"):
        out.append(load(os.path.basename(so).split(".")[0], so))
    for name in ("_testcapi", "_testinternalcapi", "_ctypes"):
        try:
            __import__(name)
            out.append("loaded")
        except ImportError:
            out.append("refused")
    os.symlink(dyn, "/tmp/dyn")           # an allowed file, by a path that is not its own
    for so in glob.glob("/tmp/dyn/_json*.so"):
        out.append(load("_json", so))
    import sqlite3
    try:
        sqlite3.connect(":memory:").enable_load_extension(True)
        out.append("loaded")
    except PermissionError:
        out.append("refused")
    return sorted(set(out))
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if res.Value != "['refused']" {
			e.T.Fatalf("native modules: %s", res.Value)
		}
	}},
	{"no_sandbox_error", func(e *Env) {
		// Programs that make the tracer's own calls fail (a class body's mapping refusing what
		// CPython writes into it, a file name whose hash raises, a signal handler raising while
		// the tracer works or pending when it starts, a recursion limit at its maximum): the run is
		// the program's, never a sandbox error (e.Trace fails on one).
		for _, code := range []string{`class M(dict):
    def __delitem__(self, k):
        raise ValueError("no")
    def __setitem__(self, k, v):
        if k == "__class__":
            raise ValueError("no")
        dict.__setitem__(self, k, v)
class Meta(type):
    @classmethod
    def __prepare__(mcs, name, bases):
        return M()
def f():
    class C(metaclass=Meta):
        x = 1
        def m(self):
            return __class__
        del x
    return 1
`, `class S(str):
    def __hash__(self):
        raise ValueError("no hash")
    def __eq__(self, other):
        raise ValueError("no eq")
def f():
    ns = {}
    exec(compile("def g():\n    return 1\n", S("elsewhere.py"), "exec"), ns)
    return ns["g"]()
`, `import signal
class Tick(Exception):
    pass
def h(*a):
    raise Tick()
class Big:
    def __repr__(self):
        return "0x" + "a" * 20_000_000
def f():
    signal.signal(signal.SIGPROF, h)
    signal.setitimer(signal.ITIMER_PROF, 0.002, 0.002)
    b = Big()
    try:
        for _ in range(20):
            c = Big()
    except Tick:
        pass
    signal.setitimer(signal.ITIMER_PROF, 0)
    return 1
`, `import signal
def on_alarm(signum, frame):
    raise TimeoutError("budget spent")
def f():
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.005)
    rounds = 0
    try:
        while True:
            s = "ab" * 20_000_000
            rounds += 1
    except TimeoutError:
        return "timed out"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
`, `import sys
class P:
    def __repr__(self):
        return "P()"
def f():
    sys.setrecursionlimit(2**31 - 1)
    p = P()
    return [p, 3]
`} {
			res := e.Trace(code, "f()", sandbox.Limits{WallTime: 20 * time.Second, CPUTime: 20 * time.Second})
			e.want(res, schemas.StatusOK, schemas.StatusException)
		}
	}},
	{"filename_cache_poisoning", func(e *Env) {
		// Code under a str subclass that equals (and hashes like) the traced file's name, but
		// is another file: it must not change whether the traced file is traced.
		res := e.Trace(`class S(str):
    def __hash__(self):
        return hash("main.py")
    def __eq__(self, other):
        return True
def helper():
    y = 2
    return y
def f():
    ns = {}
    exec(compile("def g():\n    return 1\n", S("/./elsewhere.py"), "exec"), ns)
    ns["g"]()
    return helper()
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		e.wantLocal(res, "y", "2")
	}},
	{"ghost_locals", func(e *Env) {
		// A name written into a function frame's f_locals mapping is no variable of it.
		res := e.Trace(`import sys
def f():
    x = 1
    sys._getframe().f_locals["ghost"] = "planted"
    y = 2
    return x + y
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		for _, ev := range res.Events {
			if _, ok := ev.Locals.Get("ghost"); ok {
				e.T.Fatalf("a planted name is reported as a local: %+v", ev)
			}
		}
	}},
	{"exit_codes", func(e *Env) {
		// The traced code exits with the codes the tracer uses for its own failures: the run is
		// the code's (killed), never a sandbox error that would be retried.
		for _, code := range []int{70, 97, 99, 71, 72} {
			// (e.Trace fails on a sandbox error; 99 and 72 read as memory and tampering)
			res := e.Trace(fmt.Sprintf("import os\ndef f():\n    os._exit(%d)\n", code), "f()", sandbox.Limits{})
			e.want(res, schemas.StatusKilled, schemas.StatusMemory, schemas.StatusTampered)
		}
		res := e.Trace("import os\nos._exit(70)\ndef f():\n    return 1\n", "f()", sandbox.Limits{})
		e.want(res, schemas.StatusKilled)
	}},
	{"no_false_alarms", func(e *Env) {
		// Ordinary introspection is not tampering: several statements on a line, logging and
		// inspect inside __repr__ and __del__, frames of the traced code, a signal handler.
		res := e.Trace(`import inspect, logging, signal, sys
x = 1; y = 2
log = logging.getLogger("t")
class R:
    def __repr__(self):
        log.info("rendering")
        return "R(%d)" % len(inspect.stack())
    def __del__(self):
        logging.getLogger("t").warning("gone %s", sys._getframe().f_back.f_code.co_name)
def f():
    signal.signal(signal.SIGALRM, lambda s, fr: None)
    r = R()
    del r
    r = R()
    return x + y
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if res.Value != "3" {
			e.T.Fatalf("value %s", res.Value)
		}
		// Call expressions that call the entry through a comprehension or a generator.
		for _, call := range []string{"[f(i) for i in range(3)]", "f(sum(f(i) for i in range(3)))"} {
			res := e.Trace("def f(x):\n    return x + 1\n", call, sandbox.Limits{})
			e.want(res, schemas.StatusOK)
		}
	}}, {"classes_hold_nothing", func(e *Env) {
		// Every class is reachable through object.__subclasses__(): the tracer's must not lead
		// to its state (no method closes over anything).
		res := e.Trace(`def f():
    found = []
    todo = [object]
    while todo:
        c = todo.pop()
        todo.extend(type.__subclasses__(c) if c is not type else [])
        for v in vars(c).values():
            fn = getattr(v, "__func__", v)
            if getattr(fn, "__closure__", None) and getattr(fn, "__module__", "") == "__main__" and "ndtrace" in (getattr(fn, "__globals__", {}).get("__doc__") or ""):
                found.append(c.__qualname__ + "." + fn.__name__)
    return sorted(set(found))
`, "f()", sandbox.Limits{WallTime: 120 * time.Second, CPUTime: 120 * time.Second})
		// (The walk is tens of thousands of traced events: about 4 s on a loaded 2-core machine,
		// where the suite's 5 s limits made its outcome depend on the machine's speed.)
		e.want(res, schemas.StatusOK)
		if res.Value != "[]" {
			e.T.Fatalf("tracer methods with closures reachable from object.__subclasses__(): %s", res.Value)
		}
	}},
	{"crafted_bytecode", func(e *Env) {
		res := e.Trace(`def f():
    c = f.__code__.replace(co_code=b"\x97\x00d\x01S\x00")
    return c
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
		res = e.Trace(`import marshal
def f():
    return marshal.loads(marshal.dumps(f.__code__))
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"crafted_bytecode_import_code", func(e *Env) {
		// Import code unmarshals only a read-only .pyc's own bytes (issue 29): called directly,
		// or given a zip archive of the code's, it refuses crafted bytes (TestCraftedBytecodeRoutes
		// has the other routes).
		for _, code := range []string{`import importlib._bootstrap_external as be, marshal
def f():
    ns = {}
    exec(be._compile_bytecode(marshal.dumps(compile("X = 42\n", "x", "exec"))), ns)
    return ns["X"]
`, `import importlib.util, marshal, sys, zipfile
def f():
    data = importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(compile("X = 42\n", "zz.py", "exec"))
    with zipfile.ZipFile("/tmp/z.zip", "w") as z:
        z.writestr("zz.pyc", data)
    sys.path.insert(0, "/tmp/z.zip")
    import zz
    return zz.X
`} {
			res := e.Trace(code, "f()", sandbox.Limits{})
			e.want(res, schemas.StatusException, schemas.StatusTampered)
			if res.Status == schemas.StatusException && !strings.Contains(res.ExcMessage, "ndtrace: bytecode") {
				e.T.Fatalf("crafted bytecode through import code: %s %s %s", res.Status, res.ExcType, res.ExcMessage)
			}
		}
	}},
	{"pyc_from_tmp", func(e *Env) {
		// Bytecode from a writable directory is never loaded (CPython does not verify it).
		res := e.Trace(`import importlib.util, marshal, sys
def f():
    code = compile("X = 42\n", "/tmp/evil.py", "exec")
    with open("/tmp/evil.pyc", "wb") as fh:
        fh.write(importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(code))
    sys.path.insert(0, "/tmp")
    import evil
    return evil.X
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusException)
		if res.ExcType != "PermissionError" {
			e.T.Fatalf("importing a .pyc from /tmp: %s %s %s", res.Status, res.ExcType, res.ExcMessage)
		}
	}},
	{"pyc_from_checkout", func(e *Env) {
		// Nor from a read-only mount that is not the interpreter's or Config.PythonPath (a
		// repository's checkout is written by whoever wrote the repository).
		res := e.Trace(fmt.Sprintf(`import sys
def f():
    sys.path.insert(0, %q)
    import evil_pyc
    return evil_pyc.X
`, e.RO), "f()", sandbox.Limits{})
		e.want(res, schemas.StatusException)
		if res.ExcType != "PermissionError" {
			e.T.Fatalf("importing a .pyc from a checkout: %s %s %s %s", res.Status, res.Value, res.ExcType, res.ExcMessage)
		}
	}},
	{"ctypes_unavailable", func(e *Env) {
		res := e.Trace("def f():\n    import ctypes\n    return ctypes.memmove\n", "f()", sandbox.Limits{})
		e.want(res, schemas.StatusException)
		if !strings.Contains(res.ExcType, "ImportError") && !strings.Contains(res.ExcType, "ModuleNotFoundError") {
			e.T.Fatalf("import ctypes: %s %s", res.ExcType, res.ExcMessage)
		}
	}},
	{"helper_import", func(e *Env) {
		res := e.Trace("def f():\n    import _ndtrace_native\n    return 1\n", "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"audit_hook_refused", func(e *Env) {
		// A hook of the traced code's own would see the tracer's audited operations: it is
		// never added.
		res := e.Trace(`import sys
seen = []
def f():
    sys.addaudithook(lambda event, args: seen.append(event))
    compile("1", "<x>", "eval")
    open("/dev/null").close()
    return len(seen)
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if res.Value != "0" {
			e.T.Fatalf("the traced code's audit hook saw %s events", res.Value)
		}
	}},
}
