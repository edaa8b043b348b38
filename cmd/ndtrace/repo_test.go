package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestRunRepositories turns the fixture repositories, served as local git repositories (file://)
// from a crawl list, into repository-level and function-level trajectories: broken repositories
// become rejects with their reasons, a hanging test is stopped, tests whose outcome changes under
// tracing are quarantined, functions found in two repositories
// are kept once, one evaluation set's function is excluded, and the dataset validates.
func TestRunRepositories(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	var list strings.Builder
	for _, name := range []string{"passing", "failing", "hanging", "forking", "missing_module", "unittest_only", "trace_sensitive", "generators"} {
		url, _ := testrepos.Git(t, name)
		fmt.Fprintf(&list, "%s main\n", url)
	}
	escape, _ := testrepos.SymlinkEscape(t)
	fmt.Fprintf(&list, "%s\n", escape)
	fmt.Fprintf(&list, "file://%s/no-such-repo\n", dir)
	listPath := filepath.Join(dir, "repos.txt")
	os.WriteFile(listPath, []byte(list.String()), 0o644)
	// An evaluation set holding clamp (from the passing and failing repositories).
	clamp := "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n"
	evalPath := filepath.Join(dir, "eval.jsonl")
	row, _ := json.Marshal(map[string]string{"id": "e0", "code": clamp, "input": "1, 2, 3"})
	os.WriteFile(evalPath, append(row, '\n'), 0o644)

	out := filepath.Join(dir, "data")
	spec := writeSpec(t, dir, fmt.Sprintf(`name: repos
output: %s
sources:
  - kind: repository
    list: %s
decontaminate:
  - name: evalset
    path: %s
limits:
  timeout: 3s
created_at: 2026-11-22T00:00:00Z
`, out, listPath, evalPath))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr.String())
	}
	m, _ := checkDataset(t, out)
	t.Logf("counts: %v; rows %d", m.Counts, m.Totals.Rows)

	ctx := context.Background()
	st, err := store.Open(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	levels := map[string]int{}
	repos := map[string]bool{}
	lazy := map[string]bool{} // function-level rows of the generators repository, by function
	for _, s := range m.Shards {
		rows, err := dataset.ReadRows(ctx, st, s.Path, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			levels[r.Level]++
			repos[r.RepoURL] = true
			if r.Level == "function" && r.Path == "lazy.py" {
				lazy[r.QualName] = true
				if r.Direction == "forward" && !strings.Contains(r.Text, "    return list(islice(") {
					t.Errorf("row %s of %s has no consuming wrapper", r.ID, r.QualName)
				}
			}
			if r.Level == "repository" && (r.Commit == "" || r.RepoURL == "" || strings.HasPrefix(r.Path, "/")) {
				t.Errorf("repository row with commit %q path %q", r.Commit, r.Path)
			}
			if strings.Contains(r.Text, "ndtrace-scratch") {
				t.Errorf("row %s mentions the scratch folder", r.ID)
			}
		}
	}
	// Entries come from the code under test when a test calls any (mathutil.clamp, not
	// test_clamp); tests that call nothing of the repository's own (the forking ones) are the
	// entry themselves.
	if levels["repository"] == 0 || levels["function"] == 0 {
		t.Errorf("rows by level %v: want both levels", levels)
	}
	// passing, failing, hanging, forking and unittest_only give rows.
	if len(repos) < 5 {
		t.Errorf("rows come from %d repositories: %v", len(repos), repos)
	}
	// The generators repository's lazy functions give rows: their calls return iterators, which
	// the tracer consumes; the async def and the context manager are left out at planning.
	for _, fn := range []string{"squares", "countdown", "naturals", "chunks", "evens", "scaled", "fib"} {
		if !lazy[fn] {
			t.Errorf("no function-level row of lazy.%s (rows of %v)", fn, lazy)
		}
	}
	if lazy["plus_one"] || lazy["tagged"] {
		t.Errorf("rows of an async def or a context manager: %v", lazy)
	}
	for _, k := range []string{"functions_skipped:async", "functions_skipped:context_manager", "functions_skipped:resume"} {
		if m.Counts[k] < 1 {
			t.Errorf("counts[%s] = %d, want at least 1", k, m.Counts[k])
		}
	}
	rejects := readRejects(t, out)
	if strings.Contains(rejects, "lazy.py") && strings.Contains(rejects, "the trace has no events") {
		t.Errorf("an item of lazy.py gave an empty trace:\n%s", rejects)
	}
	for _, want := range []string{"missing module hypothesis", "symlink escapes checkout", "not a git repository", "decontaminated: evalset", "duplicate of"} {
		if !strings.Contains(rejects, want) {
			t.Errorf("no reject saying %q:\n%s", want, rejects)
		}
	}
	for k, min := range map[string]int64{"tests:timeout": 1, "tests:passed": 10, "tests:failed": 1, "duplicates": 1, "decontaminated:evalset": 1, "quarantined": 1} {
		if m.Counts[k] < min {
			t.Errorf("counts[%s] = %d, want at least %d", k, m.Counts[k], min)
		}
	}
	// The version's statistics, merged from its batches' when it was committed, are those
	// computed from its shards and rejects.
	checkMergedStats(t, out)
	entries, _ := os.ReadDir("/var/tmp/ndtrace-scratch")
	for _, e := range entries {
		t.Errorf("checkout left behind: %s", e.Name())
	}
}

