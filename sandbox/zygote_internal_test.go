package sandbox

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/ndtrace/ndtrace/schemas"
)

// TestTracerSourceNotAnArgument checks that the tracer's size is not bounded by the kernel's bound
// on one argument (MAX_ARG_STRLEN, 128 KiB): a tracer each of whose files is 200 KiB longer than
// ours starts its sandboxes and traces, on each backend.
func TestTracerSourceNotAnArgument(t *testing.T) {
	if len(tracerBootstrap) > 1024 || strings.Contains(tracerBootstrap, "def ") {
		t.Fatalf("the -c program is the tracer itself: %.80q", tracerBootstrap)
	}
	saved := tracerParts
	tracerParts = slices.Clone(tracerParts)
	for i := range tracerParts {
		tracerParts[i] += "\n" + strings.Repeat("# padding: a tracer past MAX_ARG_STRLEN\n", 200<<10/40)
	}
	t.Cleanup(func() { tracerParts = saved })
	for _, backend := range Backends() {
		t.Run(backend, func(t *testing.T) {
			sb, err := New(context.Background(), Config{Backend: backend})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			res, err := sb.Run(context.Background(), Request{Code: "def f(x):\n    return x + 1\n", Call: "f(1)"})
			if err != nil || res.Status != schemas.StatusOK || res.Value != "2" {
				t.Fatalf("run: %v %+v", err, res)
			}
		})
	}
}

// writeTracerFiles writes the tracer's files to a new folder and returns it, for checks run by
// /usr/bin/python3 (skipped without it).
func writeTracerFiles(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	dir := t.TempDir()
	for i, name := range tracerFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(tracerParts[i]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTracerFiles checks how the tracer's files are joined: each one compiles on its own (so no
// statement runs across the border of two files), the bootstrap holds no code object but its own
// (the tracer trusts all the code the bottom frames' code holds), and the joined files are one
// module whose docstring is common.py's and whose main() runs last.
func TestTracerFiles(t *testing.T) {
	dir := writeTracerFiles(t)
	const check = `
import ast, os, sys, types
d, bootstrap, names = sys.argv[1], sys.argv[2], sys.argv[3:]
for name in names:
    compile(open(os.path.join(d, name), "rb").read(), name, "exec")
code = compile(bootstrap.replace("/.ndtrace/", d + "/"), "<string>", "exec")
assert not any(isinstance(c, types.CodeType) for c in code.co_consts), code.co_consts
joined = b"".join(open(os.path.join(d, name), "rb").read() for name in names)
tree = ast.parse(joined)
assert ast.get_docstring(tree).startswith("ndtrace sandbox zygote"), ast.get_docstring(tree)
assert isinstance(tree.body[-1], ast.If) and "__main__" in ast.unparse(tree.body[-1].test)
print("ok")
`
	out, err := exec.Command("/usr/bin/python3", append([]string{"-I", "-B", "-c", check, dir, tracerBootstrap},
		tracerFiles[:]...)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.HasPrefix(tracerBootstrap, "exec(compile(b''.join([open('"+supportMount+"/"+tracerFiles[0]+"', 'rb').read(), ") {
		t.Fatalf("bootstrap %q", tracerBootstrap)
	}
}

// TestTracerNames checks the names the tracer's files bind at top level: no name is bound by two
// files (they share one module: the later would silently replace the earlier; a plain "import
// MODULE" binds the same object in any file and may repeat), names starting with _gen are
// generate.py's alone and all of its are such names, and generate.py also runs on
// its own (the generator engine's harness execs it in a plain interpreter: docs/sandbox.md,
// "Generating inputs").
func TestTracerNames(t *testing.T) {
	dir := writeTracerFiles(t)
	const check = `
import ast, os, sys
d, names = sys.argv[1], sys.argv[2:]
owner, bad = {}, []
def bound(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.Import) and all(a.asname is None for a in node.names):
        pass   # "import ast" binds the module itself, the same object whichever file imports it
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for a in node.names:
            yield (a.asname or a.name).split(".")[0]
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    yield n.id
for name in names:
    tree = ast.parse(open(os.path.join(d, name), "rb").read())
    for node in tree.body:
        for b in bound(node):
            if b in owner and owner[b] != name:
                bad.append("%s: bound by %s and %s" % (b, owner[b], name))
            owner.setdefault(b, name)
            if (name == "generate.py") != b.startswith("_gen"):
                bad.append("%s: bound by %s" % (b, name))
ns = {"__name__": "standalone"}
exec(compile(open(os.path.join(d, "generate.py")).read(), "generate.py", "exec"), ns)
if not callable(ns.get("_gen_main")):
    bad.append("generate.py defines no _gen_main on its own")
print("\n".join(bad) or "ok")
`
	out, err := exec.Command("/usr/bin/python3", append([]string{"-I", "-B", "-c", check, dir}, tracerFiles[:]...)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%v: %s", err, out)
	}
}

// TestLoadTracerPartsRefuses checks the package's check of sandbox/tracer/: a file tracerFiles
// does not list, a listed file missing, and a file not ending with a newline each stop it.
func TestLoadTracerPartsRefuses(t *testing.T) {
	whole := fstest.MapFS{}
	for _, name := range tracerFiles {
		whole["tracer/"+name] = &fstest.MapFile{Data: []byte("x = 1\n")}
	}
	if got := loadTracerParts(whole); len(got) != len(tracerFiles) {
		t.Fatalf("parts %q", got)
	}
	extra := maps.Clone(whole)
	extra["tracer/new.py"] = &fstest.MapFile{Data: []byte("y = 2\n")}
	missing := maps.Clone(whole)
	delete(missing, "tracer/"+tracerFiles[3])
	unterminated := maps.Clone(whole)
	unterminated["tracer/"+tracerFiles[1]] = &fstest.MapFile{Data: []byte("x = (1,")}
	for name, fsys := range map[string]fstest.MapFS{"extra": extra, "missing": missing, "unterminated": unterminated} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: loaded", name)
				}
			}()
			loadTracerParts(fsys)
		}()
	}
}

