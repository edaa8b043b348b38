package execute

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// fakeGen is a generation sandbox whose runs answer from a script: a module's find by its
// filename (its file relative to the checkout for a module run where it lives), a function's
// generation by filename and function.
type fakeGen struct {
	find  map[string]*sandbox.Generation
	gen   map[string]*sandbox.Generation // by "rel:qual"
	fail  map[string]error               // runs whose sandbox fails, by "rel" or "rel:qual"
	reqs  *[]sandbox.GenerateRequest
	tick  func() // called at every run (a clock advancing)
	close *int
}

func (f *fakeGen) Generate(_ context.Context, req sandbox.GenerateRequest) (*sandbox.Generation, error) {
	*f.reqs = append(*f.reqs, req)
	if f.tick != nil {
		f.tick()
	}
	rel := strings.TrimPrefix(req.Filename, CheckoutPath+"/")
	k := rel
	if req.Function != "" {
		k += ":" + req.Function
	}
	if err := f.fail[k]; err != nil {
		return nil, err
	}
	if req.Function == "" {
		if g, ok := f.find[rel]; ok {
			return g, nil
		}
		return &sandbox.Generation{Status: schemas.StatusOK}, nil
	}
	if g, ok := f.gen[k]; ok {
		c := *g
		return &c, nil
	}
	return &sandbox.Generation{Status: schemas.StatusOK, Reason: "no_candidates"}, nil
}

func (f *fakeGen) Close() error { *f.close++; return nil }

// genFixture is a checkout with a package, tests, docs and files that are no modules.
func genFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"pkg/__init__.py":     "",
		"pkg/mod.py":          "import os\n\n\ndef f(x):\n    if x > 1:\n        return x\n    return -x\n\n\nasync def g():\n    pass\n\n\nclass C:\n    def m(self, y=1):\n        return y\n",
		"pkg/mod_test.py":     "def test(): pass\n",
		"pkg/test_x.py":       "def test(): pass\n",
		"pkg/conftest.py":     "",
		"tests/test_a.py":     "def test(): pass\n",
		"test/helpers.py":     "def h(): pass\n",
		"docs/conf.py":        "x = 1\n",
		"examples/ex.py":      "def e(): pass\n",
		".hidden/h.py":        "def h(): pass\n",
		"setup.py":            "from setuptools import setup\n",
		"my-script.py":        "def s(a):\n    return a\n",
		"pkg/notes.txt":       "not python\n",
		"pkg/sub/__init__.py": "def top():\n    return 1\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "pkg/mod.py"), filepath.Join(dir, "pkg/link.py")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestListModules(t *testing.T) {
	dir := genFixture(t)
	mods, more, err := listModules(context.Background(), dir, nil)
	if err != nil || more != 0 {
		t.Fatal(err, more)
	}
	want := []genModule{{"my-script.py", ""}, {"pkg/__init__.py", "pkg"}, {"pkg/mod.py", "pkg.mod"}, {"pkg/sub/__init__.py", "pkg.sub"}}
	if !reflect.DeepEqual(mods, want) {
		t.Errorf("modules %v, want %v", mods, want)
	}
	// A src layout: names under the root.
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "src/lib"), 0o755)
	os.WriteFile(filepath.Join(src, "src/lib/a.py"), nil, 0o644)
	if mods, _, _ := listModules(context.Background(), src, []string{"src"}); len(mods) != 1 || mods[0].name != "lib.a" {
		t.Errorf("src layout: %v", mods)
	}
	// Capped: the rest counted.
	many := t.TempDir()
	for i := range schemas.MaxGenModules + 3 {
		os.WriteFile(filepath.Join(many, fmt.Sprintf("m%04d.py", i)), nil, 0o644)
	}
	if mods, more, _ := listModules(context.Background(), many, nil); len(mods) != schemas.MaxGenModules || more != 3 {
		t.Errorf("cap: %d modules, %d more", len(mods), more)
	}
	// A name with a line break is left out.
	odd := t.TempDir()
	os.WriteFile(filepath.Join(odd, "a\nb.py"), nil, 0o644)
	if mods, _, _ := listModules(context.Background(), odd, nil); len(mods) != 0 {
		t.Errorf("odd names: %v", mods)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := listModules(ctx, dir, nil); err == nil {
		t.Error("a cancelled walk gave no error")
	}
}

