package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// testRepos is one sandbox with the repositories of the test-run tests mounted.
type testRepos struct {
	sb                          *sandbox.Sandbox
	repo, uni, conf, deps, venv string
}

// repoFiles is the main repository: sandboxtest.Suite plus functions whose source the tests check,
// a vendored package under a PythonPath directory inside the checkout, and a few odd tests.
var repoFiles = map[string]string{
	"calc/deco.py": `import functools


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)
    return wrapper


class Box:
    def __init__(self, v):
        self.v = v

    @logged
    def scaled(self, k):
        return [self.v * i for i in range(k)]
`,
	"tests/test_more.py": `import multiprocessing
import sys

from calc.deco import Box
from calc.ops import add
from vendored import helper


def test_box():
    assert Box(2).scaled(3) == [0, 2, 4]


def test_vendored():
    assert helper(add(1, 2)) == 30


def test_multiprocessing():
    p = multiprocessing.Process(target=add, args=(100, 200))
    p.start()
    p.join()
    assert p.exitcode == 0
    assert add(1, 2) == 3


def test_no_trace_function():
    assert sys.gettrace() is None


def test_error_in_fixture(broken):
    pass
`,
	"tests/conftest.py": `import pytest


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")
`,
	".venv/lib/python3.11/site-packages/vendored/__init__.py": "def helper(x):\n    return x * 10\n",
}

func setupRepos(t *testing.T) *testRepos {
	t.Helper()
	root := sandboxtest.HostDir(t)
	r := &testRepos{repo: filepath.Join(root, "repo"), uni: filepath.Join(root, "uni"), conf: filepath.Join(root, "conf"),
		deps: filepath.Join(root, "deps"), venv: filepath.Join(root, "repo", ".venv")}
	sandboxtest.WriteTree(t, r.repo, sandboxtest.Suite)
	sandboxtest.WriteTree(t, r.repo, repoFiles)
	sandboxtest.WriteTree(t, r.repo, map[string]string{".venv/pyvenv.cfg": "home = /usr/bin\nversion = " + pythonVersion(t) + "\n"})
	sandboxtest.WriteTree(t, r.uni, sandboxtest.UnittestSuite)
	sandboxtest.WriteTree(t, r.uni, map[string]string{"tests/test_dep.py": "import ndtrace_absent.sub\n"})
	sandboxtest.WriteTree(t, r.conf, map[string]string{
		"conftest.py":        "import ndtrace_missing_plugin\n",
		"tests/test_one.py":  "def test_one():\n    pass\n",
		"tests/test_two.py":  "def test_two():\n    pass\n",
		"local_only/__i__.x": "",
	})
	sandboxtest.WriteTree(t, r.deps, map[string]string{"extlib/__init__.py": "def triple(x):\n    return 3 * x\n"})
	venvSP, err := sandbox.VenvSitePackages(r.venv)
	if err != nil {
		t.Fatal(err)
	}
	r.sb, err = sandbox.New(context.Background(), sandbox.Config{ReadOnly: []string{r.repo, r.uni, r.conf},
		PythonPath: []string{r.deps, venvSP}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.sb.Close() })
	return r
}

// pythonVersion is the X.Y of the interpreter sandboxes use.
func pythonVersion(t *testing.T) string {
	v := shared(t).Python()
	parts := strings.Split(v, ".")
	return parts[0] + "." + parts[1]
}

func (r *testRepos) run(t *testing.T, dir, test string, traced bool) *sandbox.TestResult {
	t.Helper()
	res, err := r.sb.RunTest(context.Background(), sandbox.TestRequest{Dir: dir, Test: test, Traced: traced})
	if err != nil {
		t.Fatalf("RunTest(%s): %v", test, err)
	}
	return res
}

