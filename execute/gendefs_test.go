package execute

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/pylex"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

func TestUnitDefs(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		want       map[string][]pylex.Span
	}{
		{"function", "import os\n\ndef f(x):\n    return x\n\n# after\n", map[string][]pylex.Span{"f": {{First: 3, Last: 4}}}},
		{"one line", "def f(x): return x\ndef g(): pass\n", map[string][]pylex.Span{"f": {{First: 1, Last: 1}}, "g": {{First: 2, Last: 2}}}},
		{"decorated", "@a\n@b(1,\n   2)\ndef f(x):\n    return x\n", map[string][]pylex.Span{"f": {{First: 1, Last: 5}}}},
		{"async", "async def f():\n    pass\n", map[string][]pylex.Span{"f": {{First: 1, Last: 2}}}},
		{"docstring at column 0", "def f():\n    '''a\nb\n'''\n    return 1\nx = 1\n", map[string][]pylex.Span{"f": {{First: 1, Last: 5}}}},
		{"method", "class C(B):\n    x = 1\n\n    @staticmethod\n    def m(y):\n        return y\n\n    def n(self):\n        def inner():\n            pass\n        return 1\n",
			map[string][]pylex.Span{"C.m": {{First: 4, Last: 6}}, "C.n": {{First: 8, Last: 11}}}},
		{"in blocks", "try:\n    def f():\n        return 1\nexcept ImportError:\n    def f():\n        return 2\nif X:\n    class C:\n        if Y:\n            def m(self):\n                pass\n",
			map[string][]pylex.Span{"f": {{First: 2, Last: 3}, {First: 5, Last: 6}}, "C.m": {{First: 10, Last: 11}}}},
		{"not units", "for i in x:\n    def f():\n        pass\nclass A:\n    class B:\n        def m(self):\n            pass\ndef g():\n    def h():\n        pass\n",
			map[string][]pylex.Span{"g": {{First: 8, Last: 10}}}},
		{"crlf", "def f():\r\n    return 1\r\n", map[string][]pylex.Span{"f": {{First: 1, Last: 2}}}},
		// A lone CR is a line break to Python, not to funcLines: no unit at all.
		{"lone cr", "def f():\r    return 1\rdef g():\n    pass\n", map[string][]pylex.Span{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unitDefs(tc.code); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("unitDefs = %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzUnitDefs: any text, no panic, spans within the text's lines.
func FuzzUnitDefs(f *testing.F) {
	f.Add("def f():\n    pass\n")
	f.Add("class C:\n    @d\n    def m(self): pass\n")
	f.Add("if x:\n  def f(): '''\n'''\n")
	f.Fuzz(func(t *testing.T, code string) {
		lines := strings.Count(code, "\n") + 1
		for q, spans := range unitDefs(code) {
			for _, s := range spans {
				if s.First < 1 || s.Last < s.First || s.Last > lines || q == "" {
					t.Fatalf("%q: %v", q, s)
				}
			}
		}
	})
}

// TestGenerationForgedFuncLines (an attacker's review): a find run that names a unit with lines
// that are not its def (another function's that mentions it, the whole module, a nested def, a
// def the module replaces) gives no item: those lines would be the item's Func, what
// decontamination, deduplication and the split read.
func TestGenerationForgedFuncLines(t *testing.T) {
	dir := genFixture(t)
	// pkg/mod.py: "import os\n\n\ndef f(x):\n..." f at 4..7, g (async) 10..11, C 14..16, C.m 15..16.
	f := &fakeGen{
		find: map[string]*sandbox.Generation{"pkg/mod.py": {Status: schemas.StatusOK, Functions: []sandbox.FoundFunction{
			{QualName: "f", Kind: "function", Line: 1, EndLine: 16},  // the whole module: it holds "def f"
			{QualName: "g", Kind: "function", Line: 4, EndLine: 7},   // f's lines for g: "def g" nowhere in them
			{QualName: "C.m", Kind: "method", Line: 14, EndLine: 16}, // the class, not the method
			{QualName: "m", Kind: "function", Line: 15, EndLine: 16}, // a method as a function
			{QualName: "C.f", Kind: "method", Line: 4, EndLine: 7},   // a function as a method
			{QualName: "f", Kind: "function", Line: 4, EndLine: 6},   // f cut short
		}}},
		gen: map[string]*sandbox.Generation{
			"pkg/mod.py:f":   {Status: schemas.StatusOK, Lines: []int{5}, Inputs: []sandbox.GeneratedInput{{Call: "f(1)", Source: "typed", Lines: []int{5}}}},
			"pkg/mod.py:C.m": {Status: schemas.StatusOK, Lines: []int{16}, Inputs: []sandbox.GeneratedInput{{Call: "C().m(1)", Source: "typed", Lines: []int{16}}}},
			"pkg/mod.py:m":   {Status: schemas.StatusOK, Lines: []int{16}, Inputs: []sandbox.GeneratedInput{{Call: "m(1)", Source: "typed", Lines: []int{16}}}},
		},
	}
	g := newTestGeneration(dir, f, schemas.InputsSpec{})
	if err := g.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, it := range g.items {
		if it.Path == "pkg/mod.py" {
			t.Errorf("an item of forged lines: %s with Func %q", it.Call, it.Func)
		}
	}
	if n := g.y.Losses["invalid_report"]; n < 6 {
		t.Errorf("%d invalid reports, want 6 or more (losses %v)", n, g.y.Losses)
	}
}

// TestGenerationSourceClaims (an attacker's review): the input source a run gives its inputs is a
// column of their rows: a module without doctests cannot claim one, nor a run no language model
// proposed seeds to claim llm.
func TestGenerationSourceClaims(t *testing.T) {
	gen := map[string]*sandbox.Generation{
		"pkg/mod.py:f": {Status: schemas.StatusOK, Lines: []int{5}, Inputs: []sandbox.GeneratedInput{
			{Call: "f(1)", Source: "llm", Lines: []int{5}}, {Call: "f(2)", Source: "doctest", Lines: []int{5}},
			{Call: "f(3)", Source: "typed", Lines: []int{5}}}},
	}
	for _, tc := range []struct {
		name  string
		llm   bool
		want  []string
		bySrc map[string]int64
	}{
		{"no model", false, []string{"f(3)"}, map[string]int64{"typed": 1}},
		{"a model", true, []string{"f(1)", "f(3)"}, map[string]int64{"llm": 1, "typed": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeGen{find: map[string]*sandbox.Generation{"pkg/mod.py": modFind}, gen: gen}
			g := newTestGeneration(genFixture(t), f, schemas.InputsSpec{})
			if tc.llm {
				g.llm = fakeProposer(func(genUnit) ([]string, error) { return []string{"1"}, nil })
			}
			if err := g.run(context.Background()); err != nil {
				t.Fatal(err)
			}
			var calls []string
			for _, it := range g.items {
				calls = append(calls, it.Call)
			}
			if !reflect.DeepEqual(calls, tc.want) || !reflect.DeepEqual(g.y.BySource, tc.bySrc) {
				t.Errorf("items %q by source %v, want %q %v", calls, g.y.BySource, tc.want, tc.bySrc)
			}
		})
	}
	// A module with a doctest may claim one.
	if !sourceClaimable(schemas.InputSourceDoctest, "def f(x):\n    \"\"\"\n    >>> f(2)\n    \"\"\"\n", nil) {
		t.Error("a doctest refused")
	}
}
