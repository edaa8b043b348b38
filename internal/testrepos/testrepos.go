// Package testrepos holds small Python repositories written for ndtrace's tests (nothing here is
// downloaded or third-party), and helpers that lay them out as a directory, a git repository or a
// tarball.
//
// Every repository is a tiny Python 3.11 project with no third-party imports (unless stated), a
// module at the top level and pytest-style tests in a tests/ package (tests/__init__.py exists, so
// both `pytest` and `python -m pytest` run from the repository root can import the module):
//
//   - passing: mathutil.py with module-level functions (branches in clamp, loops in total and
//     primes_below, mean calling total and raising on empty input) and a class with a method
//     (Counter.add); tests/test_mathutil.py calls them with literal arguments. All six tests pass.
//     Exercises the ordinary path: collection, tracing of calls, loops, branches and a caught exception.
//   - failing: the same mathutil.py; test_total passes, test_clamp_wrong fails on an assert and
//     test_mean_of_nothing errors (mean([]) raises ValueError, which nothing catches; pytest reports
//     it as a failure with that exception, unittest-style runners as an error). Exercises failure and
//     exception reporting.
//   - hanging: loops.py; test_countdown passes and test_forever loops forever (`while True: pass`);
//     tests/test_optional.py imports a module the repository does not provide (the others still run).
//     Exercises per-test timeouts: a runner must stop it and still report test_countdown.
//   - forking: parallel.py; test_os_fork calls os.fork() (the child calls os._exit(0) at once, the
//     parent waits and checks the exit status), test_multiprocessing_fork runs a child with a "fork"
//     multiprocessing context and reads its result from a pipe, and test_square is ordinary. All pass.
//     Exercises tracing and sandboxing across fork.
//   - missing_module: mathutil.py and tests/test_properties.py, which imports quickprops (exists
//     nowhere), so collection fails with ModuleNotFoundError. Exercises collection errors.
//   - unittest_only: textutil.py (word_count, title_case, class Stack) with tests written as
//     unittest.TestCase classes, discoverable with `python -m unittest discover` from the root (five
//     tests, all pass). Exercises the unittest runner.
//   - src_layout: the src layout. pyproject.toml declares its packages under src/
//     ([tool.setuptools.packages.find] where), src/geometry is the package (area, perimeter) and
//     tests/test_shapes.py imports it as installed (three tests, all pass with src on sys.path; none
//     collects without). Exercises import layouts (crawl.ImportRoots).
//   - lib_layout: setup.cfg declares package_dir =lib; lib/textkit is the package (shout) and
//     tests/test_textkit.py imports it (two tests, all pass with lib on sys.path). Exercises import
//     layouts declared in setup.cfg.
//   - runner_options: inventory.py (restock, total, legacy_total, which warns DeprecationWarning) and
//     a pyproject.toml whose [tool.pytest.ini_options] addopts name what the sandbox does not have
//     (--cov=inventory --cov-report=term-missing -n 4 -p no_such_plugin) besides --strict-markers
//     and -m 'not slow', with declared markers (slow, unit) and filterwarnings = error;
//     tests/conftest.py has a stock fixture. Of four tests, test_slow (failing) is deselected by
//     -m, and test_legacy_total_is_an_error passes only while filterwarnings = error applies; the
//     other three pass. Plain pytest without pytest-cov and pytest-xdist refuses the
//     configuration (usage error). Exercises the neutralising of runner options.
//   - ns_layout: a namespace package under src/ (src/acme has no __init__.py; pyproject.toml
//     declares packages.find where = ["src"] with namespaces) whose tests live inside the package
//     (src/acme/geo/tests/test_core.py imports acme.geo.core; two tests, both pass with src on
//     sys.path). Exercises namespace packages and tests inside the package.
//   - trace_sensitive: counter.py (double, traced_now, class Noisy whose __repr__ counts its calls);
//     test_double passes either way, test_repr_side_effect fails when a tracer renders locals with
//     repr() and test_not_traced fails when sys.gettrace() is set. Exercises the quarantine of tests
//     whose outcome changes under tracing.
//   - generators: lazy.py with generator functions (squares, countdown returning a value after its
//     yields, the infinite naturals, chunks), functions returning filter and map objects over
//     lambdas (evens, scaled), an iterator class Fib returned by fib, an async def (plus_one) and a
//     contextmanager (tagged); tests/test_lazy.py consumes each (nine tests, all pass). Exercises
//     function-level items whose call returns an iterator (the tracer consumes it) and the items
//     that can only give an empty trace (async, context managers), left out at planning.
//   - with_dependency: scoring.py imports fixture_a, a third-party package that is not installed:
//     the ndtrace-fixture-a wheel of internal/testwheels (which depends on ndtrace-fixture-b), named
//     in requirements.txt; tests/test_scoring.py (three tests) pass once it is installed, and none
//     collects without. Exercises per-repository environments (env: repository).
//   - writes_files: notes.py keeps a SQLite database and a log file next to the code (put, get, log,
//     word_count); tests/test_notes.py writes both in the checkout, each test removing what it
//     wrote. All four tests pass when the checkout is writable; on a read-only one only
//     test_word_count does. Exercises the writable views of checkouts.
//   - linked_list: linkedlist.py, a module whose functions need its module-level definitions: the
//     constants PREV and NEXT (and TAGS, defined from DEFAULT_TAG), imports used only inside
//     functions (itertools, collections.defaultdict), and classes with class attributes and methods
//     (Node.kind, LinkedList.node_class and max_size; LinkedList.append links nodes through
//     node.links[PREV] and [NEXT]); tests/test_linkedlist.py has six passing tests. Exercises CODE
//     contexts that carry the imports, constants and class headers the visited code names.
//   - nondeterministic: registry.py, whose functions compute with values that change from run to
//     run of the same code: hex(id(obj)) inside a string (tag), id() (ident), the hash of a fresh
//     object (fingerprint), time.time and time.time_ns (stamp), the order of a set of objects
//     (names_of), a dict keyed by objects (index_of), a weak reference's repr (weak_name); roll
//     draws from the seeded random module and total is deterministic; wander takes 32 branches
//     decided by os.urandom, so each run visits other lines and makes other calls.
//     tests/test_registry.py (ten tests) all pass. Exercises reexecution (two traced runs
//     compared, differing values replaced, differing runs quarantined) and reproducibility.
//   - tests_py_unittest: roman.py (to_roman, from_roman) and its suite as one unittest module at the
//     top, tests.py (five tests, all pass), which pytest's default file patterns do not collect:
//     pytest finds no test and unittest discovery (pattern test*.py) finds them. Exercises the
//     fallback from one runner to the other.
//   - selection: shapes.py (area, stress) and a pytest.ini whose testpaths = tests and addopts =
//     -m "not slow" select the suite: tests/test_shapes.py has three quick passing tests and a
//     slow-marked one that sleeps an hour, and benchmarks/test_bench.py (outside testpaths) sleeps
//     an hour too. Only the three quick tests are collected. Exercises the repository's own test
//     selection.
//   - doctests: textfmt.py whose module docstring and functions (shout, pad) hold doctests, run by
//     pytest as items of their own (pytest.ini: addopts = --doctest-modules: three doctest items);
//     tests/test_textfmt.py runs them again with doctest.testmod and doctest.run_docstring_examples
//     (three tests). All six pass. doctest saves and restores the trace function
//     (sys.settrace(sys.gettrace())): exercises the tracer's verdict on that (issue 29).
//   - gc_at_import: calc.py (add, scale); tests/test_gc.py calls gc.get_objects() when it is
//     imported (during collection), tests/test_calc.py and tests/test_more.py are ordinary. All four
//     tests pass natively. Exercises a collection that leaves out the module whose import tampered
//     and traces the rest (issue 29).
//   - symlink_escape: made by [SymlinkEscape], not embedded (go:embed cannot hold symlinks): a git
//     repository with README.md and a symlink data -> /etc/passwd. Exercises the checkout's refusal of
//     links that leave the tree.
//
// [Git] makes deterministic commits (fixed identity and dates), so a repository's commit hash is the
// same on every machine and run.
package testrepos

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"embed"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