// newTestGeneration is a generation over dir with sandbox f.
func newTestGeneration(dir string, f *fakeGen, in schemas.InputsSpec) *generation {
	it := crawl.Item{Key: "dir:/r@h", Path: "/r", Repo: &crawl.RepoTarget{Resolved: crawl.Resolved{ContentHash: "h"}, FunctionsAll: true}}
	if f.reqs == nil {
		f.reqs = &[]sandbox.GenerateRequest{}
	}
	if f.close == nil {
		f.close = new(int)
	}
	return &generation{it: it, dir: dir, at: placeOf(dir, nil), in: in.WithDefaults(), seed: 7,
		lim:   sandbox.Limits{WallTime: 10 * time.Second, Memory: 1 << 30},
		start: func(context.Context) (genSandbox, error) { return f, nil }, deps: func(rel string) string { return "deps:" + rel },
		seen: map[string]bool{}, counts: schemas.Counts{}, alive: func() {}, begin: func(string, time.Duration) {},
		now: time.Now, budget: time.Hour}
}

// modFind is what a find of pkg/mod.py reports: f and C.m are units, g is async, and the rest is
// forged.
var modFind = &sandbox.Generation{Status: schemas.StatusOK, Functions: []sandbox.FoundFunction{
	{QualName: "f", Kind: "function", Line: 4, EndLine: 7},
	{QualName: "g", Kind: "function", Line: 10, EndLine: 11, Skip: "async"},
	{QualName: "C.m", Kind: "method", Line: 15, EndLine: 16},
	{QualName: "f", Kind: "function", Line: 4, EndLine: 7},                            // twice
	{QualName: "os.system('x')", Kind: "function", Line: 1, EndLine: 1},               // not a name
	{QualName: "h", Kind: "function", Line: 1, EndLine: 999},                          // past the file
	{QualName: "k", Kind: "function", Line: 1, EndLine: 1},                            // not its def
	{QualName: "z", Kind: "function", Line: 4, EndLine: 7, Skip: "rm -rf / invented"}, // a reason outside the vocabulary
}}

