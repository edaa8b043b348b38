package execute_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// genRepo is a repository whose tests call add; clamp and Acc.push are called by none.
var genRepo = map[string]string{
	"calc/__init__.py": "from .ops import add\n",
	"calc/ops.py": "def add(a, b):\n    return a + b\n\n\n" +
		"def clamp(x, lo=0, hi=10):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n\n\n" +
		"class Acc:\n    def __init__(self):\n        self.total = 0\n\n    def push(self, n):\n        self.total += n\n        return self.total\n",
	"tests/test_ops.py": "from calc.ops import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
}

// scriptedGen answers calc/ops.py's find and generations as the sandbox's generator would
// (one forged input among them), and records its requests.
type scriptedGen struct{ reqs *[]sandbox.GenerateRequest }

func (g scriptedGen) Generate(_ context.Context, req sandbox.GenerateRequest) (*sandbox.Generation, error) {
	*g.reqs = append(*g.reqs, req)
	if req.Filename != execute.CheckoutPath+"/calc/ops.py" {
		return &sandbox.Generation{Status: schemas.StatusOK}, nil
	}
	in := func(call, source string, lines ...int) sandbox.GeneratedInput {
		return sandbox.GeneratedInput{Call: call, Source: source, Lines: lines}
	}
	switch req.Function {
	case "":
		return &sandbox.Generation{Status: schemas.StatusOK, Functions: []sandbox.FoundFunction{
			{QualName: "add", Kind: "function", Line: 1, EndLine: 2},
			{QualName: "clamp", Kind: "function", Line: 5, EndLine: 10},
			{QualName: "Acc.push", Kind: "method", Line: 17, EndLine: 19},
		}}, nil
	case "add":
		return &sandbox.Generation{Status: schemas.StatusOK, Lines: []int{2}, Attempts: 2,
			Inputs: []sandbox.GeneratedInput{in("add(1, 2)", "typed", 2), in("add(2, 3)", "typed", 2)}}, nil
	case "clamp":
		return &sandbox.Generation{Status: schemas.StatusOK, Lines: []int{6, 7, 8, 9, 10}, Attempts: 9,
			Inputs: []sandbox.GeneratedInput{in("clamp(-1)", "fuzzed", 6, 7), in("clamp(5, hi=3)", "fuzzed", 6, 8, 9),
				in("clamp(__import__('os').getpid())", "fuzzed", 10)}}, nil
	case "Acc.push":
		return &sandbox.Generation{Status: schemas.StatusOK, Lines: []int{18, 19}, Attempts: 1,
			Inputs: []sandbox.GeneratedInput{in("Acc().push(4)", "example", 18, 19)}}, nil
	}
	return &sandbox.Generation{Status: schemas.StatusOK, Reason: "no_candidates"}, nil
}

func (scriptedGen) Close() error { return nil }

