package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestRunnerFallback collects repositories whose suite the first runner does not find: a unittest
// suite in a top-level tests.py (pytest finds nothing; unittest discovery finds it, and its tests
// run with unittest), pytest-style tests in a folder without __init__.py under runner unittest
// (pytest finds them); with NoFallback, and in a repository without tests, the first collection
// stands.
func TestRunnerFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("collections and test runs in the sandbox: long integration test; run without -short")
	}
	root := sandboxtest.HostDir(t)
	testsPy := testrepos.Dir(t, "tests_py_unittest")
	plain, empty := filepath.Join(root, "plain"), filepath.Join(root, "empty")
	sandboxtest.WriteTree(t, plain, map[string]string{
		"calc.py":             "def double(x):\n    return 2 * x\n",
		"tests/test_plain.py": "from calc import double\n\n\ndef test_double():\n    assert double(2) == 4\n",
	})
	sandboxtest.WriteTree(t, empty, map[string]string{"calc.py": "def double(x):\n    return 2 * x\n"})
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.Config{ReadOnly: []string{testsPy, root}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	romanTests := []string{"tests.FromRomanTest.test_bad", "tests.FromRomanTest.test_round_trip",
		"tests.ToRomanTest.test_out_of_range", "tests.ToRomanTest.test_small", "tests.ToRomanTest.test_year"}
	tests := []struct {
		name, dir, runner string
		noFallback        bool
		wantRunner, from  string
		tests             []string
	}{
		{name: "tests_py", dir: testsPy, wantRunner: sandbox.RunnerUnittest, from: sandbox.RunnerPytest, tests: romanTests},
		{name: "tests_py_pytest", dir: testsPy, runner: sandbox.RunnerPytest, wantRunner: sandbox.RunnerUnittest,
			from: sandbox.RunnerPytest, tests: romanTests},
		{name: "tests_py_no_fallback", dir: testsPy, noFallback: true, wantRunner: sandbox.RunnerPytest, tests: []string{}},
		{name: "unittest_to_pytest", dir: plain, runner: sandbox.RunnerUnittest, wantRunner: sandbox.RunnerPytest,
			from: sandbox.RunnerUnittest, tests: []string{"tests/test_plain.py::test_double"}},
		{name: "no_tests", dir: empty, wantRunner: sandbox.RunnerPytest, tests: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: tc.dir, Runner: tc.runner, NoFallback: tc.noFallback})
			if err != nil {
				t.Fatal(err)
			}
			if c.Status != schemas.StatusOK || c.Runner != tc.wantRunner || c.RunnerFallback != tc.from || !slices.Equal(c.Tests, tc.tests) {
				t.Fatalf("status %s (%s) runner %q after %q tests %q; want runner %q after %q tests %q; stderr %.2000s",
					c.Status, c.Detail, c.Runner, c.RunnerFallback, c.Tests, tc.wantRunner, tc.from, tc.tests, c.Result.Stderr)
			}
			for _, id := range c.Tests {
				for _, traced := range []bool{false, true} {
					res, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: tc.dir, Runner: c.Runner, Test: id, Traced: traced})
					if err != nil {
						t.Fatal(err)
					}
					if res.Outcome != sandbox.OutcomePassed || res.Runner != c.Runner || traced != (len(res.Result.Events) > 0) {
						t.Errorf("%s (traced %v): outcome %q runner %q, %d events (%s)", id, traced, res.Outcome, res.Runner,
							len(res.Result.Events), res.Result.Detail)
					}
				}
			}
		})
	}
}

