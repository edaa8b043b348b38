package dataset

import (
	"bytes"
	"context"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ndtrace/ndtrace/schemas"
)

func TestPercentile(t *testing.T) {
	tests := []struct {
		name          string
		values        []int64
		p25, p50, p90 float64
	}{
		{"one to ten", []int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 3.25, 5.5, 9.1},
		{"single", []int64{7}, 7, 7, 7},
		{"two", []int64{0, 10}, 2.5, 5, 9},
		{"repeated", []int64{4, 4, 4, 4, 100}, 4, 4, 61.6},
		{"negative and large", []int64{-3, 5000, 1 << 40}, 2498.5, 5000, float64(1<<40)*0.8 + 5000*0.2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c valueCounts
			for _, v := range tc.values {
				c.add(v)
			}
			m := c.metric("x", -8, 1<<40)
			for _, q := range []struct {
				name      string
				got, want float64
			}{{"p25", m.P25, tc.p25}, {"p50", m.P50, tc.p50}, {"p90", m.P90, tc.p90}} {
				if diff := q.got - q.want; diff > 1e-9*max(1, q.want) || diff < -1e-9*max(1, q.want) {
					t.Errorf("%s = %v, want %v", q.name, q.got, q.want)
				}
			}
			if m.Count != int64(len(tc.values)) {
				t.Errorf("count %d, want %d", m.Count, len(tc.values))
			}
		})
	}
}

func TestHistogramWidth(t *testing.T) {
	tests := []struct {
		lo, hi, want int64
	}{
		{0, 0, 1},
		{0, 39, 1},
		{0, 40, 2},
		{0, 79, 2},
		{0, 80, 4},
		{100, 139, 1},
		{1500, 16384, 512},
		{-5, 34, 1},
		{-5, 35, 2},
	}
	for _, tc := range tests {
		w := HistogramWidth(tc.lo, tc.hi)
		if w != tc.want {
			t.Errorf("HistogramWidth(%d, %d) = %d, want %d", tc.lo, tc.hi, w, tc.want)
		}
		if bins := floorDiv(tc.hi, w) - floorDiv(tc.lo, w) + 1; bins > MaxHistogramBins {
			t.Errorf("HistogramWidth(%d, %d): %d bins", tc.lo, tc.hi, bins)
		}
	}
}

// statsRowSpec describes one hand-made row of the statistics test dataset.
type statsRowSpec struct {
	level, dir, source, sourceID string
	tokens                       int
	events                       [4]int32
	exit                         string
}

// statsTestRow builds a structurally valid row (CheckRow) with the given counts; half its tokens
// are learned.
func statsTestRow(i int, s statsRowSpec) schemas.Row {
	ids := make([]int32, s.tokens)
	mask := make([]bool, s.tokens)
	for k := range mask[:s.tokens/2] {
		mask[k] = true
	}
	r := schemas.Row{
		ID: fmt.Sprintf("%064x", i), Level: s.level, Direction: s.dir, SourceID: s.sourceID, Policy: "paper",
		QualName: fmt.Sprintf("f%d", i), Seed: int64(i), Text: "x", InputIDs: ids, LossMask: mask,
		NumTokens: int32(s.tokens), NumLearned: int32(s.tokens / 2),
		EvCall: s.events[0], EvLine: s.events[1], EvReturn: s.events[2], EvException: s.events[3],
		Exit: s.exit, TracerVersion: testVersions.Tracer, PipelineVersion: testVersions.Pipeline,
		Tokenizer: byteTokenizerName, CreatedAt: testCreated,
	}
	if s.level == "repository" {
		r.RepoURL, r.Commit, r.Path, r.CodeChars = s.source, "c1", fmt.Sprintf("pkg/m%d.py", i), 1000
	} else {
		r.Path, r.CodeChars, r.InputSource = s.source, 40, schemas.InputSourceCorpus
	}
	if s.dir == "forward" {
		r.ActStepInto, r.ActStepOver, r.NumActions, r.NumStates = 2, 1, 3, 4
	} else {
		r.ActInvStepInto, r.ActInvStepCall, r.NumActions, r.NumStates = 1, 1, 2, 3
	}
	// Noisy values in one function-level row and three repository-level ones, a placeholder gap
	// in one repository-level row (statsShards' rows 2, 6, 7, 8 and 9).
	switch i {
	case 2, 6:
		r.NoisyValues = 1
	case 7:
		r.NoisyValues = 3
	case 8:
		r.NoisyValues = 2
	case 9:
		r.PlaceholderGap = true
	}
	return r
}