func TestGeneration(t *testing.T) {
	dir := genFixture(t)
	f := &fakeGen{
		find: map[string]*sandbox.Generation{
			"pkg/mod.py":          modFind,
			"pkg/__init__.py":     {Status: schemas.StatusException, MissingModule: "numpy"},
			"pkg/sub/__init__.py": {Status: schemas.StatusOK, Functions: []sandbox.FoundFunction{{QualName: "top", Kind: "function", Line: 1, EndLine: 2}}},
		},
		gen: map[string]*sandbox.Generation{
			"pkg/mod.py:f": {Status: schemas.StatusOK, Attempts: 1_000_000, Lines: []int{5, 6, 7, 9999}, Inputs: []sandbox.GeneratedInput{
				{Call: "f(2)", Source: "typed", Lines: []int{5, 6}},
				{Call: "f(__import__('os').system('x'))", Source: "fuzzed"},
				{Call: "g(1)", Source: "fuzzed"},
				{Call: "f(1); import os", Source: "fuzzed"},
				{Call: "f(2)", Source: "fuzzed"},
				{Call: "f(3)", Source: "corpus"},
				{Call: "f(-1)", Source: "fuzzed", Lines: []int{5, 7, 9999, 1}},
			}},
			"pkg/mod.py:C.m": {Status: schemas.StatusOK, Attempts: 3, Lines: []int{16}, Inputs: []sandbox.GeneratedInput{
				{Call: "C().m(1)", Source: "example", Lines: []int{16}},
				{Call: "C.m(C(), 2)", Source: "fuzzed", Lines: []int{16}},
				{Call: "D().m(1)", Source: "fuzzed"},
				{Call: "C(open('x')).m()", Source: "fuzzed"},
				{Call: "C(1, 'a').m(y=[1, {'k': (2,)}])", Source: "typed", Lines: []int{16}},
			}},
			"pkg/sub/__init__.py:top": {Status: schemas.StatusTimeout},
		},
		fail: map[string]error{"my-script.py": errors.New("the sandbox died")},
	}
	g := newTestGeneration(dir, f, schemas.InputsSpec{PerFunction: 16})
	g.seen["pkg/mod.py\x00f(-1)"] = true // a call the tests made
	alive := 0
	steps := map[string]time.Duration{}
	g.alive = func() { alive++ }
	g.begin = func(step string, d time.Duration) { steps[step] = d }
	if err := g.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A heartbeat after every run; each run a step of the watchdog within its limit and slack.
	if alive != len(*f.reqs) || steps["generating inputs for pkg.mod.C.m"] != 5*time.Second+schemas.GenSlack ||
		steps["finding the functions of \"my-script.py\""] != schemas.GenFindTimeout+schemas.GenSlack {
		t.Errorf("%d heartbeats for %d runs, steps %v", alive, len(*f.reqs), steps)
	}
	y := g.y
	want := schemas.GenYield{Modules: 4, Found: 9, Units: 3, WithInput: 2, Inputs: 3, Attempts: 200 + 3, // f's attempts capped at inputs.attempts
		BySource: map[string]int64{"typed": 2, "example": 1},
		Losses: map[string]int64{"sandbox_error": 1, "missing_module": 1, "async": 1, "invalid_report": 4, "other": 1,
			"timeout": 1}}
	// f: lines 5, 6, 7 executable, its kept input reached 5 and 6 (f(-1) is the tests'): 66%.
	want.Coverage[6]++
	// C.m: line 16 of 16: 100%.
	want.Coverage[9]++
	if !reflect.DeepEqual(*y, want) {
		t.Errorf("yield\n%+v\nwant\n%+v", *y, want)
	}
	var calls []string
	for _, it := range g.items {
		calls = append(calls, it.Call)
	}
	if wantCalls := []string{"f(2)", "C().m(1)", "C(1, 'a').m(y=[1, {'k': (2,)}])"}; !slices.Equal(calls, wantCalls) {
		t.Errorf("items %q, want %q", calls, wantCalls)
	}
	if g.counts[schemas.CountGenInputsRefused] != 5+3 || g.counts[schemas.CountGenTestCallRepeat] != 1 {
		t.Errorf("counts %v", g.counts)
	}
	it := g.items[0]
	wantItem := crawl.Item{Key: "dir:/r@h#gen:pkg/mod.py:f:0", Path: "pkg/mod.py", SourceID: "gen:f", Code: it.Code, Filename: "mod.py",
		Call: "f(2)", QualName: "f", Func: "def f(x):\n    if x > 1:\n        return x\n    return -x", Module: "pkg.mod", RepoURL: "/r",
		Commit: "h", Deps: "deps:pkg/mod.py", InputSource: "typed"}
	if !reflect.DeepEqual(it, wantItem) || !strings.HasPrefix(it.Code, "import os\n") {
		t.Errorf("item\n%+v\nwant\n%+v", it, wantItem)
	}
	if m := g.items[1]; m.Func != "    def m(self, y=1):\n        return y" || m.QualName != "C.m" || m.Key != "dir:/r@h#gen:pkg/mod.py:C.m:0" {
		t.Errorf("method item %+v", m)
	}
	// The requests: modules where they live, the standalone file as itself; the functions'
	// runs with the inputs' limits and a seed of their own.
	var fReq *sandbox.GenerateRequest
	for i, r := range *f.reqs {
		if r.Function == "" && r.Limits.WallTime != schemas.GenFindTimeout {
			t.Errorf("find of %s with wall time %v", r.Filename, r.Limits.WallTime)
		}
		if r.Limits.Memory != 1<<30 {
			t.Errorf("run of %s without the item's memory limit", r.Filename)
		}
		if r.Function == "f" {
			fReq = &(*f.reqs)[i]
		}
		if r.Filename == "my-script.py" && (r.Module != "" || r.Code != "def s(a):\n    return a\n") {
			t.Errorf("standalone request %+v", r)
		}
	}
	if fReq == nil || fReq.Module != "pkg.mod" || fReq.Dir != CheckoutPath || fReq.Filename != CheckoutPath+"/pkg/mod.py" ||
		fReq.PerFunction != 16 || fReq.Attempts != 200 || fReq.Limits.WallTime != 5*time.Second || fReq.Limits.CPUTime != 5*time.Second ||
		fReq.Seed != genSeed(7, "dir:/r@h", "pkg/mod.py", "f") || fReq.Seed < 0 {
		t.Errorf("f's request %+v", fReq)
	}
	// The sandbox that failed was closed and another started; the last is closed at the end.
	if *f.close != 2 {
		t.Errorf("%d sandboxes closed, want 2", *f.close)
	}
}

