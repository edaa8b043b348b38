package sandbox

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/schemas"
)

func TestCheckRefused(t *testing.T) {
	many := make([]string, maxRefused+1)
	for i := range many {
		many[i] = RefusedTestpaths
	}
	tests := []struct {
		name  string
		kinds []string
		ok    bool
	}{
		{"none", nil, true},
		{"every kind", []string{RefusedArgs, RefusedTestpaths, "--ignore", "--ignore-glob", "--deselect"}, true},
		{"repeats", []string{RefusedTestpaths, RefusedTestpaths}, true},
		{"full", many[:maxRefused], true},
		{"too many", many, false},
		{"unknown kind", []string{"--cov"}, false},
		{"empty", []string{""}, false},
		{"a path", []string{"../outside"}, false},
		{"long", []string{strings.Repeat("x", 1<<20)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			why := checkRefused(tc.kinds)
			if (why == "") != tc.ok || len(why) > 200 {
				t.Errorf("checkRefused(%.40q) = %q, want ok %v", tc.kinds, why, tc.ok)
			}
		})
	}
}

func TestFindsNothing(t *testing.T) {
	tests := []struct {
		status schemas.Status
		tests  []string
		want   bool
	}{
		{schemas.StatusOK, nil, true},
		{schemas.StatusOK, []string{}, true},
		{schemas.StatusException, []string{}, true},
		{schemas.StatusOK, []string{"tests/test_a.py::test_x"}, false},
		{schemas.StatusTampered, []string{}, false},
		{schemas.StatusTimeout, []string{}, false},
		{schemas.StatusOutputLimit, []string{}, false},
	}
	for _, tc := range tests {
		if got := findsNothing(&Collection{Status: tc.status, Tests: tc.tests}); got != tc.want {
			t.Errorf("findsNothing(%s, %q) = %v, want %v", tc.status, tc.tests, got, tc.want)
		}
	}
	for runner, want := range map[string]string{"": RunnerUnittest, RunnerPytest: RunnerUnittest, RunnerUnittest: RunnerPytest} {
		if got := otherRunner(runner); got != want {
			t.Errorf("otherRunner(%q) = %q, want %q", runner, got, want)
		}
	}
}

// selectionDriver loads the tracer's definitions and judges, per case, the pytest configuration of
// a fresh checkout (a pytest.ini of the case's text, a tests/ folder, an outside/ folder next to
// the checkout and a link out to it), printing what _runner_options gives.
const selectionDriver = `
import json, os, shlex, sys, tempfile, types
src = sys.stdin.read()
m = types.ModuleType("tracer")
exec(compile(src.split("\nif __name__")[0], "tracer.py", "exec"), m.__dict__)
with open(sys.argv[1]) as f:
    cases = json.load(f)
out = []
for ini, kind, options in cases:
    base = tempfile.mkdtemp(dir=os.environ["NDTRACE_SELECTION_DIR"])
    d = os.path.join(base, "repo")
    for sub in ("repo/tests", "repo/tests/deep", "outside"):
        os.makedirs(os.path.join(base, sub))
    os.symlink(os.path.join(base, "outside"), os.path.join(d, "linked"))
    with open(os.path.join(d, "pytest.ini"), "w") as f:
        f.write(ini)
    os.chdir(d)
    try:
        args, o = m._runner_options({"kind": kind, "test": "tests/test_a.py::t", "options": options}, d)
    except BaseException as e:
        out.append({"error": repr(e)})
        continue
    out.append({"args": args, "kept": o.kept or [], "refused": o.refused})
print(json.dumps(out))
`

type selectionResult struct {
	Error   string   `json:"error"`
	Args    []string `json:"args"`
	Kept    []string `json:"kept"`
	Refused []string `json:"refused"`
}

// judgeSelection runs selectionDriver on cases ([pytest.ini text, kind, options]).
func judgeSelection(t *testing.T, cases [][3]string) []selectionResult {
	var res []selectionResult
	runTracerDriver(t, selectionDriver, "NDTRACE_SELECTION_DIR", cases, &res)
	return res
}