// statsShards are the rows of the statistics test dataset, per shard.
var statsShards = [][]statsRowSpec{
	{
		{"function", "forward", "corpus/a.jsonl", "1", 10, [4]int32{1, 3, 1, 0}, "exit_normal"},
		{"function", "inverse", "corpus/a.jsonl", "1", 20, [4]int32{1, 3, 1, 0}, "inv_exit_entry"},
		{"function", "forward", "corpus/a.jsonl", "2", 30, [4]int32{2, 5, 2, 1}, "exit_error"},
		{"function", "inverse", "corpus/a.jsonl", "2", 40, [4]int32{2, 5, 2, 1}, "inv_exit_entry"},
		{"function", "forward", "corpus/a.jsonl", "3", 50, [4]int32{1, 1, 1, 0}, "exit_normal"},
		{"function", "forward", "corpus/b.jsonl", "1", 60, [4]int32{1, 2, 1, 0}, "exit_normal"},
	},
	{
		{"repository", "forward", "https://example.com/r1", "t1", 100, [4]int32{5, 10, 5, 2}, "exit_normal"},
		{"repository", "forward", "https://example.com/r1", "t1", 300, [4]int32{5, 10, 5, 2}, "exit_error"},
		{"repository", "inverse", "https://example.com/r1", "t1", 200, [4]int32{5, 10, 5, 2}, "inv_exit_entry"},
		{"repository", "forward", "https://example.com/r1", "t2", 500, [4]int32{3, 4, 3, 1}, "exit_normal"},
	},
}

const statsRejects = `{"source":"corpus/a.jsonl","key":"corpus/a.jsonl#4","reason":"timeout: ran for 10s"}
{"source":"corpus/a.jsonl","key":"corpus/a.jsonl#5","reason":"timeout: ran for 10s"}
{"source":"corpus/c.jsonl","key":"corpus/c.jsonl#0","reason":"malformed JSON: unexpected end"}
{"source":"https://example.com/r1","key":"r1::t3","reason":"quarantined: outcome changed under tracing"}
{"source":"corpus/a.jsonl","key":"corpus/a.jsonl#6","reason":"decontaminated:cruxeval matches sample_3"}

{"source":"corpus/a.jsonl","key":"corpus/a.jsonl#7","reason":"duplicate of corpus/a.jsonl#1"}
{"source":"corpus/a.jsonl","key":"corpus/a.jsonl#8","reason":"timeout: ran for 10s"}
{"source":"corpus/a.jsonl","key":"corpus/a.jsonl#9","reason":"timeout"}
`

