package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// TestRunRepositories turns the fixture repositories, served as local git repositories (file://)
// from a crawl list, into repository-level and function-level trajectories: broken repositories
// become rejects with their reasons, a hanging test is stopped, tests whose outcome changes under
// tracing are quarantined, functions found in two repositories
// are kept once, one evaluation set's function is excluded, and the dataset validates.
func TestRunRepositories(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
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
    trust_list: true
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
	// The hanging repository has one test file needing a module it does not provide: counted
	// once, without the module's name (which the repository writes).
	if m.Counts["missing_module"] != 1 {
		t.Errorf("missing_module counted %d times, want 1", m.Counts["missing_module"])
	}
	for k := range m.Counts {
		if strings.HasPrefix(string(k), "missing_module:") {
			t.Errorf("a counter keyed by a repository's module name: %s", k)
		}
	}

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
	for _, k := range []schemas.CountKey{"functions_skipped:async", "functions_skipped:context_manager", "functions_skipped:resume"} {
		if m.Counts[k] < 1 {
			t.Errorf("counts[%s] = %d, want at least 1", k, m.Counts[k])
		}
	}
	rejects := readRejects(t, out)
	if strings.Contains(rejects, "lazy.py") && strings.Contains(rejects, "the trace has no events") {
		t.Errorf("an item of lazy.py gave an empty trace:\n%s", rejects)
	}
	for _, want := range []string{"missing module quickprops", "symlink escapes checkout", "not a git repository", "decontaminated: evalset", "duplicate of"} {
		if !strings.Contains(rejects, want) {
			t.Errorf("no reject saying %q:\n%s", want, rejects)
		}
	}
	for k, min := range map[schemas.CountKey]int64{"tests:timeout": 1, "tests:passed": 10, "tests:failed": 1, "duplicates": 1, "decontaminated:evalset": 1, "quarantined": 1} {
		if m.Counts[k] < min {
			t.Errorf("counts[%s] = %d, want at least %d", k, m.Counts[k], min)
		}
	}
	// The version's statistics, merged from its batches' when it was committed, are those
	// computed from its shards and rejects.
	checkMergedStats(t, out)
	checkYields(t, out)
	checkNativePassRates(t, out, []string{"passing", "failing", "forking", "unittest_only", "generators"})
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
		t.Skip("long integration test; run without -short")
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
	st, m := openHead(t, url)
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
	st, m := openHead(t, url)
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

// TestRunRepositoryShapes traces repositories shaped as real ones are: src/ and declared package
// layouts, tests that write next to their code. Every test passes as it does natively.
func TestRunRepositoryShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	var lines []string
	shapes := []string{"src_layout", "lib_layout", "ns_layout", "writes_files"}
	for _, name := range shapes {
		url, _ := testrepos.Git(t, name)
		lines = append(lines, url+" main")
	}
	out, m := runRepoList(t, "layouts", lines, "", "")
	checkNativePassRates(t, out, shapes)
	repos := map[string]int{}
	traced := map[string]bool{} // the files of the repositories' own code that rows show
	for _, r := range repositoryRows(t, out, m) {
		repos[filepath.Base(r.RepoURL)]++
		traced[r.Path] = true
	}
	// The packages of src/ and declared layouts are the repositories' code: traced, not only
	// imported.
	for _, f := range []string{"src/geometry/shapes.py", "lib/textkit/__init__.py", "src/acme/geo/core.py", "notes.py"} {
		if !traced[f] {
			t.Errorf("no repository-level row enters %s (rows enter %v)", f, traced)
		}
	}
	if len(repos) != len(shapes) || m.Counts["tests:passed"] != 11 || m.Counts["quarantined"] != 0 {
		t.Errorf("repository-level rows by repository %v, counts %v; rejects:\n%s", repos, m.Counts, readRejects(t, out))
	}
}

