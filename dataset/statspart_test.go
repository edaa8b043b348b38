package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// randomStatsRow builds a structurally valid row (CheckRow) of the given trace with varied counts.
func randomStatsRow(rng *rand.Rand, i int, level, dir, source, sourceID, commit string, events [4]int32) schemas.Row {
	tokens := 1 + rng.IntN(600)
	ids := make([]int32, tokens)
	mask := make([]bool, tokens)
	learned := rng.IntN(tokens + 1)
	for k := range mask[:learned] {
		mask[k] = true
	}
	exits := []string{"exit_normal", "exit_error", "exit_never", "inv_exit_entry", ""}
	r := schemas.Row{
		ID: fmt.Sprintf("%064x", i), Level: level, Direction: dir, SourceID: sourceID, Policy: "paper",
		QualName: fmt.Sprintf("f%d", i), Seed: int64(i), Text: "x", InputIDs: ids, LossMask: mask,
		NumTokens: int32(tokens), NumLearned: int32(learned),
		EvCall: events[0], EvLine: events[1], EvReturn: events[2], EvException: events[3],
		Exit: exits[rng.IntN(len(exits))], TracerVersion: testVersions.Tracer, PipelineVersion: testVersions.Pipeline,
		Tokenizer: byteTokenizerName, CreatedAt: testCreated,
		CodeChars: int32(rng.IntN(3000)),
	}
	if level == "repository" {
		r.RepoURL, r.Commit, r.Path = source, commit, fmt.Sprintf("pkg/m%d.py", rng.IntN(5))
	} else {
		// Function-level rows of every input source; a generated item's now and then from a
		// repository (repo_url), whose source's generation counts its rows.
		r.Path = source
	}
	if level == "function" {
		r.InputSource = schemas.InputSources[rng.IntN(len(schemas.InputSources))]
		if schemas.GeneratedInputSource(r.InputSource) && rng.IntN(2) == 0 {
			r.RepoURL = fmt.Sprintf("https://example.invalid/gen%d.git", rng.IntN(3))
		}
	}
	acts := []*int32{&r.ActStepInto, &r.ActStepOver, &r.ActStepReturn, &r.ActBreakpoint, &r.ActContinue,
		&r.ActInvStepInto, &r.ActInvStepOver, &r.ActInvStepCall}
	for _, a := range acts {
		if rng.IntN(3) > 0 {
			*a = int32(rng.IntN(12)) - 1 // now and then negative: the statistics take any int32
		}
		r.NumActions += *a
	}
	r.NumStates = r.NumActions + 1
	return r
}

// randomStatsShards builds shards of rows over a few levels (one empty), directions (one empty),
// sources and traces of one to four trajectories each; all rows of a trace are in one shard.
func randomStatsShards(seed uint64, shards, tracesPerShard int) [][]schemas.Row {
	rng := rand.New(rand.NewPCG(seed, 7))
	levels := []string{"function", "function", "repository", ""}
	dirs := []string{"forward", "inverse", "forward", ""}
	i := 0
	out := make([][]schemas.Row, shards)
	for s := range out {
		for t := range tracesPerShard {
			level := levels[rng.IntN(len(levels))]
			source := fmt.Sprintf("corpus/%c.jsonl", 'a'+rng.IntN(6))
			if level == "repository" {
				source = fmt.Sprintf("https://example.com/r%d", rng.IntN(4))
			}
			events := [4]int32{int32(rng.IntN(50)), int32(rng.IntN(2000)), int32(rng.IntN(50)), int32(rng.IntN(3))}
			id := fmt.Sprintf("s%d-t%d", s, t)
			commit := fmt.Sprintf("c%d", rng.IntN(2))
			for range 1 + rng.IntN(4) {
				out[s] = append(out[s], randomStatsRow(rng, i, level, dirs[rng.IntN(len(dirs))], source, id, commit, events))
				i++
			}
		}
	}
	return out
}