// TestGeneratedInputsTraced: with functions: all, the inputs generated for a repository's
// functions become function-level items traced for real where they live, beside those of its
// tests' calls (a call its tests made is not made twice); a forged call is refused. A group of
// files (NoTests) runs no test; a repository without tests is not rejected.
func TestGeneratedInputsTraced(t *testing.T) {
	noTests := map[string]string{}
	for k, v := range genRepo {
		if !strings.HasPrefix(k, "tests/") {
			noTests[k] = v
		}
	}
	for _, tc := range []struct {
		name    string
		files   map[string]string
		noTests bool
		want    map[string]string // generated calls and their values
		tests   int
		reason  string
	}{
		{"tests", genRepo, false, map[string]string{"add(2, 3)": "5", "clamp(-1)": "0", "clamp(5, hi=3)": "3", "Acc().push(4)": "4"}, 1, ""},
		{"files", genRepo, true, map[string]string{"add(1, 2)": "3", "add(2, 3)": "5", "clamp(-1)": "0", "clamp(5, hi=3)": "3", "Acc().push(4)": "4"}, 0, "no_tests: a group of files, which has no tests"},
		{"no tests", noTests, false, map[string]string{"add(1, 2)": "3", "add(2, 3)": "5", "clamp(-1)": "0", "clamp(5, hi=3)": "3", "Acc().push(4)": "4"}, 0, "no_tests: no tests found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f, it, pool := repoFixture(t, "gen"+strings.ReplaceAll(tc.name, " ", ""), tc.files)
			it.Repo.FunctionsAll, it.Repo.NoTests = true, tc.noTests
			trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
			var reqs []sandbox.GenerateRequest
			var cfgs []sandbox.Config
			execute.SetGenStart(trc, func(_ context.Context, cfg sandbox.Config) (execute.GenSandbox, error) {
				cfgs = append(cfgs, cfg)
				return scriptedGen{&reqs}, nil
			})
			tr, err := trc.Trace(ctx, it, schemas.Spec{}.WithDefaults(), func() {})
			if err != nil || tr.Repo == nil {
				t.Fatalf("trace: %v, %s %s", err, tr.Status, tr.Detail)
			}
			rt := tr.Repo
			if rt.Run != tc.tests || len(rt.Traces) != tc.tests || rt.NoTests != tc.reason {
				t.Errorf("%d tests run, no tests %q", rt.Run, rt.NoTests)
			}
			got := map[string]execute.TracedItem{}
			for _, fi := range rt.Functions {
				if _, dup := got[fi.Item.Call]; dup {
					t.Errorf("%s twice", fi.Item.Call)
				}
				got[fi.Item.Call] = fi
			}
			for call, value := range tc.want {
				fi, ok := got[call]
				if !ok {
					t.Errorf("no item %s (functions %d, counts %v, gen %+v)", call, len(rt.Functions), rt.Counts, rt.Gen)
					continue
				}
				if fi.Status != schemas.StatusOK || fi.Trace == nil || fi.Value != value || fi.Item.InputSource == "" ||
					!strings.Contains(fi.Item.Key, "#gen:calc/ops.py:") || fi.Item.Module != "calc.ops" || fi.Item.Path != "calc/ops.py" {
					t.Errorf("%s: %s %s = %q, item %+v", call, fi.Status, fi.Detail, fi.Value, fi.Item)
				}
			}
			if tc.tests > 0 {
				if fi, ok := got["add(1, 2)"]; !ok || fi.Item.InputSource != schemas.InputSourceTestCall {
					t.Errorf("the tests' item add(1, 2): %+v", fi.Item)
				}
			}
			for call := range got {
				if strings.Contains(call, "__import__") {
					t.Errorf("a forged call was traced: %s", call)
				}
			}
			y := rt.Gen
			if y == nil || y.Modules != 2 || y.Found != 3 || y.Units != 3 || y.WithInput != 3 || y.Inputs != int64(len(tc.want)) ||
				y.Traced != int64(len(tc.want)) || y.Attempts != 12 {
				t.Errorf("yield %+v", y)
			}
			if rt.Counts[schemas.CountGenInputsRefused] != 1 {
				t.Errorf("counts %v", rt.Counts)
			}
			// The runs: one find per module, one generation per unit, in one sandbox seeing the
			// checkout where the functions' sandbox sees it.
			if len(reqs) != 5 || len(cfgs) != 1 || !slices.ContainsFunc(cfgs[0].Binds, func(b sandbox.Bind) bool { return b.At == execute.CheckoutPath }) {
				t.Errorf("%d requests, %d sandboxes (%+v)", len(reqs), len(cfgs), cfgs)
			}
			for _, r := range reqs {
				if r.Module == "" || r.Dir != execute.CheckoutPath || !strings.HasPrefix(r.Filename, execute.CheckoutPath+"/calc/") {
					t.Errorf("request %+v", r)
				}
			}
		})
	}
}

// TestGenerateInSandbox generates the inputs of genRepo's functions with the sandbox's own
// generator and traces them (it runs once the sandbox's generate is built).
func TestGenerateInSandbox(t *testing.T) {
	ctx := context.Background()
	f, it, pool := repoFixture(t, "genreal", map[string]string{
		"calc/__init__.py":  genRepo["calc/__init__.py"],
		"calc/ops.py":       genRepo["calc/ops.py"],
		"calc/broken.py":    "raise RuntimeError('no import')\n",
		"calc/needs.py":     "import no_such_module_anywhere\n\n\ndef f(x):\n    return x\n",
		"tests/test_ops.py": genRepo["tests/test_ops.py"],
	})
	it.Repo.FunctionsAll = true
	trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
	tr, err := trc.Trace(ctx, it, schemas.Spec{Sources: []schemas.SourceSpec{{Kind: "repository", URL: "x", Functions: schemas.Functions(schemas.FunctionsModeAll)}}}.WithDefaults(), func() {})
	if err != nil || tr.Repo == nil || tr.Repo.Gen == nil {
		t.Fatalf("trace: %v, %s %s", err, tr.Status, tr.Detail)
	}
	y := tr.Repo.Gen
	if y.Modules != 4 || y.Units < 3 || y.WithInput < 2 || y.Traced < 2 || y.Losses["missing_module"] != 1 || y.Losses["import_failed"] != 1 {
		t.Errorf("yield %+v", y)
	}
	for _, fi := range tr.Repo.Functions {
		if strings.Contains(fi.Item.Key, "#gen:") && (fi.Item.InputSource == "" || fi.Item.Func == "" || fi.Status != schemas.StatusOK && fi.Status != schemas.StatusException) {
			t.Errorf("generated item %+v: %s %s", fi.Item, fi.Status, fi.Detail)
		}
	}
}