func TestRunTest(t *testing.T) {
	r := setupRepos(t)
	tests := []struct {
		name, test    string
		outcome       string
		traced        bool
		exc           string
		missingModule string
		check         func(t *testing.T, tr *sandbox.TestResult)
	}{
		{name: "passing", test: "tests/test_ops.py::test_mul", outcome: sandbox.OutcomePassed, traced: true,
			check: func(t *testing.T, tr *sandbox.TestResult) {
				res := tr.Result
				// The test function is the first traced frame, at depth 0; pytest is never traced.
				if e := res.Events[0]; e.Event != "call" || e.Func != "test_mul" || e.Depth != 0 ||
					e.File != filepath.Join(r.repo, "tests/test_ops.py") {
					t.Fatalf("first event %+v", e)
				}
				depth := map[string]int{}
				for _, e := range res.Events {
					if e.Event == "call" {
						if _, ok := depth[e.Func]; !ok {
							depth[e.Func] = e.Depth
						}
					}
				}
				if depth["mul"] != 1 || depth["mul.<locals>.<genexpr>"] != 2 || depth["add"] != 3 {
					t.Errorf("call depths %v", depth)
				}
				// Functions: first-call order, the genexpr folded into mul, exact source.
				var names []string
				for _, f := range res.Functions {
					names = append(names, f.QualName)
				}
				if !slices.Equal(names, []string{"test_mul", "mul", "add"}) {
					t.Fatalf("functions %q", names)
				}
				add := res.Functions[2]
				want := schemas.FuncSource{File: filepath.Join(r.repo, "calc/ops.py"), QualName: "add", FirstLine: 1,
					LastLine: 3, Source: "def add(a, b):\n    total = a + b\n    return total"}
				if add != want {
					t.Errorf("add: %+v, want %+v", add, want)
				}
			}},
		{name: "decorated_method", test: "tests/test_more.py::test_box", outcome: sandbox.OutcomePassed, traced: true,
			check: func(t *testing.T, tr *sandbox.TestResult) {
				got := map[string]schemas.FuncSource{}
				for _, f := range tr.Result.Functions {
					got[f.QualName] = f
				}
				s, ok := got["Box.scaled"]
				if !ok || s.FirstLine != 15 || s.LastLine != 17 || !strings.HasPrefix(s.Source, "    @logged\n    def scaled") {
					t.Errorf("Box.scaled: %+v (all %v)", s, tr.Result.Functions)
				}
				if w := got["logged.<locals>.wrapper"]; w.FirstLine != 5 || w.LastLine != 7 {
					t.Errorf("nested wrapper: %+v", w)
				}
			}},
		{name: "failing", test: "tests/test_ops.py::test_fails", outcome: sandbox.OutcomeFailed, traced: true, exc: "AssertionError"},
		{name: "fixture_error", test: "tests/test_more.py::test_error_in_fixture", outcome: sandbox.OutcomeError, exc: "RuntimeError",
			check: func(t *testing.T, tr *sandbox.TestResult) {
				if !strings.Contains(tr.Result.Detail, "error in setup") {
					t.Errorf("detail %q", tr.Result.Detail)
				}
			}},
		{name: "skipped", test: "tests/test_ops.py::test_skipped", outcome: sandbox.OutcomeSkipped},
		{name: "not_found", test: "tests/test_ops.py::test_nonexistent", outcome: sandbox.OutcomeError, exc: "PytestExit"},
		{name: "missing_module", test: "tests/test_needs_dep.py::test_never", outcome: sandbox.OutcomeError,
			exc: "ModuleNotFoundError", missingModule: "ndtrace_no_such_dependency"},
		{name: "pythonpath_excluded", test: "tests/test_more.py::test_vendored", outcome: sandbox.OutcomePassed, traced: true,
			check: func(t *testing.T, tr *sandbox.TestResult) {
				if count(tr.Result.Events, "call", "helper") != 0 || count(tr.Result.Events, "call", "add") != 1 {
					t.Errorf("a PythonPath module inside the checkout was traced: %v", kinds(tr.Result.Events))
				}
			}},
		{name: "fork", test: "tests/test_ops.py::test_forks", outcome: sandbox.OutcomePassed, traced: true,
			check: func(t *testing.T, tr *sandbox.TestResult) {
				if n := count(tr.Result.Events, "call", "add"); n != 1 {
					t.Errorf("%d calls of add traced, want 1 (the forked child's is not)", n)
				}
			}},
		{name: "multiprocessing", test: "tests/test_more.py::test_multiprocessing", outcome: sandbox.OutcomePassed, traced: true,
			check: func(t *testing.T, tr *sandbox.TestResult) {
				if n := count(tr.Result.Events, "call", "add"); n != 1 {
					t.Errorf("%d calls of add traced, want 1", n)
				}
			}},
		{name: "untraced_no_settrace", test: "tests/test_more.py::test_no_trace_function", outcome: sandbox.OutcomePassed},
		{name: "traced_settrace", test: "tests/test_more.py::test_no_trace_function", outcome: sandbox.OutcomeFailed, traced: true,
			exc: "AssertionError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := r.run(t, r.repo, tc.test, tc.traced)
			res := tr.Result
			if res.Status != schemas.StatusOK || tr.Outcome != tc.outcome || tr.Runner != sandbox.RunnerPytest {
				t.Fatalf("status %s (%s) outcome %q runner %q, want ok %q; stdout %.3000s\nstderr %.3000s", res.Status,
					res.Detail, tr.Outcome, tr.Runner, tc.outcome, res.Stdout, res.Stderr)
			}
			if res.ExcType != tc.exc || tr.MissingModule != tc.missingModule {
				t.Errorf("exception %q (%s), missing module %q; want %q, %q", res.ExcType, res.ExcMessage,
					tr.MissingModule, tc.exc, tc.missingModule)
			}
			for _, e := range res.Events {
				if !strings.HasPrefix(e.File, r.repo+"/") || strings.HasPrefix(e.File, r.venv+"/") {
					t.Fatalf("traced a frame outside the repository's own files: %+v", e)
				}
			}
			for _, f := range res.Functions {
				if !strings.HasPrefix(f.File, r.repo+"/") {
					t.Fatalf("function outside the repository: %+v", f)
				}
			}
			if tc.traced && tc.outcome == sandbox.OutcomePassed && len(res.Events) == 0 {
				t.Fatal("no events")
			}
			if !tc.traced && (len(res.Events) != 0 || len(res.Functions) != 0) {
				t.Fatalf("an untraced run has %d events, %d functions", len(res.Events), len(res.Functions))
			}
			if tc.check != nil {
				tc.check(t, tr)
			}
		})
	}
}

