package sandboxtest

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// HostDir returns a new empty directory for files a sandbox mounts read-only (repositories,
// site-packages), removed when the test ends. It is outside /tmp, which the sandbox replaces with
// its own tmpfs: under $NDTRACE_TEST_DIR if set, else /var/tmp. It is world-readable, so the
// sandbox's unprivileged uid can read it.
func HostDir(t testing.TB) string {
	t.Helper()
	return testrepos.MountableDir(t)
}

// WriteTree writes files (slash-separated relative path to content) under dir, world-readable.
func WriteTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Suite is a small repository with a test suite of every kind the test-run cases need.
var Suite = map[string]string{
	"calc/__init__.py": "",
	"calc/ops.py": `def add(a, b):
    total = a + b
    return total


def mul(a, b):
    return sum(add(0, a) for _ in range(b))
`,
	"tests/__init__.py": "",
	"tests/test_ops.py": `import os
import time

import pytest

from calc.ops import add, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(3, 4) == 12


def test_fails():
    assert add(2, 2) == 5


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass


def test_hangs():
    while True:
        time.sleep(0.01)


def test_forks():
    pid = os.fork()
    if pid == 0:
        add(100, 200)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert add(1, 1) == 2
    assert status == 0
`,
	"tests/test_needs_dep.py": `import ndtrace_no_such_dependency


def test_never():
    pass
`,
}

// UnittestSuite is a repository whose tests only need unittest.
var UnittestSuite = map[string]string{
	"mod.py":            "def double(x):\n    return 2 * x\n",
	"tests/__init__.py": "",
	"tests/test_mod.py": `import unittest

from mod import double


class TestDouble(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(double(2), 4)

    def test_bad(self):
        self.assertEqual(double(2), 5)
`,
}

// PhaseSuite is a repository whose tests attack the tracer's phase markers (the tracer module's
// _phase, whose events turn recording on and off in a traced test run) and the state the tracer
// module writes the test record from, and honest tests that once looked like tampering.
var PhaseSuite = map[string]string{
	"nanmod.py": "def g():\n    return 1e400 * 0\n",
	"fdutil.py": "def report(n):\n    return \"opened %d files\" % n\n",
	"test_honest.py": `import os

import fdutil
import nanmod


def test_nan_constant():
    # a NaN folded into a constant: NaN != NaN, but it is the file's own code
    x = nanmod.g()
    assert x != x


def test_emfile():
    # the first call into another module while no descriptor is free
    fds = []
    try:
        while True:
            fds.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        msg = fdutil.report(len(fds))
    finally:
        for fd in fds:
            os.close(fd)
    assert msg.startswith("opened")
`,
	"finalize/conftest.py": `import sys
import weakref

import pytest


class _Box:
    pass


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    # End the running phase from a finalizer that runs as this frame is cleared (after its
    # return event): nothing traced is on the stack then, but it is not the phase's own caller.
    f = sys._getframe(1)
    while f is not None and "teardowns" not in f.f_locals:
        f = f.f_back
    if f is None:
        return
    gens = [g for g in f.f_locals["teardowns"] if getattr(g, "gi_code", None) and g.gi_code.co_name == "_phase"]
    if gens:
        weakref.finalize(_Box(), next, gens[0], None)
`,
	"finalize/test_fin.py": `def helper(n):
    return n * 2


def test_y():
    secret = helper(21)
    assert secret == 42
`,
	"test_phase.py": `import sys
import types


def _bottom_globals():
    f = sys._getframe()
    while f.f_back is not None:
        f = f.f_back
    return f.f_globals


def test_phase_inside():
    gen = _bottom_globals()["_phase"]()
    next(gen)
    hidden = 1
    assert hidden


def test_phase_code():
    _bottom_globals()["_phase"].__code__ = (lambda plugin=None, item=None: None).__code__


def test_compiled_under_name():
    exec(compile("def test_x():\n    assert True\n", __file__, "exec"), {})
    hidden = 1
    assert hidden


def test_recompiled_file():
    # The file itself compiled again (as runpy or importlib.reload do) is honest.
    ns = {"__name__": "again"}
    with open(__file__, "rb") as fh:
        exec(compile(fh.read(), __file__, "exec", dont_inherit=True), ns)
    assert ns["_bottom_globals"] is not _bottom_globals


def test_record_state():
    # What the tracer module writes the test record from, changed by the test: never a sandbox error.
    f = sys._getframe()
    while f is not None and "req" not in f.f_locals:
        f = f.f_back
    f.f_locals["req"]["kind"] = "collect"


def test_resume_early():
    code = _bottom_globals()["_phase"].__code__
    found = []
    f = sys._getframe()
    while f is not None:
        for v in list(f.f_locals.values()):
            for g in (v if isinstance(v, list) else [v]):
                if isinstance(g, types.GeneratorType) and g.gi_code is code:
                    found.append(g)
                    next(g, None)
        f = f.f_back
    hidden = 1
    assert found and hidden
`,
}

