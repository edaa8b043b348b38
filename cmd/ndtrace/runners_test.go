package main

import (
	"path/filepath"
	"testing"

	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestRunRunnerFallback traces the tests_py_unittest repository, whose unittest suite lives in a
// top-level tests.py that pytest does not collect: it used to be rejected with "no tests found";
// unittest discovery now finds its five tests, which run (and are traced) with unittest and give
// repository-level rows, and the fallback is counted.
func TestRunRunnerFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	url, _ := testrepos.Git(t, "tests_py_unittest")
	out, m := runRepoList(t, "fallback", []string{url + " main"}, "", "")
	rows := len(repositoryRows(t, out, m))
	want := schemas.Counts{"tests:passed": 5, "traced:passed": 5, schemas.CountRunnerFallback("unittest"): 1}
	wantCounts(t, out, m, want)
	if rows == 0 {
		t.Errorf("no repository-level rows; rejects:\n%s", readRejects(t, out))
	}
}

// TestRunTestSelection traces the selection repository, whose pytest.ini selects its suite
// (testpaths = tests, -m "not slow"): only its three quick tests are collected and run; the
// hour-long slow-marked test and the benchmark outside testpaths never run (no timeouts).
func TestRunTestSelection(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	url, _ := testrepos.Git(t, "selection")
	out, m := runRepoList(t, "selection", []string{url + " main"}, "", "")
	rows := len(repositoryRows(t, out, m))
	want := schemas.Counts{"tests:passed": 3, "traced:passed": 3, "tests:timeout": 0, "traced:timeout": 0}
	wantCounts(t, out, m, want)
	if rows == 0 {
		t.Errorf("no repository-level rows; rejects:\n%s", readRejects(t, out))
	}
}

// TestRunSelectionRefused traces a repository whose test selection names paths outside its
// checkout (refused and counted by kind) and whose addopts pytest refuses (--maxfail=many): the
// rest of addopts is dropped, but its -m deselection still applies, so the slow test never runs.
func TestRunSelectionRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	repo := filepath.Join(t.TempDir(), "refused")
	sandboxtest.WriteTree(t, repo, map[string]string{
		"pytest.ini": "[pytest]\ntestpaths = tests ../outside\naddopts = -m 'not slow' --maxfail=many --ignore=/elsewhere " +
			"--deselect ../x.py::t\nmarkers =\n    slow: slow\n",
		"calc.py":           "def double(x):\n    return 2 * x\n",
		"tests/__init__.py": "",
		"tests/test_calc.py": "import time\n\nimport pytest\n\nfrom calc import double\n\n\ndef test_double():\n    assert double(2) == 4\n\n\n" +
			"@pytest.mark.slow\ndef test_slow():\n    time.sleep(3600)\n",
		"other/test_other.py": "import time\n\n\ndef test_other():\n    time.sleep(3600)\n",
	})
	testrepos.RunGit(t, repo, "init", "-q", "--template=", ".")
	testrepos.Commit(t, repo, "Add refused")
	out, m := runRepoList(t, "refused", []string{"file://" + repo + " main"}, "", "")
	want := schemas.Counts{"tests": 1, "tests:passed": 1, "traced:passed": 1, "neutralised:addopts": 1,
		schemas.CountSelectionRefused("testpaths"): 1, schemas.CountSelectionRefused("--ignore"): 1,
		schemas.CountSelectionRefused("--deselect"): 1, schemas.CountRunnerFallback("unittest"): 0}
	wantCounts(t, out, m, want)
}