// TestTracedUntracedAgree runs every collected test both ways: the verdicts must be the same.
func TestTracedUntracedAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("every collected test run traced and untraced: long integration test; run without -short")
	}
	r := setupRepos(t)
	for _, dir := range []string{r.repo, r.uni} {
		c, err := r.sb.CollectTests(context.Background(), sandbox.CollectRequest{Dir: dir})
		if err != nil || c.Status != schemas.StatusOK || len(c.Tests) < 2 {
			t.Fatalf("collect %s: %v %+v", dir, err, c)
		}
		for _, id := range c.Tests {
			if strings.HasSuffix(id, "test_hangs") || strings.HasSuffix(id, "test_no_trace_function") {
				continue
			}
			plain, traced := r.run(t, dir, id, false), r.run(t, dir, id, true)
			if plain.Outcome == "" || plain.Outcome != traced.Outcome || plain.Result.ExcType != traced.Result.ExcType {
				t.Errorf("%s: untraced %q %s, traced %q %s", id, plain.Outcome, plain.Result.Detail, traced.Outcome,
					traced.Result.Detail)
			}
		}
	}
}

func TestCollectTests(t *testing.T) {
	r := setupRepos(t)
	tests := []struct {
		name, dir, runner string
		status            schemas.Status
		wantRunner        string
		tests             []string
		missing           string
		errors            int
	}{
		{name: "pytest", dir: r.repo, status: schemas.StatusOK, wantRunner: sandbox.RunnerPytest, missing: "ndtrace_no_such_dependency",
			errors: 1, tests: []string{"tests/test_more.py::test_box", "tests/test_more.py::test_vendored",
				"tests/test_more.py::test_multiprocessing", "tests/test_more.py::test_no_trace_function",
				"tests/test_more.py::test_error_in_fixture", "tests/test_ops.py::test_add", "tests/test_ops.py::test_mul",
				"tests/test_ops.py::test_fails", "tests/test_ops.py::test_skipped", "tests/test_ops.py::test_hangs",
				"tests/test_ops.py::test_forks"}},
		{name: "unittest", dir: r.uni, runner: sandbox.RunnerUnittest, status: schemas.StatusOK, wantRunner: sandbox.RunnerUnittest,
			missing: "ndtrace_absent", errors: 1,
			tests: []string{"tests.test_mod.TestDouble.test_bad", "tests.test_mod.TestDouble.test_ok"}},
		{name: "pytest_on_unittest", dir: r.uni, status: schemas.StatusOK, wantRunner: sandbox.RunnerPytest,
			missing: "ndtrace_absent", errors: 1,
			tests: []string{"tests/test_mod.py::TestDouble::test_bad", "tests/test_mod.py::TestDouble::test_ok"}},
		{name: "conftest_missing_module", dir: r.conf, status: schemas.StatusException, wantRunner: sandbox.RunnerPytest,
			missing: "ndtrace_missing_plugin", tests: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := r.sb.CollectTests(context.Background(), sandbox.CollectRequest{Dir: tc.dir, Runner: tc.runner})
			if err != nil {
				t.Fatal(err)
			}
			if c.Status != tc.status || c.Runner != tc.wantRunner || !slices.Equal(c.Tests, tc.tests) {
				t.Fatalf("status %s (%s) runner %q tests %q; stderr %.3000s", c.Status, c.Detail, c.Runner, c.Tests, c.Result.Stderr)
			}
			if c.MissingModule != tc.missing || len(c.Errors) != tc.errors {
				t.Fatalf("missing module %q, errors %q", c.MissingModule, c.Errors)
			}
		})
	}
	// Collection writes nothing into the read-only checkout (no .pytest_cache, no __pycache__).
	filepath.WalkDir(r.repo, func(p string, d os.DirEntry, err error) error {
		if err == nil && (d.Name() == ".pytest_cache" || d.Name() == "__pycache__") {
			t.Errorf("collection left %s", p)
		}
		return nil
	})
}