// TestRlimitProduct checks the rlimits of an item bounded by rlimits alone: its processes (all
// but the keeper and init RLIMIT_NPROC counts) times RLIMIT_AS stay within Limits.Memory, and
// limits already within it are kept.
func TestRlimitProduct(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name      string
		lim       Limits
		as        int64
		nproc     int
		unchanged bool
	}{
		{"within", Limits{AddressSpace: 512 * mib, Processes: 6, Memory: 2048 * mib}, 512 * mib, 6, true},
		{"defaults", DefaultLimits, 256 * mib, 8 + itemPids, false},
		{"conformance", Limits{AddressSpace: 1024 * mib, Processes: 32, Memory: 2048 * mib}, 256 * mib, 8 + itemPids, false},
		{"small memory", Limits{AddressSpace: 1024 * mib, Processes: 8, Memory: 512 * mib}, 256 * mib, 2 + itemPids, false},
		{"few processes", Limits{AddressSpace: 4096 * mib, Processes: 4, Memory: 2048 * mib}, 1024 * mib, 2 + itemPids, false},
		{"small address space", Limits{AddressSpace: 64 * mib, Processes: 200, Memory: 2048 * mib}, 64 * mib, 32 + itemPids, false},
		{"tiny memory", Limits{AddressSpace: 1024 * mib, Processes: 64, Memory: 100 * mib}, 100 * mib, 1 + itemPids, false},
		{"one process", Limits{AddressSpace: 4096 * mib, Processes: 1, Memory: 1024 * mib}, 1024 * mib, 1, false},
		{"no memory limit", Limits{AddressSpace: 1024 * mib, Processes: 64}, 1024 * mib, 64, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as, nproc := rlimitProduct(tc.lim)
			if as != tc.as || nproc != tc.nproc {
				t.Fatalf("rlimitProduct(%+v) = %d MiB x %d, want %d MiB x %d", tc.lim, as>>20, nproc, tc.as>>20, tc.nproc)
			}
			if tc.unchanged {
				return
			}
			if procs := int64(max(nproc-itemPids, 1)); as*procs > tc.lim.Memory {
				t.Fatalf("%d processes x %d MiB = %d MiB, over the memory limit of %d MiB", procs, as>>20, as*procs>>20, tc.lim.Memory>>20)
			}
			if nproc > tc.lim.Processes || as > tc.lim.AddressSpace {
				t.Fatalf("%d MiB x %d raises the limits %+v", as>>20, nproc, tc.lim)
			}
		})
	}
}

// pythonDescendant returns the pid of the first python process below pid (the zygote below the
// backend's set-up process), or 0.
func pythonDescendant(pid int) int {
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); err == nil && strings.Contains(filepath.Base(exe), "python") {
			return p
		}
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			b, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					todo = append(todo, c)
				}
			}
		}
	}
	return 0
}

// rssAnonKB is the RssAnon of process pid, in kB.
func rssAnonKB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no RssAnon in /proc/%d/status", pid)
	return 0
}

// TestZygoteMemoryFlat backs Config.RecycleAfter's default: items never run in the zygote, so
// its memory does not grow with the items it forks (measured: the same RssAnon at its 10th and
// 4000th item).
func TestZygoteMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("zygote memory over 1,500 items: long integration test; run without -short")
	}
	s, err := New(context.Background(), Config{RecycleAfter: 100000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(n int) {
		for i := 0; i < n; i++ {
			res, err := s.Run(context.Background(), Request{Code: "def f(x):\n    return [str(x)] * 1000\n", Call: fmt.Sprintf("f(%d)", i)})
			if err != nil || res.Status != schemas.StatusOK {
				t.Fatalf("%v %s %s", err, res.Status, res.Detail)
			}
		}
	}
	run(20)
	pid := pythonDescendant(s.z.cmd.Process.Pid)
	if pid == 0 {
		t.Skip("no python process found below the sandbox's process")
	}
	before := rssAnonKB(t, pid)
	run(1500)
	if after := rssAnonKB(t, pid); after > before+512 {
		t.Fatalf("the zygote grew from %d kB to %d kB (RssAnon) over 1,500 items", before, after)
	} else {
		t.Logf("zygote RssAnon: %d kB after 20 items, %d kB after 1,520", before, after)
	}
}
