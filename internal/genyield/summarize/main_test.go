package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// statsJSON is the shape `ndtrace stats --json` gives a files source's run (cut down).
const statsJSON = `{"totals": {"rows": 56}, "counts": {"items": 29, "rejects": 1},
 "repositories": {"generation": {"modules": 3, "found": 20, "units": 16, "with_input": 12,
  "inputs": 28, "attempts": 471, "traced": 28, "coverage": [0,0,0,0,0,0,0,0,2,10],
  "by_source": {"doctest": 4, "example": 3, "fuzzed": 11, "typed": 10},
  "losses": {"async": 1, "needs_io": 3, "no_candidates": 4, "dunder": 3, "timeout": 1},
  "with_input_share": 0.75, "median_coverage": 90, "rows": 56}},
 "groups": [{"name": "all", "directions": {"forward": 27, "inverse": 29}}],
 "rejects": [{"class": "no_trajectory", "count": 1}, {"class": "duplicate", "count": 1}]}`

func TestParseArg(t *testing.T) {
	for _, c := range []struct {
		in, name, path string
		wall           float64
		bad            bool
	}{
		{in: "toolz=/a/b.json:12.5", name: "toolz", path: "/a/b.json", wall: 12.5},
		{in: "x=/a:b/c.json:3", name: "x", path: "/a:b/c.json", wall: 3},
		{in: "=/a.json:1", bad: true},
		{in: "x/a.json:1", bad: true},
		{in: "x=/a.json", bad: true},
		{in: "x=/a.json:-1", bad: true},
		{in: "x=/a.json:fast", bad: true},
	} {
		name, path, wall, err := parseArg(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("parseArg(%q): no error", c.in)
			}
			continue
		}
		if err != nil || name != c.name || path != c.path || wall != c.wall {
			t.Errorf("parseArg(%q) = %q, %q, %v, %v", c.in, name, path, wall, err)
		}
	}
}

func TestSummarize(t *testing.T) {
	st, err := readStats(strings.NewReader(statsJSON))
	if err != nil {
		t.Fatal(err)
	}
	r := summarize(run{name: "lib", st: st, wall: 4})
	want := row{Name: "lib", Found: 20, Units: 16, WithInput: 12, Inputs: 28, Traced: 28, Rowed: 27, Rows: 56,
		Items: 29, UnitsPct: 75, FoundPct: 60, Median: 90, BySource: "fuzzed 11, typed 10, doctest 4, example 3",
		Losses: "no_candidates 4, dunder 3, needs_io 3, async 1", Rejects: "duplicate 1, no_trajectory 1",
		Wall: 4, ItemsPerSec: 6.75, RowsPerSec: 14, ModulesSearched: 3, Attempts: 471, RepoItems: 1}
	if r != want {
		t.Errorf("summarize\n got %+v\nwant %+v", r, want)
	}
	// A run without generation (CruxEval): its items only.
	st, err = readStats(strings.NewReader(`{"totals": {"rows": 10}, "counts": {"items": 5},
		"groups": [{"name": "all", "directions": {"forward": 5, "inverse": 5}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	r = summarize(run{name: "given", st: st, wall: 2})
	if r.Median != -1 || r.Units != 0 || r.Rowed != 5 || r.ItemsPerSec != 2.5 || r.RowsPerSec != 5 {
		t.Errorf("summarize without generation: %+v", r)
	}
	if tot := total([]row{want, want}); tot.Units != 32 || tot.UnitsPct != 75 || tot.Median != -1 || tot.Wall != 8 {
		t.Errorf("total: %+v", tot)
	}
}

func TestReadStatsBad(t *testing.T) {
	for _, in := range []string{"", "{", `{"totals": {"rows": "many"}}`} {
		if _, err := readStats(strings.NewReader(in)); err == nil {
			t.Errorf("readStats(%q): no error", in)
		}
	}
	// A file past the cap is refused, never decoded whole.
	big := strings.NewReader(`{"x": "` + strings.Repeat("a", maxStatsBytes) + `"}`)
	if _, err := readStats(big); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Errorf("readStats of a huge file: %v", err)
	}
}

func TestMainErr(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.json")
	if err := os.WriteFile(p, []byte(statsJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := mainErr([]string{"yield", "lib=" + p + ":4"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| lib | 20 | 16 | 12 | 75.0% | 60.0% | 90%+ | 28 | 28 | 27 | 56 | 4 |", "| total | 20 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("yield table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := mainErr([]string{"throughput", "given=" + p + ":2", "gen=" + p + ":4"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| gen | 4.0 | 27 | 56 | 6.75 | 14.00 | 2.00x |") {
		t.Errorf("throughput table:\n%s", out.String())
	}
	for _, args := range [][]string{nil, {"yield"}, {"other", "a=" + p + ":1"}, {"yield", "a=/nonexistent:1"}} {
		if err := mainErr(args, &out); err == nil {
			t.Errorf("mainErr(%q): no error", args)
		}
	}
}