func TestTestRequestErrors(t *testing.T) {
	r := setupRepos(t)
	ctx := context.Background()
	other := sandboxtest.HostDir(t)
	for name, req := range map[string]sandbox.TestRequest{
		"not_mounted":  {Dir: other, Test: "t.py::test_x"},
		"relative_dir": {Dir: "repo", Test: "t.py::test_x"},
		"bad_runner":   {Dir: r.repo, Runner: "nose", Test: "t.py::test_x"},
		"no_test":      {Dir: r.repo},
		"option":       {Dir: r.repo, Test: "--help"},
	} {
		if _, err := r.sb.RunTest(ctx, req); err == nil {
			t.Errorf("%s: RunTest accepted %+v", name, req)
		}
	}
	if _, err := r.sb.CollectTests(ctx, sandbox.CollectRequest{Dir: other}); err == nil {
		t.Error("CollectTests accepted a directory that is not mounted")
	}
}

func TestPythonPathFunctionLevel(t *testing.T) {
	r := setupRepos(t)
	res, err := r.sb.Run(context.Background(), sandbox.Request{Code: "from extlib import triple\ndef f(x):\n    return triple(x)\n", Call: "f(3)"})
	if err != nil || res.Status != schemas.StatusOK || res.Value != "9" {
		t.Fatalf("%v %s %s %s", err, res.Status, res.Detail, res.Value)
	}
	if count(res.Events, "call", "triple") != 0 {
		t.Error("a PythonPath module was traced")
	}
}

