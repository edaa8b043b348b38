package debugger

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/internal/pylex"
	"github.com/ndtrace/ndtrace/schemas"
)

const defsModule = `import re
from collections import defaultdict
PREV, NEXT = 0, 1
UNUSED = 5
WIDTH = PREV + 10
class Box:
    """Doc."""
    size = WIDTH
    def get(self):
        return self.size
def f(s):
    d = defaultdict(int)
    return re.sub("a", "b", s), PREV, Box, d
`

// TestModuleContext checks the function-level CODE context: the visited block with the imports,
// constants and class headers it names (the class's attributes, not its methods), transitively
// (WIDTH through Box.size), in source order; within a small budget the ones that do not fit are
// counted, and a budget < 0 gives the context without definitions.
func TestModuleContext(t *testing.T) {
	blocks := []schemas.Block{{File: "m.py", Start: 1, End: 1}, {File: "m.py", Start: 2, End: 2}, {File: "m.py", Start: 3, End: 3},
		{File: "m.py", Start: 4, End: 4}, {File: "m.py", Start: 5, End: 5}, {File: "m.py", Start: 6, End: 10}, {File: "m.py", Start: 11, End: 13}}
	visited := map[int]bool{12: true, 13: true}
	wrapper := MainWrapper(`f("a")`)
	for _, tc := range []struct {
		name    string
		budget  int
		want    string
		omitted int
	}{
		{"all", DefsBudget, `import re

from collections import defaultdict

PREV, NEXT = 0, 1

WIDTH = PREV + 10

class Box:

    size = WIDTH

def f(s):
    d = defaultdict(int)
    return re.sub("a", "b", s), PREV, Box, d

` + wrapper, 0},
		{"small budget", 20, `import re

def f(s):
    d = defaultdict(int)
    return re.sub("a", "b", s), PREV, Box, d

` + wrapper, 3},
		{"none", -1, `def f(s):
    d = defaultdict(int)
    return re.sub("a", "b", s), PREV, Box, d

` + wrapper, 0},
	} {
		got, omitted := moduleContext(defsModule, blocks, visited, "m.py", wrapper, tc.budget)
		if got != tc.want || omitted != tc.omitted {
			t.Errorf("%s: omitted %d (want %d), context:\n%s\nwant:\n%s", tc.name, omitted, tc.omitted, got, tc.want)
		}
	}
	// A visited class is shown whole: its header is not repeated.
	got, _ := moduleContext(defsModule, blocks, map[int]bool{10: true}, "m.py", "", DefsBudget)
	if want := "WIDTH = PREV + 10\n\n"; !strings.HasPrefix(got, "PREV, NEXT = 0, 1\n\n"+want) || strings.Count(got, "class Box") != 1 {
		t.Errorf("visited class: context\n%s", got)
	}
}

// TestModuleDefs checks what is collected for repository-level contexts: the definitions the
// functions name, the class of a method, transitively, and a too-long definition without text.
func TestModuleDefs(t *testing.T) {
	src := defsModule + "BIG = [\n" + strings.Repeat("    1,\n", MaxDefBytes/7+1) + "]\ndef g():\n    return BIG\n"
	m := ParseModule(src)
	funcs := []schemas.FuncSource{{File: "m.py", QualName: "Box.get", FirstLine: 9, LastLine: 10, Source: "    def get(self):\n        return self.size"},
		{File: "m.py", QualName: "g", Source: "def g():\n    return BIG"}}
	var got []string
	for _, d := range m.Defs("m.py", funcs) {
		got = append(got, strings.Join(d.Names, ","))
		if d.File != "m.py" || d.Names[0] == "BIG" && d.Parts != nil || d.Names[0] != "BIG" && d.Parts == nil {
			t.Errorf("def %+v", d)
		}
	}
	if want := []string{"PREV,NEXT", "WIDTH", "Box", "BIG"}; !reflect.DeepEqual(got, want) {
		t.Errorf("defs %q, want %q", got, want)
	}
}

