package sandbox

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckNeutralised(t *testing.T) {
	many := make([]string, maxNeutralised+1)
	for i := range many {
		many[i] = "--opt" + strings.Repeat("x", i)
	}
	tests := []struct {
		name  string
		names []string
		ok    bool
	}{
		{"none", nil, true},
		{"empty", []string{}, true},
		{"some", []string{"--cov", "-n", "-p no_such_plugin", "required_plugins", "..."}, true},
		{"full", many[:maxNeutralised], true},
		{"too many", many, false},
		{"empty name", []string{"--cov", ""}, false},
		{"repeated", []string{"--cov", "--cov"}, false},
		{"longest", []string{strings.Repeat("é", maxNeutralisedName)}, true},
		{"too long", []string{strings.Repeat("x", maxNeutralisedName+1)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if why := checkNeutralised(tc.names); (why == "") != tc.ok {
				t.Errorf("checkNeutralised(%q) = %q, want ok %v", tc.names, why, tc.ok)
			}
		})
	}
}

func TestCheckOptions(t *testing.T) {
	for o, ok := range map[RunnerOptions]bool{OptionsNeutralised: true, OptionsOriginal: true, OptionsNone: true,
		"all": false, "Original": false} {
		if err := checkOptions(o); (err == nil) != ok {
			t.Errorf("checkOptions(%q) = %v", o, err)
		}
	}
}

// addoptsDriver loads the tracer's definitions (its files joined, without main) and judges the addopts of one config
// file per case, printing what _runner_options gives and whether its invariants hold.
const addoptsDriver = `
import json, os, shlex, sys, tempfile, types
src = sys.stdin.read()
m = types.ModuleType("tracer")
exec(compile(src.split("\nif __name__")[0], "tracer.py", "exec"), m.__dict__)
with open(sys.argv[1]) as f:
    cases = json.load(f)
out = []
for flavour, addopts, kind in cases:
    d = tempfile.mkdtemp(dir=os.environ["NDTRACE_ADDOPTS_DIR"])
    os.makedirs(os.path.join(d, "tests"))
    if flavour == "pyproject.toml":
        text = "[tool.pytest.ini_options]\naddopts = %s\n" % json.dumps(addopts)
    else:
        section = "tool:pytest" if flavour == "setup.cfg" else "pytest"
        text = "[%s]\naddopts = %s\n" % (section, addopts.replace("\n", " "))
    with open(os.path.join(d, flavour), "w") as f:
        f.write(text)
    os.chdir(d)
    sys.path.insert(0, d)               # as in an item: the checkout first on sys.path
    try:
        args, o = m._runner_options({"kind": kind, "test": "tests/test_a.py::t", "options": ""}, d)
    except BaseException as e:
        out.append({"error": repr(e)})
        continue
    finally:
        sys.path.remove(d)
    kept = o.kept or []
    ok = (o.kept is None or shlex.split(args[1][len("addopts="):]) == kept) if args else True
    out.append({"args": args, "kept": kept, "neutralised": o.neutralised, "runnable": o.runnable,
                "roundtrip": ok})
print(json.dumps(out))
`

type addoptsResult struct {
	Error       string   `json:"error"`
	Args        []string `json:"args"`
	Kept        []string `json:"kept"`
	Neutralised []string `json:"neutralised"`
	Runnable    bool     `json:"runnable"`
	Roundtrip   bool     `json:"roundtrip"`
}

// judgeAddopts runs the driver on cases ([flavour, addopts, kind]).
func judgeAddopts(t *testing.T, cases [][3]string) []addoptsResult {
	var res []addoptsResult
	runTracerDriver(t, addoptsDriver, "NDTRACE_ADDOPTS_DIR", cases, &res)
	return res
}

// runTracerDriver runs driver, a Python program given the tracer's source on its standard input
// and a JSON file of the cases as its argument (a temporary folder named by the environment
// variable dirEnv holds it and what the driver makes), and decodes its JSON output into res, one
// result per case.
func runTracerDriver[C, R any](t *testing.T, driver, dirEnv string, cases []C, res *[]R) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	dir := t.TempDir()
	arg, _ := json.Marshal(cases)
	if err := os.WriteFile(dir+"/cases.json", arg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "-I", "-B", "-c", driver, dir+"/cases.json")
	cmd.Stdin = strings.NewReader(tracerSource())
	cmd.Env = []string{dirEnv + "=" + dir, "PATH=/usr/bin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("driver: %v: %s", err, stderr.String())
	}
	if err := json.Unmarshal(out, res); err != nil || len(*res) != len(cases) {
		t.Fatalf("driver output %q: %v", out, err)
	}
}

// neverKept are options no kept addopts may hold, whatever the quoting around them.
var neverKept = []string{"--cov", "-n", "--numprocesses", "--dist", "-c", "--config-file", "--rootdir", "--confcutdir",
	"--basetemp", "--junitxml", "--collect-only", "--co", "--", "--help", "--version", "--debug", "--pdb", "--lf", "--report-log"}

