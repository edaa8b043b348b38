package main

import (
	"testing"

	"github.com/ndtrace/ndtrace/internal/testrepos"
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
	for k, v := range want {
		if m.Counts[k] != v {
			t.Errorf("counts[%s] = %d, want %d (counts %v; rejects:\n%s)", k, m.Counts[k], v, m.Counts, readRejects(t, out))
		}
	}
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
	for k, v := range want {
		if m.Counts[k] != v {
			t.Errorf("counts[%s] = %d, want %d (counts %v; rejects:\n%s)", k, m.Counts[k], v, m.Counts, readRejects(t, out))
		}
	}
	if rows == 0 {
		t.Errorf("no repository-level rows; rejects:\n%s", readRejects(t, out))
	}
}