// randomRejects returns n rejects over the sources randomStatsShards uses and one of its own, with
// reasons of every class countReject knows.
func randomRejects(seed uint64, n int) []schemas.Reject {
	rng := rand.New(rand.NewPCG(seed, 11))
	reasons := []string{"timeout: ran for 10s", "timeout", "malformed JSON: x", "quarantined: outcome changed",
		"duplicate of x", "duplicates", "decontaminated:cruxeval matches y", "decontaminated: humaneval",
		"decontaminated", ": odd", "memory " + strings.Repeat("é", 400)}
	var out []schemas.Reject
	for k := range n {
		src := fmt.Sprintf("corpus/%c.jsonl", 'a'+rng.IntN(7))
		if rng.IntN(3) == 0 {
			src = fmt.Sprintf("https://example.com/r%d", rng.IntN(5))
		}
		out = append(out, schemas.Reject{Source: src, Key: fmt.Sprintf("%s#%05d", src, k), Reason: reasons[rng.IntN(len(reasons))]})
	}
	return out
}

// writeRowsDataset writes shards of rows (and rejects.jsonl if rejects is not nil) and commits the
// manifest with counts.
func writeRowsDataset(t testing.TB, st *store.Store, shards [][]schemas.Row, rejects []schemas.Reject, counts schemas.Counts) *Manifest {
	t.Helper()
	ctx := context.Background()
	var infos []ShardInfo
	for s, rows := range shards {
		info, err := WriteShard(ctx, st, fmt.Sprintf("part-%05d", s), rows)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if rejects != nil {
		var b strings.Builder
		for _, r := range rejects {
			fmt.Fprintf(&b, "{\"source\":%q,\"key\":%q,\"reason\":%q}\n", r.Source, r.Key, r.Reason)
		}
		if err := st.Put(ctx, RejectsKey, []byte(b.String()), nil); err != nil {
			t.Fatal(err)
		}
	}
	m, err := WriteManifest(ctx, st, Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: infos, Counts: counts})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// parseRejectLines decodes rejects.jsonl text.
func parseRejectLines(t testing.TB, text string) []schemas.Reject {
	t.Helper()
	var out []schemas.Reject
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var r schemas.Reject
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// statsCase is a dataset for the part tests: rows per shard (one batch each), rejects (nil: no
// rejects.jsonl) and the manifest's counts.
type statsCase struct {
	name    string
	shards  [][]schemas.Row
	rejects []schemas.Reject
	counts  schemas.Counts
}

func statsCases(t testing.TB) []statsCase {
	fixture := make([][]schemas.Row, len(statsShards))
	i := 0
	for s, specs := range statsShards {
		for _, sp := range specs {
			fixture[s] = append(fixture[s], statsTestRow(i, sp))
			i++
		}
	}
	var test [][]schemas.Row
	for s := range 3 {
		test = append(test, makeRows(t, s*10, 10))
	}
	cases := []statsCase{
		{"fixture", fixture, parseRejectLines(t, statsRejects), statsCounts},
		{"fixture without rejects.jsonl", fixture, nil, schemas.Counts{"rejects:timeout": 2, "rejects:syntax": 5}},
		{"fixture with an empty rejects.jsonl", fixture, []schemas.Reject{}, statsCounts},
		{"test dataset", test, nil, schemas.Counts{"rejects.syntax_error": 2, "dropped_too_long": 1}},
		{"empty", nil, nil, nil},
		{"only rejects", nil, sortedByKey(randomRejects(9, 25)), schemas.Counts{"items": 25}},
	}
	for seed := range uint64(3) {
		cases = append(cases, statsCase{fmt.Sprintf("random %d", seed), randomStatsShards(seed, 2+int(seed)*3, 20+int(seed)*30),
			sortedByKey(randomRejects(seed, 10+int(seed)*50)), schemas.Counts{"items": 1000, "decontaminated:x": 2}})
	}
	return cases
}

// sortedByKey sorts rejects by key, as the pipeline writes rejects.jsonl.
func sortedByKey(rejects []schemas.Reject) []schemas.Reject {
	slices.SortStableFunc(rejects, func(a, b schemas.Reject) int { return strings.Compare(a.Key, b.Key) })
	return rejects
}

// caseParts returns a part per shard, the rejects spread over them and over one more part (a
// planning page's).
func caseParts(t testing.TB, c statsCase) []*StatsPart {
	t.Helper()
	var parts []*StatsPart
	for _, rows := range c.shards {
		p, err := NewStatsPart(rows)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	if c.rejects != nil {
		parts = append(parts, &StatsPart{})
		spread := make([][]schemas.Reject, len(parts))
		for k, r := range c.rejects {
			spread[k%len(parts)] = append(spread[k%len(parts)], r)
		}
		for k, p := range parts {
			p.AddRejects(spread[k])
		}
	}
	return parts
}

// roundTrip returns p encoded and parsed back (a fresh copy), checking the encoding is stable.
func roundTrip(t testing.TB, p *StatsPart) *StatsPart {
	t.Helper()
	data := partJSON(t, p)
	back, err := ParseStatsPart(data)
	if err != nil {
		t.Fatalf("ParseStatsPart rejects a part: %v\n%.2000s", err, data)
	}
	if again := partJSON(t, back); !bytes.Equal(again, data) {
		t.Fatalf("part JSON is not stable:\n%.500s\n%.500s", data, again)
	}
	return back
}

func partJSON(t testing.TB, p *StatsPart) []byte {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// mergeTree merges parts pairwise, level by level, each through JSON.
func mergeTree(t testing.TB, parts []*StatsPart) *StatsPart {
	t.Helper()
	if len(parts) == 0 {
		return &StatsPart{}
	}
	for len(parts) > 1 {
		var next []*StatsPart
		for k := 0; k < len(parts); k += 2 {
			p := roundTrip(t, parts[k])
			if k+1 < len(parts) {
				p.Merge(roundTrip(t, parts[k+1]))
			}
			next = append(next, p)
		}
		parts = next
	}
	return roundTrip(t, parts[0])
}

// mergeFold merges parts one by one in the given order into an empty part, each through JSON.
func mergeFold(t testing.TB, parts []*StatsPart, order []int) *StatsPart {
	t.Helper()
	total := &StatsPart{}
	for _, k := range order {
		total.Merge(roundTrip(t, parts[k]))
	}
	return roundTrip(t, total)
}

func TestStatsPartMatchesComputeStats(t *testing.T) {
	ctx := context.Background()
	for _, c := range statsCases(t) {
		t.Run(c.name, func(t *testing.T) {
			st := openTest(t, "mem://")
			m := writeRowsDataset(t, st, c.shards, c.rejects, c.counts)
			want, err := ComputeStats(ctx, st, m)
			if err != nil {
				t.Fatal(err)
			}
			wantJSON, err := want.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			parts := caseParts(t, c)
			n := len(parts)
			forward, backward := make([]int, n), make([]int, n)
			for k := range n {
				forward[k], backward[k] = k, n-1-k
			}
			shuffled := rand.New(rand.NewPCG(uint64(n), 3)).Perm(n)
			groupings := []struct {
				name  string
				merge func() *StatsPart
			}{
				{"in order", func() *StatsPart { return mergeFold(t, parts, forward) }},
				{"reversed", func() *StatsPart { return mergeFold(t, parts, backward) }},
				{"shuffled", func() *StatsPart { return mergeFold(t, parts, shuffled) }},
				{"pairwise", func() *StatsPart { return mergeTree(t, parts) }},
				{"pages of two", func() *StatsPart {
					var pages []*StatsPart
					for k := 0; k < n; k += 2 {
						pages = append(pages, mergeFold(t, parts, forward[k:min(k+2, n)]))
					}
					order := make([]int, len(pages))
					for k := range order {
						order[k] = len(pages) - 1 - k
					}
					return mergeFold(t, pages, order)
				}},
			}
			var firstPart []byte
			for _, g := range groupings {
				p := g.merge()
				got, err := p.Stats(m).Marshal()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, wantJSON) {
					t.Errorf("%s: merged parts give other statistics than ComputeStats:\n%s", g.name, firstLineDiff(wantJSON, got))
				}
				pj := partJSON(t, p)
				if firstPart == nil {
					firstPart = pj
				} else if !bytes.Equal(pj, firstPart) {
					t.Errorf("%s: merged part differs from the first grouping's", g.name)
				}
			}
		})
	}
}

// firstLineDiff describes the first line where two texts differ.
func firstLineDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range max(len(wl), len(gl)) {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d: want %q, got %q", i+1, w, g)
		}
	}
	return "no difference"
}

// tokenRows returns n rows of one level and direction whose tokens are from, from+step, ..., each
// its own trace, with code_chars following the tokens.
func tokenRows(level, dir string, from, n, step int) []schemas.Row {
	rows := make([]schemas.Row, n)
	for k := range rows {
		v := from + k*step
		rows[k] = schemas.Row{Level: level, Direction: dir, Path: "corpus/x.jsonl", SourceID: fmt.Sprintf("%s-%d-%d", dir, from, k),
			NumTokens: int32(v), NumLearned: int32(v / 2), NumActions: 2, NumStates: 3, ActStepOver: 2,
			EvLine: int32(v % 7), Exit: "exit_normal", CodeChars: int32(3 * v)}
	}
	return rows
}

func TestStatsPartMergeLaws(t *testing.T) {
	mustPart := func(rows []schemas.Row) *StatsPart {
		p, err := NewStatsPart(rows)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	random := randomStatsShards(5, 3, 40)
	big := [][]schemas.Row{
		tokenRows("function", "forward", 0, 3000, 1),
		tokenRows("function", "forward", 2000, 3000, 1), // with the first: 5000 distinct, coarsened
		append(tokenRows("function", "inverse", 10000, 3000, 2), tokenRows("function", "forward", 70000, 10, 1000)...),
	}
	for _, tc := range []struct {
		name   string
		shards [][]schemas.Row
	}{{"random", random}, {"beyond the cap", big}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, c := mustPart(tc.shards[0]), mustPart(tc.shards[1]), mustPart(tc.shards[2])
			a.AddRejects(randomRejects(1, 7))
			c.AddRejects(randomRejects(2, 9))
			merge := func(ps ...*StatsPart) []byte {
				total := roundTrip(t, ps[0])
				for _, p := range ps[1:] {
					total.Merge(roundTrip(t, p))
				}
				return partJSON(t, total)
			}
			ab, bc := roundTrip(t, a), roundTrip(t, b)
			ab.Merge(b)
			bc.Merge(c)
			if coarse := ab.Groups[0].Metrics[0].Shift > 0; coarse != (tc.name == "beyond the cap") {
				t.Fatalf("a+b tokens coarsened: %v", coarse)
			}
			want := merge(a, b, c)
			for name, got := range map[string][]byte{
				"(a+b)+c": merge(ab, c), "a+(b+c)": merge(a, bc), "c+b+a": merge(c, b, a), "b+a+c": merge(b, a, c),
				"(b+c)+a": merge(bc, a), "with empty parts": merge(&StatsPart{}, a, &StatsPart{}, b, c, &StatsPart{}),
			} {
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from a+b+c", name)
				}
			}
			if !bytes.Equal(merge(a), partJSON(t, a)) || !bytes.Equal(merge(&StatsPart{}, a), partJSON(t, a)) {
				t.Error("merging into an empty part changes it")
			}
			// One part of all rows is the merge of the batches' parts.
			all := mustPart(slices.Concat(tc.shards...))
			all.AddRejects(slices.Concat(randomRejects(1, 7), randomRejects(2, 9)))
			if got := partJSON(t, all); !bytes.Equal(got, want) {
				t.Error("the part of all rows differs from the merged parts")
			}
			// Merging a part into itself doubles it.
			self, twice := roundTrip(t, a), roundTrip(t, a)
			self.Merge(self)
			twice.Merge(roundTrip(t, a))
			if !bytes.Equal(partJSON(t, self), partJSON(t, twice)) {
				t.Error("p.Merge(p) differs from merging a copy")
			}
			// Merge leaves its argument alone.
			before := partJSON(t, b)
			x := roundTrip(t, a)
			x.Merge(b)
			x.Merge(c)
			if !bytes.Equal(partJSON(t, b), before) {
				t.Error("Merge changed its argument")
			}
		})
	}
}