//go:embed all:testdata
var content embed.FS

// Date is the author and committer date of every commit (and the tagger date of every tag) that
// [Git] and [SymlinkEscape] make, and the modification time of every [Tarball] entry.
var Date = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// Branch and Tag name what [Git] creates: the branch holding the commit and an annotated tag on it.
const (
	Branch = "main"
	Tag    = "v1.0"
)

// Names returns the names of the embedded repositories, sorted (symlink_escape, which is not
// embedded, is not among them).
func Names() []string {
	entries, err := content.ReadDir("testdata")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// Files returns the files of repository name, by slash-separated path relative to its root. It fails
// the test if there is no such repository.
func Files(t testing.TB, name string) map[string][]byte {
	t.Helper()
	root := path.Join("testdata", name)
	if name == "" || strings.ContainsAny(name, "/.") || !slices.Contains(Names(), name) {
		t.Fatalf("testrepos: no repository %q (have %v)", name, Names())
	}
	files := map[string][]byte{}
	err := fs.WalkDir(content, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "__pycache__" {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".pyc") {
			return nil
		}
		data, err := content.ReadFile(p)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(p, root+"/")] = data
		return nil
	})
	if err != nil {
		t.Fatalf("testrepos: read %s: %v", name, err)
	}
	return files
}

// Dir copies repository name into a fresh directory under MountableDir and returns its path. Files
// are written with mode 0644.
func Dir(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(MountableDir(t), name)
	write(t, dir, Files(t, name))
	return dir
}