// TestGeneratedRunIsTheUnit (an attacker's review): a module that tells the generator's run from
// the traced one (the generator's frames are on the stack of its import) binds clamp to its def
// for the generator and to another function for the traced run. The item's Func is clamp's def,
// so its row would show clamp's source beside the trace of another function (a benchmark's
// solution, say, past decontamination): the traced run of a generated item must call the def its
// item names, or it is no row.
func TestGeneratedRunIsTheUnit(t *testing.T) {
	ctx := context.Background()
	f, it, pool := repoFixture(t, "genswap", map[string]string{
		"calc/__init__.py": "",
		"calc/ops.py": "import sys\n\n\n" +
			"def _generating():\n    try:\n        fr = sys._getframe(1)\n    except BaseException:\n        return False\n" +
			"    while fr is not None:\n        if fr.f_code.co_name == '_gen_main':\n            return True\n        fr = fr.f_back\n    return False\n\n\n" +
			"def clamp(x, lo=0, hi=10):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n\n\n" +
			"def _stolen(x, lo=0, hi=10):\n    return sorted([x, lo, hi])[1]\n\n\n" +
			"if not _generating():\n    clamp = _stolen\n",
	})
	it.Repo.FunctionsAll, it.Repo.NoTests = true, true
	trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
	tr, err := trc.Trace(ctx, it, schemas.Spec{}.WithDefaults(), func() {})
	if err != nil || tr.Repo == nil || tr.Repo.Gen == nil {
		t.Fatalf("trace: %v, %s %s", err, tr.Status, tr.Detail)
	}
	clamps := 0
	for _, fi := range tr.Repo.Functions {
		if fi.Item.QualName != "clamp" {
			continue
		}
		clamps++
		if fi.Trace != nil || fi.Status != schemas.StatusInvalid {
			t.Errorf("%s traced as clamp's row: %s %s (Func %q)", fi.Item.Call, fi.Status, fi.Detail, fi.Item.Func)
		}
	}
	if clamps == 0 {
		t.Fatalf("the generator kept no input of clamp (gen %+v): the attack did not run", tr.Repo.Gen)
	}
	if tr.Repo.Counts[schemas.CountGenInputsRefused] < int64(clamps) {
		t.Errorf("counts %v", tr.Repo.Counts)
	}
}

// inflatedGen reports calc/ops.py's clamp with one input said to reach all of clamp's lines.
type inflatedGen struct{}

func (inflatedGen) Generate(_ context.Context, req sandbox.GenerateRequest) (*sandbox.Generation, error) {
	if req.Filename != execute.CheckoutPath+"/calc/ops.py" {
		return &sandbox.Generation{Status: schemas.StatusOK}, nil
	}
	if req.Function == "" {
		return &sandbox.Generation{Status: schemas.StatusOK, Functions: []sandbox.FoundFunction{
			{QualName: "clamp", Kind: "function", Line: 5, EndLine: 10}}}, nil
	}
	return &sandbox.Generation{Status: schemas.StatusOK, Lines: []int{6, 7, 8, 9, 10}, Attempts: 1,
		Inputs: []sandbox.GeneratedInput{{Call: "clamp(-1)", Source: "typed", Lines: []int{6, 7, 8, 9, 10}}}}, nil
}

func (inflatedGen) Close() error { return nil }

// TestGeneratedCoverageIsTraced (an attacker's review): the lines a generation run says its
// inputs reach are its to forge; the yield report's coverage counts those its items' traced runs
// reached. clamp(-1) runs lines 6 and 7 of clamp's 5 executable lines: 40%, not the 100% claimed.
func TestGeneratedCoverageIsTraced(t *testing.T) {
	ctx := context.Background()
	f, it, pool := repoFixture(t, "gencov", map[string]string{"calc/__init__.py": "", "calc/ops.py": genRepo["calc/ops.py"]})
	it.Repo.FunctionsAll, it.Repo.NoTests = true, true
	trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
	execute.SetGenStart(trc, func(context.Context, sandbox.Config) (execute.GenSandbox, error) { return inflatedGen{}, nil })
	tr, err := trc.Trace(ctx, it, schemas.Spec{}.WithDefaults(), func() {})
	if err != nil || tr.Repo == nil || tr.Repo.Gen == nil {
		t.Fatalf("trace: %v, %s %s", err, tr.Status, tr.Detail)
	}
	var want [schemas.CoverageBuckets]int64
	want[4] = 1
	if y := tr.Repo.Gen; y.Traced != 1 || y.Coverage != want {
		t.Errorf("yield %+v, coverage want %v", y, want)
	}
}