// testRunCases checks CollectTests and RunTest on a backend: outcomes, timeouts, forks, missing
// dependencies, unittest, PythonPath, and that traces keep to the repository's files.
func testRunCases(t *testing.T, cfg sandbox.Config) {
	ctx := context.Background()
	root := HostDir(t)
	repo, uni, deps := filepath.Join(root, "repo"), filepath.Join(root, "uni"), filepath.Join(root, "deps")
	WriteTree(t, repo, Suite)
	WriteTree(t, uni, UnittestSuite)
	WriteTree(t, deps, map[string]string{"extlib/__init__.py": "def triple(x):\n    return 3 * x\n"})
	WriteTree(t, repo, map[string]string{"tests/test_ext.py": `from extlib import triple


def test_triple():
    assert triple(2) == 6
`})
	phase := filepath.Join(root, "phase")
	WriteTree(t, phase, PhaseSuite)
	rw := filepath.Join(root, "rw")
	WriteTree(t, rw, WritableSuite)
	hostile, huge := filepath.Join(root, "hostile"), filepath.Join(root, "huge")
	writeHostileTree(t, hostile, huge)
	cfg.ReadOnly = []string{repo, uni, phase, rw, hostile, huge}
	cfg.PythonPath = []string{deps}
	sb, err := sandbox.New(ctx, cfg)
	if err != nil {
		t.Fatalf("sandbox.New(%s): %v", cfg.Backend, err)
	}
	t.Cleanup(func() { sb.Close() })
	env := &Env{T: t, Ctx: ctx, SB: sb}

	t.Run("collect", func(t *testing.T) {
		c, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: repo})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"tests/test_ext.py::test_triple", "tests/test_ops.py::test_add", "tests/test_ops.py::test_mul",
			"tests/test_ops.py::test_fails", "tests/test_ops.py::test_skipped", "tests/test_ops.py::test_hangs",
			"tests/test_ops.py::test_forks"}
		if c.Status != schemas.StatusOK || c.Runner != sandbox.RunnerPytest || !slices.Equal(c.Tests, want) {
			t.Fatalf("collection %s (%s) runner %q tests %q; stderr %s", c.Status, c.Detail, c.Runner, c.Tests, c.Result.Stderr)
		}
		if c.MissingModule != "ndtrace_no_such_dependency" || len(c.Errors) != 1 || !strings.HasPrefix(c.Errors[0], "tests/test_needs_dep.py") {
			t.Fatalf("missing module %q, errors %q", c.MissingModule, c.Errors)
		}
	})
	for _, tc := range []struct {
		test, outcome string
		status        schemas.Status
	}{
		{"tests/test_ops.py::test_add", sandbox.OutcomePassed, schemas.StatusOK},
		{"tests/test_ops.py::test_fails", sandbox.OutcomeFailed, schemas.StatusOK},
		{"tests/test_ops.py::test_skipped", sandbox.OutcomeSkipped, schemas.StatusOK},
		{"tests/test_ops.py::test_forks", sandbox.OutcomePassed, schemas.StatusOK},
		{"tests/test_ext.py::test_triple", sandbox.OutcomePassed, schemas.StatusOK},
		{"tests/test_needs_dep.py::test_never", sandbox.OutcomeError, schemas.StatusOK},
		{"tests/test_ops.py::test_hangs", "", schemas.StatusTimeout},
	} {
		for _, traced := range []bool{false, true} {
			name := strings.TrimPrefix(tc.test, "tests/")
			if traced {
				name += "/traced"
			}
			t.Run(name, func(t *testing.T) {
				lim := sandbox.Limits{}
				if tc.status == schemas.StatusTimeout {
					lim.WallTime = 1500 * time.Millisecond
				}
				r, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: repo, Test: tc.test, Traced: traced, Limits: lim})
				if err != nil {
					t.Fatal(err)
				}
				res := r.Result
				if res.Status != tc.status || r.Outcome != tc.outcome {
					t.Fatalf("status %s (%s) outcome %q, want %s %q; stdout %.2000s stderr %.2000s", res.Status, res.Detail,
						r.Outcome, tc.status, tc.outcome, res.Stdout, res.Stderr)
				}
				if !traced && (len(res.Events) > 0 || len(res.Functions) > 0) {
					t.Fatalf("untraced run has %d events", len(res.Events))
				}
				for _, e := range res.Events {
					if !strings.HasPrefix(e.File, repo+"/") {
						t.Fatalf("traced a frame outside the repository: %+v", e)
					}
				}
				if tc.test == "tests/test_needs_dep.py::test_never" && r.MissingModule != "ndtrace_no_such_dependency" {
					t.Fatalf("missing module %q", r.MissingModule)
				}
				if traced && tc.outcome == sandbox.OutcomePassed && (len(res.Events) == 0 || len(res.Functions) == 0) {
					t.Fatalf("traced run recorded %d events and %d functions", len(res.Events), len(res.Functions))
				}
				if tc.test == "tests/test_ops.py::test_forks" && traced {
					// The forked child's add(100, 200) never reaches the trace.
					for _, e := range res.Events {
						if v, _ := e.Locals.Get("a"); v == "100" {
							t.Fatalf("the forked child wrote to the trace: %+v", e)
						}
					}
				}
			})
			env.assertNoStrays()
		}
	}
	t.Run("phase_markers", func(t *testing.T) {
		// A test that starts a phase of its own, gives the phase marker other code, resumes the
		// running phase's marker to switch recording off for its remaining lines, or runs code
		// compiled under its file's name: tampering (an untraced run has no phases: its first
		// test just passes). Never a passed test with lines missing from its trace.
		for _, tc := range []struct {
			test   string
			traced bool
			want   []schemas.Status
		}{
			{"test_phase.py::test_phase_inside", true, []schemas.Status{schemas.StatusTampered}},
			{"test_phase.py::test_phase_inside", false, []schemas.Status{schemas.StatusOK}},
			{"test_phase.py::test_phase_code", true, []schemas.Status{schemas.StatusTampered}},
			{"test_phase.py::test_phase_code", false, []schemas.Status{schemas.StatusTampered}},
			{"test_phase.py::test_resume_early", true, []schemas.Status{schemas.StatusTampered}},
			{"test_phase.py::test_compiled_under_name", true, []schemas.Status{schemas.StatusTampered}},
			{"test_phase.py::test_record_state", true, []schemas.Status{schemas.StatusTampered}},
			{"test_phase.py::test_record_state", false, []schemas.Status{schemas.StatusTampered}},
			{"finalize/test_fin.py::test_y", true, []schemas.Status{schemas.StatusTampered}},
		} {
			r, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: phase, Test: tc.test, Traced: tc.traced})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(tc.want, r.Result.Status) && !(r.Result.Status == schemas.StatusOK && r.Outcome == sandbox.OutcomeFailed) {
				t.Errorf("%s (traced %v): %s (%s) outcome %q, want %v", tc.test, tc.traced, r.Result.Status, r.Result.Detail, r.Outcome, tc.want)
			}
			if r.Result.Status == schemas.StatusOK && r.Outcome == sandbox.OutcomePassed && tc.traced {
				t.Errorf("%s: passed with its phase tampered with", tc.test)
			}
			env.assertNoStrays()
		}
		for _, id := range []string{"test_phase.py::test_recompiled_file", "test_honest.py::test_nan_constant", "test_honest.py::test_emfile"} {
			r, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: phase, Test: id, Traced: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Result.Status != schemas.StatusOK || r.Outcome != sandbox.OutcomePassed {
				t.Errorf("%s: %s (%s) outcome %q, want a pass", id, r.Result.Status, r.Result.Detail, r.Outcome)
			}
		}
	})
	t.Run("writable_checkout", func(t *testing.T) { writableCases(t, env, rw) })
	t.Run("writable_hostile_tree", func(t *testing.T) { writableHostileCases(t, env, hostile, huge) })
	t.Run("unittest", func(t *testing.T) {
		c, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: uni, Runner: sandbox.RunnerUnittest})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"tests.test_mod.TestDouble.test_bad", "tests.test_mod.TestDouble.test_ok"}
		if c.Status != schemas.StatusOK || !slices.Equal(c.Tests, want) {
			t.Fatalf("collection %s (%s) tests %q", c.Status, c.Detail, c.Tests)
		}
		for i, outcome := range []string{sandbox.OutcomeFailed, sandbox.OutcomePassed} {
			r, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: uni, Runner: c.Runner, Test: want[i], Traced: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Outcome != outcome || r.Result.Status != schemas.StatusOK {
				t.Fatalf("%s: %s (%s) outcome %q, want %q", want[i], r.Result.Status, r.Result.Detail, r.Outcome, outcome)
			}
		}
	})
}

