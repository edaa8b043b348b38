package crawl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/costbound"
	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/internal/testrepos"
)

func TestTokenizePython(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"def f(x):\n    return x + 1  # c\n", "def f ( x ) : return x + 1"},
		{"x = r'a\\'b' + b\"\"\"c\nd\"\"\"", `x = 'a\'b + 'c` + "\nd"},
		{"a **= 1.5e-3 // 0x1F", "a **= 1.5e-3 // 0x1F"},
		{"f(a,\n  b)\\\n + c", "f ( a , b ) + c"},
		{"x := ...", "x := ..."},
	} {
		var got []string
		tokenizePython(tc.src, func(tk pyToken) bool { got = append(got, tk.text); return true })
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("tokens of %q = %q, want %q", tc.src, s, tc.want)
		}
	}
}

// render shows a function's tokens with names numbered by first appearance in the function.
func render(toks []string) string {
	ids := map[string]int{}
	out := make([]string, len(toks))
	for i, t := range toks {
		if name, ok := strings.CutPrefix(t, nameMark); ok {
			if _, seen := ids[name]; !seen {
				ids[name] = len(ids)
			}
			t = fmt.Sprintf("$%d", ids[name])
		}
		out[i] = t
	}
	return strings.Join(out, " ")
}

func TestPyFunctionsAnonymise(t *testing.T) {
	a := "def f(nums):\n    '''Doc.'''\n    out = []\n    for n in nums:\n        if(n):\n            out.append(n)\n    return out\n"
	b := "def g(values):\n  res = [ ]\n  # loop\n  for v in values:\n    if v: res.append(v)\n  return res\n"
	var fa, fb []string
	pyFunctions(a, func(toks []string) { fa = append(fa, render(toks)) })
	pyFunctions(b, func(toks []string) { fb = append(fb, render(toks)) })
	if len(fa) != 1 || !slices.Equal(fa, fb) {
		t.Fatalf("renamed, reformatted function gives other tokens:\n%q\n%q", fa, fb)
	}
	want := "def $0 ( $p0 ) : $1 = [ ] for $2 in $p0 : if $2 : $1 . append ( $2 ) return $1"
	if fa[0] != want {
		t.Errorf("tokens %q, want %q", fa[0], want)
	}
	// Nested functions and methods count on their own too.
	n := 0
	pyFunctions("class C:\n    def m(self):\n        def inner():\n            return 1\n        return inner\n", func([]string) { n++ })
	if n != 2 {
		t.Errorf("%d functions, want 2", n)
	}
}

// TestGramHashesPerGram: names are numbered within each gram, so a renamed function has the same
// grams, and a name added in front changes only the grams it is in.
func TestGramHashesPerGram(t *testing.T) {
	toks := func(src string) []string {
		var out []string
		pyFunctions(src, func(ts []string) { out = ts })
		return out
	}
	a := gramHashes(toks("def f(x, y):\n    z = x + y\n    w = z * x\n    return w - y\n"), 6)
	b := gramHashes(toks("def g(p, q):\n    r = p + q\n    s = r * p\n    return s - q\n"), 6)
	c := gramHashes(toks("def g(p, q):\n    log(p)\n    r = p + q\n    s = r * p\n    return s - q\n"), 6)
	if !slices.Equal(a, b) {
		t.Errorf("renaming changed the grams")
	}
	kept := 0
	for _, h := range a {
		if slices.Contains(c, h) {
			kept++
		}
	}
	if kept < len(a)/2 {
		t.Errorf("a statement added kept %d of %d grams", kept, len(a))
	}
}

