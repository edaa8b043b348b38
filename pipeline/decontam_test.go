package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"

	"github.com/ndtrace/ndtrace/schemas"
)

// TestDecontaminator: the check rows are built with names the first set (in spec order) holding
// the code's function and the item matched; the sets of a spec are indexed once per process.
func TestDecontaminator(t *testing.T) {
	dir := t.TempDir()
	write := func(name, rows string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(rows), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.jsonl", `{"id":"a0","code":"def f(xs):\n    out = []\n    for x in xs:\n        if x % 3 == 1:\n            out.append(x * 2)\n    return out"}`+"\n")
	b := write("b.jsonl", `{"code":"def g(s):\n    return s.strip().lower().replace(' ', '_') + s[::-1]"}`+"\n"+
		`{"id":"b1","code":"def f(xs):\n    out = []\n    for x in xs:\n        if x % 3 == 1:\n            out.append(x * 2)\n    return out"}`+"\n")
	spec, err := schemas.ParseSpec([]byte("sources:\n  - kind: examples\ndecontaminate:\n  - path: " + a + "\n  - path: " + b + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	sets, err := cachedEvalSets(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := cachedEvalSets(context.Background(), spec)
	if len(sets) != 2 || sets[0] != again[0] || sets[1] != again[1] {
		t.Errorf("sets indexed again")
	}
	check := Decontaminator(sets)
	for _, tc := range []struct{ code, set, item string }{
		{"def h(values):\n    res = []\n    for v in values:\n        if v % 3 == 1:\n            res.append(v * 2)\n    return res\n", "a", "a0"},
		{"def k(name):\n    '''Slug.'''\n    return name.strip().lower().replace(' ', '_') + name[::-1]\n", "b", "line 1"},
		{"def k(name):\n    return name.upper()\n", "", ""},
	} {
		for range 2 { // the second time from the kept result
			set, item, hit := check(tc.code)
			if set != tc.set || item != tc.item || hit != (tc.set != "") {
				t.Errorf("check(%q) = %q, %q, %v; want %q, %q", tc.code, set, item, hit, tc.set, tc.item)
			}
		}
	}
	if Decontaminator(nil) != nil {
		t.Errorf("a check without sets")
	}
}

// TestBatchHashCoversEvalSets: rows are decontaminated when a batch's shard is built, and a batch
// whose record exists is reused: an evaluation set's file changed at the same path (items added)
// must change the batches' hashes, or a re-run of the spec would keep rows the new items match.
// The same content gives the same hashes.
func TestBatchHashCoversEvalSets(t *testing.T) {
	dir := t.TempDir()
	eval := filepath.Join(dir, "eval.jsonl")
	path := corpus(t, 20)
	spec := schemas.Spec{Name: "p", Sources: []schemas.SourceSpec{{Kind: "jsonl", Path: path}}, BatchSize: 8,
		Decontaminate: []schemas.EvalSetSpec{{Name: "e", Path: eval}}}.WithDefaults()
	created := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	hashes := func(content string) []string {
		if err := os.WriteFile(eval, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		s := openMem(t)
		run := NewRun(spec, created)
		_, fr := plan(t, s, run, &crawl.Fetcher{})
		return batchHashes(t, s, run, fr)
	}
	one := `{"id":"x","code":"def unrelated(a, b):\n    return [a * i + b for i in range(a) if i % b]\n"}` + "\n"
	two := one + `{"id":"y","code":"def other(s):\n    return ''.join(reversed(s.split(',')))\n"}` + "\n"
	h1, h1again, h2 := hashes(one), hashes(one), hashes(two)
	if len(h1) == 0 || !slices.Equal(h1, h1again) {
		t.Fatalf("the same evaluation set gave batches %v, then %v", h1, h1again)
	}
	for i := range min(len(h1), len(h2)) {
		if h1[i] == h2[i] {
			t.Errorf("batch %d: hash %s unchanged by the evaluation set's new item", i, h1[i])
		}
	}
}
