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
		var b strings.Builder
		b.WriteString("def f():\n")
		for i := 0; i < 3000; i++ {
			fmt.Fprintf(&b, "    v%d = %d\n", i, i)
		}
		b.WriteString("    for i in range(200000):\n        v0 = i\n    return 0\n")
		res := e.Trace(b.String(), "f()", sandbox.Limits{WallTime: 30 * time.Second})
		e.want(res, schemas.StatusEventLimit)
		// And a flood of bytes the tracer did not write.
		res = e.Trace("import os\ndef f():\n    for _ in range(64):\n        os.write(3, b'{\"event\":\"line\"' + b' ' * (1 << 17) + b'}\\n')\n    return 1\n", "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"frames_from_repr", func(e *Env) {
		// A __repr__ (the tracer calls it to render a local) walking down into the tracer.
		res := e.Trace(`import sys
class Spy:
    def __repr__(self):
        f = sys._getframe()
        found = []
        while f is not None:
            found.extend(k for k in f.f_locals if k in ("buf", "key", "seal_prev"))
            f = f.f_back
        return "Spy(%s)" % found
def f():
    s = Spy()
    return 1
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"frames_from_signal", func(e *Env) {
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
	{"call_frame_tracer", func(e *Env) {
		// The frame's own trace function, called to record a return that did not happen.
		res := e.Trace(`import sys
def f():
    fr = sys._getframe()
    fr.f_trace(fr, "return", 42)
    raise ValueError("the real outcome")
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"call_global_tracer", func(e *Env) {
		res := e.Trace(`import sys, threading
def f():
    g = sys.gettrace()
    out = []
    t = threading.Thread(target=lambda: out.append(g(sys._getframe(), "call", None)))
    t.start()
    t.join()
    return 1
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"hide_lines", func(e *Env) {
		// A frame drops its trace function, then calls on: the callee's caller is untraced code
		// in the middle of the traced call.
		res := e.Trace(`import sys
def g():
    return 2
def f():
    sys._getframe().f_trace = None
    x = g()
    return x
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"rebind_tracer_globals", func(e *Env) {
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
	{"tracer_code_object", func(e *Env) {
		res := e.Trace(`import sys, types
def f():
    g = sys._getframe(2).f_globals
    code = g["make_tracer"].__code__
    return len(code.co_consts)
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusTampered)
	}},
	{"classes_hold_nothing", func(e *Env) {
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
`, "f()", sandbox.Limits{})
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
