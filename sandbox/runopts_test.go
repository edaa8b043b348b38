package sandbox_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// flavourTests is the test file of the ini-flavour repositories: test_warning passes only while
// addopts' -W error::UserWarning applies, test_marked only while the declared marker does
// (--strict-markers), and test_fixture uses conftest.py's fixture.
const flavourTests = `import warnings

import pytest


@pytest.mark.fast
def test_marked():
    pass


def test_warning():
    with pytest.raises(UserWarning):
        warnings.warn("made an error by -W", UserWarning)


def test_fixture(answer):
    assert answer == 42
`

const flavourConftest = "import pytest\n\n\n@pytest.fixture\ndef answer():\n    return 42\n"

// flavourAddopts names a plugin and coverage and xdist options the sandbox lacks.
const flavourAddopts = "--cov=pkg --cov-report term -n 4 -p no_such_plugin --strict-markers -W error::UserWarning"

// fakeCov is an environment (a PythonPath directory) holding a stand-in for pytest-cov: an
// entry-point plugin that accepts --cov and, when given it, sets FAKE_COV in the environment.
var fakeCov = map[string]string{
	"pytest_cov/__init__.py": "",
	"pytest_cov/plugin.py": `import os


def pytest_addoption(parser):
    parser.addoption("--cov", action="append", nargs="?", const=True, default=[])
    parser.addoption("--cov-report", action="append", default=[])


def pytest_configure(config):
    if config.getoption("--cov"):
        os.environ["FAKE_COV"] = "1"
`,
	"pytest_cov-9.9.dist-info/METADATA":         "Metadata-Version: 2.1\nName: pytest-cov\nVersion: 9.9\n",
	"pytest_cov-9.9.dist-info/entry_points.txt": "[pytest11]\npytest_cov = pytest_cov.plugin\n",
	"pytest_cov-9.9.dist-info/RECORD":           "",
}