// undefinedNames returns the module-level names (imports, assignments, classes; functions too with
// defs) that the shown functions of ctx use free (pylex.FreeUses), or whose method they are,
// without their definition's first line among ctx's lines. srcs holds each file's source; funcs
// the functions that may be shown (one is shown when its source is in ctx).
func undefinedNames(ctx string, srcs map[string]string, funcs []schemas.FuncSource, defs bool) []string {
	lines := map[string]bool{}
	for _, l := range strings.Split(ctx, "\n") {
		lines[l] = true
	}
	missing := map[string]bool{}
	for _, f := range funcs {
		src, ok := srcs[f.File]
		if !ok || f.QualName == "<module>" || !strings.Contains(ctx, f.Source) {
			continue
		}
		fileLines := strings.Split(src, "\n")
		bound := map[string][]string{} // name -> first lines of its binding statements
		for _, st := range pylex.TopLevel(src) {
			if st.Kind == pylex.KindOther || st.Kind == pylex.KindDef && !defs {
				continue
			}
			for _, n := range st.Binds {
				bound[n] = append(bound[n], fileLines[st.Span.First-1])
			}
		}
		used := map[string]bool{}
		pylex.FreeUses(f.Source, func(n string) { used[n] = true })
		if c := methodClass(f.QualName); c != "" {
			used[c] = true
		}
		for n := range used {
			firsts, ok := bound[n]
			if !ok {
				continue
			}
			found := false
			for _, l := range firsts {
				found = found || lines[l]
			}
			if !found {
				missing[n] = true
			}
		}
	}
	var out []string
	for n := range missing {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// cruxItem is one CruxEval row.
type cruxItem struct {
	Code  string `json:"code"`
	Input string `json:"input"`
	ID    string `json:"id"`
}

// TestCruxEvalContexts measures function-level CODE contexts over CruxEval: each function f's
// block as visited (the module body runs untraced), with the main() wrapper, before definitions
// were added (budget < 0) and now. It counts the contexts that change and the share that use a
// module-level name they do not define.
func TestCruxEvalContexts(t *testing.T) {
	path := cruxeval.Path(t)
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	n, changed, before, after, omitted := 0, 0, 0, 0, 0
	var changedIDs []string
	for sc.Scan() {
		var it cruxItem
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			t.Fatal(err)
		}
		n++
		var blocks []schemas.Block
		visited := map[int]bool{}
		var fn schemas.FuncSource
		lines := strings.Split(it.Code, "\n")
		for _, st := range pylex.TopLevel(it.Code) {
			blocks = append(blocks, schemas.Block{File: "m.py", Start: st.Span.First, End: st.Span.Last})
			if st.Kind == pylex.KindDef && reflect.DeepEqual(st.Binds, []string{"f"}) {
				for l := st.Span.First; l <= st.Span.Last; l++ {
					visited[l] = true
				}
				fn = schemas.FuncSource{File: "m.py", QualName: "f", FirstLine: st.Span.First, LastLine: st.Span.Last,
					Source: strings.Join(lines[st.Span.First-1:st.Span.Last], "\n")}
			}
		}
		wrapper := MainWrapper("f(" + it.Input + ")")
		old, _ := moduleContext(it.Code, blocks, visited, "m.py", wrapper, -1)
		now, om := moduleContext(it.Code, blocks, visited, "m.py", wrapper, DefsBudget)
		omitted += om
		if old != now {
			changed++
			changedIDs = append(changedIDs, it.ID)
		}
		srcs := map[string]string{"m.py": it.Code}
		funcs := []schemas.FuncSource{fn}
		if len(undefinedNames(old, srcs, funcs, false)) > 0 {
			before++
		}
		if u := undefinedNames(now, srcs, funcs, false); len(u) > 0 {
			after++
			t.Logf("%s: still undefined %v:\n%s", it.ID, u, now)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("CruxEval: %d function-level contexts, %d changed (%v); with undefined module-level names: before %d, after %d; omitted %d",
		n, changed, changedIDs, before, after, omitted)
	if after != 0 || omitted != 0 {
		t.Errorf("after: %d contexts with undefined names, %d omitted", after, omitted)
	}
}

// TestRepoContext checks a repository-level context over two files: files in first-call order,
// each file's definitions and functions by line, a method with its class header, transitive
// needs, and the budget counting what it leaves out.
func TestRepoContext(t *testing.T) {
	bsrc := "import json\nK = 1\ndef h(x):\n    return json.dumps(x) + K\n"
	srcs := map[string]string{"a.py": defsModule, "b.py": bsrc}
	funcs := []schemas.FuncSource{
		{File: "b.py", QualName: "h", FirstLine: 3, LastLine: 4, Source: "def h(x):\n    return json.dumps(x) + K"},
		{File: "a.py", QualName: "Box.get", FirstLine: 9, LastLine: 10, Source: "    def get(self):\n        return self.size"},
	}
	var mods []schemas.ModuleDef
	for _, f := range funcs {
		mods = append(mods, ParseModule(srcs[f.File]).Defs(f.File, []schemas.FuncSource{f})...)
	}
	v := "1"
	tree, err := BuildForward([]schemas.Event{
		{Event: "call", Frame: 1, Func: "h", File: "b.py", Lineno: 3, Src: "def h(x):", Locals: schemas.Locals{}},
		{Event: "line", Frame: 1, Func: "h", File: "b.py", Lineno: 4, Src: "    return json.dumps(x) + K", Locals: schemas.Locals{}},
		{Event: "call", Frame: 2, Func: "Box.get", File: "a.py", Lineno: 9, Depth: 1, Src: "    def get(self):", Locals: schemas.Locals{}},
		{Event: "line", Frame: 2, Func: "Box.get", File: "a.py", Lineno: 10, Depth: 1, Src: "        return self.size", Locals: schemas.Locals{}},
		{Event: "return", Frame: 2, Func: "Box.get", File: "a.py", Lineno: 10, Depth: 1, Src: "        return self.size", Value: &v, Locals: schemas.Locals{}},
		{Event: "return", Frame: 1, Func: "h", File: "b.py", Lineno: 4, Src: "    return json.dumps(x) + K", Value: &v, Locals: schemas.Locals{}},
	}, ExitNormal)
	if err != nil {
		t.Fatal(err)
	}
	full := `import json

K = 1

def h(x):
    return json.dumps(x) + K

PREV, NEXT = 0, 1

WIDTH = PREV + 10

class Box:

    size = WIDTH

    def get(self):
        return self.size
`
	for _, tc := range []struct {
		budget, omitted int
		want            string
	}{
		{DefsBudget, 0, full},
		{30, 1, "import json\n\nK = 1\n\ndef h(x):\n    return json.dumps(x) + K\n\n    def get(self):\n        return self.size\n"},
		{-1, 0, "def h(x):\n    return json.dumps(x) + K\n\n    def get(self):\n        return self.size\n"},
	} {
		got, omitted := RepoContext(funcs, mods, tree, tc.budget)
		if got != tc.want || omitted != tc.omitted {
			t.Errorf("budget %d: omitted %d (want %d), context:\n%s\nwant:\n%s", tc.budget, omitted, tc.omitted, got, tc.want)
		}
	}
	if got := RepoCodeContext(funcs, tree); got != "def h(x):\n    return json.dumps(x) + K\n\n    def get(self):\n        return self.size\n" {
		t.Errorf("without definitions:\n%s", got)
	}
	if u := undefinedNames(full, srcs, funcs, true); len(u) > 0 {
		t.Errorf("undefined %v", u)
	}
}

// FuzzModuleContext checks on any module that the context's lines are the module's lines, that
// it is built within the budget, and that Defs gives definitions in file order.
func FuzzModuleContext(f *testing.F) {
	f.Add(defsModule, 12)
	f.Add("X = 1\ndef f():\n    return X\n", 3)
	f.Add("class A:\n  y = 1\n  def m(s):\n    return B\nB = A\n", 4)
	f.Fuzz(func(t *testing.T, src string, line int) {
		if strings.Contains(src, "\r") {
			return // the context normalises \r\n; lone \r lines are not its case
		}
		var blocks []schemas.Block
		for _, st := range pylex.TopLevel(src) {
			blocks = append(blocks, schemas.Block{Start: st.Span.First, End: st.Span.Last})
		}
		ctx, omitted := moduleContext(src, blocks, map[int]bool{line: true}, "", "", 64)
		if omitted < 0 {
			t.Fatalf("omitted %d", omitted)
		}
		fileLines := map[string]bool{"": true}
		for _, l := range strings.Split(src, "\n") {
			fileLines[l] = true
		}
		for _, l := range strings.Split(ctx, "\n") {
			if !fileLines[l] {
				t.Fatalf("context line %q is not a line of the module", l)
			}
		}
		m := ParseModule(src)
		last := 0
		for _, d := range m.Defs("m.py", []schemas.FuncSource{{File: "m.py", QualName: "A.m", Source: src}}) {
			if d.Chars > MaxDefBytes && d.Parts != nil || len(d.Names) == 0 {
				t.Fatalf("def %+v", d)
			}
			for _, p := range d.Parts {
				if p.FirstLine <= last {
					t.Fatalf("parts out of order: %+v after line %d", p, last)
				}
				last = p.LastLine
			}
		}
	})
}