func TestStatsPartSize(t *testing.T) {
	row := makeRow(t, 1, trajectoryText(1, 3))
	size := func(n int) int {
		rows := make([]schemas.Row, n)
		for k := range rows {
			rows[k] = row
		}
		p, err := NewStatsPart(rows)
		if err != nil {
			t.Fatal(err)
		}
		p.AddRejects([]schemas.Reject{{Source: "corpus/test.jsonl", Key: "k", Reason: "timeout: 10s"}})
		return len(partJSON(t, p))
	}
	small, large := size(100), size(10_000)
	t.Logf("part of 100 identical rows: %d bytes; of 10,000: %d bytes", small, large)
	if large > small+128 {
		t.Errorf("a part of 10,000 identical rows takes %d bytes, of 100 rows %d: it grows with rows", large, small)
	}
	// Typical batches, for the record: 16 function-level items of one corpus file with a forward and
	// an inverse trajectory each, and rows of every level and direction from several sources.
	rng := rand.New(rand.NewPCG(4, 4))
	var items []schemas.Row
	for k := range 32 {
		events := [4]int32{int32(rng.IntN(50)), int32(rng.IntN(2000)), int32(rng.IntN(50)), int32(rng.IntN(3))}
		items = append(items, randomStatsRow(rng, k, "function", []string{"forward", "inverse"}[k%2], "corpus/a.jsonl",
			fmt.Sprint(k/2), "", events))
	}
	for name, rows := range map[string][]schemas.Row{
		"32 test rows (one level, direction and source)": makeRows(t, 0, 32),
		"16 items x 2 directions":                        items,
		"32 varied rows (levels, directions, sources)":   slices.Concat(randomStatsShards(3, 1, 25)...)[:32],
	} {
		p, err := NewStatsPart(rows)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("part of %s: %d bytes of JSON", name, len(partJSON(t, p)))
	}
}