// writeStatsDataset writes the statistics test dataset into store, with rejects.jsonl if rejects
// is not empty, and returns its manifest.
func writeStatsDataset(t testing.TB, st *store.Store, rejects string, counts schemas.Counts) *Manifest {
	t.Helper()
	ctx := context.Background()
	var infos []ShardInfo
	i := 0
	for s, specs := range statsShards {
		var rows []schemas.Row
		for _, sp := range specs {
			rows = append(rows, statsTestRow(i, sp))
			i++
		}
		info, err := WriteShard(ctx, st, fmt.Sprintf("part-%05d", s), rows)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if rejects != "" {
		if err := st.Put(ctx, RejectsKey, []byte(rejects), nil); err != nil {
			t.Fatal(err)
		}
	}
	m, err := WriteManifest(ctx, st, Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: infos, Counts: counts})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var statsCounts = schemas.Counts{
	"items": 20, "rejects": 8, "rejects:timeout": 4, "rejects:malformed": 1, "rejects:quarantined": 1,
	"rejects:decontaminated": 1, "rejects:duplicate": 1, "quarantined": 1, "decontaminated:cruxeval": 1,
	"duplicates": 1, "dropped:too_long": 3,
}

func TestComputeStats(t *testing.T) {
	ctx := context.Background()
	st := openTest(t, "mem://")
	m := writeStatsDataset(t, st, statsRejects, statsCounts)
	s, err := ComputeStats(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, g := range s.Groups {
		names = append(names, g.Name)
	}
	wantNames := []string{"all", "forward", "inverse", "function", "function/forward", "function/inverse",
		"repository", "repository/forward", "repository/inverse"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("groups %v, want %v", names, wantNames)
	}

	// Token distributions per group, on known values.
	type dist struct {
		count          int64
		mean           float64
		min, max       int64
		p25, p50, p90  float64
		histLo, histW  int64
		histCountsHead []int64
	}
	tokenTests := []struct {
		level, dir string
		want       dist
	}{
		{"", "", dist{10, 131, 10, 500, 32.5, 55, 320, 0, 16, []int64{1, 2, 1, 2, 0, 0, 1}}},
		{"function", "forward", dist{4, 37.5, 10, 60, 25, 40, 57, 0, 16, []int64{1, 1, 0, 2}}},
		{"function", "", dist{6, 35, 10, 60, 22.5, 35, 55, 0, 16, []int64{1, 2, 1, 2}}},
		{"repository", "forward", dist{3, 300, 100, 500, 200, 300, 460, 0, 16, []int64{0, 0, 0, 0, 0, 0, 1}}},
		{"", "inverse", dist{3, 86.666667, 20, 200, 30, 40, 168, 0, 16, []int64{0, 1, 1}}},
	}
	for _, tc := range tokenTests {
		t.Run("tokens "+tc.level+"/"+tc.dir, func(t *testing.T) {
			g := s.Group(tc.level, tc.dir)
			if g == nil {
				t.Fatal("no group")
			}
			mt := g.Metric("tokens")
			got := dist{mt.Count, mt.Mean, mt.Min, mt.Max, mt.P25, mt.P50, mt.P90, mt.Histogram.Lo, mt.Histogram.Width,
				mt.Histogram.Counts[:min(len(mt.Histogram.Counts), len(tc.want.histCountsHead))]}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("tokens = %+v\nwant     %+v", got, tc.want)
			}
			var sum int64
			for _, c := range mt.Histogram.Counts {
				sum += c
			}
			if sum != mt.Count || len(mt.Histogram.Counts) > MaxHistogramBins {
				t.Errorf("histogram %v does not hold %d values in at most %d bins", mt.Histogram.Counts, mt.Count, MaxHistogramBins)
			}
		})
	}

	// Counters per group: traces are distinct, events counted once per trace.
	counterTests := []struct {
		group                       string
		traces, trajectories, toks  int64
		call, line, ret, exc        int64
		stepInto, invStepCall       int64
		exitNormal, exitError, invE int64
	}{
		{"all", 6, 10, 1310, 13, 25, 13, 4, 14, 3, 5, 2, 3},
		{"function", 4, 6, 210, 5, 11, 5, 1, 8, 2, 3, 1, 2},
		{"inverse", 3, 3, 260, 8, 18, 8, 3, 0, 3, 0, 0, 3},
		{"repository/forward", 2, 3, 900, 8, 14, 8, 3, 6, 0, 2, 1, 0},
	}
	for _, tc := range counterTests {
		var g *Group
		for i := range s.Groups {
			if s.Groups[i].Name == tc.group {
				g = &s.Groups[i]
			}
		}
		got := []int64{g.Traces, g.Trajectories, g.Tokens, g.Events["call"], g.Events["line"], g.Events["return"],
			g.Events["exception"], g.Actions["step_into"], g.Actions["inv_step_call"], g.Exits["exit_normal"],
			g.Exits["exit_error"], g.Exits["inv_exit_entry"]}
		want := []int64{tc.traces, tc.trajectories, tc.toks, tc.call, tc.line, tc.ret, tc.exc, tc.stepInto,
			tc.invStepCall, tc.exitNormal, tc.exitError, tc.invE}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("group %s counters %v, want %v", tc.group, got, want)
		}
	}

	// Rows with noisy values and with placeholder gaps, and their shares.
	for _, tc := range []struct {
		group        string
		noisy, gap   int64
		nshare, gshr float64
	}{
		{"all", 4, 1, 0.4, 0.1},
		{"function", 1, 0, 0.166667, 0},
		{"repository", 3, 1, 0.75, 0.25},
		{"repository/forward", 2, 1, 0.666667, 0.333333},
		{"inverse", 1, 0, 0.333333, 0},
	} {
		for _, g := range s.Groups {
			if g.Name == tc.group && (g.NoisyRows != tc.noisy || g.PlaceholderGapRows != tc.gap || g.NoisyShare != tc.nshare ||
				g.PlaceholderGapShare != tc.gshr) {
				t.Errorf("group %s: noisy %d (%v), gap %d (%v); want %d (%v), %d (%v)", g.Name, g.NoisyRows, g.NoisyShare,
					g.PlaceholderGapRows, g.PlaceholderGapShare, tc.noisy, tc.nshare, tc.gap, tc.gshr)
			}
		}
	}
	if d := s.Dataset; d.NoisyRows != 4 || d.NoisyShare != 0.4 || d.PlaceholderGapRows != 1 {
		t.Errorf("dataset: %d noisy rows (%v), %d with gaps", d.NoisyRows, d.NoisyShare, d.PlaceholderGapRows)
	}

	// Other metrics of the Figure 5 / A.1 set.
	fn := s.Group("function", "forward")
	for _, tc := range []struct {
		metric    string
		mean, p90 float64
	}{
		{"actions", 3, 3}, {"events", 5.5, 8.5}, {"code_chars", 40, 40}, {"learned_tokens", 18.75, 28.5},
		{"action:step_into", 2, 2}, {"event:line", 2.75, 4.4}, {"action:inv_step_into", 0, 0},
	} {
		mt := fn.Metric(tc.metric)
		if mt == nil || mt.Mean != tc.mean || fmt.Sprintf("%.6f", mt.P90) != fmt.Sprintf("%.6f", tc.p90) {
			t.Errorf("function/forward %s = %+v, want mean %v p90 %v", tc.metric, mt, tc.mean, tc.p90)
		}
	}
	if got := len(fn.Metrics); got != len(StatsMetrics) {
		t.Errorf("%d metrics, want %d", got, len(StatsMetrics))
	}

	// The dataset's input counts prefer the manifest's counts.
	d := s.Dataset
	if d.Items != 20 || d.Rejects != 8 || d.Quarantined != 1 || d.Duplicates != 1 ||
		d.Decontaminated["cruxeval"] != 1 || d.RejectsByClass["timeout"] != 4 || d.Traces != 6 || d.Trajectories != 10 {
		t.Errorf("dataset counts %+v", d)
	}
	if s.Counts["dropped:too_long"] != 3 || !s.Matches(m) {
		t.Errorf("counts %v / matches %v", s.Counts, s.Matches(m))
	}

	// Sources, sorted by level then source; a source seen only in rejects has no level.
	type src struct {
		level, source                     string
		items, traces, trajectories, rejs int64
		quarantined, duplicates, decontam int64
	}
	var gotSrc []src
	for _, x := range s.Sources {
		gotSrc = append(gotSrc, src{x.Level, x.Source, x.Items, x.Traces, x.Trajectories, x.Rejects, x.Quarantined,
			x.Duplicates, x.Decontaminated["cruxeval"]})
	}
	wantSrc := []src{
		{"", "corpus/c.jsonl", 1, 0, 0, 1, 0, 0, 0},
		{"function", "corpus/a.jsonl", 9, 3, 5, 6, 0, 1, 1},
		{"function", "corpus/b.jsonl", 1, 1, 1, 0, 0, 0, 0},
		{"repository", "https://example.com/r1", 3, 2, 4, 1, 1, 0, 0},
	}
	if !reflect.DeepEqual(gotSrc, wantSrc) {
		t.Errorf("sources\n%+v\nwant\n%+v", gotSrc, wantSrc)
	}
	if a := s.Sources[1]; a.Events["line"] != 9 || a.Tokens != 150 || a.RejectsByClass["timeout"] != 4 {
		t.Errorf("source a: %+v", a)
	}

	// Rejects by class, most first, with examples.
	var classes []string
	for _, rc := range s.Rejects {
		classes = append(classes, fmt.Sprintf("%s=%d/%d", rc.Class, rc.Count, len(rc.Examples)))
	}
	wantClasses := "timeout=4/3 decontaminated=1/1 duplicate=1/1 malformed=1/1 quarantined=1/1"
	if strings.Join(classes, " ") != wantClasses {
		t.Errorf("rejects %v, want %s", classes, wantClasses)
	}
	if ex := s.Rejects[0].Examples[0]; ex != (RejectExample{"corpus/a.jsonl", "corpus/a.jsonl#4", "timeout: ran for 10s"}) {
		t.Errorf("first example %+v", ex)
	}
}