func TestEvalSetMatch(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "e.jsonl")
	os.WriteFile(p, []byte(`{"id":"s0","code":"def f(nums):\n    output = []\n    for n in nums:\n        output.append((nums.count(n), n))\n    output.sort(reverse=True)\n    return output"}
{"code":"def f(text, ch):\n    return text.count(ch) * 2 + len(text.split(ch))"}
`), 0o644)
	set, err := ReadEvalSetNgram(context.Background(), "e", p, 8, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		code, item string
		hit        bool
	}{
		{"def f(text, ch):\n    return text.count(ch) * 2 + len(text.split(ch))", "line 2", true},
		{"def g(xs):\n    \"\"\"Counts.\"\"\"\n    res = []\n    for x in xs:\n        res.append((xs.count(x), x))\n    res.sort(reverse=True)\n    return res\n", "s0", true},
		{"import os\n\ndef other(a):\n    return os.path.join(a, 'b')\n\ndef h(s, c):\n    return s.count(c) * 2 + len(s.split(c))\n", "line 2", true},
		{"def f(nums):\n    return sorted(nums)\n", "", false},
	} {
		item, hit := set.Match(tc.code)
		if item != tc.item || hit != tc.hit {
			t.Errorf("Match(%q) = %q, %v; want %q, %v", tc.code, item, hit, tc.item, tc.hit)
		}
	}
}

func FuzzTokenizePython(f *testing.F) {
	for _, s := range []string{"def f(x):\n    return x\n", "'''", "r'\\", "1e-", "\\\n", "((((", "é = 1", "\"\"\"a\"\"\" # x", "async def f():\n  '''d'''\n  pass"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		n := 0
		tokenizePython(src, func(tk pyToken) bool {
			n++
			if len(tk.text) > len(src)+1 {
				t.Fatalf("token %q longer than the source", tk.text)
			}
			return true
		})
		if n > len(src) {
			t.Fatalf("%d tokens from %d bytes", n, len(src))
		}
		costbound.Check(t, "pyFunctions", len(src), decontamCost, func() {
			pyFunctions(src, func(toks []string) {
				if len(toks) > MaxFunctionTokens {
					t.Fatalf("%d tokens in a function", len(toks))
				}
				gramHashes(toks, DefaultNgram)
			})
		})
	})
}

// decontamCost bounds what reading a candidate's functions and their n-grams allocates per byte
// of source: linear work, whatever the input.
var decontamCost = costbound.Bound{PerByte: 1024, Fixed: 1 << 20}

// TestDecontamCost: hostile sources (deep nesting, one huge function, unbalanced brackets, an
// unterminated string, many small functions) cost an amount linear in their size.
func TestDecontamCost(t *testing.T) {
	var nest, flat strings.Builder
	for i := range 2000 {
		nest.WriteString(strings.Repeat(" ", i) + "def f(a, b):\n")
	}
	for range 5000 {
		flat.WriteString("def f(a):\n    return a+a*a-(a)\n")
	}
	for name, src := range map[string]string{
		"nested": nest.String(), "small functions": flat.String(), "brackets": strings.Repeat("(", 200000),
		"one huge function": "def f():\n " + strings.Repeat("x+", 100000), "unterminated string": `'''` + strings.Repeat("a", 100000),
	} {
		n := 0
		got := costbound.Check(t, name, len(src), decontamCost, func() {
			pyFunctions(src, func(toks []string) { n += len(gramHashes(toks, DefaultNgram)) })
		})
		t.Logf("%s: %d bytes, %d grams, %d bytes allocated", name, len(src), n, got)
	}
}

// cruxevalItems reads the shared CruxEval corpus (never copied into the repository).
func cruxevalItems(t testing.TB) []struct{ Code, ID string } {
	data, err := os.ReadFile(cruxeval.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []struct{ Code, ID string }
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var r struct {
			Code string `json:"code"`
			ID   string `json:"id"`
		}
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, struct{ Code, ID string }{r.Code, r.ID})
	}
	return out
}

// rewrites returns, for every 10th CruxEval function, its rewrites by kind (testdata/rewrite_eval.py).
func rewrites(t *testing.T, items []struct{ Code, ID string }) (ids []string, rw []map[string]string) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	var srcs []string
	for i := 0; i < len(items); i += 10 {
		srcs = append(srcs, items[i].Code)
		ids = append(ids, items[i].ID)
	}
	in, _ := json.Marshal(srcs)
	cmd := exec.Command("python3", "testdata/rewrite_eval.py")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rewrite_eval.py: %v: %s", err, stderr.String())
	}
	if err := json.Unmarshal(out, &rw); err != nil {
		t.Fatal(err)
	}
	return ids, rw
}