// TestGenerationPerFunction: only the first PerFunction inputs a run reports are read.
func TestGenerationPerFunction(t *testing.T) {
	dir := genFixture(t)
	var inputs []sandbox.GeneratedInput
	for i := range 100 {
		inputs = append(inputs, sandbox.GeneratedInput{Call: fmt.Sprintf("f(%d)", i), Source: "fuzzed"})
	}
	f := &fakeGen{find: map[string]*sandbox.Generation{"pkg/mod.py": modFind},
		gen: map[string]*sandbox.Generation{"pkg/mod.py:f": {Status: schemas.StatusOK, Inputs: inputs}}}
	g := newTestGeneration(dir, f, schemas.InputsSpec{PerFunction: 2})
	if err := g.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(g.items) != 2 || g.y.Inputs != 2 || g.y.Coverage != [10]int64{} {
		t.Errorf("%d items, yield %+v", len(g.items), g.y)
	}
}

// TestGenerationBreaks: a sandbox failing maxFunctionBreaks runs in a row is given up, the rest
// counted; one that has no generate (the stub) at once; the context's error is returned.
func TestGenerationBreaks(t *testing.T) {
	dir := genFixture(t)
	for _, tc := range []struct {
		name    string
		err     error
		runs    int
		sandbox int64
	}{
		{"broken", errors.New("died"), maxFunctionBreaks, 4},
	} {
		fail := map[string]error{}
		for _, m := range []string{"my-script.py", "pkg/__init__.py", "pkg/mod.py", "pkg/sub/__init__.py"} {
			fail[m] = tc.err
		}
		f := &fakeGen{fail: fail}
		g := newTestGeneration(dir, f, schemas.InputsSpec{})
		if err := g.run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(*f.reqs) != tc.runs || g.y.Losses["sandbox_error"] != tc.sandbox || g.y.Modules != int64(tc.runs) {
			t.Errorf("%s: %d runs, yield %+v", tc.name, len(*f.reqs), g.y)
		}
	}
	// A sandbox that does not start: everything counted.
	f := &fakeGen{}
	g := newTestGeneration(dir, f, schemas.InputsSpec{})
	g.start = func(context.Context) (genSandbox, error) { return nil, errors.New("no") }
	if err := g.run(context.Background()); err != nil || g.y.Losses["sandbox_error"] != 4 {
		t.Errorf("no sandbox: %v, %+v", err, g.y)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f = &fakeGen{fail: map[string]error{"my-script.py": context.Canceled}, tick: cancel}
	if err := newTestGeneration(dir, f, schemas.InputsSpec{}).run(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestGenerationBudget: past the repository's budget, modules and units are counted, not run;
// a run near its end gets what is left (at least the least timeout).
func TestGenerationBudget(t *testing.T) {
	dir := genFixture(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &fakeGen{find: map[string]*sandbox.Generation{"pkg/mod.py": modFind}, tick: func() { now = now.Add(time.Minute) }}
	g := newTestGeneration(dir, f, schemas.InputsSpec{Timeout: mustDuration(t, "10m")})
	g.now = func() time.Time { return now }
	g.budget = 3*time.Minute + 30*time.Second
	if err := g.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Runs: three finds (my-script, pkg, pkg.mod), f's generation at 3 min (30 s left); then C.m and
	// pkg.sub are past the budget.
	if len(*f.reqs) != 4 || g.y.Losses["repository_budget"] != 2 {
		t.Fatalf("%d runs, yield %+v", len(*f.reqs), g.y)
	}
	if last := (*f.reqs)[3]; last.Function != "f" || last.Limits.WallTime != 30*time.Second {
		t.Errorf("last run %s with %v", last.Function, last.Limits.WallTime)
	}
}

// TestGenerationCaps: units past MaxGenUnits and items past MaxGenItems are counted as
// repository_cap.
func TestGenerationCaps(t *testing.T) {
	dir := t.TempDir()
	var src strings.Builder
	var found []sandbox.FoundFunction
	for i := range schemas.MaxGenUnits + 5 {
		fmt.Fprintf(&src, "def f%d():\n    pass\n", i)
		found = append(found, sandbox.FoundFunction{QualName: fmt.Sprintf("f%d", i), Kind: "function", Line: 2*i + 1, EndLine: 2*i + 2})
	}
	os.WriteFile(filepath.Join(dir, "big.py"), []byte(src.String()), 0o644)
	gen := map[string]*sandbox.Generation{}
	for i := range schemas.MaxGenUnits {
		q := fmt.Sprintf("f%d", i)
		gen["big.py:"+q] = &sandbox.Generation{Status: schemas.StatusOK, Inputs: []sandbox.GeneratedInput{{Call: q + "()", Source: "example"}, {Call: q + "( )", Source: "example"}}}
	}
	f := &fakeGen{find: map[string]*sandbox.Generation{"big.py": {Status: schemas.StatusOK, Functions: found}}, gen: gen}
	g := newTestGeneration(dir, f, schemas.InputsSpec{})
	g.maxCode = 1 << 30
	if err := g.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 2005 found: 5 past the units' cap at the find; 2000 units, 1000 with two items (2000),
	// the other 1000 past the items' cap.
	if g.y.Found != schemas.MaxGenUnits || g.y.Losses["repository_cap"] != 5+1000 || len(g.items) != schemas.MaxGenItems ||
		g.y.WithInput != 1000 || g.y.Units != schemas.MaxGenUnits {
		t.Errorf("%d items, yield found %d units %d with %d losses %v", len(g.items), g.y.Found, g.y.Units, g.y.WithInput, g.y.Losses)
	}
}

// TestGenerationLLM: the proposer's argument lists are the run's seeds; its failure is counted,
// the generation goes on.
func TestGenerationLLM(t *testing.T) {
	dir := genFixture(t)
	f := &fakeGen{find: map[string]*sandbox.Generation{"pkg/mod.py": modFind}}
	g := newTestGeneration(dir, f, schemas.InputsSpec{})
	g.llm = fakeProposer(func(u genUnit) ([]string, error) {
		if u.fn.QualName == "C.m" {
			return nil, errors.New("down")
		}
		return []string{"1", "x=2"}, nil
	})
	if err := g.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]string{}
	for _, r := range *f.reqs {
		if r.Function != "" {
			seeds[r.Function] = r.Seeds
		}
	}
	if !slices.Equal(seeds["f"], []string{"1", "x=2"}) || seeds["C.m"] != nil || g.y.Losses["llm_error"] != 1 || g.counts[schemas.CountGenLLMErrors] != 1 {
		t.Errorf("seeds %v, yield %+v", seeds, g.y)
	}
}

type fakeProposer func(genUnit) ([]string, error)

func (p fakeProposer) Propose(_ context.Context, u genUnit) ([]string, error) { return p(u) }

func mustDuration(t *testing.T, s string) schemas.Duration {
	t.Helper()
	d, err := schemas.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestGenSeed: the same spec, item, module and function give the same seed; any other one
// another, never negative.
func TestGenSeed(t *testing.T) {
	a := genSeed(1, "k", "m.py", "f")
	if a != genSeed(1, "k", "m.py", "f") || a < 0 {
		t.Fatal("not deterministic")
	}
	for _, b := range []int64{genSeed(2, "k", "m.py", "f"), genSeed(1, "k2", "m.py", "f"), genSeed(1, "k", "n.py", "f"),
		genSeed(1, "k", "m.py", "g"), genSeed(1, "k", "m.pyf", ""), genSeed(1, "km.py", "", "f")} {
		if b == a || b < 0 {
			t.Errorf("seed %d", b)
		}
	}
}

// TestValidCall: a generated call is a call of its unit with literal arguments, or refused.
func TestValidCall(t *testing.T) {
	for _, tc := range []struct {
		call, qual string
		ok         bool
	}{
		{"f()", "f", true},
		{"f(1, 'a')", "f", true},
		{"f(1,)", "f", true},
		{"f(xs=[1, 2], k={'a': (1,)})", "f", true},
		{"f(1, b=2)", "f", true},
		{"f('a)', \"b(\", '''c\\'''')", "f", true},
		{"f(b'\\x00', -1.5e3, 2j, None, True, {1, 2}, set())", "f", true},
		{"C().m(2)", "C.m", true},
		{"C(1, 'x').m(2)", "C.m", true},
		{"C.m(1)", "C.m", true},
		{"C.m()", "C.m", true},
		// Attacks and other callees.
		{"f(__import__('os').system('x'))", "f", false},
		{"__import__('os').system('x')", "f", false},
		{"f(1) or __import__('os')", "f", false},
		{"f(1), g(2)", "f", false},
		{"f(1)(2)", "f", false},
		{"f(1).x", "f", false},
		{"f(1); import os", "f", false},
		{"f(1)\nimport os", "f", false},
		{"f(1 # )\n, __import__('os'))", "f", false},
		{"f(x)", "f", false},
		{"f(open('x'))", "f", false},
		{"f(*[1])", "f", false},
		{"f(**{'a': 1})", "f", false},
		{"f(a=1, 2)", "f", false},
		{"f(a=1, a=2)", "f", false},
		{"f(lambda: 1)", "f", false},
		{"f(1 if 1 else 2)", "f", false},
		{"f([x for x in ()])", "f", false},
		{"f(f'{x}')", "f", false},
		{"f('a' + 'b')", "f", false},
		{"f(,)", "f", false},
		{"f(1,,2)", "f", false},
		{"f('unclosed)", "f", false},
		{"f(1))", "f", false},
		{"f(1", "f", false},
		{"f(]", "f", false},
		{"ff(1)", "f", false},
		{"g(1)", "f", false},
		{" f(1)", "f", false},
		{"f (1)", "f", false},
		{"f(1) ", "f", false},
		{"f(class=1)", "f", false},
		{"f(\\\n1)", "f", false},
		{"D().m(1)", "C.m", false},
		{"C(open('x')).m()", "C.m", false},
		{"C().n(1)", "C.m", false},
		{"C().m(1).m(2)", "C.m", false},
		{"C.m.__globals__['os'].system('x')", "C.m", false},
		{"m(1)", "C.m", false},
		{"C(1)(2).m()", "C.m", false},
		{"f(" + strings.Repeat("[", 200) + strings.Repeat("]", 200) + ")", "f", false},
		{"f(" + strings.Repeat("1", maxCallBytes) + ")", "f", false},
	} {
		if got := validCall(tc.call, tc.qual); got != tc.ok {
			t.Errorf("validCall(%q, %q) = %v, want %v", tc.call, tc.qual, got, tc.ok)
		}
	}
}

func FuzzValidCall(f *testing.F) {
	for _, s := range []string{"f(1)", "C().m('a')", "C.m(x=[1])", "f('a)', b=(1,))", "f(__import__('os'))", "f('''a''')"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, call string) {
		for _, q := range []string{"f", "C.m"} {
			if !validCall(call, q) {
				continue
			}
			// Accepted: no line break, a call of q (or its class's instance) ending in ")".
			if strings.ContainsAny(call, "\n\r") || !strings.HasSuffix(call, ")") ||
				!(strings.HasPrefix(call, q+"(") || q == "C.m" && strings.HasPrefix(call, "C(")) {
				t.Errorf("validCall(%q, %q) accepted", call, q)
			}
		}
		_ = validArgList(call)
	})
}

// TestGenerationCodeBytes: items past the code the repository's items may hold are counted as
// code_bytes.
func TestGenerationCodeBytes(t *testing.T) {
	dir := genFixture(t)
	f := &fakeGen{find: map[string]*sandbox.Generation{"pkg/mod.py": modFind},
		gen: map[string]*sandbox.Generation{
			"pkg/mod.py:f":   {Status: schemas.StatusOK, Inputs: []sandbox.GeneratedInput{{Call: "f(1)", Source: "typed"}, {Call: "f(2)", Source: "typed"}}},
			"pkg/mod.py:C.m": {Status: schemas.StatusOK, Inputs: []sandbox.GeneratedInput{{Call: "C().m()", Source: "typed"}}},
		}}
	g := newTestGeneration(dir, f, schemas.InputsSpec{})
	code, _ := os.ReadFile(filepath.Join(dir, "pkg/mod.py"))
	g.maxCode = 2*len(code) + 1
	if err := g.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(g.items) != 2 || g.y.Losses["code_bytes"] != 1 || g.y.WithInput != 1 {
		t.Errorf("%d items, yield %+v", len(g.items), g.y)
	}
}
