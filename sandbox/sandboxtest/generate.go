package sandboxtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// Generate runs a generate request (sandbox.Generate) and fails the test if the sandbox itself
// failed.
func (e *Env) Generate(req sandbox.GenerateRequest) *sandbox.Generation {
	e.T.Helper()
	g, err := e.SB.Generate(e.Ctx, req)
	if err != nil {
		e.T.Fatalf("Generate: %v", err)
	}
	return g
}

// wantGen fails unless g has one of the statuses.
func (e *Env) wantGen(g *sandbox.Generation, statuses ...schemas.Status) {
	e.T.Helper()
	if !slices.Contains(statuses, g.Status) {
		e.T.Fatalf("generate: status %s (%s), want %v", g.Status, g.Detail, statuses)
	}
}

// genReport is the start of a generate run's module that reports what it saw: report(out)
// writes, on the result channel (the events pipe, fd 3), a result of its own whose detail is out
// as JSON, and leaves. (A generate run's code can forge its result: it is only a proposal.)
const genReport = `import json, os
def report(out):
    os.write(3, (json.dumps({"status": "ok", "detail": json.dumps(out, sort_keys=True)}) + "\n").encode())
    os._exit(0)
`

// genProbe runs a generate request whose module body, after genReport, is body (which calls
// report), and decodes what it reported.
func (e *Env) genProbe(req sandbox.GenerateRequest, body string) map[string]any {
	e.T.Helper()
	req.Code = genReport + body
	g := e.Generate(req)
	e.wantGen(g, schemas.StatusOK)
	var m map[string]any
	if err := json.Unmarshal([]byte(g.Detail), &m); err != nil {
		e.T.Fatalf("generate probe reported %q: %v", g.Detail, err)
	}
	return m
}