// MountableDir returns a fresh, world-readable directory, removed when the test ends, that a sandbox
// can mount: under $NDTRACE_TEST_DIR, or /var/tmp, never under /tmp (the sandbox's private /tmp
// hides whatever the host has there).
func MountableDir(t testing.TB) string {
	t.Helper()
	base := os.Getenv("NDTRACE_TEST_DIR")
	if base == "" {
		base = "/var/tmp"
	}
	dir, err := os.MkdirTemp(base, "ndtrace-test-")
	if err != nil {
		t.Fatalf("testrepos: a directory for sandbox mounts (set NDTRACE_TEST_DIR to a directory outside /tmp): %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Git makes a git repository from repository name under t.TempDir(): one commit on branch [Branch]
// with a fixed identity and date ([Date]), and an annotated tag [Tag] on it. It returns the
// repository's file:// URL and the commit's hash, which is the same on every run. It needs the git
// binary.
func Git(t testing.TB, name string) (url string, commit string) {
	t.Helper()
	dir := Dir(t, name)
	return commitAll(t, dir, "Add "+name)
}

// SymlinkEscape makes the symlink_escape repository: a git repository (as [Git] makes them) holding
// README.md and a symlink data -> /etc/passwd, whose target lies outside any checkout. It returns the
// repository's file:// URL and commit hash.
func SymlinkEscape(t testing.TB) (url string, commit string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "symlink_escape")
	write(t, dir, map[string][]byte{"README.md": []byte("A repository whose data link leaves the tree.\n")})
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "data")); err != nil {
		t.Fatalf("testrepos: %v", err)
	}
	return commitAll(t, dir, "Add symlink_escape")
}

// Commit adds every file of the git repository at dir (made by [Git] or [SymlinkEscape]) and commits
// them on the current branch with the fixed identity and date, returning the new commit's hash. Tests
// use it to move a branch after a ref was resolved.
func Commit(t testing.TB, dir, message string) string {
	t.Helper()
	RunGit(t, dir, "add", "-A")
	RunGit(t, dir, "commit", "-q", "--allow-empty", "-m", message)
	return strings.TrimSpace(RunGit(t, dir, "rev-parse", "HEAD"))
}

// RunGit runs git with args in dir with a clean configuration (no system or global config, a
// temporary HOME) and the fixed identity and dates, and returns its standard output. It fails the test
// if git fails.
func RunGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	date := Date.Format(time.RFC3339)
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=" + Branch, "-c", "commit.gpgsign=false",
		"-c", "tag.gpgsign=false", "-c", "core.autocrlf=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "HOME="+t.TempDir(),
		"GIT_AUTHOR_NAME=ndtrace tests", "GIT_AUTHOR_EMAIL=tests@ndtrace.invalid", "GIT_AUTHOR_DATE="+date,
		"GIT_COMMITTER_NAME=ndtrace tests", "GIT_COMMITTER_EMAIL=tests@ndtrace.invalid", "GIT_COMMITTER_DATE="+date,
		"LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("testrepos: git %s in %s: %v: %s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}

// commitAll turns dir into a git repository with one commit and the tag, and returns its URL and commit.
func commitAll(t testing.TB, dir, message string) (string, string) {
	t.Helper()
	RunGit(t, dir, "init", "-q", "--template=", ".")
	commit := Commit(t, dir, message)
	RunGit(t, dir, "tag", "-a", Tag, "-m", "Release "+Tag)
	return "file://" + filepath.ToSlash(dir), commit
}

// Tarball returns repository name as a gzip-compressed tar archive whose entries (directories and
// files, sorted, mode 0644 or 0755, modification time [Date]) all lie under prefix ("" for none, or
// for example "passing-1.0/", as GitHub's archives have). The bytes are the same on every run.
func Tarball(t testing.TB, name, prefix string) []byte {
	t.Helper()
	files := Files(t, name)
	paths := map[string]bool{}
	for p := range files {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			paths[d+"/"] = true
		}
		paths[p] = true
	}
	if prefix != "" {
		prefix = strings.TrimSuffix(prefix, "/") + "/"
		paths[""] = true // the prefix directory itself
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	slices.Sort(sorted)
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(gz)
	for _, p := range sorted {
		hdr := &tar.Header{Name: prefix + p, ModTime: Date, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if p == "" || strings.HasSuffix(p, "/") {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		} else {
			hdr.Size = int64(len(files[p]))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(files[p]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// write writes files under dir, creating folders as needed.
func write(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatalf("testrepos: %v", err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatalf("testrepos: %v", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testrepos: %v", err)
	}
}