// TestSelectionFilter judges repositories' test selections with the tracer's own code: what
// is kept when the rest of addopts is dropped (options none), and which paths are refused.
func TestSelectionFilter(t *testing.T) {
	tests := []struct {
		name, ini, kind string
		options         RunnerOptions
		kept, refused   []string
		testpaths       string // the -o testpaths= override passed, "" for none
	}{
		{name: "selection kept", ini: "[pytest]\naddopts = -m 'not slow' --maxfail=many -n 2 tests --ignore=tests/deep -k 'a or b' --deselect tests/x.py::t\n",
			kind: "collect", options: OptionsNone,
			kept: []string{"-m", "not slow", "tests", "--ignore=tests/deep", "-k", "a or b", "--deselect", "tests/x.py::t"}},
		{name: "bad expression dropped", ini: "[pytest]\naddopts = -m 'not (' -k ok -m slow\n", kind: "collect", options: OptionsNone,
			kept: []string{"-k", "ok", "-m", "slow"}},
		{name: "missing test path dropped", ini: "[pytest]\naddopts = nowhere tests/x.py::t tests\n", kind: "collect", options: OptionsNone,
			kept: []string{"tests"}},
		{name: "test paths not in a test run", ini: "[pytest]\naddopts = tests -m slow\n", kind: "test", options: OptionsNone,
			kept: []string{"-m", "slow"}},
		{name: "escapes refused", ini: "[pytest]\naddopts = ../outside /etc linked tests --ignore=../x --ignore-glob=/x/* --deselect=../y::z -x\n",
			kind: "collect", kept: []string{"tests", "-x"},
			refused: []string{"args", "args", "args", "--ignore", "--ignore-glob", "--deselect"}},
		{name: "escapes refused without addopts", ini: "[pytest]\naddopts = ../outside --ignore ../x -m slow -n 2\n",
			kind: "collect", options: OptionsNone, kept: []string{"-m", "slow"}, refused: []string{"args", "--ignore"}},
		{name: "inside paths kept", ini: "[pytest]\naddopts = tests/../tests ./tests --ignore=tests/deep/../x\ntestpaths = tests ./tests/deep\n",
			kind: "collect", kept: []string{"tests/../tests", "./tests", "--ignore=tests/deep/../x"}},
		{name: "testpaths refused", ini: "[pytest]\ntestpaths = tests ../outside /etc linked t*\n", kind: "collect",
			kept: []string{}, refused: []string{"testpaths", "testpaths", "testpaths"}, testpaths: "tests tests"},
		{name: "testpaths override in addopts", ini: "[pytest]\naddopts = -o testpaths=../outside -o 'testpaths=tests' -o 'testpaths=tests linked/*'\n",
			kind: "collect", kept: []string{"-o", "testpaths=tests"}, refused: []string{"testpaths", "testpaths"}},
		{name: "testpaths only in collections", ini: "[pytest]\ntestpaths = ../outside\n", kind: "test", kept: []string{}},
	}
	var cases [][3]string
	for _, tc := range tests {
		cases = append(cases, [3]string{tc.ini, tc.kind, string(tc.options)})
	}
	for i, r := range judgeSelection(t, cases) {
		tc := tests[i]
		testpaths := ""
		for j := 0; j+1 < len(r.Args); j++ {
			if v, ok := strings.CutPrefix(r.Args[j+1], "testpaths="); ok && r.Args[j] == "-o" {
				testpaths = v
			}
		}
		if r.Error != "" || !slices.Equal(r.Kept, tc.kept) || !slices.Equal(r.Refused, tc.refused) || testpaths != tc.testpaths {
			t.Errorf("%s: error %q kept %q refused %q testpaths %q; want %q %q %q", tc.name, r.Error, r.Kept, r.Refused,
				testpaths, tc.kept, tc.refused, tc.testpaths)
		}
	}
}

// FuzzSelection judges arbitrary addopts with the rest dropped (options none): only selection
// options are kept, and none of them names a path that leaves the checkout.
func FuzzSelection(f *testing.F) {
	for _, s := range []string{"-m 'not slow' --ignore=../x tests", "-k", "--deselect", "-m=a -kb --ignore-glob /x", "../ linked -- -m x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addopts string) {
		if !utf8.ValidString(addopts) || strings.ContainsAny(addopts, "\x00\r\n%") {
			return // not a value an ini file can hold
		}
		for _, r := range judgeSelection(t, [][3]string{{"[pytest]\naddopts = " + addopts + "\n", "collect", "none"}}) {
			if r.Error != "" {
				t.Fatalf("error %s", r.Error)
			}
			for i, k := range r.Kept {
				if strings.HasPrefix(k, "-") && !slices.ContainsFunc([]string{"-m", "-k", "--ignore", "--ignore-glob", "--deselect"},
					func(o string) bool { return strings.HasPrefix(k, o) }) && (i == 0 || !slices.Contains([]string{"-m", "-k"}, r.Kept[i-1])) {
					t.Errorf("kept %q (all kept %q)", k, r.Kept)
				}
				if strings.HasPrefix(k, "/") || strings.HasPrefix(k, "..") || strings.HasPrefix(k, "linked") {
					t.Errorf("kept path %q (all kept %q)", k, r.Kept)
				}
			}
		}
	})
}