// unrelatedModules reads unrelated code: the modules of Python's standard library (if present)
// and the Python files of our own test repositories (internal/testrepos).
func unrelatedModules(t *testing.T) map[string]string {
	files, _ := filepath.Glob("/usr/lib/python3*/*.py")
	if len(files) == 0 {
		t.Skip("no Python standard library")
	}
	mods := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil {
			mods[f] = string(data)
		}
	}
	for _, name := range testrepos.Names() {
		for p, data := range testrepos.Files(t, name) {
			if strings.HasSuffix(p, ".py") {
				mods["testrepos/"+name+"/"+p] = string(data)
			}
		}
	}
	return mods
}

var rewriteKinds = []string{"exact", "rename", "docstring", "unparse", "reformat", "statement", "helper", "repository", "all"}

// TestDecontamRewrites measures, on >= 60 CruxEval functions rewritten 7 ways, the share the
// default n-gram check removes (per kind and overall), and its false positives on the functions
// of Python's standard library and of our test repositories; then the same for other n-gram
// lengths, thresholds, names numbered per function or one generic placeholder for every name, and
// a score of the evaluation function's share alone, as a table in the log (go test -run TestDecontamRewrites -v
// ./crawl). The defaults must remove >= 95% with no false positive.
func TestDecontamRewrites(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the CruxEval corpus and the standard library, runs python3; run without -short")
	}
	items := cruxevalItems(t)
	ids, rw := rewrites(t, items)
	mods := unrelatedModules(t)
	names := make([]string, 0, len(mods))
	for k := range mods {
		names = append(names, k)
	}
	slices.Sort(names)
	p := cruxeval.Path(t)

	type result struct {
		removed, total int
		perKind        map[string][2]int
		fp             []string
		fpFuncs, funcs int
		missed         []string
	}
	measure := func(n int, thr float64, mode int, evalOnly, noParams bool) result {
		nameMode, evalShareOnly, paramNames = mode, evalOnly, !noParams
		defer func() { nameMode, evalShareOnly, paramNames = namesPerGram, false, true }()
		set, err := ReadEvalSetNgram(context.Background(), "cruxeval", p, n, thr)
		if err != nil {
			t.Fatal(err)
		}
		r := result{perKind: map[string][2]int{}}
		for i, m := range rw {
			for _, k := range rewriteKinds {
				src, ok := m[k]
				if k == "exact" {
					src, ok = items[i*10].Code, true
				}
				if !ok {
					continue
				}
				c := r.perKind[k]
				c[1]++
				r.total++
				if _, hit := set.Match(src); hit {
					c[0]++
					r.removed++
				} else {
					r.missed = append(r.missed, k+":"+ids[i])
				}
				r.perKind[k] = c
			}
		}
		for _, name := range names {
			src := mods[name]
			pyFunctions(src, func(toks []string) {
				r.funcs++
				if i, _, ok := set.index.matchTokens(toks); ok {
					r.fpFuncs++
					if len(r.fp) < 5 {
						r.fp = append(r.fp, fmt.Sprintf("%s: %s ~ %s", filepath.Base(name), strings.Join(strings.Fields(render(toks))[:min(len(toks), 12)], " "), set.Items[i]))
					}
				}
			})
		}
		return r
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%d functions, %d unrelated modules (standard library, test repositories)\nn   thr  names     removed           %s  false positives (functions)\n", len(rw), len(names), strings.Join(rewriteKinds, " "))
	for _, cfg := range []struct {
		n        int
		thr      float64
		mode     int
		evalOnly bool
		noParams bool
	}{{DefaultNgram, DefaultThreshold, namesPerGram, false, false},
		{8, 0.5, namesPerGram, false, false}, {12, 0.5, namesPerGram, false, false},
		{13, 0.5, namesPerGram, false, false}, {10, 0.4, namesPerGram, false, false}, {13, 0.4, namesPerGram, false, false},
		{10, 0.3, namesPerGram, false, false}, {10, 0.7, namesPerGram, false, false},
		{10, 0.5, namesPerGram, false, true}, {13, 0.5, namesPerGram, false, true},
		{10, 0.5, namesPerFunction, false, true}, {13, 0.5, namesPerFunction, false, true},
		{10, 0.5, namesGeneric, false, true}, {13, 0.5, namesGeneric, false, true},
		{10, 0.5, namesPerGram, true, false}} {
		r := measure(cfg.n, cfg.thr, cfg.mode, cfg.evalOnly, cfg.noParams)
		mode := []string{"per-gram", "per-function", "generic"}[cfg.mode]
		if !cfg.noParams {
			mode += "+params"
		}
		if cfg.evalOnly {
			mode += "/evalshare"
		}
		fmt.Fprintf(&table, "%-3d %.1f  %-25s %4d/%4d %5.1f%%  ", cfg.n, cfg.thr, mode, r.removed, r.total, 100*float64(r.removed)/float64(r.total))
		for _, k := range rewriteKinds {
			c := r.perKind[k]
			fmt.Fprintf(&table, " %s=%d/%d", k, c[0], c[1])
		}
		fmt.Fprintf(&table, "  fp=%d/%d %q missed %v\n", r.fpFuncs, r.funcs, r.fp, r.missed)
		if cfg.n == DefaultNgram && cfg.thr == DefaultThreshold && cfg.mode == namesPerGram && !cfg.evalOnly && !cfg.noParams {
			if len(rw) < 60 {
				t.Errorf("%d functions rewritten, want >= 60", len(rw))
			}
			if float64(r.removed) < 0.95*float64(r.total) {
				t.Errorf("defaults remove %d of %d rewrites, want >= 95%%", r.removed, r.total)
			}
			if r.fpFuncs != 0 {
				t.Errorf("defaults match %d unrelated functions: %q", r.fpFuncs, r.fp)
			}
		}
	}
	t.Log("\n" + table.String())
}