// checkKept checks the invariants of one result: no error, the kept tokens survive pytest's
// splitting unchanged, none of them is an option that is always dropped or an ini override of
// addopts, and the neutralised list is within bounds.
func checkKept(t *testing.T, what string, r addoptsResult) {
	t.Helper()
	if r.Error != "" || !r.Roundtrip {
		t.Fatalf("%s: error %q, round trip %v", what, r.Error, r.Roundtrip)
	}
	for i, k := range r.Kept {
		name, _, _ := strings.Cut(k, "=")
		if slices.Contains(neverKept, name) || strings.HasPrefix(k, "--cov") ||
			(i > 0 && (r.Kept[i-1] == "-o" || r.Kept[i-1] == "--override-ini") && strings.HasPrefix(strings.TrimSpace(k), "addopts")) {
			t.Errorf("%s: kept %q (all kept %q)", what, k, r.Kept)
		}
	}
	if why := checkNeutralised(r.Neutralised); why != "" {
		t.Errorf("%s: %s", what, why)
	}
}

// TestAddoptsFilter judges addopts in each ini flavour, hostile ones included, with the tracer's
// own code.
func TestAddoptsFilter(t *testing.T) {
	tests := []struct {
		name, addopts, kind string
		kept, neutralised   []string
	}{
		{"missing plugins", "--cov=pkg -n 4 -p no_such_plugin --strict-markers", "collect",
			[]string{"--strict-markers"}, []string{"--cov", "-n", "-p no_such_plugin"}},
		{"kept options", "-ra -q -W error::UserWarning -m 'not slow' -k \"a and b\" --import-mode=importlib", "test",
			[]string{"-ra", "-q", "-W", "error::UserWarning", "-m", "not slow", "-k", "a and b", "--import-mode=importlib"}, []string{}},
		{"test paths", "tests -x", "collect", []string{"tests", "-x"}, []string{}},
		{"test paths in a test run", "tests -x", "test", []string{"-x"}, []string{}},
		{"cluster", "-vxn4", "test", []string{"-v", "-x"}, []string{"-n"}},
		{"optional value", "--cov tests --cov-report term -x", "collect", []string{"-x"}, []string{"--cov", "--cov-report"}},
		{"hostile", "--basetemp=/ --rootdir / -c other.ini --confcutdir=/ -o addopts=--cov --override-ini=required_plugins=x -o xfail_strict=true",
			"test", []string{"-o", "xfail_strict=true"},
			[]string{"--basetemp", "--rootdir", "-c", "--confcutdir", "-o addopts=--cov", "--override-ini required_plugins=x"}},
		{"end of options", "-x -- -p no:python", "test", []string{"-x"}, []string{"--"}},
		{"own plugin", "-p tests", "test", []string{"-p", "tests"}, []string{}},
		{"builtin plugin", "-p pytester -p no:warnings -p xdist.plugin", "test", []string{"-p", "pytester", "-p", "no:warnings"}, []string{"-p xdist.plugin"}},
		{"unbalanced quotes", "-x 'oops", "test", []string{}, []string{"addopts"}},
		{"huge", strings.Repeat("-x ", 30000), "test", []string{}, []string{"addopts"}},
		{"many unknown", strings.Repeat("--unknown-a --unknown-b ", 40), "test", nil, nil},
	}
	var cases [][3]string
	for _, flavour := range []string{"pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"} {
		for _, tc := range tests {
			cases = append(cases, [3]string{flavour, tc.addopts, tc.kind})
		}
	}
	res := judgeAddopts(t, cases)
	for i, r := range res {
		tc := tests[i%len(tests)]
		what := cases[i][0] + "/" + tc.name
		checkKept(t, what, r)
		if tc.kept == nil {
			continue
		}
		if !slices.Equal(r.Kept, tc.kept) || !slices.Equal(r.Neutralised, tc.neutralised) {
			t.Errorf("%s: kept %q neutralised %q, want %q %q", what, r.Kept, r.Neutralised, tc.kept, tc.neutralised)
		}
	}
}

// FuzzAddopts judges arbitrary addopts (one Python run per input: slow, but the parser is the
// tracer's own).
func FuzzAddopts(f *testing.F) {
	for _, s := range []string{"--cov=pkg -n 4 -p no_such_plugin --strict-markers", "-o 'addopts=--cov -n 2' -- x",
		"-p", "'\"", "--cov=\"a b\" -vvn auto", "-c=x -cx --rootdir= -W", "\x00", "-o", "-pno:x -p=foo -p ''"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addopts string) {
		if !utf8.ValidString(addopts) || strings.ContainsAny(addopts, "\x00\r\n") {
			return // not a value an ini file can hold
		}
		for _, r := range judgeAddopts(t, [][3]string{{"pyproject.toml", addopts, "test"}}) {
			checkKept(t, "fuzz", r)
		}
	})
}
