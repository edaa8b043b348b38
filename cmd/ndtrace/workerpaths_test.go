package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/internal/testwheels"
	"github.com/ndtrace/ndtrace/internal/userdirs"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// workerPathsRepo is a repository whose tests and functions compute, in every way we know of,
// values from where the checkout is: os.getcwd(), __file__ and the folders above it, the path as
// bytes, as a pathlib.Path and as its parents, a path at the end of a value longer than
// value_chars (cut inside the path), an exception's message naming it, sys.path, a hash of it,
// and a tmp_path and a tempfile folder (in the sandbox's own /tmp); and a dependency installed in
// its environment (env: repository), whose __file__ and the folders above it are the worker's too. The functions find their
// folder through an imported module's __file__: a function item's module runs as code of its own.
var workerPathsRepo = map[string]string{
	"where.py": "import os\n\nFILE = os.path.abspath(__file__)\nROOT = os.path.dirname(FILE)\n",
	"wp.py": `import os
import pathlib
import sys

from where import FILE, ROOT


def here(name):
    return os.path.join(ROOT, name)


def parents():
    return [str(p) for p in pathlib.Path(FILE).parents]


def as_bytes(name):
    return os.fsencode(os.path.join(ROOT, name))


def as_path(name):
    return pathlib.Path(ROOT) / name


def long_value(n):
    return "x" * n + ROOT + "/data.txt"


def missing(name):
    try:
        open(os.path.join(ROOT, name))
    except OSError as e:
        return str(e)


def cwd():
    return os.getcwd()


def hashed():
    return hash(ROOT) % 1000003


def size(path):
    with open(path) as f:
        return len(f.read())


def first_paths():
    return [p for p in sys.path if p.startswith("/") and "python3" not in p][:4]
`,
	"data.txt":         "hello\n",
	"requirements.txt": "ndtrace-fixture-a>=1.0\n",
	"tests/test_dep.py": `import os
import pathlib

import fixture_a


def test_dependency():
    f = fixture_a.__file__
    ups = [str(p) for p in pathlib.Path(f).parents]
    v = "z" * 990 + f
    assert f.endswith(".py")
`,
	"tests/test_wp.py": `import os
import pathlib
import sys
import tempfile

import wp


def test_functions():
    assert wp.here("data.txt").endswith("data.txt")
    assert wp.parents()
    assert wp.as_bytes("data.txt").endswith(b"data.txt")
    assert wp.as_path("data.txt").name == "data.txt"
    assert wp.long_value(990).endswith("data.txt")
    assert "nope.txt" in wp.missing("nope.txt")
    assert wp.cwd()
    assert wp.hashed() >= 0
    assert wp.first_paths() is not None
    assert wp.size(wp.here("data.txt")) == 6


def test_locations(tmp_path):
    c = os.getcwd()
    up = os.path.dirname(c)
    f = __file__
    b = os.fsencode(f)
    p = pathlib.Path(f)
    ups = [str(x) for x in p.parents]
    t = str(tmp_path)
    d = tempfile.gettempdir()
    h = hash(f) % 1000003
    s = [x for x in sys.path if x.startswith("/") and "python3" not in x][:4]
    m = repr(wp)
    assert f.endswith("test_wp.py")


def test_long_value():
    v = "y" * 985 + __file__
    w = repr(os.fsencode(v))
    assert v.endswith("test_wp.py")


def test_exception():
    try:
        open(os.path.join(os.path.dirname(__file__), "nope.txt"))
    except FileNotFoundError as e:
        msg = str(e)
        args = e.args
        name = e.filename
    assert "nope.txt" in msg


def test_fails():
    open(os.path.join(os.path.dirname(__file__), "absent.txt"))
`,
}