// generateCases check generate runs (kind generate: sandbox.Generate): the item's isolation is a
// function item's though no tracer is installed, and nothing its code writes or does gets past
// the result's checks, hangs the run, or outlives it.
var generateCases = []testCase{
	{"generate_kernel_surface", func(e *Env) {
		// No tracer and no audit hook: the module imports ctypes in the item itself, and meets
		// the same kernel as a call item's fresh interpreter.
		if runtime.GOARCH != "amd64" {
			e.T.Skip("the kernel probe uses x86_64 system call numbers")
		}
		m := e.genProbe(sandbox.GenerateRequest{Limits: sandbox.Limits{WallTime: 30 * time.Second}}, fmt.Sprintf(`import io, sys
out, sys.stdout = io.StringIO(), io.StringIO()
exec(%q, {})
report(json.loads(sys.stdout.getvalue()))
`, kernelProbe))
		k := map[string]int64{}
		for name, v := range m {
			f, _ := v.(float64)
			k[name] = int64(f)
		}
		e.checkKernel(k)
	}},
	{"generate_isolation", func(e *Env) {
		// The module where it lives in a read-only checkout: no network, nothing written outside
		// its /tmp, the support directory out of reach, the same uid and rlimits as a call item,
		// and only its own init and itself in its PID namespace.
		port, reached := e.hostListener()
		const see = `import os, resource, socket
def seen(port, writes):
    out = {"uid": os.getuid(), "pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(),
           "limits": repr([resource.getrlimit(getattr(resource, r)) for r in
                           ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")])}
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2)
        out["net"] = "connected"
    except OSError as e:
        out["net"] = type(e).__name__
    for p in writes:
        try:
            with open(p, "w") as fh:
                fh.write("x")
            out[p] = "written"
        except OSError as e:
            out[p] = type(e).__name__
    for p in ("/.ndtrace/common.py", "/.ndtrace/_ndtrace_native.so"):
        try:
            open(p, "r+b")
            out[p] = "opened"
        except OSError as e:
            out[p] = type(e).__name__
    alive = []
    for pid in range(3, 4096):
        if pid != os.getpid():
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except OSError:
                pass
    out["others"] = alive
    with open("/tmp/inside", "w") as fh:
        fh.write("ok")
    out["tmp"] = open("/tmp/inside").read()
    return out
`
		writes := []string{"/etc/ndtrace-escape", "/usr/ndtrace-escape", "/ndtrace-escape",
			filepath.Join(e.RO, "ndtrace-escape"), filepath.Join(e.RO, "genmod_iso.py")}
		code := genReport + see + fmt.Sprintf("report(seen(%d, %s))\n", port, pyList(writes))
		file := filepath.Join(e.RO, "genmod_iso.py")
		if err := os.WriteFile(file, []byte(code), 0o644); err != nil {
			e.T.Fatal(err)
		}
		defer os.Remove(file)
		g := e.Generate(sandbox.GenerateRequest{Code: code, Filename: file, Module: "genmod_iso", Dir: e.RO})
		e.wantGen(g, schemas.StatusOK)
		var m map[string]any
		if err := json.Unmarshal([]byte(g.Detail), &m); err != nil {
			e.T.Fatalf("reported %q: %v", g.Detail, err)
		}
		for _, p := range writes {
			if m[p] == "written" {
				e.T.Errorf("a generate run wrote %s", p)
			}
		}
		for _, k := range []string{"/.ndtrace/common.py", "/.ndtrace/_ndtrace_native.so"} {
			if m[k] == "opened" {
				e.T.Errorf("a generate run opened %s for writing", k)
			}
		}
		if m["net"] == "connected" || m["tmp"] != "ok" || m["cwd"] != "/tmp" {
			e.T.Errorf("network %v, /tmp %v, cwd %v", m["net"], m["tmp"], m["cwd"])
		}
		if fmt.Sprint(m["others"]) != "[]" || m["pid"] != 2.0 || m["ppid"] != 1.0 {
			e.T.Errorf("the item sees other processes: %v (pid %v, parent %v)", m["others"], m["pid"], m["ppid"])
		}
		if reached() {
			e.T.Fatal("a generate run reached a loopback listener on the host")
		}
		// A call item of the same sandbox sees the same uid and limits.
		res := e.Trace(see, fmt.Sprintf("seen(%d, [])", port), sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		uid, lim := fmt.Sprintf("'uid': %v,", m["uid"]), fmt.Sprintf("'limits': '%v',", m["limits"])
		if !strings.Contains(res.Value, uid) || !strings.Contains(res.Value, lim) {
			e.T.Errorf("a call item sees %s; the generate run uid %v, limits %v", res.Value, m["uid"], m["limits"])
		}
	}},
	{"generate_result_junk", func(e *Env) {
		// Bytes of the module's own on the result channel before the result: invalid.
		g := e.Generate(sandbox.GenerateRequest{Code: "import os\nos.write(3, b'junk\\n')\ndef f():\n    pass\n"})
		e.wantGen(g, schemas.StatusInvalid)
	}},
	{"generate_result_flood", func(e *Env) {
		// Endless bytes on the result channel: stopped at the result's bound, invalid, quickly.
		start := time.Now()
		g := e.Generate(sandbox.GenerateRequest{Code: "import os\nb = b'x' * (1 << 20)\nwhile True:\n    os.write(3, b)\n",
			Limits: sandbox.Limits{WallTime: 60 * time.Second, CPUTime: 60 * time.Second}})
		e.wantGen(g, schemas.StatusInvalid)
		if d := time.Since(start); d > 30*time.Second {
			e.T.Fatalf("a flooded result took %v", d)
		}
	}},
	{"generate_result_forged", func(e *Env) {
		// Results the module writes itself: anything out of bounds is invalid; what is within
		// them is a proposal like any other (and is traced again before it is kept).
		forge := func(function, result string) *sandbox.Generation {
			// (def f: the generator looks a unit up in the module's text before importing it.)
			code := fmt.Sprintf("def f():\n    pass\nimport os\nos.write(3, (%s).encode() + b'\\n')\nos._exit(0)\n", result)
			return e.Generate(sandbox.GenerateRequest{Code: code, Function: function})
		}
		for _, c := range []struct{ name, function, result string }{
			{"many functions", "", `'{"status":"ok","functions":[' + ','.join(['{"qualname":"f","kind":"function","line":1,"end_line":1}'] * 6000) + ']}'`},
			{"huge", "", `'{"status":"ok","detail":"' + 'x' * (5 << 20) + '"}'`},
			{"deep", "", `'{"status":"ok","extra":' + '[' * 100000 + ']' * 100000 + '}'`},
			{"a status of the supervisor's", "", `'{"status":"timeout"}'`},
			{"a call of something else", "f", `'{"status":"ok","inputs":[{"call":"__import__(\\'os\\').system(\\'x\\')","source":"llm","lines":[]}]}'`},
			{"more inputs than asked", "f", `'{"status":"ok","inputs":[' + ','.join(['{"call":"f()","source":"typed","lines":[]}'] * 5) + ']}'`},
			{"lines out of range", "f", `'{"status":"ok","lines":[0, 99999999999]}'`},
			{"two results", "", `'{"status":"ok"}\n{"status":"ok"}'`},
		} {
			if g := forge(c.function, c.result); g.Status != schemas.StatusInvalid {
				e.T.Errorf("%s: status %s (%s), want invalid", c.name, g.Status, g.Detail)
			}
		}
		g := forge("f", `'{"status":"ok","inputs":[{"call":"f(1)","source":"corpus","lines":[]},{"call":"f(2)","source":"typed","lines":[1],"raised":"bad name"}],"reason":"Not A Reason"}'`)
		e.wantGen(g, schemas.StatusOK)
		if len(g.Inputs) != 1 || g.Inputs[0].Call != "f(2)" || g.Inputs[0].Raised != "?" || g.Reason != sandbox.GenReasonOther {
			e.T.Errorf("a forged result within bounds: %+v", g)
		}
	}},
	{"generate_fork_writer", func(e *Env) {
		// A child that writes on the result channel and stdout while its parent returns, and goes
		// on after the item's exit: the run ends with the item (invalid: junk in the result),
		// and the child is gone with it.
		g := e.Generate(sandbox.GenerateRequest{Code: `import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    first = True
    while True:
        try:
            os.write(3, b"junk\n")
            os.write(1, b"child\n")
        except OSError:
            pass
        if first:
            os.write(w, b"1")
            first = False
        time.sleep(0.01)
os.read(r, 1)
def f():
    pass
`})
		e.wantGen(g, schemas.StatusInvalid)
	}},
	{"generate_sleeps", func(e *Env) {
		// The generator bounds an import by its own timers (an exception, "import timed out");
		// a module that ignores their signals meets the supervisor's limit.
		lim := sandbox.Limits{WallTime: 1500 * time.Millisecond}
		g := e.Generate(sandbox.GenerateRequest{Code: "import time\ntime.sleep(3600)\n", Limits: lim})
		if g.Status != schemas.StatusTimeout && !(g.Status == schemas.StatusException && strings.Contains(g.Detail, "timed out")) {
			e.T.Errorf("sleeps: status %s (%s), want timeout", g.Status, g.Detail)
		}
		g = e.Generate(sandbox.GenerateRequest{Code: "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n" +
			"signal.signal(signal.SIGPROF, signal.SIG_IGN)\ntime.sleep(3600)\n", Limits: lim})
		e.wantGen(g, schemas.StatusTimeout)
	}},
	{"generate_memory", func(e *Env) {
		// The address-space limit refuses the allocation (MemoryError: the generator's verdict,
		// memory or exception), or the memory limit kills the item (memory).
		for _, code := range []string{"b = bytearray(10 * 1024 ** 3)\n",
			"chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024 ** 2))\n"} {
			g := e.Generate(sandbox.GenerateRequest{Code: code, Limits: sandbox.Limits{WallTime: 60 * time.Second, CPUTime: 60 * time.Second}})
			e.T.Logf("%q: %s (%s)", code, g.Status, g.Detail)
			if g.Status != schemas.StatusMemory && !(strings.Contains(g.Detail, "MemoryError") &&
				(g.Status == schemas.StatusException || g.Status == schemas.StatusInvalid)) {
				e.T.Errorf("%q: status %s (%s), want memory", code, g.Status, g.Detail)
			}
		}
	}},
	{"generate_exits", func(e *Env) {
		// The module leaves, by any door, before there is a result: killed (never a sandbox
		// error, whatever the exit code), or the generator's own verdict.
		for _, c := range []struct {
			code string
			want []schemas.Status
		}{
			{"import os\nos._exit(0)\n", []schemas.Status{schemas.StatusKilled}},
			{"import os\nos._exit(70)\n", []schemas.Status{schemas.StatusKilled}},
			{"import os\nos._exit(97)\n", []schemas.Status{schemas.StatusKilled}},
			{"import os\nos.close(3)\n", []schemas.Status{schemas.StatusKilled}},
			{"import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", []schemas.Status{schemas.StatusKilled}},
			{"import sys\nsys.exit(3)\n", []schemas.Status{schemas.StatusInvalid, schemas.StatusException}},
		} {
			g := e.Generate(sandbox.GenerateRequest{Code: c.code})
			if !slices.Contains(c.want, g.Status) {
				e.T.Errorf("%q: status %s (%s), want %v", c.code, g.Status, g.Detail, c.want)
			}
		}
	}},
	{"generate_replaces_plumbing", func(e *Env) {
		// The module replaces what writing a result could use (json, os.write, os._exit, the
		// builtins' repr and str): the result is still written by what the plumbing took
		// before the module ran, or the run is invalid; never a sandbox error.
		g := e.Generate(sandbox.GenerateRequest{Code: `import builtins, json, json.encoder, os, sys
json.dumps = lambda *a, **k: "forged"
json.JSONEncoder.encode = lambda *a, **k: "forged"
json.encoder.encode_basestring_ascii = lambda s: "forged"
os.write = lambda fd, b: len(b)
os._exit = lambda code: None
builtins.repr = lambda x: "forged"
builtins.str = lambda *a: "forged"
sys.modules["json"] = None
def f():
    pass
`})
		e.T.Logf("status %s (%s), functions %+v", g.Status, g.Detail, g.Functions)
		e.wantGen(g, schemas.StatusOK, schemas.StatusInvalid, schemas.StatusException)
		if g.Status == schemas.StatusOK && (len(g.Functions) != 1 || g.Functions[0].QualName != "f") {
			e.T.Errorf("functions %+v", g.Functions)
		}
	}},
	{"generate_kill_parent", func(e *Env) {
		g := e.Generate(sandbox.GenerateRequest{Code: `import os, signal
for pid in (os.getppid(), 1, -1):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
def f():
    pass
`})
		e.wantGen(g, schemas.StatusOK, schemas.StatusKilled)
		next := e.Generate(sandbox.GenerateRequest{Code: "def f():\n    pass\n"})
		e.wantGen(next, schemas.StatusOK)
		if len(next.Functions) != 1 {
			e.T.Errorf("functions %+v", next.Functions)
		}
	}},
	{"generate_daemon", func(e *Env) {
		g := e.Generate(sandbox.GenerateRequest{Code: `import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/usr/bin/sleep", ["sleep", "987653.321"])
    os._exit(0)
def f():
    pass
`})
		e.wantGen(g, schemas.StatusOK)
		if pids := hostProcessesWith("987653.321"); len(pids) > 0 {
			e.T.Fatalf("the daemon outlived the generate run: host pids %v", pids)
		}
	}},
}