// WritableSuite is a repository whose tests write next to their code, as many real suites do (a
// database file, a cache, a changed fixture file), and probe what else they could reach.
var WritableSuite = map[string]string{
	"pkg/__init__.py": "",
	"pkg/state.txt":   "original\n",
	"tests/test_rw.py": `import errno
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def test_writes_next_to_code():
    with open(os.path.join(ROOT, "pkg", "data.db"), "w") as f:
        f.write("rows")
    with open(os.path.join(ROOT, "pkg", "state.txt"), "a") as f:
        f.write("changed\n")
    os.mkdir(os.path.join(ROOT, "build"))
    os.remove(os.path.join(ROOT, "pkg", "__init__.py"))
    assert open(os.path.join(ROOT, "pkg", "data.db")).read() == "rows"
    assert open(os.path.join(ROOT, "pkg", "state.txt")).read() == "original\nchanged\n"


def test_fresh_view():
    # Nothing the test before wrote is here: each test gets its own view.
    assert not os.path.exists(os.path.join(ROOT, "pkg", "data.db"))
    assert not os.path.exists(os.path.join(ROOT, "build"))
    assert os.path.exists(os.path.join(ROOT, "pkg", "__init__.py"))
    assert open(os.path.join(ROOT, "pkg", "state.txt")).read() == "original\n"


def test_bounded():
    # Writes are bounded (ENOSPC or the file-size limit), and only the checkout is writable.
    try:
        with open(os.path.join(ROOT, "big"), "wb") as f:
            for _ in range(1024):
                f.write(b"x" * (1 << 20))
        raise AssertionError("wrote 1 GiB into the checkout")
    except OSError as e:
        assert e.errno in (errno.ENOSPC, errno.EFBIG), e
    for target in (os.path.dirname(ROOT), "/usr", "/"):
        try:
            open(os.path.join(target, "ndtrace-escape"), "w").close()
            raise AssertionError("wrote into " + target)
        except OSError:
            pass
    # Nor through a link the repository ships.
    try:
        open(os.path.join(ROOT, "up", "ndtrace-escape"), "w").close()
        raise AssertionError("wrote through a link out of the checkout")
    except OSError:
        pass
    # The staging area of the view is not reachable.
    assert not os.path.exists("/tmp/.ndtrace-writable")
`,
}