// checkYields checks the yield report of TestRunRepositories' dataset: in stats.json, in
// `ndtrace stats` and on the dashboard.
func checkYields(t *testing.T, out string) {
	t.Helper()
	st, _, err := loadDatasetStats(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	y := st.Repositories
	if y == nil {
		t.Fatal("stats.json has no repositories' yield")
	}
	if y.Repositories != 10 || y.WithRows < 5 || y.RejectedByClass["missing_module"] != 1 ||
		y.RejectedByClass["checkout"]+y.RejectedByClass["unresolved"] != 2 || y.Run == 0 || y.PassedPlain < y.PassedTraced {
		t.Errorf("yield %+v", *y)
	}
	found := false
	for _, s := range st.Sources {
		if strings.HasSuffix(s.Source, "/passing") {
			found = true
			if r := s.Yield; r == nil || r.Collected != 6 || r.Run != 6 || r.PassedPlain != 6 || r.PassedTraced != 6 || r.Rows == 0 || r.WithRows != 1 {
				t.Errorf("yield of %s: %+v", s.Source, r)
			}
		}
	}
	if !found {
		t.Error("no source for the passing repository")
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"stats", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("stats: exit %d: %s", code, stderr.String())
	}
	t.Logf("ndtrace stats:\n%s", stdout.String())
	for _, want := range []string{"Repositories (10, ", "passed untraced", "without rows, by stage: ", "missing_module=1", "/passing"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("ndtrace stats lacks %q:\n%s", want, stdout.String())
		}
	}
	_, body := httpGet(t, startDashboard(t, out))
	for _, want := range []string{`id="yield-table"`, `id="repos-table"`, "missing_module", "/passing</code>"} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
}

// TestRunRunnerOptions traces the runner_options repository, whose pytest addopts name coverage,
// xdist and a plugin the sandbox does not have: they are neutralised (pytest used to refuse the
// whole repository with a usage error), the rest of its configuration applies (the -m deselection,
// filterwarnings = error a test relies on), and its three tests give repository-level rows,
// counted as run under neutralised options.
func TestRunRunnerOptions(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	url, _ := testrepos.Git(t, "runner_options")
	out, m := runRepoList(t, "runopts", []string{url + " main"}, "", "")
	rows := len(repositoryRows(t, out, m))
	want := schemas.Counts{"tests:passed": 3, "tests:runner_options_neutralised": 3, "neutralised:coverage": 1,
		"neutralised:xdist": 1, "neutralised:plugin": 1}
	wantCounts(t, out, m, want)
	if rows == 0 || m.Counts["tests:changed_by_runner_options"] != 0 || m.Counts["tests:failed"] != 0 {
		t.Errorf("%d repository-level rows, counts %v; rejects:\n%s", rows, m.Counts, readRejects(t, out))
	}
}

// TestRunOriginalRunnerOptions traces a repository whose addopts ask for coverage in an
// environment that has (a stand-in for) pytest-cov: the original configuration can run, so each
// test also runs untraced with it; test_no_cov, whose outcome it changes, is counted and
// quarantined, test_plain gives rows.
func TestRunOriginalRunnerOptions(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	dir := t.TempDir()
	env := filepath.Join(testrepos.MountableDir(t), "env")
	sandboxtest.WriteTree(t, env, map[string]string{
		"pytest_cov/__init__.py": "",
		"pytest_cov/plugin.py": "import os\n\n\ndef pytest_addoption(parser):\n    parser.addoption('--cov', action='append', nargs='?', const=True, default=[])\n\n\n" +
			"def pytest_configure(config):\n    if config.getoption('--cov'):\n        os.environ['FAKE_COV'] = '1'\n",
		"pytest_cov-9.9.dist-info/METADATA":         "Metadata-Version: 2.1\nName: pytest-cov\nVersion: 9.9\n",
		"pytest_cov-9.9.dist-info/entry_points.txt": "[pytest11]\npytest_cov = pytest_cov.plugin\n",
	})
	repo := filepath.Join(dir, "covered")
	sandboxtest.WriteTree(t, repo, map[string]string{
		"pytest.ini":        "[pytest]\naddopts = --cov=calc\n",
		"calc.py":           "def double(x):\n    y = x * 2\n    return y\n",
		"tests/__init__.py": "",
		"tests/test_calc.py": "import os\n\nfrom calc import double\n\n\ndef test_no_cov():\n    assert 'FAKE_COV' not in os.environ\n    assert double(2) == 4\n\n\n" +
			"def test_plain():\n    assert double(3) == 6\n",
	})
	testrepos.RunGit(t, repo, "init", "-q", "--template=", ".")
	testrepos.Commit(t, repo, "Add covered")
	out, m := runRepoList(t, "origopts", []string{"file://" + repo + " main"}, "    python_path: ["+env+"]\n", "")
	want := schemas.Counts{"tests:passed": 2, "tests:changed_by_runner_options": 1, "quarantined": 1,
		"tests:runner_options_neutralised": 0, "neutralised:coverage": 1}
	wantCounts(t, out, m, want)
	if m.Totals.Rows == 0 {
		t.Errorf("no rows; rejects:\n%s", readRejects(t, out))
	}
}