func TestComputeStatsWithoutRejectsFile(t *testing.T) {
	st := openTest(t, "mem://")
	m := writeStatsDataset(t, st, "", schemas.Counts{"rejects:timeout": 2, "rejects:syntax": 5})
	s, err := ComputeStats(context.Background(), st, m)
	if err != nil {
		t.Fatal(err)
	}
	if s.Dataset.Rejects != 7 || s.Dataset.Items != 13 || len(s.Rejects) != 2 || s.Rejects[0].Class != "syntax" ||
		s.Rejects[0].Count != 5 || len(s.Rejects[0].Examples) != 0 {
		t.Errorf("dataset %+v rejects %+v", s.Dataset.InputCounts, s.Rejects)
	}
}

func TestComputeStatsEmpty(t *testing.T) {
	ctx := context.Background()
	st := openTest(t, "mem://")
	m, err := WriteManifest(ctx, st, Manifest{CreatedAt: testCreated, Versions: testVersions})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ComputeStats(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Groups) != 1 || s.Groups[0].Name != "all" || s.Groups[0].Metrics[0].Count != 0 || len(s.Sources) != 0 {
		t.Errorf("stats of an empty dataset: %+v", s)
	}
	if _, err := s.EncodeParquet(); err != nil {
		t.Error(err)
	}
}

