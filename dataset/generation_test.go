package dataset

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/schemas"
)

// genRow is a structurally valid function-level row of trace id with input source src, from the
// repository repo (empty for a corpus row).
func genRow(id int, src, repo string) schemas.Row {
	return schemas.Row{ID: fmt.Sprintf("%064x", id), Level: "function", Direction: "forward", Path: "m.py",
		SourceID: fmt.Sprint(id), RepoURL: repo, InputSource: src, Exit: "exit_normal", Tokenizer: "bytes"}
}

// TestGenerationStats: the generation reports of repositories sum per source and for the
// dataset the same in any grouping; stats.json's generation has the sums, the with-input share,
// the median coverage and the rows of the generated items (per source: those whose repo_url it
// is); rows count per input source; and stats.parquet has the counters.
func TestGenerationStats(t *testing.T) {
	genA := &schemas.GenYield{Modules: 3, Found: 12, Units: 10, WithInput: 7, Inputs: 20, Attempts: 1500, Traced: 19,
		Coverage: [schemas.CoverageBuckets]int64{0: 1, 5: 2, 9: 4}, BySource: map[string]int64{"typed": 12, "fuzzed": 8},
		Losses: map[string]int64{"async": 2, "no_candidates": 3}}
	genB := &schemas.GenYield{Modules: 1, Found: 5, Units: 4, WithInput: 1, Inputs: 2, Attempts: 90, Traced: 2,
		Coverage: [schemas.CoverageBuckets]int64{8: 1}, BySource: map[string]int64{"doctest": 2},
		Losses: map[string]int64{"needs_io": 1, "async": 1, "all_raised": 2}}
	ys := []schemas.RepoYield{
		{Source: "r/a", Key: "a1", Generation: genA, Rejected: schemas.YieldNoTests},
		{Source: "r/b", Key: "b", Generation: genB, Rejected: schemas.YieldNoTests},
		{Source: "r/a", Key: "a2", Generation: genB, Rejected: schemas.YieldNoTests},
		{Source: "r/c", Key: "c", Collected: 2, Run: 2, Rows: 4}, // no generation
	}
	rows := []schemas.Row{
		genRow(1, "typed", "r/a"), genRow(2, "fuzzed", "r/a"), genRow(3, "doctest", "r/b"),
		genRow(4, "test_call", "r/a"), genRow(5, "corpus", ""), genRow(6, "corpus", ""),
	}
	build := func(parts ...func(p *StatsPart)) *StatsPart {
		total := &StatsPart{}
		for _, f := range parts {
			p := &StatsPart{}
			f(p)
			total.Merge(p)
		}
		return total
	}
	rowPart := func(rs []schemas.Row) func(*StatsPart) {
		return func(p *StatsPart) {
			q, err := NewStatsPart(rs)
			if err != nil {
				t.Fatal(err)
			}
			p.Merge(q)
		}
	}
	yieldPart := func(y []schemas.RepoYield) func(*StatsPart) { return func(p *StatsPart) { p.AddYields(y) } }
	whole := build(rowPart(rows), yieldPart(ys))
	split := build(yieldPart(ys[2:]), rowPart(rows[3:]), yieldPart(ys[:2]), rowPart(rows[:3]))
	a, _ := json.Marshal(whole)
	b, _ := json.Marshal(split)
	if string(a) != string(b) {
		t.Fatalf("merged parts differ:\n%s\n%s", a, b)
	}
	p, err := ParseStatsPart(a)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stats(&Manifest{})

	g := st.Repositories.Generation
	if g == nil || g.Modules != 5 || g.Found != 22 || g.Units != 18 || g.WithInput != 9 || g.Inputs != 24 || g.Traced != 23 ||
		g.Coverage != [schemas.CoverageBuckets]int64{0: 1, 5: 2, 8: 2, 9: 4} || g.BySource["doctest"] != 4 ||
		g.Losses["async"] != 4 || g.Losses["all_raised"] != 4 || g.WithInputShare != 0.5 || g.MedianCoverage != 80 || g.Rows != 3 {
		t.Fatalf("dataset generation %+v", g)
	}
	bySource := map[string]*Generation{}
	for _, s := range st.Sources {
		if s.Yield != nil {
			bySource[s.Source] = s.Yield.Generation
		}
	}
	ga, gb := bySource["r/a"], bySource["r/b"]
	if ga == nil || ga.Found != 17 || ga.WithInput != 8 || ga.WithInputShare != round6(8.0/14) || ga.MedianCoverage != 90 || ga.Rows != 2 ||
		ga.Losses["async"] != 3 || ga.Losses["needs_io"] != 1 {
		t.Errorf("r/a: %+v", ga)
	}
	if gb == nil || gb.Rows != 1 || gb.MedianCoverage != 80 || gb.WithInputShare != 0.25 {
		t.Errorf("r/b: %+v", gb)
	}
	if bySource["r/c"] != nil {
		t.Errorf("r/c generated nothing: %+v", bySource["r/c"])
	}
	if got := st.Dataset.InputSources; got["corpus"] != 2 || got["test_call"] != 1 || got["typed"] != 1 || got["fuzzed"] != 1 || got["doctest"] != 1 {
		t.Errorf("rows by input source %v", got)
	}
	// The statistics' JSON has them, and stats.parquet's counters.
	js, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"with_input_share": 0.5`, `"median_coverage": 80`, `"input_sources": {`, `"by_source": {`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("stats.json lacks %s", want)
		}
	}
	found := map[string]int64{}
	for _, r := range st.Records() {
		if r.Group == "dataset" || r.Source == "r/a" {
			found[r.Group+" "+r.Metric] = r.Count
		}
	}
	for k, v := range map[string]int64{"dataset generation:found": 22, "dataset generation:rows": 3, "dataset generation:loss:async": 4,
		"dataset generation:coverage:80": 2, "dataset input_source:corpus": 2, "source generation:rows": 2, "source generation:by_source:typed": 12} {
		if found[k] != v {
			t.Errorf("stats.parquet counter %s = %d, want %d", k, found[k], v)
		}
	}
}

// TestGenerationKeysCapped (attacker's review): a report's losses and input sources come from
// the worker's bounded vocabularies, but a report that breaks them (many keys, long keys, bytes
// that are not UTF-8, negative counts) is summed into at most MaxGenKeys keys besides "other",
// whose count takes the rest; the cap gives the same sums in any grouping; a stored part
// that breaks it is refused.
func TestGenerationKeysCapped(t *testing.T) {
	hostile := func(from, n int) *schemas.GenYield {
		g := &schemas.GenYield{Found: -5, Units: 3, Losses: map[string]int64{}, BySource: map[string]int64{"typed": 1}}
		for i := range n {
			g.Losses[fmt.Sprintf("reason_%04d", from+i)] = 1
		}
		g.Losses[strings.Repeat("x", 200)] = 7 // too long: other
		g.Losses["\xff\xfe"] = 2               // not UTF-8: its key is made valid
		g.Losses["negative"] = -100            // not counted
		g.Losses["zero"] = 0                   // not counted
		g.BySource[GenOther] = 1               // an "other" of its own adds up
		return g
	}
	ys := []schemas.RepoYield{
		{Source: "r", Key: "1", Generation: hostile(0, 500)},
		{Source: "r", Key: "2", Generation: hostile(250, 500)},
		{Source: "r", Key: "3", Generation: hostile(1000, 30)},
	}
	var parts []string
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}} {
		p := &StatsPart{}
		for _, i := range order {
			q := &StatsPart{}
			q.AddYields(ys[i : i+1])
			p.Merge(q)
		}
		js, _ := json.Marshal(p)
		parts = append(parts, string(js))
	}
	if parts[0] != parts[1] || parts[0] != parts[2] {
		t.Fatal("the capped sums depend on the order of merges")
	}
	p, err := ParseStatsPart([]byte(parts[0]))
	if err != nil {
		t.Fatal(err)
	}
	g := p.Stats(&Manifest{}).Repositories.Generation
	var total int64
	for _, n := range g.Losses {
		total += n
	}
	// 1030 reason_NNNN counts (250 keys twice), 3 long keys (7 each) and 3 invalid ones (2
	// each, their key valid after): 1030 + 21 + 6, of which the first 64 keys in byte order
	// (reason_0000 to reason_0063, once each) are kept and the rest is "other".
	if len(g.Losses) != MaxGenKeys+1 || total != 1030+21+6 || g.Losses["reason_0000"] != 1 || g.Losses["reason_0063"] != 1 ||
		g.Losses[GenOther] != 1057-64 {
		t.Errorf("%d loss keys, %d counted in all (reason_0000=%d, reason_0063=%d, other=%d)", len(g.Losses), total,
			g.Losses["reason_0000"], g.Losses["reason_0063"], g.Losses[GenOther])
	}
	for k := range g.Losses {
		if !utf8.ValidString(k) || len(k) > maxGenKey {
			t.Errorf("loss key %q kept", k)
		}
	}
	if g.Losses["negative"] != 0 || g.Found != 0 || g.BySource[GenOther] != 3 || g.BySource["typed"] != 3 {
		t.Errorf("negative %d, found %d, by source %v", g.Losses["negative"], g.Found, g.BySource)
	}
	// Below the cap, an invalid key is kept, made valid.
	small := &StatsPart{}
	small.AddYields([]schemas.RepoYield{{Source: "r", Key: "4", Generation: hostile(0, 3)}})
	if got := small.Stats(&Manifest{}).Repositories.Generation.Losses; got["\ufffd\ufffd"] != 2 || got[GenOther] != 7 || len(got) != 5 {
		t.Errorf("small report's losses %v", got)
	}
	// A part that breaks the invariants is refused.
	keys := make([]string, 0, MaxGenKeys+2)
	for i := range MaxGenKeys + 2 {
		keys = append(keys, fmt.Sprintf(`"k%03d":1`, i))
	}
	ok := `{"v":1,"yields":[{"source":"r","repositories":1,"with_rows":1,"collected":0,"run":0,"passed_plain":0,"passed_traced":0,"quarantined":0,"runner_neutralised":0,"changed_by_runner_options":0,"checkout_read_only":0,"sandbox_errors":0,"rows":0,"rejected_by_class":null,"generation":{"modules":1,"found":1,"units":1,"with_input":1,"inputs":1,"attempts":1,"traced":1,"coverage":[0,0,0,0,0,0,0,0,0,1],"losses":{"async":1},"with_input_share":0,"median_coverage":0,"rows":0}}]}`
	if _, err := ParseStatsPart([]byte(ok)); err != nil {
		t.Fatalf("a good part: %v", err)
	}
	for name, bad := range map[string]string{
		"too many keys":   strings.Replace(ok, `"losses":{"async":1}`, `"losses":{`+strings.Join(keys, ",")+`}`, 1),
		"negative":        strings.Replace(ok, `"found":1`, `"found":-1`, 1),
		"derived set":     strings.Replace(ok, `"median_coverage":0`, `"median_coverage":90`, 1),
		"zero count":      strings.Replace(ok, `"async":1`, `"async":0`, 1),
		"long key":        strings.Replace(ok, `"async":1`, `"`+strings.Repeat("a", 100)+`":1`, 1),
		"gen rows unsort": strings.Replace(ok, `]}`, `],"gen_rows":[{"source":"b","rows":1},{"source":"a","rows":1}]}`, 1),
	} {
		if _, err := ParseStatsPart([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCapGenKeys checks the cap on its own: the first keys in byte order are kept.
func TestCapGenKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		want int // keys after the cap
	}{{"below", MaxGenKeys - 1, MaxGenKeys - 1}, {"at", MaxGenKeys, MaxGenKeys}, {"above", MaxGenKeys + 1, MaxGenKeys + 1}, {"far above", 10 * MaxGenKeys, MaxGenKeys + 1}} {
		m := map[string]int64{}
		for i := range tc.n {
			m[fmt.Sprintf("k%04d", i)] = 2
		}
		m = capGenKeys(m)
		if len(m) != tc.want {
			t.Errorf("%s: %d keys, want %d", tc.name, len(m), tc.want)
		}
		if tc.n > MaxGenKeys && (m[GenOther] != int64(2*(tc.n-MaxGenKeys)) || m["k0000"] != 2 || m[fmt.Sprintf("k%04d", MaxGenKeys)] != 0) {
			t.Errorf("%s: other %d, k0000 %d", tc.name, m[GenOther], m["k0000"])
		}
	}
}