// writableCases checks the writable checkout views: tests that write next to their code pass, the
// next test sees the checkout as it was, nothing reaches the host's copy, writes are bounded.
func writableCases(t *testing.T, env *Env, rw string) {
	ctx, sb := env.Ctx, env.SB
	if err := os.Symlink("..", filepath.Join(rw, "up")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	before := treeSnapshot(t, rw)
	// (Collection in a copied view took 14 s of wall and 5 s of CPU time on a loaded 2-core
	// machine: its limits leave a wide margin, so that its outcome does not depend on the speed.)
	c, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: rw, Limits: sandbox.Limits{WallTime: 120 * time.Second, CPUTime: 120 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Writable != sandbox.WritableOverlay && c.Writable != sandbox.WritableCopy {
		t.Fatalf("collection saw the checkout %q: %s (%s); stderr %s", c.Writable, c.Status, c.Detail, c.Result.Stderr)
	}
	t.Logf("writable view: %s", c.Writable)
	for _, traced := range []bool{false, true} {
		for _, test := range []string{"tests/test_rw.py::test_writes_next_to_code", "tests/test_rw.py::test_fresh_view",
			"tests/test_rw.py::test_bounded"} {
			r, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: rw, Test: test, Traced: traced,
				Limits: sandbox.Limits{WallTime: 20 * time.Second, FileSize: 1 << 30}})
			if err != nil {
				t.Fatal(err)
			}
			if r.Result.Status != schemas.StatusOK || r.Outcome != sandbox.OutcomePassed {
				t.Errorf("%s (traced %v): %s (%s) outcome %q; stdout %.3000s stderr %.2000s", test, traced, r.Result.Status,
					r.Result.Detail, r.Outcome, r.Result.Stdout, r.Result.Stderr)
			}
			if r.Writable != c.Writable {
				t.Errorf("%s: view %q, collection's %q", test, r.Writable, c.Writable)
			}
			env.assertNoStrays()
		}
	}
	if after := treeSnapshot(t, rw); !maps.Equal(before, after) {
		t.Fatalf("the host's checkout changed:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(rw), "ndtrace-escape")); err == nil {
		t.Fatal("a test wrote next to the checkout on the host")
	}
}

// treeSnapshot maps every path under dir to its content (directories to "/").
func treeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[p] = "/"
			return nil
		}
		if d.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			out[p] = "-> " + target
			return err
		}
		data, err := os.ReadFile(p)
		out[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// HostileSuite is a checkout shaped to break its writable view: names in the syntax of mount
// options, a fifo (a copy that opened it would block), symbolic link loops, deep nesting, a file
// nobody may read, a name that is not UTF-8 (writeHostileTree adds the entries Go cannot write as
// text). Its tests then try the view's own levers: overlayfs's extended attributes, whiteouts,
// set-uid bits.
var HostileSuite = map[string]string{
	"pkg/__init__.py":       "",
	"pkg/data.txt":          "data\n",
	"a,b:c\\d=e":            "ok",
	"lowerdir=x,upperdir=y": "ok",
	"new\nline":             "ok",
	"tests/test_hostile.py": `import errno
import os
import stat

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def test_hostile_tree():
    names = os.listdir(ROOT)
    with open(os.path.join(ROOT, "written"), "w") as f:
        f.write("x")
    for n in ("a,b:c\\d=e", "lowerdir=x,upperdir=y", "new\nline"):
        assert n in names, names
        assert open(os.path.join(ROOT, n)).read() == "ok"
    raw = os.listdir(os.fsencode(ROOT))
    assert b"\xff\xfe-not-utf8" in raw, raw
    assert open(os.path.join(os.fsencode(ROOT), b"\xff\xfe-not-utf8"), "rb").read() == b"ok"
    assert os.readlink(os.path.join(ROOT, "loop_a")) == "loop_b"
    assert os.readlink(os.path.join(ROOT, "self")) == "self"
    deep = os.path.join(ROOT, *["d"] * 60, "leaf.txt")
    assert open(deep).read() == "deep"
    with open(deep, "a") as f:
        f.write("er")
    p = os.path.join(ROOT, "fifo")
    assert not os.path.lexists(p) or stat.S_ISFIFO(os.lstat(p).st_mode)
    flags = os.statvfs(ROOT).f_flag
    assert flags & os.ST_NOSUID and flags & os.ST_NODEV, flags
    # overlayfs's own attributes (opaque directories, redirects) and file capabilities are not
    # the item's to set
    for name in ("trusted.overlay.opaque", "trusted.overlay.redirect", "security.capability"):
        try:
            os.setxattr(os.path.join(ROOT, "pkg"), name, b"y")
            raise AssertionError("set " + name)
        except OSError:
            pass
    for name in ("user.overlay.opaque", "user.overlay.whiteout"):
        try:
            os.setxattr(os.path.join(ROOT, "pkg"), name, b"y")
        except OSError:
            pass
    assert "data.txt" in os.listdir(os.path.join(ROOT, "pkg"))
    try:
        os.mknod(os.path.join(ROOT, "whiteout"), stat.S_IFCHR | 0o600, 0)
    except OSError:
        pass
    try:
        os.mknod(os.path.join(ROOT, "null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
        raise AssertionError("made a device node")
    except OSError:
        pass
    exe = os.path.join(ROOT, "suid")
    with open(exe, "w") as f:
        f.write("#!/bin/sh\nid -u\n")
    try:
        os.chmod(exe, 0o4755)
    except OSError:
        pass
    assert not os.path.exists("/tmp/.ndtrace-writable")


def test_next_sees_clean():
    for n in ("written", "whiteout", "suid"):
        assert not os.path.lexists(os.path.join(ROOT, n)), n
    assert open(os.path.join(ROOT, *["d"] * 60, "leaf.txt")).read() == "deep"
    assert "data.txt" in os.listdir(os.path.join(ROOT, "pkg"))
`,
}

// writeHostileTree writes HostileSuite at hostile, with the entries that are not text, and at
// huge a checkout holding a sparse file far larger than the disk space it takes.
func writeHostileTree(t *testing.T, hostile, huge string) {
	t.Helper()
	WriteTree(t, hostile, HostileSuite)
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(syscall.Mkfifo(filepath.Join(hostile, "fifo"), 0o644))
	check(os.Symlink("loop_b", filepath.Join(hostile, "loop_a")))
	check(os.Symlink("loop_a", filepath.Join(hostile, "loop_b")))
	check(os.Symlink("self", filepath.Join(hostile, "self")))
	check(os.WriteFile(filepath.Join(hostile, "\xff\xfe-not-utf8"), []byte("ok"), 0o644))
	check(os.WriteFile(filepath.Join(hostile, "secret"), []byte("secret"), 0o000))
	deep := filepath.Join(append([]string{hostile}, slices.Repeat([]string{"d"}, 60)...)...)
	check(os.MkdirAll(deep, 0o755))
	check(os.WriteFile(filepath.Join(deep, "leaf.txt"), []byte("deep"), 0o644))
	WriteTree(t, huge, map[string]string{"tests/test_huge.py": "def test_huge():\n    pass\n"})
	f, err := os.Create(filepath.Join(huge, "sparse.bin"))
	check(err)
	check(f.Truncate(hugeSparse))
	check(f.Close())
	check(os.Chmod(filepath.Join(huge, "sparse.bin"), 0o644))
}

// hugeSparse is the size of writeHostileTree's sparse file: more than a writable view copies.
const hugeSparse = 3 << 30

// writableHostileCases runs HostileSuite's tests: the views are made (not refused, not blocked)
// whatever the checkout holds, what the tests do through them stays in them, and a checkout
// too large to copy is seen read-only rather than copied into memory.
func writableHostileCases(t *testing.T, env *Env, hostile, huge string) {
	ctx, sb := env.Ctx, env.SB
	before := lstatSnapshot(t, hostile)
	lim := sandbox.Limits{WallTime: 30 * time.Second}
	for _, test := range []string{"tests/test_hostile.py::test_hostile_tree", "tests/test_hostile.py::test_next_sees_clean"} {
		start := time.Now()
		r, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: hostile, Test: test, Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		if r.Result.Status != schemas.StatusOK || r.Outcome != sandbox.OutcomePassed ||
			(r.Writable != sandbox.WritableOverlay && r.Writable != sandbox.WritableCopy) {
			t.Errorf("%s: %s (%s) outcome %q view %q after %v; stdout %.3000s stderr %.2000s", test, r.Result.Status,
				r.Result.Detail, r.Outcome, r.Writable, time.Since(start), r.Result.Stdout, r.Result.Stderr)
		}
		env.assertNoStrays()
	}
	if after := lstatSnapshot(t, hostile); !maps.Equal(before, after) {
		t.Fatalf("the host's checkout changed:\nbefore %v\nafter  %v", before, after)
	}

	start := time.Now()
	r, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: huge, Test: "tests/test_huge.py::test_huge", Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("huge sparse checkout: view %q in %v", r.Writable, took)
	if r.Result.Status != schemas.StatusOK || r.Outcome != sandbox.OutcomePassed {
		t.Errorf("huge: %s (%s) outcome %q view %q after %v; stderr %.2000s", r.Result.Status, r.Result.Detail,
			r.Outcome, r.Writable, took, r.Result.Stderr)
	}
	if r.Writable == sandbox.WritableCopy {
		t.Errorf("a checkout of %d bytes (sparse) was copied into the item's memory", int64(hugeSparse))
	}
	env.assertNoStrays()
}

// lstatSnapshot maps every path under dir to its type, mode, size and, for links, target; it
// never opens a file (dir may hold fifos).
func lstatSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10)
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v += " -> " + target
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