// wantCounts reports every counter of want that the run's manifest m (written to out) does not
// have at that value, with all its counters and the run's rejects.
func wantCounts(t *testing.T, out string, m *dataset.Manifest, want schemas.Counts) {
	t.Helper()
	for k, v := range want {
		if m.Counts[k] != v {
			t.Errorf("counts[%s] = %d, want %d (counts %v; rejects:\n%s)", k, m.Counts[k], v, m.Counts, readRejects(t, out))
		}
	}
}

// runRepoList produces a dataset (named name) of one repository source listing lines (a list file
// line each), with sourceYAML added to the source (lines indented by four spaces) and extraYAML at
// the top level of the spec, and returns the dataset's folder and checked manifest.
func runRepoList(t *testing.T, name string, lines []string, sourceYAML, extraYAML string) (string, *dataset.Manifest) {
	t.Helper()
	dir := t.TempDir()
	listPath := filepath.Join(dir, "repos.txt")
	if err := os.WriteFile(listPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "data")
	spec := writeSpec(t, dir, fmt.Sprintf("name: %s\noutput: %s\nsources:\n  - kind: repository\n    list: %s\n    trust_list: true\n%s%slimits:\n  timeout: 3s\ncreated_at: 2026-11-24T00:00:00Z\n",
		name, out, listPath, sourceYAML, extraYAML))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr.String())
	}
	m, _ := checkDataset(t, out)
	return out, m
}

// repositoryRows returns the repository-level rows of the dataset in out.
func repositoryRows(t *testing.T, out string, m *dataset.Manifest) []schemas.Row {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, out)
	var rows []schemas.Row
	for _, s := range m.Shards {
		rs, err := dataset.ReadRows(ctx, st, s.Path, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Level == "repository" {
				rows = append(rows, r)
			}
		}
	}
	return rows
}

// checkNativePassRates compares, for each fixture repository named, the tests that pass under
// plain pytest outside ndtrace (run by this test on a writable copy, with the import roots on
// PYTHONPATH as an editable install would put them) with the tests that passed in the sandbox,
// untraced and traced, as the dataset in out reports them: the same counts.
func checkNativePassRates(t *testing.T, out string, names []string) {
	t.Helper()
	st, _, err := loadDatasetStats(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	yields := map[string]*dataset.Yield{}
	for _, s := range st.Sources {
		if s.Yield != nil {
			yields[filepath.Base(s.Source)] = s.Yield
		}
	}
	summary := regexp.MustCompile(`(\d+) passed`)
	for _, name := range names {
		dir := testrepos.Dir(t, name)
		roots, err := crawl.ImportRoots(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		var pp []string
		for _, r := range roots {
			pp = append(pp, filepath.Join(dir, r))
		}
		cmd := exec.Command("/usr/bin/python3", "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PYTHONPATH="+strings.Join(pp, ":"))
		data, _ := cmd.CombinedOutput()
		native := int64(0)
		if m := summary.FindSubmatch(data); m != nil {
			native, _ = strconv.ParseInt(string(m[1]), 10, 64)
		}
		y := yields[name]
		if native == 0 || y == nil || y.PassedPlain != native || y.PassedTraced != native {
			t.Errorf("%s: %d tests pass natively, yield %+v; pytest said:\n%s", name, native, y, data)
		}
	}
}