func TestVenvSitePackages(t *testing.T) {
	dir := sandboxtest.HostDir(t)
	ver := pythonVersion(t)
	sandboxtest.WriteTree(t, dir, map[string]string{
		"good/pyvenv.cfg": "home = /usr/bin\ninclude-system-site-packages = false\nversion = " + ver + ".2\n",
		"good/lib/python" + ver + "/site-packages/x.py": "",
		"uv/pyvenv.cfg": "home = /usr/bin\nimplementation = CPython\nversion_info = " + ver + ".2.final.0\n",
		"uv/lib/python" + ver + "/site-packages/x.py": "",
		"old/pyvenv.cfg":                                   "version = 3.7.9\n",
		"old/lib/python3.7/site-packages/x.py":             "",
		"broken/pyvenv.cfg":                                "version = " + ver + ".0\n",
		"notvenv/lib/python" + ver + "/site-packages/x.py": "",
	})
	for _, name := range []string{"good", "uv"} {
		sp, err := sandbox.VenvSitePackages(filepath.Join(dir, name))
		if want := filepath.Join(dir, name, "lib", "python"+ver, "site-packages"); err != nil || sp != want {
			t.Errorf("%s: %q %v, want %q", name, sp, err, want)
		}
	}
	for _, name := range []string{"broken", "notvenv"} {
		if sp, err := sandbox.VenvSitePackages(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s: got %q, want an error", name, sp)
		}
	}
	// A virtualenv of another Python version cannot serve the sandbox's interpreter.
	sp, err := sandbox.VenvSitePackages(filepath.Join(dir, "old"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(context.Background(), sandbox.Config{PythonPath: []string{sp}})
	if err == nil {
		sb.Close()
		t.Fatal("New accepted site-packages of Python 3.7")
	} else if !strings.Contains(err.Error(), "is for Python 3.7") {
		t.Errorf("error %v", err)
	}
}

func TestConfigPaths(t *testing.T) {
	for name, cfg := range map[string]sandbox.Config{
		"readonly_under_tmp":   {ReadOnly: []string{t.TempDir()}},
		"pythonpath_under_tmp": {PythonPath: []string{t.TempDir()}},
		"pythonpath_relative":  {PythonPath: []string{"site-packages"}},
		"pythonpath_missing":   {PythonPath: []string{"/nonexistent/site-packages"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		sb, err := sandbox.New(ctx, cfg)
		cancel()
		if err == nil {
			sb.Close()
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

// TestOwnCopyWins: the zygote preloads the interpreter's pytest, but a dependency environment's own
// copy of one of its modules (here pluggy) is the one a test run imports.
func TestOwnCopyWins(t *testing.T) {
	src := "/usr/lib/python3/dist-packages/pluggy"
	if _, err := os.Stat(src); err != nil {
		t.Skip("Debian's pluggy is not installed")
	}
	root := sandboxtest.HostDir(t)
	repo, deps := filepath.Join(root, "repo"), filepath.Join(root, "deps")
	files := map[string]string{}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".py") {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files["pluggy/"+e.Name()] = string(b)
		}
	}
	sandboxtest.WriteTree(t, deps, files)
	sandboxtest.WriteTree(t, repo, map[string]string{"test_p.py": "import pluggy\n\n\ndef test_p():\n    assert pluggy.__file__.startswith(" +
		"'" + deps + "/'), pluggy.__file__\n"})
	sb, err := sandbox.New(context.Background(), sandbox.Config{ReadOnly: []string{repo}, PythonPath: []string{deps}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for i := 0; i < 2; i++ { // before and after the zygote has preloaded pytest
		tr, err := sb.RunTest(context.Background(), sandbox.TestRequest{Dir: repo, Test: "test_p.py::test_p"})
		if err != nil || tr.Outcome != sandbox.OutcomePassed {
			t.Fatalf("%v %+v %s", err, tr, tr.Result.Detail)
		}
	}
}

// TestPycNotFromPythonPathInCheckout: a PythonPath directory inside a checkout (a src/ layout's
// folder) is importable, but bytecode never loads from it: the repository wrote it.
func TestPycNotFromPythonPathInCheckout(t *testing.T) {
	ctx := context.Background()
	checkout := sandboxtest.HostDir(t)
	src := filepath.Join(checkout, "src")
	sandboxtest.WriteTree(t, checkout, map[string]string{"src/evil_pyc_src.py": "X = 42\n", "src/plain.py": "Y = 7\n"})
	if out, err := exec.Command("/usr/bin/python3", "-c", "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)",
		filepath.Join(src, "evil_pyc_src.py"), filepath.Join(src, "evil_pyc.pyc")).CombinedOutput(); err != nil {
		t.Fatalf("compiling a .pyc: %v: %s", err, out)
	}
	os.Chmod(filepath.Join(src, "evil_pyc.pyc"), 0o644)
	sb, err := sandbox.New(ctx, sandbox.Config{ReadOnly: []string{checkout}, PythonPath: []string{src}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Run(ctx, sandbox.Request{Code: "import plain\n\ndef f():\n    import evil_pyc\n    return evil_pyc.X\n", Call: "f()"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != schemas.StatusException || res.ExcType != "PermissionError" {
		t.Fatalf("importing a .pyc from a PythonPath folder inside a checkout: %s %s %s %s", res.Status, res.Value, res.ExcType, res.ExcMessage)
	}
}