// TestDecontamCrossCruxEval counts the CruxEval functions that match another CruxEval item under
// the defaults: near-duplicates within the benchmark, expected to be few.
func TestDecontamCrossCruxEval(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the CruxEval corpus; run without -short")
	}
	items := cruxevalItems(t)
	p := cruxeval.Path(t)
	set, err := ReadEvalSet(context.Background(), "cruxeval", p)
	if err != nil {
		t.Fatal(err)
	}
	others := 0
	var ex []string
	for i, it := range items {
		pyFunctions(it.Code, func(toks []string) {
			for _, j := range set.index.matchAll(toks) {
				if j != i && items[j].Code != it.Code {
					others++
					if len(ex) < 5 {
						ex = append(ex, it.ID+"~"+items[j].ID)
					}
				}
			}
		})
	}
	t.Logf("%d of %d CruxEval functions, matched against the others, match another item (pairs, ordered): e.g. %v", others, len(items), ex)
	if others > len(items)/10 {
		t.Errorf("%d cross matches among %d CruxEval functions, want <= 10%%", others, len(items))
	}
}

// BenchmarkEvalSetMatch measures Match of the modules of the standard library against CruxEval:
// time per byte of candidate code stays flat however large the module (the index is looked up
// once per gram, and every function reads at most MaxFunctionTokens tokens).
// go test ./crawl -run '^$' -bench EvalSetMatch -benchtime 3x
func BenchmarkEvalSetMatch(b *testing.B) {
	set, err := ReadEvalSet(context.Background(), "cruxeval", cruxeval.Path(b))
	if err != nil {
		b.Fatal(err)
	}
	files, _ := filepath.Glob("/usr/lib/python3*/*.py")
	if len(files) == 0 {
		b.Skip("no Python standard library")
	}
	var mods []string
	size := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil {
			mods = append(mods, string(data))
			size += len(data)
		}
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	for range b.N {
		for _, m := range mods {
			set.Match(m)
		}
	}
}
