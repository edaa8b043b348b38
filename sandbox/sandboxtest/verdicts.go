package sandboxtest

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// verdictCases are honest programs the tracer once judged as tampering, each beside the attacks
// its relaxed verdict must still catch (issue 29).
var verdictCases = []testCase{
	{"settrace_restore", func(e *Env) {
		// Restoring the trace function sys.gettrace() returned is no change: the run is traced
		// on after it (g's call is in the trace).
		res := e.Trace(`import sys
def g():
    return 2
def f():
    saved = sys.gettrace()
    sys.settrace(saved)
    sys.settrace(sys.gettrace())
    return g()
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if !hasCall(res, "g") {
			e.T.Fatalf("g's call is not in the trace after the restore: %d events", len(res.Events))
		}
	}},
	{"settrace_doctest", func(e *Env) {
		// doctest saves and restores the trace function around every run of examples.
		res := e.Trace(`import doctest
def double(x):
    """
    >>> double(21)
    42
    """
    return 2 * x
def f():
    doctest.run_docstring_examples(double, {"double": double})
    r = doctest.DocTestRunner(verbose=False)
    for t in doctest.DocTestFinder().find(double, "double", globs={"double": double}):
        r.run(t)
    return r.summarize(verbose=False).failed + double(1)
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if res.Value != "2" || !hasCall(res, "double") {
			e.T.Fatalf("value %s, double traced %v", res.Value, hasCall(res, "double"))
		}
	}},
	{"settrace_attacks", func(e *Env) {
		// Anything but the current trace function still ends the run: another function, the
		// getter itself, a lookalike that claims equality with everything, the current function
		// shown by a sys.gettrace of the code's own, a debugger, a profile function (even the
		// current one), a thread's trace function, and CPython's own settrace however it is
		// reached (it is audited).
		for _, stmt := range []string{
			"sys.settrace(lambda *a: None)",
			"sys.settrace(sys.gettrace)",
			"sys.settrace(Lookalike())",
			"hook = lambda *a: None; sys.gettrace = lambda: hook; sys.settrace(hook)",
			"import bdb; sys.settrace(bdb.Bdb().trace_dispatch)",
			"sys.setprofile(sys.getprofile())",
			"sys.setprofile(lambda *a: None)",
			"threading.settrace(lambda *a: None); t = threading.Thread(target=g); t.start(); t.join()",
			"t = threading.Thread(target=lambda: sys.settrace(lambda *a: None)); t.start(); t.join()",
			"import importlib; importlib.reload(sys); sys.settrace(None)",
			"sys.settrace(None)",
		} {
			res := e.Trace(`import sys, threading
class Lookalike:
    def __eq__(self, other):
        return True
    def __hash__(self):
        return 0
    def __call__(self, *a):
        return None
def g():
    return "nobody saw this"
def f():
    `+stmt+`
    return g()
`, "f()", sandbox.Limits{})
			if res.Status != schemas.StatusTampered {
				e.T.Errorf("%s: %s (%s) value %s, want tampered", stmt, res.Status, res.Detail, res.Value)
			}
		}
	}},
}

// hasCall reports whether the run's trace has a call event of function name.
func hasCall(res *sandbox.Result, name string) bool {
	for _, ev := range res.Events {
		if ev.Event == schemas.EventCall && (ev.Func == name || strings.HasSuffix(ev.Func, "."+name)) {
			return true
		}
	}
	return false
}

// verdictTestRuns checks the verdicts of test runs (issue 29): doctests collected and run traced
// by pytest --doctest-modules, and a collection that ends tampered naming the module that did it,
// which a collection leaving it out (CollectRequest.Ignore) does not import; each way of tampering
// at import time still ends the collection so.
func verdictTestRuns(t *testing.T, cfg sandbox.Config) {
	ctx := context.Background()
	root := HostDir(t)
	doc, gcRepo := filepath.Join(root, "doctests"), filepath.Join(root, "gc")
	WriteTree(t, doc, map[string]string{
		"pytest.ini": "[pytest]\naddopts = --doctest-modules\n",
		"fmt.py":     "def shout(s):\n    \"\"\"\n    >>> shout('a')\n    'A!'\n    \"\"\"\n    loud = s.upper()\n    return loud + '!'\n",
		"test_doc.py": "import doctest\n\nimport fmt\n\n\ndef test_testmod():\n    assert doctest.testmod(fmt).failed == 0\n\n\n" +
			"def test_hook():\n    import sys\n    sys.settrace(sys.gettrace)\n",
	})
	attacks := map[string]string{
		"gc":       "import gc\nN = len(gc.get_objects())\n",
		"referent": "import gc\nN = len(gc.get_referents(gc))\n",
		"helper":   "import _ndtrace_native\nN = 1\n",
		"code":     "import types\nN = types.CodeType(0, 0, 0, 0, 0, 0, b'', (), (), (), 'x', 'x', 'x', 1, b'', b'')\n",
		"settrace": "import sys\nsys.settrace(lambda *a: None)\nN = 1\n",
		"marshal":  "import marshal\nN = marshal.loads(marshal.dumps(compile('1', 'x', 'eval')))\n",
	}
	WriteTree(t, gcRepo, map[string]string{
		"calc.py":           "def add(a, b):\n    return a + b\n",
		"tests/__init__.py": "",
		"tests/test_calc.py": "import unittest\n\nfrom calc import add\n\n\nclass TestAdd(unittest.TestCase):\n" +
			"    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
	})
	cfg.ReadOnly = []string{doc, gcRepo}
	sb, err := sandbox.New(ctx, cfg)
	if err != nil {
		t.Fatalf("sandbox.New(%s): %v", cfg.Backend, err)
	}
	t.Cleanup(func() { sb.Close() })

	t.Run("doctests", func(t *testing.T) {
		c, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: doc})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"fmt.py::fmt.shout", "test_doc.py::test_testmod", "test_doc.py::test_hook"}
		if c.Status != schemas.StatusOK || !slices.Equal(c.Tests, want) {
			t.Fatalf("collection %s (%s) tests %q", c.Status, c.Detail, c.Tests)
		}
		for _, traced := range []bool{false, true} {
			for _, id := range want[:2] {
				r, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: doc, Test: id, Traced: traced})
				if err != nil {
					t.Fatal(err)
				}
				if r.Result.Status != schemas.StatusOK || r.Outcome != sandbox.OutcomePassed {
					t.Errorf("%s (traced %v): %s (%s) outcome %q", id, traced, r.Result.Status, r.Result.Detail, r.Outcome)
				}
				if traced && !hasCall(r.Result, "shout") {
					t.Errorf("%s: shout's call is not in the trace", id)
				}
			}
			r, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: doc, Test: want[2], Traced: traced})
			if err != nil {
				t.Fatal(err)
			}
			if r.Result.Status != schemas.StatusTampered {
				t.Errorf("%s (traced %v): %s (%s), want tampered", want[2], traced, r.Result.Status, r.Result.Detail)
			}
		}
	})
	for _, name := range slices.Sorted(maps.Keys(attacks)) {
		t.Run("collect_"+name, func(t *testing.T) {
			mod := "tests/test_" + name + ".py"
			WriteTree(t, gcRepo, map[string]string{mod: attacks[name] + "\n\ndef test_n():\n    assert N\n"})
			defer os.Remove(filepath.Join(gcRepo, filepath.FromSlash(mod)))
			for _, runner := range []string{sandbox.RunnerPytest, sandbox.RunnerUnittest} {
				c, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: gcRepo, Runner: runner})
				if err != nil {
					t.Fatal(err)
				}
				if c.Status != schemas.StatusTampered || !slices.Equal(c.TamperedFiles, []string{mod}) {
					t.Fatalf("%s: collection %s (%s) tampered files %q, want tampered in %s", runner, c.Status, c.Detail, c.TamperedFiles, mod)
				}
				c, err = sb.CollectTests(ctx, sandbox.CollectRequest{Dir: gcRepo, Runner: runner, Ignore: []string{mod}})
				if err != nil {
					t.Fatal(err)
				}
				want := []string{"tests/test_calc.py::TestAdd::test_add"}
				if runner == sandbox.RunnerUnittest {
					want = []string{"tests.test_calc.TestAdd.test_add"}
				}
				if c.Status != schemas.StatusOK || !slices.Equal(c.Tests, want) || len(c.TamperedFiles) != 0 {
					t.Fatalf("%s without %s: collection %s (%s) tests %q", runner, mod, c.Status, c.Detail, c.Tests)
				}
			}
		})
	}
	t.Run("ignore_outside", func(t *testing.T) {
		for _, bad := range []string{"/etc/passwd", "../x", "a/../../x"} {
			if _, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: gcRepo, Ignore: []string{bad}}); err == nil {
				t.Errorf("Ignore %q accepted", bad)
			}
		}
	})
}