// TestRunRepositoryRowsHoldNoWorkerPath (issue 29) runs one repository as two workers would, each
// with its scratch folder (of another length) and asserts that no row holds any part of either
// worker's folders (the scratch folder, the checkout's name in it, the folders above), and that
// the two workers' shards are byte-identical. A worker's checkout was mounted at its own path in
// the sandbox and values naming it were rewritten afterwards: a folder above it (a parent walked
// up to), a path cut at value_chars, a hash of a path or the addresses a longer path shifts were
// not, and gave rows that differ from worker to worker. The sandbox now shows the checkout at
// execute.CheckoutPath on every worker.
func TestRunRepositoryRowsHoldNoWorkerPath(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	host := sandboxtest.HostDir(t)
	repo := filepath.Join(host, "wp")
	sandboxtest.WriteTree(t, repo, workerPathsRepo)
	ix := testwheels.Serve(t, testwheels.Fixtures())
	workers := []string{filepath.Join(host, "w1"), filepath.Join(host, "worker-two", "with-a-longer-scratch")}
	envs := []string{filepath.Join(host, "e1"), filepath.Join(host, "envs-two", "with-a-longer-name")}
	var rows [2][]schemas.Row
	var hashes [2][]string
	for i, scratch := range workers {
		t.Setenv(userdirs.ScratchEnv, scratch)
		t.Setenv(userdirs.EnvsEnv, envs[i])
		out, m := runRepoList(t, "wp", []string{repo}, "    frozen_clock: true\n    env: repository\n",
			fmt.Sprintf("environments:\n  index_url: %s\n  timeout: 2m\n", ix.SimpleURL()))
		rows[i], hashes[i] = allRows(t, out), shardHashes(m)
		if len(rows[i]) == 0 {
			t.Fatalf("worker %d: no rows (counts %v)", i, m.Counts)
		}
		levels := map[string]int{}
		for _, r := range rows[i] {
			levels[r.Level]++
		}
		t.Logf("worker %d: %d rows %v, counts %v", i, len(rows[i]), levels, m.Counts)
		if levels["repository"] == 0 || levels["function"] == 0 {
			t.Errorf("worker %d: rows by level %v: want repository and function rows", i, levels)
		}
	}
	// What no row may hold: the workers' folders, the checkout's folder name (repo-HEX), and the
	// folder of both (whatever of it a parent would show).
	banned := append(append(slices.Clone(workers), envs...), host, "/repo-", "/w1", "/worker-two", "/e1", "/envs-two")
	leaks := 0
	for i := range rows {
		for _, r := range rows[i] {
			r.RepoURL = "" // the repository's own address (the fixture's folder), not a worker's
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range banned {
				if strings.Contains(string(b), s) {
					leaks++
					if leaks <= 5 {
						t.Errorf("worker %d: row %s (%s %s) holds %s:\n%s", i, r.ID, r.Level, r.QualName, s, excerpt(string(b), s))
					}
				}
			}
		}
	}
	// A function called with a path in the checkout is an item: its run has the checkout where
	// the test's had it (it was skipped, as checkout_path, while that path was the worker's).
	sized := false
	for _, r := range rows[0] {
		sized = sized || r.Level == "function" && r.QualName == "size"
	}
	if !sized {
		t.Error("no function row of size('/checkout/data.txt')")
	}
	// The rows show the checkout where the sandbox shows it.
	all := ""
	for _, r := range rows[0] {
		all += r.Text + "\n"
	}
	for _, want := range []string{execute.CheckoutPath + "/data.txt", "b'" + execute.CheckoutPath + "/data.txt'",
		"PosixPath('" + execute.CheckoutPath + "/data.txt')", "No such file or directory: '" + execute.CheckoutPath + "/nope.txt'",
		"'" + execute.EnvsPath + "/"} {
		if !strings.Contains(all, want) {
			t.Errorf("no row shows %s", want)
		}
	}
	if d := differingRows(rows[0], rows[1]); d != 0 || !slices.Equal(hashes[0], hashes[1]) {
		t.Errorf("two workers give %d differing rows, shards %v and %v", d, hashes[0], hashes[1])
	}
}

// excerpt is s around the first occurrence of sub.
func excerpt(s, sub string) string {
	i := strings.Index(s, sub)
	lo, hi := max(0, i-200), min(len(s), i+len(sub)+200)
	return fmt.Sprintf("...%s...", s[lo:hi])
}