// TestRunDedupAgainst produces the built-in examples twice: the second dataset names the first in
// dedup_against, so every function-level item (the example functions and those found in the
// example repository) is a duplicate across runs, and only repository-level rows remain.
func TestRunDedupAgainst(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	first := filepath.Join(dir, "first")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--out", first}, &stdout, &stderr); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr.String())
	}
	m1, _ := checkDataset(t, first)
	second := filepath.Join(dir, "second")
	spec := writeSpec(t, dir, fmt.Sprintf("name: again\noutput: %s\nsources:\n  - kind: examples\ndedup_against: [%s]\n", second, first))
	if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, stderr.String())
	}
	m2, _ := checkDataset(t, second)
	fnItems := m1.Counts["items"] - 1 // all but the repository
	if m2.Counts["duplicates"] != fnItems {
		t.Errorf("second run: %d duplicates, want %d (counts %v)", m2.Counts["duplicates"], fnItems, m2.Counts)
	}
	data := readRejects(t, second)
	if !strings.Contains(data, " in "+first) {
		t.Errorf("rejects do not name the earlier dataset:\n%s", data)
	}
	ctx := context.Background()
	st, _ := store.Open(ctx, second)
	defer st.Close()
	for _, s := range m2.Shards {
		rows, err := dataset.ReadRows(ctx, st, s.Path, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Level != "repository" {
				t.Errorf("a %s row in the second dataset: %s %s", r.Level, r.Path, r.QualName)
			}
		}
	}
}

// readRejects returns the rejects of the dataset at url's head version, one JSON object a line.
func readRejects(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := dataset.ReadManifest(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if _, err := dataset.EachReject(ctx, st, m, func(r schemas.Reject) error {
		line, err := json.Marshal(r)
		b.Write(line)
		b.WriteByte('\n')
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// checkMergedStats checks that the statistics a version was committed with (merged from its
// batches') are byte-identical to those computed from its shards and rejects.
func checkMergedStats(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := dataset.ReadManifest(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if m.Stats == nil {
		t.Fatal("the manifest references no statistics")
	}
	merged, computed, err := dataset.LoadStats(ctx, st, m)
	if err != nil || computed {
		t.Fatalf("LoadStats: computed %v, %v", computed, err)
	}
	fresh, err := dataset.ComputeStats(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := merged.Marshal()
	b, _ := fresh.Marshal()
	if !bytes.Equal(a, b) {
		t.Errorf("merged statistics differ from computed ones:\nmerged   %s\ncomputed %s", a, b)
	}
}

// TestRunImportLayouts traces repositories whose packages are not at the top level (a src layout
// declared in pyproject.toml, a lib folder declared in setup.cfg): their tests import the package
// as after an editable install, so both give repository-level rows and no reject.
func TestRunImportLayouts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	var list strings.Builder
	for _, name := range []string{"src_layout", "lib_layout"} {
		url, _ := testrepos.Git(t, name)
		fmt.Fprintf(&list, "%s main\n", url)
	}
	listPath := filepath.Join(dir, "repos.txt")
	os.WriteFile(listPath, []byte(list.String()), 0o644)
	out := filepath.Join(dir, "data")
	spec := writeSpec(t, dir, fmt.Sprintf("name: layouts\noutput: %s\nsources:\n  - kind: repository\n    list: %s\nlimits:\n  timeout: 3s\ncreated_at: 2026-11-24T00:00:00Z\n", out, listPath))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr.String())
	}
	m, _ := checkDataset(t, out)
	ctx := context.Background()
	st, _ := store.Open(ctx, out)
	defer st.Close()
	repos := map[string]int{}
	for _, s := range m.Shards {
		rows, err := dataset.ReadRows(ctx, st, s.Path, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Level == "repository" {
				repos[filepath.Base(r.RepoURL)]++
			}
		}
	}
	if len(repos) != 2 || m.Counts["tests:passed"] != 5 {
		t.Errorf("repository-level rows by repository %v, counts %v; rejects:\n%s", repos, m.Counts, readRejects(t, out))
	}
}