func TestStatsPartCap(t *testing.T) {
	// Up to MaxPartValues distinct values a metric is exact; one more coarsens it.
	for _, tc := range []struct {
		n         int
		wantShift int
	}{{MaxPartValues, 0}, {MaxPartValues + 1, 1}} {
		p, err := NewStatsPart(tokenRows("function", "forward", 0, tc.n, 1))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Groups[0].Metrics[0]; got.Shift != tc.wantShift || len(got.Values) > MaxPartValues {
			t.Errorf("%d distinct tokens: shift %d with %d values, want shift %d", tc.n, got.Shift, len(got.Values), tc.wantShift)
		}
	}

	// 100k distinct values, as one part and as ten merged in two groupings.
	const n, step = 100_000, 7
	rows := tokenRows("function", "forward", -500, n, step)
	whole, err := NewStatsPart(rows)
	if err != nil {
		t.Fatal(err)
	}
	var parts []*StatsPart
	for k := 0; k < n; k += n / 10 {
		p, err := NewStatsPart(rows[k : k+n/10])
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(len(parts))
	data := partJSON(t, whole)
	if !bytes.Equal(partJSON(t, mergeFold(t, parts, order)), data) || !bytes.Equal(partJSON(t, mergeTree(t, parts)), data) {
		t.Error("merged coarsened parts differ from the part of all rows")
	}
	t.Logf("part of %d rows with %d distinct tokens: %d bytes of JSON", n, n, len(data))
	if len(data) > 400<<10 {
		t.Errorf("part of 100k distinct values takes %d bytes", len(data))
	}
	g := &whole.Groups[0]
	for j, v := range g.Metrics {
		if len(v.Values) > MaxPartValues {
			t.Errorf("metric %s keeps %d values", StatsMetrics[j], len(v.Values))
		}
	}
	tokens := g.Metrics[0]
	if tokens.Shift == 0 {
		t.Fatal("100k distinct tokens are not coarsened")
	}

	// Count, sum, mean, min, max and histogram stay exact; percentiles within the bin width.
	s := whole.Stats(&Manifest{CreatedAt: testCreated})
	m := s.Group("", "").Metric("tokens")
	exact := make([]valueCount, n)
	var sum int64
	for k := range exact {
		exact[k] = valueCount{int64(-500 + k*step), 1}
		sum += exact[k].v
	}
	width := HistogramWidth(exact[0].v, exact[n-1].v)
	hist := make([]int64, floorDiv(exact[n-1].v, width)-floorDiv(exact[0].v, width)+1)
	for _, vc := range exact {
		hist[floorDiv(vc.v, width)-floorDiv(exact[0].v, width)]++
	}
	if m.Count != n || m.Sum != sum || m.Min != exact[0].v || m.Max != exact[n-1].v ||
		m.Mean != round6(float64(sum)/n) || m.Histogram.Width != width || !slices.Equal(m.Histogram.Counts, hist) {
		t.Errorf("coarsened tokens: %+v", m)
	}
	binWidth := float64(int64(1) << tokens.Shift)
	for _, q := range []struct {
		p   float64
		got float64
	}{{0.25, m.P25}, {0.5, m.P50}, {0.9, m.P90}} {
		if want := percentile(exact, n, q.p); math.Abs(q.got-want) >= binWidth {
			t.Errorf("p%v = %v, exact %v: off by more than the bin width %v", q.p*100, q.got, want, binWidth)
		}
	}
}

func TestStatsPartRejectExamples(t *testing.T) {
	// Examples are the first rejects of a class by key, in whatever order the rejects come.
	rejects := []schemas.Reject{
		{Source: "a", Key: "k9", Reason: "timeout: 1"}, {Source: "a", Key: "k2", Reason: "timeout: 2"},
		{Source: "b", Key: "k5", Reason: "timeout: 3"}, {Source: "a", Key: "k1", Class: "timeout", Reason: "timeout: 4"},
		{Source: "a", Key: "k3", Reason: "malformed: " + strings.Repeat("x", 400)},
	}
	p := &StatsPart{}
	p.AddRejects(rejects[:2])
	q := &StatsPart{}
	q.AddRejects(rejects[2:])
	p.Merge(q)
	s := p.Stats(&Manifest{CreatedAt: testCreated})
	var keys []string
	for _, ex := range s.Rejects[0].Examples {
		keys = append(keys, ex.Key)
	}
	if s.Rejects[0].Class != "timeout" || s.Rejects[0].Count != 4 || strings.Join(keys, " ") != "k1 k2 k5" {
		t.Errorf("timeout examples %v of %+v", keys, s.Rejects[0])
	}
	if r := s.Rejects[1].Examples[0].Reason; utf8.RuneCountInString(r) != maxExampleReason || !strings.HasSuffix(r, "…") {
		t.Errorf("long reason kept as %q", r)
	}
	// ComputeStats takes the same examples from a rejects.jsonl in another order.
	st := openTest(t, "mem://")
	m := writeRowsDataset(t, st, nil, rejects, nil)
	want, err := ComputeStats(context.Background(), st, m)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := want.Marshal()
	gotJSON, _ := p.Stats(m).Marshal()
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("examples differ from ComputeStats': %s", firstLineDiff(wantJSON, gotJSON))
	}
	// A part without rejects takes the reject counts from the manifest, one with an empty list not.
	counts := schemas.Counts{"rejects:timeout": 3}
	none := (&StatsPart{}).Stats(&Manifest{Counts: counts})
	empty := &StatsPart{}
	empty.AddRejects(nil)
	if none.Dataset.Rejects != 3 || len(none.Rejects) != 1 || empty.Stats(&Manifest{Counts: counts}).Dataset.Rejects != 0 {
		t.Errorf("rejects without a list %+v, with an empty one %+v", none.Dataset.InputCounts,
			empty.Stats(&Manifest{Counts: counts}).Dataset.InputCounts)
	}
}