// TestUnittestLoadTestsDoctests runs the doctests a unittest suite's load_tests protocol adds
// (doctest.DocTestSuite), one test per item: their ids name the documented functions, which
// loadTestsFromName would call with no argument (python-json-pointer's five doctests errored
// so; issue 29). zero() records that it was called: it must not be.
func TestUnittestLoadTestsDoctests(t *testing.T) {
	if testing.Short() {
		t.Skip("collections and test runs in the sandbox: long integration test; run without -short")
	}
	root := sandboxtest.HostDir(t)
	dir := filepath.Join(root, "repo")
	sandboxtest.WriteTree(t, dir, map[string]string{
		"calc.py": "def double(x):\n    \"\"\"\n    >>> double(2)\n    4\n    \"\"\"\n    return 2 * x\n\n\n" +
			"def zero():\n    \"\"\"\n    >>> 1 + 1\n    2\n    \"\"\"\n    raise SystemExit('zero() was called by the runner')\n",
		"tests.py": "import doctest\nimport unittest\n\nimport calc\n\n\n" +
			"class CalcTest(unittest.TestCase):\n    def test_double(self):\n        self.assertEqual(calc.double(3), 6)\n\n\n" +
			"def load_tests(loader, tests, ignore):\n    tests.addTests(doctest.DocTestSuite(calc))\n    return tests\n",
	})
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.Config{ReadOnly: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	c, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: dir, Runner: sandbox.RunnerUnittest})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tests.CalcTest.test_double", "calc.double", "calc.zero"}
	if c.Status != schemas.StatusOK || !slices.Equal(c.Tests, want) {
		t.Fatalf("status %s (%s), tests %q, want %q", c.Status, c.Detail, c.Tests, want)
	}
	for _, id := range c.Tests {
		for _, traced := range []bool{false, true} {
			res, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: dir, Runner: c.Runner, Test: id, Traced: traced})
			if err != nil {
				t.Fatal(err)
			}
			// zero's doctest runs no code of the checkout: no events to trace.
			if res.Outcome != sandbox.OutcomePassed || (traced && id != "calc.zero") != (len(res.Result.Events) > 0) {
				t.Errorf("%s (traced %v): outcome %q, %d events (%s)", id, traced, res.Outcome, len(res.Result.Events), res.Result.Detail)
			}
		}
	}
}

// TestTestSelection collects repositories that select their own suite: testpaths and -m (the
// selection fixture: its hour-long tests are not collected); the selection kept when the rest of
// addopts is dropped after a usage error; and selections that name paths outside the checkout
// (absolute, "..", a link out to a mounted folder holding tests), refused and listed.
func TestTestSelection(t *testing.T) {
	if testing.Short() {
		t.Skip("collections in the sandbox: long integration test; run without -short")
	}
	root := sandboxtest.HostDir(t)
	selection := testrepos.Dir(t, "selection")
	none, escape, outside := filepath.Join(root, "none"), filepath.Join(root, "escape"), filepath.Join(root, "outside")
	sandboxtest.WriteTree(t, none, map[string]string{
		"setup.cfg": "[tool:pytest]\ntestpaths = tests\naddopts = --maxfail=many -m 'not slow' --ignore=tests/test_ignored.py " +
			"--deselect tests/test_a.py::test_deselected -k 'not skipme' -n 2\nmarkers =\n    slow: slow\n",
		"tests/test_a.py": "import pytest\n\n\ndef test_ok():\n    pass\n\n\ndef test_deselected():\n    pass\n\n\n" +
			"def test_skipme():\n    pass\n\n\n@pytest.mark.slow\ndef test_slow():\n    pass\n",
		"tests/test_ignored.py": "def test_ignored():\n    pass\n",
		"other/test_other.py":   "def test_other():\n    pass\n",
	})
	sandboxtest.WriteTree(t, outside, map[string]string{"tests/test_outside.py": "def test_outside():\n    pass\n"})
	sandboxtest.WriteTree(t, escape, map[string]string{
		"pytest.ini": "[pytest]\ntestpaths = tests ../outside /etc linked\n" +
			"addopts = ../outside --ignore=/x --deselect=../y.py::z --ignore-glob=../* -o testpaths=../outside\n",
		"tests/test_in.py": "def test_in():\n    pass\n",
	})
	if err := os.Symlink(outside, filepath.Join(escape, "linked")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.Config{ReadOnly: []string{selection, root}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	tests := []struct {
		name, dir string
		options   sandbox.RunnerOptions
		tests     []string
		refused   []string
	}{
		{name: "selection", dir: selection, tests: []string{"tests/test_shapes.py::test_square",
			"tests/test_shapes.py::test_rect", "tests/test_shapes.py::test_unknown"}},
		{name: "kept_without_addopts", dir: none, options: sandbox.OptionsNone, tests: []string{"tests/test_a.py::test_ok"}},
		{name: "escapes", dir: escape, tests: []string{"tests/test_in.py::test_in"},
			refused: []string{"args", "--ignore", "--deselect", "--ignore-glob", "testpaths", "testpaths", "testpaths", "testpaths"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: tc.dir})
			if err != nil {
				t.Fatal(err)
			}
			if c.Status != schemas.StatusOK || c.Options != tc.options || !slices.Equal(c.Tests, tc.tests) ||
				!slices.Equal(c.Refused, tc.refused) {
				t.Fatalf("status %s (%s) options %q tests %q refused %q; want %q %q %q; stderr %.2000s",
					c.Status, c.Detail, c.Options, c.Tests, c.Refused, tc.options, tc.tests, tc.refused, c.Result.Stderr)
			}
		})
	}
}