func TestComputeStatsBadRejects(t *testing.T) {
	st := openTest(t, "mem://")
	m := writeStatsDataset(t, st, "{\"source\":\"a\"}\nnot json\n", nil)
	_, err := ComputeStats(context.Background(), st, m)
	if err == nil || !strings.Contains(err.Error(), "rejects.jsonl line 2") {
		t.Errorf("error %v, want one naming rejects.jsonl line 2", err)
	}
}

func TestStatsDeterminism(t *testing.T) {
	ctx := context.Background()
	var jsons, pqs [][]byte
	for _, kind := range []string{"mem", "file", "mem"} {
		u := "mem://"
		if kind == "file" {
			u = "file://" + t.TempDir() + "/ds"
		}
		st := openTest(t, u)
		m := writeStatsDataset(t, st, statsRejects, statsCounts)
		s, err := ComputeStats(ctx, st, m)
		if err != nil {
			t.Fatal(err)
		}
		js, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		pq, err := s.EncodeParquet()
		if err != nil {
			t.Fatal(err)
		}
		jsons, pqs = append(jsons, js), append(pqs, pq)

		// Round trip through the store.
		if err := WriteStats(ctx, st, s); err != nil {
			t.Fatal(err)
		}
		back, err := ReadStats(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Errorf("%s: ReadStats differs from what WriteStats wrote", kind)
		}
		loaded, computed, err := LoadStats(ctx, st, m)
		if err != nil || computed || !reflect.DeepEqual(loaded, s) {
			t.Errorf("%s: LoadStats computed=%v err=%v", kind, computed, err)
		}
		stored, err := st.ReadAll(ctx, StatsParquetKey)
		if err != nil || !bytes.Equal(stored, pq) {
			t.Errorf("%s: stats.parquet differs (%v)", kind, err)
		}
	}
	for i := 1; i < len(jsons); i++ {
		if !bytes.Equal(jsons[i], jsons[0]) || !bytes.Equal(pqs[i], pqs[0]) {
			t.Errorf("run %d gave other bytes than run 0", i)
		}
	}
	if !bytes.HasSuffix(jsons[0], []byte("}\n")) || !bytes.Contains(jsons[0], []byte("\n  \"format\": \"ndtrace-stats\",")) {
		t.Errorf("stats.json is not canonical indented JSON:\n%.200s", jsons[0])
	}

	// stats.parquet reads back as the long table.
	recs, err := parquet.Read[StatsRecord](bytes.NewReader(pqs[0]), int64(len(pqs[0])))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range recs {
		if r.Kind == "distribution" && r.Group == "function/forward" && r.Metric == "tokens" {
			found = r.Level == "function" && r.Direction == "forward" && r.Count == 4 && r.P25 == 25 && r.P90 == 57 &&
				r.HistWidth == 16 && len(r.HistCounts) == 4
		}
	}
	if !found {
		t.Error("stats.parquet has no correct function/forward tokens row")
	}
	st := openTest(t, "mem://")
	s, err := ComputeStats(ctx, st, writeStatsDataset(t, st, statsRejects, statsCounts))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(s.Records()) {
		t.Errorf("%d records, want %d", len(recs), len(s.Records()))
	}
}

