package sandbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// craftedPrelude defines crafted(): the bytes of a .pyc body (after its 16-byte header) that
// set X = 42. marshal.dumps of a compile() result stands in for crafted bytecode: what matters is
// that bytes of the traced code's own choosing reach marshal.loads.
const craftedPrelude = `import importlib.util, marshal, os, sys
def crafted():
    return marshal.dumps(compile("X = 42\n", "zz.py", "exec"))
def pyc_bytes(header=None):
    return (header or importlib.util.MAGIC_NUMBER + b"\0" * 12) + crafted()
`

// TestCraftedBytecodeRoutes (issue 29): every route by which traced code can have the import
// system unmarshal bytes of its own choosing ends refused (an ImportError or PermissionError of
// the sandbox's) or tampered, never ok with the crafted module's value. Each case is a route a
// colleague proved or that the rule's review found: import code called directly, a loader whose
// get_data is the code's, the stdlib's own loaders given a path that is not a .pyc, patched
// module globals and classes, zipimport, a function built on _compile_bytecode's code with other
// globals, and the frozen-module path.
func TestCraftedBytecodeRoutes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sandbox; run without -short")
	}
	sb := shared(t)
	for _, tc := range craftedRoutes {
		t.Run(tc.name, func(t *testing.T) {
			code := craftedPrelude + tc.code
			res, err := sb.Run(context.Background(), sandbox.Request{Code: code, Call: "f()"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s %s", res.Status, res.ExcType, res.ExcMessage)
			switch {
			case res.Status == schemas.StatusTampered:
			case res.Status == schemas.StatusException && strings.Contains(res.ExcType, "Error") &&
				strings.Contains(res.ExcMessage, "ndtrace: "):
			default:
				t.Fatalf("%s %s %s %s: want tampered or the sandbox's refusal", res.Status, res.Value, res.ExcType, res.ExcMessage)
			}
		})
	}
}

// TestHonestBytecodeLoads (issue 29): the rule on unmarshalled bytes refuses none of the honest
// imports: the standard library's and dist-packages' .pyc files load (and _compile_bytecode given
// a root's .pyc contents unmarshals them), a .py module in a writable directory imports from its
// source (its bytecode cache refused), zipimport imports an archive's sources and falls back to
// them past bytecode it may not load, and types.coroutine still sets its flag.
func TestHonestBytecodeLoads(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sandbox; run without -short")
	}
	sb := shared(t)
	for _, tc := range honestLoads {
		t.Run(tc.name, func(t *testing.T) {
			res, err := sb.Run(context.Background(), sandbox.Request{Code: tc.code, Call: "f()"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != schemas.StatusOK || res.Value != tc.want {
				t.Fatalf("%s %s %s %s, want ok %s", res.Status, res.Value, res.ExcType, res.ExcMessage, tc.want)
			}
		})
	}
}

// craftedRoutes are the programs of TestCraftedBytecodeRoutes and TestReplayCraftedBytecode:
// each defines f(), which returns 42 if crafted bytes were unmarshalled and run (after
// craftedPrelude).
var craftedRoutes = []struct{ name, code string }{
	{"compile_bytecode_direct", `import importlib._bootstrap_external as be
def f():
    ns = {}
    exec(be._compile_bytecode(crafted()), ns)
    return ns["X"]
`},
	{"compile_bytecode_stdlib_path", `import importlib._bootstrap_external as be, colorsys
def f():
    # A real .pyc of the standard library named, other bytes given.
    ns = {}
    exec(be._compile_bytecode(memoryview(pyc_bytes())[16:], bytecode_path=colorsys.__cached__), ns)
    return ns["X"]
`},
	{"zip_pyc", `import zipfile
def f():
    with zipfile.ZipFile("/tmp/z.zip", "w") as z:
        z.writestr("zz.pyc", pyc_bytes())
    sys.path.insert(0, "/tmp/z.zip")
    import zz
    return zz.X
`},
	{"zipimporter_direct", `import zipfile, zipimport
def f():
    with zipfile.ZipFile("/tmp/z2.zip", "w") as z:
        z.writestr("zz2.pyc", pyc_bytes())
    ns = {}
    exec(zipimport.zipimporter("/tmp/z2.zip").get_code("zz2"), ns)
    return ns["X"]
`},
	{"zipimport_patched_get_data", `import zipfile, zipimport
def f():
    # zipimport's reader patched: the archive is a real one, the bytes are not its.
    with zipfile.ZipFile("/tmp/z3.zip", "w") as z:
        z.writestr("zz3.pyc", b"placeholder")
    zipimport._get_data = lambda archive, toc: pyc_bytes()
    ns = {}
    exec(zipimport.zipimporter("/tmp/z3.zip").get_code("zz3"), ns)
    return ns["X"]
`},
	{"source_loader_subclass", `import importlib.abc, importlib.util
class L(importlib.abc.SourceLoader):
    def get_filename(self, fullname):
        return "/tmp/sl_mod.py"
    def path_stats(self, path):
        return {"mtime": 0, "size": 0}
    def get_data(self, path):
        if path.endswith(".pyc"):
            return pyc_bytes()
        return b"X = 7\n"
def f():
    spec = importlib.util.spec_from_loader("sl_mod", L())
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.X
`},
	{"meta_path_loader", `import importlib.abc, importlib.util
class L(importlib.abc.SourceLoader, importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        return importlib.util.spec_from_loader(name, self) if name == "mp_mod" else None
    def get_filename(self, fullname):
        return "/tmp/mp_mod.py"
    def path_stats(self, path):
        return {"mtime": 0, "size": 0}
    def get_data(self, path):
        return pyc_bytes() if path.endswith(".pyc") else b"X = 7\n"
def f():
    sys.meta_path.insert(0, L())
    import mp_mod
    return mp_mod.X
`},
	{"sourceless_loader_subclass", `import importlib.machinery, importlib.util
class L(importlib.machinery.SourcelessFileLoader):
    def get_data(self, path):
        return pyc_bytes()
def f():
    loader = L("sll", "/usr/lib/python3/nothing.pyc")
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("sll", loader))
    loader.exec_module(mod)
    return mod.X
`},
	{"sourceless_loader_not_pyc", `import importlib.machinery, importlib.util
def f():
    # The standard library's own loader, its file not named .pyc (the open rule looks at names).
    with open("/tmp/m.bin", "wb") as fh:
        fh.write(pyc_bytes())
    loader = importlib.machinery.SourcelessFileLoader("mbin", "/tmp/m.bin")
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("mbin", loader))
    loader.exec_module(mod)
    return mod.X
`},
	{"cache_from_source_patched", `import importlib._bootstrap_external as be
def f():
    # The source's bytecode path redirected to a file not named .pyc, whose header validates.
    os.makedirs("/tmp/cfs", exist_ok=True)
    with open("/tmp/cfs/cfs_mod.py", "w") as fh:
        fh.write("X = 7\n")
    st = os.stat("/tmp/cfs/cfs_mod.py")
    header = importlib.util.MAGIC_NUMBER + b"\0" * 4 + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + \
        (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    with open("/tmp/cfs/evil.bin", "wb") as fh:
        fh.write(pyc_bytes(header))
    be.cache_from_source = lambda path, *a, **k: "/tmp/cfs/evil.bin"
    sys.path.insert(0, "/tmp/cfs")
    import cfs_mod
    return cfs_mod.X
`},
	{"file_loader_get_data_patched", `import importlib._bootstrap_external as be
def f():
    # The standard library's loader class patched: a module of the standard library not yet
    # imported, its real .pyc named, other bytes returned.
    real = be.FileLoader.get_data
    def get_data(self, path):
        data = real(self, path)
        return data[:16] + crafted() if path.endswith(".pyc") else data
    be.FileLoader.get_data = get_data
    import colorsys
    return colorsys.X
`},
	{"compile_bytecode_other_globals", `import functools, importlib._bootstrap_external as be, types, colorsys
def f():
    # _compile_bytecode's own code with other globals: their marshal is not the module (here a
    # namespace holding the real function; a C callable there could hand it other bytes).
    real = open(colorsys.__cached__, "rb").read()
    g = dict(vars(be))
    g["marshal"] = types.SimpleNamespace(loads=marshal.loads)
    fn = types.FunctionType(be._compile_bytecode.__code__, g, None, be._compile_bytecode.__defaults__)
    ns = {}
    exec(fn(memoryview(real)[16:], bytecode_path=colorsys.__cached__), ns)
    return ns["X"]
`},
	{"marshal_loads_replaced", `import functools, importlib._bootstrap_external as be, colorsys
def f():
    # marshal.loads replaced by a C callable (no frame of the code's own): refused, as any
    # callable between _compile_bytecode and the real function could hand it other bytes.
    real = open(colorsys.__cached__, "rb").read()
    marshal.loads = functools.partial(marshal.loads)
    ns = {}
    exec(be._compile_bytecode(memoryview(real)[16:], bytecode_path=colorsys.__cached__), ns)
    return ns["X"]
`},
	{"marshal_module_class", `import importlib._bootstrap_external as be, colorsys, types
class M(types.ModuleType):
    def __getattribute__(self, name):
        return types.ModuleType.__getattribute__(self, name)
def f():
    # The module's class changed: its attribute lookup is the code's.
    real = open(colorsys.__cached__, "rb").read()
    marshal.__class__ = M
    ns = {}
    exec(be._compile_bytecode(memoryview(real)[16:], bytecode_path=colorsys.__cached__), ns)
    return ns["X"]
`},
	{"mutable_buffer", `import importlib._bootstrap_external as be, colorsys
def f():
    # A bytearray equal to the file's bytes when checked (a finalizer could change it while
    # marshal reads it).
    real = open(colorsys.__cached__, "rb").read()
    ns = {}
    exec(be._compile_bytecode(bytearray(real[16:]), bytecode_path=colorsys.__cached__), ns)
    return ns["X"]
`},
	{"frozen_with_data", `import _imp, importlib._bootstrap as b
def f():
    ns = {}
    exec(b._call_with_frames_removed(_imp.get_frozen_object, "zz", crafted()), ns)
    return ns["X"]
`},
	{"marshal_load_file", `import io
def f():
    ns = {}
    exec(marshal.load(io.BytesIO(crafted())), ns)
    return ns["X"]
`},
	// An attacker's review (issue 29): the hook looked up "marshal" in _compile_bytecode's
	// globals, "loads" in marshal's dict and "data" in the frame's locals by dict lookup, which
	// calls the __eq__ of a key of the same hash placed before the real one: the code's Python
	// then ran inside the audit hook, where no operation is checked (a .pyc opened in /tmp,
	// marshal.loads of crafted bytes).
	{"hook_key_eq_globals", keyedDictRoute("vars(be)", "marshal")},
	{"hook_key_eq_marshal_dict", keyedDictRoute("vars(marshal)", "loads")},
	// The same, through the extension rule: _imp.create_dynamic audits the spec's origin as it
	// is, and the hook's os.fspath of it ran the origin's __fspath__ inside the hook.
	{"hook_fspath_ext_origin", `import _imp, types
_loads, _dumps = marshal.loads, marshal.dumps
class P:
    got = None
    def __fspath__(self):
        try:
            open("/tmp/probe.pyc", "wb").close()    # refused outside the audit hook
            P.got = _loads(_dumps(compile("X = 42\n", "zz.py", "exec")))
        except OSError:
            pass
        return "/nonexistent/zz.so"
def f():
    try:
        _imp.create_dynamic(types.SimpleNamespace(name="zz", origin=P()))
    except ImportError:
        if P.got is None:
            raise
    ns = {}
    exec(P.got, ns)
    return ns["X"]
`},
	{"hook_key_eq_frame_locals", `import importlib._bootstrap_external as be
class K:
    got = None
    def __hash__(self):
        return hash("data")
    def __eq__(self, other):
        if K.got is None:
            try:
                open("/tmp/probe.pyc", "wb").close()    # refused outside the audit hook
            except OSError:
                return False
            K.got = marshal.loads(crafted())
        return False
class Trap:
    # marshal's global looked up by _compile_bytecode: its frame reached through a traceback,
    # a key planted in the frame's locals dict
    def __hash__(self):
        return hash("marshal")
    def __eq__(self, other):
        try:
            raise ValueError
        except ValueError as e:
            fr = e.__traceback__.tb_frame.f_back
        if fr is not None and fr.f_code is be._compile_bytecode.__code__:
            loc = fr.f_locals
            d = loc.pop("data", None)
            loc[K()] = None
            if d is not None:
                loc["data"] = d
        return False
def f():
    g = vars(be)
    m = g.pop("marshal")
    g[Trap()] = None
    g["marshal"] = m
    try:
        be._compile_bytecode(crafted())
    except ImportError:
        if K.got is None:
            raise
    ns = {}
    exec(K.got, ns)
    return ns["X"]
`},
}

// keyedDictRoute is the program of an attack on the hook's dict lookups: a key of name's hash
// placed before name in dict (an expression of the module be and marshal), whose __eq__, once
// it finds itself inside the audit hook (a .pyc in /tmp may be opened), unmarshals crafted bytes.
func keyedDictRoute(dict, name string) string {
	return strings.NewReplacer("{dict}", dict, "{name}", name).Replace(`import importlib._bootstrap_external as be
_loads, _dumps = marshal.loads, marshal.dumps
class K:
    got, busy = None, False
    def __hash__(self):
        return hash("{name}")
    def __eq__(self, other):
        if K.got is None and not K.busy:
            K.busy = True
            try:
                open("/tmp/probe.pyc", "wb").close()    # refused outside the audit hook
                K.got = _loads(_dumps(compile("X = 42\n", "zz.py", "exec")))
            except OSError:
                pass
            finally:
                K.busy = False
        return False
def f():
    g = {dict}
    v = g.pop("{name}")
    g[K()] = None
    g["{name}"] = v
    try:
        be._compile_bytecode(crafted())
    except ImportError:
        if K.got is None:
            raise
    ns = {}
    exec(K.got, ns)
    return ns["X"]
`)
}

// honestLoads are the programs of TestHonestBytecodeLoads and TestReplayCraftedBytecode, with
// the value f() returns.
var honestLoads = []struct{ name, code, want string }{
	{"stdlib", `def f():
    import colorsys, fractions, json.decoder, email.mime.text
    return fractions.Fraction(1, 3).denominator + len(colorsys.__name__)
`, "11"},
	{"extension_modules", `def f():
    # the standard library's extension modules load (their spec's origin is a str path)
    import _bz2, _decimal, _queue
    return 3
`, "3"},
	{"stdlib_pyc_direct", `import importlib._bootstrap_external as be
def f():
    import colorsys
    data = open(colorsys.__cached__, "rb").read()
    code = be._compile_bytecode(memoryview(data)[16:], bytecode_path=colorsys.__cached__)
    return code.co_filename.endswith("colorsys.py")
`, "True"},
	{"dist_packages", `def f():
    import six
    return six.__cached__.startswith("/usr/lib/python3/dist-packages/__pycache__/") and six.PY3
`, "True"},
	{"py_in_tmp", `import os, sys
def f():
    os.makedirs("/tmp/hon", exist_ok=True)
    with open("/tmp/hon/hon_mod.py", "w") as fh:
        fh.write("X = 7\n")
    sys.path.insert(0, "/tmp/hon")
    import hon_mod
    import importlib
    importlib.invalidate_caches()
    return hon_mod.X
`, "7"},
	{"zip_source", `import sys, zipfile
def f():
    with zipfile.ZipFile("/tmp/hz.zip", "w") as z:
        z.writestr("hz_mod.py", "X = 7\n")
    sys.path.insert(0, "/tmp/hz.zip")
    import hz_mod
    return hz_mod.X
`, "7"},
	{"zip_bytecode_falls_back", `import importlib.util, marshal, sys, zipfile
def f():
    with zipfile.ZipFile("/tmp/hz2.zip", "w") as z:
        z.writestr("hz2_mod.pyc", importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(compile("X = 42\n", "x", "exec")))
        z.writestr("hz2_mod.py", "X = 7\n")
    sys.path.insert(0, "/tmp/hz2.zip")
    import hz2_mod
    return hz2_mod.X
`, "7"},
	{"types_coroutine", `import types
@types.coroutine
def g():
    yield 1
def f():
    return bool(g.__code__.co_flags & 0x100)
`, "True"},
}

// TestReplayCraftedBytecode (issue 29): a replay's audit hook (replay.py) keeps the C hook's
// rule on unmarshalled bytes: the same routes end tampered or refused, the same honest imports
// replay ok.
func TestReplayCraftedBytecode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sandbox; run without -short")
	}
	sb := shared(t)
	replay := func(t *testing.T, code string) *sandbox.Result {
		res, err := sb.Replay(context.Background(), sandbox.ReplayRequest{Code: code, Call: "f()",
			Wrapper: "def main():\n    return f()\n", Actions: [][2]string{{"continue", ""}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, tc := range craftedRoutes {
		t.Run(tc.name, func(t *testing.T) {
			res := replay(t, craftedPrelude+tc.code)
			t.Logf("%s %s %s", res.Status, res.Value, res.Detail)
			if res.Status != schemas.StatusTampered && !strings.Contains(res.Value, "ndtrace: ") &&
				!strings.Contains(res.Detail, "ndtrace: ") {
				t.Fatalf("%s %s %s: want tampered or the sandbox's refusal", res.Status, res.Value, res.Detail)
			}
		})
	}
	for _, tc := range honestLoads {
		t.Run("honest/"+tc.name, func(t *testing.T) {
			if res := replay(t, tc.code); res.Status != schemas.StatusOK || res.Value != tc.want {
				t.Fatalf("%s %s %s, want ok %s", res.Status, res.Value, res.Detail, tc.want)
			}
		})
	}
}

// TestReplayHookGuardRace (issue 29, an attacker's review): the bdb replay's audit hook skips
// every event while its guard is set (its own code running), and the guard was the process's,
// not the thread's: while one thread had a root's .pyc proven (the hook reads the file again,
// releasing the GIL), another thread's refused operations went through unchecked (a .pyc opened
// for writing in /tmp here; an extension module outside the roots, _cffi_backend's raw memory,
// just as well). The guard covers only the thread that set it.
func TestReplayHookGuardRace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sandbox; run without -short")
	}
	const code = `import importlib._bootstrap_external as be, colorsys, threading
pyc = colorsys.__cached__
with open(pyc, "rb") as fh:
    body = fh.read()[16:]
def f():
    won, stop = [], []
    def other():
        while not stop and not won:
            try:
                open("/tmp/probe.pyc", "wb").close()    # refused unless the hook skips it
                won.append(1)
            except OSError:
                pass
    t = threading.Thread(target=other)
    t.start()
    try:
        for _ in range(2000):
            if won:
                break
            be._compile_bytecode(memoryview(body), bytecode_path=pyc)
    finally:
        stop.append(1)
        t.join()
    return len(won)
`
	sb := shared(t)
	res, err := sb.Replay(context.Background(), sandbox.ReplayRequest{Code: code, Call: "f()",
		Wrapper: "def main():\n    return f()\n", Actions: [][2]string{{"continue", ""}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %s %s", res.Status, res.Value, res.Detail)
	if res.Status != schemas.StatusOK || res.Value != "0" {
		t.Fatalf("%s %s %s: want ok 0 (no refused operation of another thread let through)", res.Status, res.Value, res.Detail)
	}
	// The traced run's C hook keeps its guard per thread already.
	run, err := sb.Run(context.Background(), sandbox.Request{Code: code, Call: "f()"})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != schemas.StatusOK || run.Value != "0" {
		t.Fatalf("traced: %s %s %s %s: want ok 0", run.Status, run.Value, run.ExcType, run.ExcMessage)
	}
}