// TestRunnerOptions runs repositories whose pytest configuration names plugins the sandbox does
// not have: what cannot run is neutralised, the rest of the configuration still applies, in each
// ini flavour; hostile addopts are neutralised too; a configuration pytest still refuses falls
// back to no addopts; and with the plugins present the original configuration can be run.
func TestRunnerOptions(t *testing.T) {
	if testing.Short() {
		t.Skip("repository test runs under each ini flavour: long integration test; run without -short")
	}
	root := sandboxtest.HostDir(t)
	dirs := map[string]string{}
	flavours := map[string]map[string]string{
		"tox":       {"tox.ini": "[pytest]\naddopts = " + flavourAddopts + "\nmarkers =\n    fast: quick\n"},
		"setup_cfg": {"setup.cfg": "[metadata]\nname = x\n\n[tool:pytest]\naddopts = " + flavourAddopts + "\nmarkers =\n    fast: quick\n"},
		"pytest_ini": {"pytest.ini": "[pytest]\naddopts = " + flavourAddopts + "\nmarkers = fast: quick\n",
			"tox.ini": "[pytest]\naddopts = --collect-only\n"}, // pytest.ini wins
		"pyproject": {"pyproject.toml": "[tool.pytest.ini_options]\naddopts = [\"--cov=pkg\", \"--cov-report\", \"term\", \"-n\", \"4\", " +
			"\"-p\", \"no_such_plugin\", \"--strict-markers\", \"-W\", \"error::UserWarning\"]\nmarkers = [\"fast: quick\"]\n"},
	}
	for name, files := range flavours {
		dirs[name] = filepath.Join(root, name)
		files["tests/__init__.py"] = ""
		files["tests/conftest.py"] = flavourConftest
		files["tests/test_flavour.py"] = flavourTests
		sandboxtest.WriteTree(t, dirs[name], files)
	}
	// Hostile addopts: files and directories of ours (-c, --rootdir, --confcutdir, --basetemp=/),
	// ini overrides that would restore what we drop, modes that run no test, "--" that would turn
	// our own options into file names; -p of the repository's own plugin module loads (its code
	// runs in the sandbox anyway, as conftest.py's does); a .pth file on the PythonPath that sets
	// PYTEST_ADDOPTS.
	dirs["hostile"] = filepath.Join(root, "hostile")
	sandboxtest.WriteTree(t, dirs["hostile"], map[string]string{
		"pytest.ini": "[pytest]\naddopts = --basetemp=/ --rootdir=/ -c other.ini --confcutdir=/ -o addopts=--cov " +
			"--override-ini=required_plugins=pytest-cov -o xfail_strict=true -p ownplugin --junitxml=/tmp/x.xml " +
			"--collect-only --setup-plan -- -p no:python\nrequired_plugins = pytest-cov\n",
		"other.ini":         "[pytest]\naddopts = -p no_such_plugin\n",
		"ownplugin.py":      "import pytest\n\n\n@pytest.fixture\ndef own():\n    return 'own'\n",
		"site/evil.pth":     "import os; os.environ['PYTEST_ADDOPTS'] = '--collect-only -p no_such_plugin'\n",
		"tests/__init__.py": "",
		"tests/test_hostile.py": `def test_own_plugin(own):
    assert own == "own"


def test_tmp_path(tmp_path):
    (tmp_path / "f").write_text("x")
    assert str(tmp_path).startswith("/tmp/")
`,
	})
	// Options of the repository's conftest.py stay; options nothing defines go.
	dirs["conftest_opts"] = filepath.Join(root, "conftest_opts")
	sandboxtest.WriteTree(t, dirs["conftest_opts"], map[string]string{
		"pytest.ini": "[pytest]\naddopts = --runslow --level 3 --timeout 30 --no-such-flag\n",
		"conftest.py": "def pytest_addoption(parser):\n    parser.addoption('--runslow', action='store_true')\n" +
			"    parser.addoption('--level', type=int, default=0)\n",
		"tests/__init__.py": "",
		"tests/test_opts.py": "def test_opts(request):\n    assert request.config.getoption('--runslow')\n" +
			"    assert request.config.getoption('--level') == 3\n",
	})
	// Still a usage error once neutralised (a bad value of pytest's own option): no addopts.
	dirs["fallback"] = filepath.Join(root, "fallback")
	sandboxtest.WriteTree(t, dirs["fallback"], map[string]string{
		"setup.cfg":         "[tool:pytest]\naddopts = --maxfail=many -n 2\n",
		"tests/__init__.py": "",
		"tests/test_f.py":   "def test_f():\n    pass\n",
	})
	fixture := testrepos.Dir(t, "runner_options")
	env := filepath.Join(root, "env")
	sandboxtest.WriteTree(t, env, fakeCov)
	dirs["cov"] = filepath.Join(root, "cov")
	sandboxtest.WriteTree(t, dirs["cov"], map[string]string{
		"pytest.ini":        "[pytest]\naddopts = --cov=pkg -W error::UserWarning\n",
		"tests/__init__.py": "",
		"tests/test_cov.py": "import os\n\n\ndef test_no_cov():\n    assert 'FAKE_COV' not in os.environ\n\n\ndef test_plain():\n    pass\n",
	})

	ctx := context.Background()
	ro := []string{fixture, root}
	sb, err := sandbox.New(ctx, sandbox.Config{ReadOnly: ro, PythonPath: []string{filepath.Join(dirs["hostile"], "site")}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	withCov, err := sandbox.New(ctx, sandbox.Config{ReadOnly: ro, PythonPath: []string{env}})
	if err != nil {
		t.Fatal(err)
	}
	defer withCov.Close()

	flavourWant := []string{"--cov", "--cov-report", "-n", "-p no_such_plugin"}
	flavourTestIDs := []string{"tests/test_flavour.py::test_marked", "tests/test_flavour.py::test_warning", "tests/test_flavour.py::test_fixture"}
	tests := []struct {
		name, dir   string
		sb          *sandbox.Sandbox
		options     sandbox.RunnerOptions
		neutralised []string
		runnable    bool
		tests       []string
		outcomes    map[string]string // by test; default passed
	}{
		{name: "fixture", dir: fixture, sb: sb, neutralised: flavourWant,
			tests: []string{"tests/test_inventory.py::test_restock", "tests/test_inventory.py::test_total",
				"tests/test_inventory.py::test_legacy_total_is_an_error"}},
		{name: "tox", dir: dirs["tox"], sb: sb, neutralised: flavourWant, tests: flavourTestIDs},
		{name: "setup_cfg", dir: dirs["setup_cfg"], sb: sb, neutralised: flavourWant, tests: flavourTestIDs},
		{name: "pytest_ini", dir: dirs["pytest_ini"], sb: sb, neutralised: flavourWant, tests: flavourTestIDs},
		{name: "pyproject", dir: dirs["pyproject"], sb: sb, neutralised: flavourWant, tests: flavourTestIDs},
		{name: "hostile", dir: dirs["hostile"], sb: sb,
			neutralised: []string{"--basetemp", "--rootdir", "-c", "--confcutdir", "-o addopts=--cov",
				"--override-ini required_plugins=pytest-cov", "--junitxml", "--collect-only", "--setup-plan", "--", "required_plugins"},
			tests: []string{"tests/test_hostile.py::test_own_plugin", "tests/test_hostile.py::test_tmp_path"}},
		{name: "conftest_opts", dir: dirs["conftest_opts"], sb: sb, neutralised: []string{"--timeout", "--no-such-flag"},
			tests: []string{"tests/test_opts.py::test_opts"}},
		{name: "fallback", dir: dirs["fallback"], sb: sb, options: sandbox.OptionsNone, neutralised: []string{"addopts"},
			tests: []string{"tests/test_f.py::test_f"}},
		{name: "cov_missing", dir: dirs["cov"], sb: sb, neutralised: []string{"--cov"},
			tests: []string{"tests/test_cov.py::test_no_cov", "tests/test_cov.py::test_plain"}},
		{name: "cov_present", dir: dirs["cov"], sb: withCov, neutralised: []string{"--cov"}, runnable: true,
			tests: []string{"tests/test_cov.py::test_no_cov", "tests/test_cov.py::test_plain"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.sb.CollectTests(ctx, sandbox.CollectRequest{Dir: tc.dir})
			if err != nil {
				t.Fatal(err)
			}
			if c.Status != schemas.StatusOK || !slices.Equal(c.Tests, tc.tests) {
				t.Fatalf("status %s (%s) tests %q; stderr %.3000s", c.Status, c.Detail, c.Tests, c.Result.Stderr)
			}
			if c.Options != tc.options || !slices.Equal(c.Neutralised, tc.neutralised) || c.OriginalRunnable != tc.runnable {
				t.Errorf("options %q neutralised %q runnable %v, want %q %q %v", c.Options, c.Neutralised, c.OriginalRunnable,
					tc.options, tc.neutralised, tc.runnable)
			}
			for _, id := range c.Tests {
				for _, traced := range []bool{false, true} {
					res, err := tc.sb.RunTest(ctx, sandbox.TestRequest{Dir: tc.dir, Test: id, Traced: traced, Options: c.Options})
					if err != nil {
						t.Fatal(err)
					}
					want := tc.outcomes[id]
					if want == "" {
						want = sandbox.OutcomePassed
					}
					if res.Outcome != want || !slices.Equal(res.Neutralised, tc.neutralised) {
						t.Errorf("%s (traced %v): outcome %q (%s: %s), neutralised %q; want %s %q", id, traced, res.Outcome,
							res.Result.Status, res.Result.Detail, res.Neutralised, want, tc.neutralised)
					}
				}
			}
		})
	}

	// The original configuration, where it can run: the fake pytest-cov's --cov changes
	// test_no_cov's outcome; where it cannot, pytest refuses it.
	for _, tc := range []struct {
		sb      *sandbox.Sandbox
		test    string
		outcome string
	}{
		{withCov, "tests/test_cov.py::test_no_cov", sandbox.OutcomeFailed},
		{withCov, "tests/test_cov.py::test_plain", sandbox.OutcomePassed},
		{sb, "tests/test_cov.py::test_plain", sandbox.OutcomeError},
	} {
		res, err := tc.sb.RunTest(ctx, sandbox.TestRequest{Dir: dirs["cov"], Test: tc.test, Options: sandbox.OptionsOriginal})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != tc.outcome || len(res.Neutralised) != 0 {
			t.Errorf("original options, %s: outcome %q (%s), neutralised %q; want %s", tc.test, res.Outcome, res.Result.Detail,
				res.Neutralised, tc.outcome)
		}
	}
	// Without neutralising, the fixture repository is refused as before.
	c, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: fixture, Options: sandbox.OptionsOriginal})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != schemas.StatusException || len(c.Tests) != 0 {
		t.Errorf("original options: status %s (%s), tests %q", c.Status, c.Detail, c.Tests)
	}
	if _, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: fixture, Options: "everything"}); err == nil {
		t.Error("unknown runner options accepted")
	}
}