func TestNewStatsPartErrors(t *testing.T) {
	var rows []schemas.Row
	for k := range 65 {
		rows = append(rows, schemas.Row{Level: "function", Direction: fmt.Sprintf("d%d", k)})
	}
	if _, err := NewStatsPart(rows); err == nil || !strings.Contains(err.Error(), "row 64") {
		t.Errorf("65 level/direction pairs: error %v", err)
	}
}

func TestParseStatsPart(t *testing.T) {
	c := statsCases(t)[0]
	valid := mergeTree(t, caseParts(t, c))
	data := partJSON(t, valid)
	if _, err := ParseStatsPart(data); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(p *StatsPart)) []byte {
		p := roundTrip(t, valid)
		f(p)
		return partJSON(t, p)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"not JSON", []byte("nope"), "malformed"},
		{"unknown field", []byte(`{"v":1,"extra":2}`), "unknown field"},
		{"trailing data", append(slices.Clone(data), "{}"...), "trailing data"},
		{"other version", []byte(`{"v":2}`), "version 2"},
		{"no version", []byte(`{}`), "version 0"},
		{"groups out of order", edit(func(p *StatsPart) { p.Groups[0], p.Groups[1] = p.Groups[1], p.Groups[0] }), "not sorted"},
		{"missing metric", edit(func(p *StatsPart) { p.Groups[0].Metrics = p.Groups[0].Metrics[1:] }), "17 metrics"},
		{"values out of order", edit(func(p *StatsPart) {
			v := p.Groups[0].Metrics[0].Values
			v[0], v[1] = v[1], v[0]
		}), "not increasing"},
		{"values miscounted", edit(func(p *StatsPart) { p.Groups[0].Metrics[2].Counts[0]++ }), "values counted"},
		{"needless shift", edit(func(p *StatsPart) { p.Groups[0].Metrics[0].Shift = 1 }), "coarser than needed"},
		{"sum of exact values", edit(func(p *StatsPart) { p.Groups[0].Metrics[0].Sum = 5 }), "exact values"},
		{"directions miscounted", edit(func(p *StatsPart) { p.Groups[0].Directions["forward"]++ }), "directions count"},
		{"few actions", edit(func(p *StatsPart) { p.Sources[0].Actions = p.Sources[0].Actions[:3] }), "3 action counts"},
		{"level without group", edit(func(p *StatsPart) { p.Levels[0].Level = "zzz" }), "no group"},
		{"traces do not add up", edit(func(p *StatsPart) { p.Levels[0].Traces++ }), "sources count"},
		{"sources repeated", edit(func(p *StatsPart) { p.Sources[1] = p.Sources[0] }), "not sorted or repeated"},
		{"rejects without the flag", edit(func(p *StatsPart) { p.HaveRejects = false }), "without have_rejects"},
		{"examples missing", edit(func(p *StatsPart) { delete(p.Examples, "timeout") }), "0 examples, want 3"},
		{"examples of no class", edit(func(p *StatsPart) { p.Examples["nope"] = p.Examples["timeout"] }), "has no rejects"},
		{"decontaminated miscounted", edit(func(p *StatsPart) { p.Rejects[0].Decontaminated = nil }), "decontaminated by set"},
		{"negative count", edit(func(p *StatsPart) { p.Rejects[0].Classes["timeout"] = -1 }), "bad count"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseStatsPart(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// FuzzParseStatsPart feeds ParseStatsPart arbitrary bytes (seeded with real parts): it never panics,
// what it accepts encodes to a canonical form that parses back to the same bytes, merges into an
// empty part unchanged, and gives statistics.
func FuzzParseStatsPart(f *testing.F) {
	for _, c := range statsCases(f)[:7] {
		f.Add(partJSON(f, mergeTree(f, caseParts(f, c))))
	}
	coarse, err := NewStatsPart(tokenRows("repository", "inverse", 0, MaxPartValues+10, 3))
	if err == nil {
		f.Add(partJSON(f, coarse))
	}
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":1,"groups":[null],"examples":{"x":null}}`))
	// Generated inputs: a repository's report, and rows of generated items with input sources.
	gen := &StatsPart{}
	gen.AddYields([]schemas.RepoYield{{Source: "r", Key: "k", Generation: &schemas.GenYield{Modules: 1, Found: 3, Units: 2, WithInput: 1,
		Coverage: [schemas.CoverageBuckets]int64{7: 1}, BySource: map[string]int64{"typed": 2}, Losses: map[string]int64{"async": 1, "other": 1}}}})
	if rows, err := NewStatsPart([]schemas.Row{{Level: "function", Direction: "forward", Path: "m.py", SourceID: "1", RepoURL: "r", InputSource: "typed"},
		{Level: "function", Direction: "forward", Path: "c.jsonl", SourceID: "2", InputSource: "corpus"}}); err == nil {
		gen.Merge(rows)
	}
	f.Add(partJSON(f, gen))
	f.Fuzz(checkPartInput)
}

// checkPartInput is FuzzParseStatsPart's check of one input.
func checkPartInput(t *testing.T, data []byte) {
	p, err := ParseStatsPart(data)
	if err != nil {
		return
	}
	out := partJSON(t, p)
	again, err := ParseStatsPart(out)
	if err != nil {
		t.Fatalf("ParseStatsPart rejects what it accepted, re-encoded: %v\n%s", err, out)
	}
	if out2 := partJSON(t, again); !bytes.Equal(out, out2) {
		t.Fatalf("not stable:\n%s\n%s", out, out2)
	}
	total := &StatsPart{}
	total.Merge(p)
	if got := partJSON(t, total); !bytes.Equal(got, out) {
		t.Fatalf("merging into an empty part changes it:\n%s\n%s", out, got)
	}
	m := &Manifest{CreatedAt: testCreated, Counts: schemas.Counts{"rejects:x": 1}}
	if _, err := p.Stats(m).Marshal(); err != nil {
		t.Fatal(err)
	}
	p.Merge(again)
	if _, err := p.Stats(m).Marshal(); err != nil {
		t.Fatal(err)
	}
}

func TestStatRowOfCopiesEveryColumn(t *testing.T) {
	// Every column statistics read from a shard is taken from the row in memory too: give each
	// column of the row its own value and find it in the stat row.
	var row schemas.Row
	rv := reflect.ValueOf(&row).Elem()
	byColumn := map[string]reflect.Value{}
	for i := range rv.NumField() {
		col, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("parquet"), ",")
		byColumn[col] = rv.Field(i)
		switch f := rv.Field(i); f.Kind() {
		case reflect.String:
			f.SetString("v" + col)
		case reflect.Int32, reflect.Int64:
			f.SetInt(int64(100 + i))
		case reflect.Bool:
			f.SetBool(true)
		}
	}
	got := statRowOf(&row)
	sv := reflect.ValueOf(got)
	for i := range sv.NumField() {
		col, _, _ := strings.Cut(sv.Type().Field(i).Tag.Get("parquet"), ",")
		want, ok := byColumn[col]
		if !ok {
			t.Errorf("column %s is not in schemas.Row", col)
			continue
		}
		if !reflect.DeepEqual(sv.Field(i).Interface(), want.Interface()) {
			t.Errorf("column %s: stat row has %v, row %v", col, sv.Field(i).Interface(), want.Interface())
		}
	}
}

// TestDecontaminatedBySet: decontaminated rejects count under the evaluation set the reject names
// (EvalSet), and a reject stored before rejects named it under the set its reason gives: never
// once under the set and once more under "unknown".
func TestDecontaminatedBySet(t *testing.T) {
	p := &StatsPart{}
	p.AddRejects([]schemas.Reject{
		{Source: "a.jsonl", Key: "a#0", Class: schemas.RejectDecontaminated, Reason: "decontaminated: cruxeval", EvalSet: "cruxeval"},
		{Source: "a.jsonl", Key: "a#1", Class: schemas.RejectDecontaminated, Reason: "decontaminated: cruxeval"},
		{Source: "a.jsonl", Key: "a#2", Class: schemas.RejectDecontaminated, Reason: "decontaminated: humaneval", EvalSet: "humaneval"},
	})
	if len(p.Rejects) != 1 {
		t.Fatalf("rejects %+v", p.Rejects)
	}
	if got, want := p.Rejects[0].Decontaminated, map[string]int64{"cruxeval": 2, "humaneval": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("decontaminated by set %v, want %v", got, want)
	}
}

// TestDecontaminatedCountedOnce: the dataset's decontaminated counts are the manifest's when it has
// any, never the manifest's laid over the rejects' key by key. A part whose rejects name no set
// (counted under "unknown", as every reject was before its reason parsed: a regression of
// "cruxeval=250 unknown=250") and a manifest that counts them under their set, plus the repository
// rows left out, give that set once.
func TestDecontaminatedCountedOnce(t *testing.T) {
	p := &StatsPart{}
	var rejects []schemas.Reject
	for i := range 250 {
		rejects = append(rejects, schemas.Reject{Source: "c.jsonl", Key: fmt.Sprintf("c#%03d", i), Class: schemas.RejectDecontaminated, Reason: "decontaminated"})
	}
	p.AddRejects(rejects)
	if got := p.Rejects[0].Decontaminated; !reflect.DeepEqual(got, map[string]int64{"unknown": 250}) {
		t.Fatalf("part counts %v", got)
	}
	for _, tc := range []struct {
		counts schemas.Counts
		want   map[string]int64
	}{
		{schemas.Counts{schemas.CountDecontaminated("cruxeval"): 250}, map[string]int64{"cruxeval": 250}},
		{schemas.Counts{schemas.CountDecontaminated("cruxeval"): 262}, map[string]int64{"cruxeval": 262}}, // with 12 repository rows
		{schemas.Counts{"items": 250}, map[string]int64{"unknown": 250}},                                  // a manifest without them: the rejects'
	} {
		s := p.Stats(&Manifest{Counts: tc.counts})
		if !reflect.DeepEqual(s.Dataset.Decontaminated, tc.want) {
			t.Errorf("counts %v: dataset decontaminated %v, want %v", tc.counts, s.Dataset.Decontaminated, tc.want)
		}
	}
}