func TestLoadStatsStale(t *testing.T) {
	ctx := context.Background()
	st := openTest(t, "mem://")
	m := writeStatsDataset(t, st, statsRejects, statsCounts)
	s, err := ComputeStats(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	s.Totals.Rows++ // stats of another version
	s.Dataset.Trajectories = 999
	if err := WriteStats(ctx, st, s); err != nil {
		t.Fatal(err)
	}
	got, computed, err := LoadStats(ctx, st, m)
	if err != nil || !computed || got.Dataset.Trajectories != 10 {
		t.Errorf("LoadStats with stale stats.json: computed=%v err=%v trajectories=%d", computed, err, got.Dataset.Trajectories)
	}
	if _, err := ParseStats([]byte(`{"format":"other","format_version":1}`)); err == nil {
		t.Error("ParseStats accepted another format")
	}
}

func TestStatsReadsOnlyItsColumns(t *testing.T) {
	// statRow's columns must exist in the row schema with the same types: a typo would make
	// parquet-go fill zeros silently.
	rowSchema := parquet.SchemaOf(schemas.Row{})
	for _, f := range parquet.SchemaOf(statRow{}).Fields() {
		rf, ok := rowSchema.Lookup(f.Name())
		if !ok {
			t.Errorf("column %s is not in schemas.Row", f.Name())
			continue
		}
		if rf.Node.Type().Kind() != f.Type().Kind() {
			t.Errorf("column %s: kind %v, schemas.Row has %v", f.Name(), f.Type().Kind(), rf.Node.Type().Kind())
		}
	}
}

// FuzzParseStats feeds ParseStats arbitrary bytes (seeded with real statistics): it never panics,
// and what it accepts marshals and parses back to the same statistics.
func FuzzParseStats(f *testing.F) {
	s := openTest(&testing.T{}, "mem://")
	m := writeStatsDataset(&testing.T{}, s, "", nil)
	st, err := ComputeStats(context.Background(), s, m)
	if err == nil {
		if data, err := st.Marshal(); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"format": 1, "groups": [null]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseStats(data)
		if err != nil {
			return
		}
		out, err := st.Marshal()
		if err != nil {
			return
		}
		again, err := ParseStats(out)
		if err != nil {
			t.Fatalf("ParseStats rejects what Marshal wrote: %v\n%s", err, out)
		}
		if out2, _ := again.Marshal(); !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}

// TestComputeStatsRowSchema1 reads a dataset whose first shard was written with row schema 1,
// without the columns schema 2 added (noisy_values, placeholder_gap, ...) and schema 3's
// (input_source): its rows count as clean and without input source, the current shard's are
// counted; then with row schema 2 (without input_source only); a shard of any other schema is
// still refused.
func TestComputeStatsRowSchema1(t *testing.T) {
	ctx := context.Background()
	st := openTest(t, "mem://")
	m := writeStatsDataset(t, st, statsRejects, statsCounts)
	want, err := ComputeStats(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	rt := reflect.TypeOf(schemas.Row{})
	// without returns schemas.Row's fields without those whose columns drop holds, in order.
	without := func(drop func(col, name string) bool) reflect.Type {
		var fields []reflect.StructField
		for i := range rt.NumField() {
			f := rt.Field(i)
			if col, _, _ := strings.Cut(f.Tag.Get("parquet"), ","); !drop(col, f.Name) {
				fields = append(fields, f)
			}
		}
		return reflect.StructOf(fields)
	}
	encode := func(rows []schemas.Row, old reflect.Type) []byte {
		var buf bytes.Buffer
		w := parquet.NewWriter(&buf, parquet.SchemaOf(reflect.New(old).Interface()))
		for i := range rows {
			o := reflect.New(old).Elem()
			rv := reflect.ValueOf(rows[i])
			for k := range old.NumField() {
				o.Field(k).Set(rv.FieldByName(old.Field(k).Name))
			}
			if err := w.Write(o.Addr().Interface()); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	var rows []schemas.Row
	for i, sp := range statsShards[0] {
		rows = append(rows, statsTestRow(i, sp))
	}
	wantFn := want.Group("function", "")
	if wantFn.InputSources[schemas.InputSourceCorpus] != 6 {
		t.Fatalf("current schema: function rows by input source %v, want corpus=6", wantFn.InputSources)
	}
	for _, tc := range []struct {
		name  string
		drop  map[string]bool
		noisy int64 // function-level rows with noisy values
	}{
		{"schema 1", map[string]bool{"code_omitted": true, "function_id": true, "split": true, "truncated": true,
			"noisy_values": true, "placeholder_gap": true, "input_source": true}, 0},
		{"schema 2", rowSchema3Columns, 1},
	} {
		old := without(func(col, _ string) bool { return tc.drop[col] })
		if old.NumField() != rt.NumField()-len(tc.drop) {
			t.Fatalf("%s: %d of %d columns kept", tc.name, old.NumField(), rt.NumField())
		}
		if err := st.Put(ctx, m.Shards[0].Path, encode(rows, old), nil); err != nil {
			t.Fatal(err)
		}
		got, err := ComputeStats(ctx, st, m)
		if err != nil {
			t.Fatalf("a %s shard: %v", tc.name, err)
		}
		// Row 2 of shard 0 had noisy values; read from schema 1 it has none. Shard 0 holds
		// every function-level row: none has an input source.
		if fn := got.Group("function", ""); fn.NoisyRows != tc.noisy || fn.Trajectories != 6 || fn.Tokens != wantFn.Tokens || fn.InputSources != nil {
			t.Errorf("function group from a %s shard: %d noisy of %d trajectories, %d tokens, input sources %v",
				tc.name, fn.NoisyRows, fn.Trajectories, fn.Tokens, fn.InputSources)
		}
		if all := got.Group("", ""); all.NoisyRows != 3+tc.noisy || all.PlaceholderGapRows != 1 || all.Trajectories != 10 {
			t.Errorf("%s: all: %d noisy, %d gaps of %d", tc.name, all.NoisyRows, all.PlaceholderGapRows, all.Trajectories)
		}
	}

	// A shard missing another column is refused, naming it.
	old := without(func(_, name string) bool { return name == "CodeChars" })
	if err := st.Put(ctx, m.Shards[0].Path, encode(rows, old), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ComputeStats(ctx, st, m); err == nil || !strings.Contains(err.Error(), "code_chars") {
		t.Errorf("a shard without code_chars: %v", err)
	}
}
