package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	"github.com/ndtrace/ndtrace/tokenize"
)

func strataOf(sizes ...int64) []stratum {
	var out []stratum
	for i, n := range sizes {
		out = append(out, stratum{Shard: fmt.Sprintf("data/part-%02d.parquet", i/2), Level: "function",
			Direction: []string{"forward", "inverse"}[i%2], Rows: n})
	}
	return out
}

func takes(s []stratum) []int {
	out := make([]int, len(s))
	for i := range s {
		out[i] = s[i].Take
	}
	return out
}

// TestAllocate checks the split of a sample over strata: it sums to the sample (or every row),
// never exceeds a stratum, covers every stratum when it can, and is proportional otherwise.
func TestAllocate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int64
		n     int
		want  []int // nil: only the invariants
	}{
		{"proportional", []int64{101, 51, 1, 1}, 8, []int{4, 2, 1, 1}}, // 1 each, then 4 split 100:50:0:0 (2.67, 1.33)
		{"all rows", []int64{3, 2, 1}, 100, []int{3, 2, 1}},
		{"exactly the strata", []int64{10, 20, 30}, 3, []int{1, 1, 1}},
		{"fewer than the strata", []int64{10, 20, 30, 40, 50}, 2, nil},
		{"one stratum", []int64{1000}, 7, []int{7}},
		{"zero", []int64{5, 5}, 0, []int{0, 0}},
		{"equal strata", []int64{10, 10, 10, 10}, 10, nil},
		{"many small", []int64{1, 1, 1, 1, 1, 1, 1, 1, 1000}, 20, []int{1, 1, 1, 1, 1, 1, 1, 1, 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := strataOf(tc.sizes...)
			allocate(s, tc.n, 7)
			got := takes(s)
			var total int64
			sum := 0
			for i, st := range s {
				total += st.Rows
				sum += st.Take
				if int64(st.Take) > st.Rows || st.Take < 0 {
					t.Errorf("stratum %d: take %d of %d rows", i, st.Take, st.Rows)
				}
				if tc.n >= len(s) && st.Take == 0 {
					t.Errorf("stratum %d left out of a sample of %d over %d strata", i, tc.n, len(s))
				}
			}
			if want := int(min(int64(tc.n), total)); sum != want {
				t.Errorf("takes %v sum to %d, want %d", got, sum, want)
			}
			if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Errorf("takes %v, want %v", got, tc.want)
			}
			again := strataOf(tc.sizes...)
			allocate(again, tc.n, 7)
			if !slices.Equal(takes(again), got) {
				t.Errorf("not reproducible: %v then %v", got, takes(again))
			}
		})
	}
}

// TestReservoir checks that a stratum's draw is the rows of smallest priority whatever the order
// they come in, bounded by the stratum's allocation, and changes with the seed.
func TestReservoir(t *testing.T) {
	var rows []schemas.Row
	for i := 0; i < 500; i++ {
		rows = append(rows, schemas.Row{ID: fmt.Sprintf("row-%03d", i)})
	}
	draw := func(seed uint64, take int, order []schemas.Row) []string {
		r := reservoir{take: take}
		for i := range order {
			r.offer(priority(seed, order[i].ID), &order[i])
		}
		var ids []string
		for _, d := range r.rows {
			ids = append(ids, d.row.ID)
		}
		return ids
	}
	reversed := slices.Clone(rows)
	slices.Reverse(reversed)
	for _, tc := range []struct {
		seed uint64
		take int
	}{{0, 1}, {0, 10}, {1, 10}, {42, 499}, {42, 500}, {3, 600}} {
		t.Run(fmt.Sprintf("seed%d-take%d", tc.seed, tc.take), func(t *testing.T) {
			a := draw(tc.seed, tc.take, rows)
			if want := min(tc.take, len(rows)); len(a) != want {
				t.Fatalf("drew %d rows, want %d", len(a), want)
			}
			if b := draw(tc.seed, tc.take, reversed); !slices.Equal(a, b) {
				t.Errorf("the draw depends on the order of the rows")
			}
			// The draw is exactly the take rows of smallest priority.
			all := slices.Clone(rows)
			slices.SortFunc(all, func(x, y schemas.Row) int {
				px, py := priority(tc.seed, x.ID), priority(tc.seed, y.ID)
				if px != py {
					if px < py {
						return -1
					}
					return 1
				}
				return strings.Compare(x.ID, y.ID)
			})
			for i, id := range a {
				if all[i].ID != id {
					t.Fatalf("row %d drawn is %s, want %s", i, id, all[i].ID)
				}
			}
			if tc.take < len(rows) {
				if other := draw(tc.seed+1000, tc.take, rows); slices.Equal(a, other) && tc.take > 1 {
					t.Errorf("another seed drew the same rows")
				}
			}
		})
	}
}

// TestSampleSize checks --sample and --fraction against the dataset's rows.
func TestSampleSize(t *testing.T) {
	for _, tc := range []struct {
		total    int64
		n        int
		fraction float64
		want     int
	}{
		{1000, 200, 0, 200},
		{100, 200, 0, 100},
		{1000, 200, 0.1, 100},
		{1000, 200, 0.0001, 1},
		{1000, 200, 1, 1000},
		{0, 200, 0.5, 0},
	} {
		if got := sampleSize(tc.total, tc.n, tc.fraction); got != tc.want {
			t.Errorf("sampleSize(%d, %d, %v) = %d, want %d", tc.total, tc.n, tc.fraction, got, tc.want)
		}
	}
}

// TestFirstDifferentState checks that a difference is placed in the state (frame) it is in.
func TestFirstDifferentState(t *testing.T) {
	fs := tokenize.FrameSep
	code := "<|begin_of_text|><|trace_context_start|>def f(x):\n    return x\n"
	a := code + fs + "<|call_sep|>A" + fs + "<|line_sep|>B" + fs + "<|exit_normal|><|trace_end|><|end_of_text|>"
	for _, tc := range []struct {
		name string
		b    string
		want int
	}{
		{"code", strings.Replace(a, "return x", "return y", 1), 0},
		{"state 1", strings.Replace(a, "A", "Z", 1), 1},
		{"state 2", strings.Replace(a, "B", "Z", 1), 2},
		{"exit", strings.Replace(a, "<|exit_normal|>", "<|exit_error|>", 1), 3},
		{"one state fewer", code + fs + "<|call_sep|>A" + fs + "<|exit_normal|><|trace_end|><|end_of_text|>", 2},
		{"same", a, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, _, _, n := firstDifferentState(a, tc.b)
			if k != tc.want || n != 4 {
				t.Errorf("first different state %d of %d, want %d of 4", k, n, tc.want)
			}
		})
	}
	long := strings.Repeat("x", 1000) + "A" + strings.Repeat("y", 1000)
	if e := excerpt(long, strings.Replace(long, "A", "B", 1)); !strings.Contains(e, "A") || len(e) > 200 {
		t.Errorf("excerpt %q does not show the difference in short", e)
	}
}

// FuzzParseVerification checks that any input is a certificate or an error, never a panic, and
// that a certificate parsed re-encodes to one that parses the same.
func FuzzParseVerification(f *testing.F) {
	f.Add([]byte(`{"format":"ndtrace-verify","rows":3,"sample":{"seed":1,"size":2,"strata":1},"checked":2,"agreed":2,"agreement":1,"differences":{},"not_re_executed":{},"replay":{"run":0,"agreed":0,"differences":{},"not_replayed":{"not_run":2}},"min_agreement":1,"passed":true,"verifier":{"tracer":"5","pipeline":"1"},"dataset_versions":{"tracer":"5","pipeline":"1"},"dataset_created_at":"2026-11-22T00:00:00Z","started_at":"2026-11-22T00:00:00Z","seconds":1.5}`))
	f.Add([]byte(`{"format":"other"}`))
	f.Add([]byte(`{"format":"ndtrace-verify"} {}`))
	f.Add([]byte(`{"format":"ndtrace-verify","x":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		if err != nil {
			return
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		w, err := Parse(again)
		if err != nil {
			t.Fatalf("re-encoded certificate does not parse: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("round trip changed the certificate:\n%+v\n%+v", v, w)
		}
	})
}

// FuzzFirstDifferentState checks that the first differing state is always a part of one of the
// texts, and -1 exactly when they are equal.
func FuzzFirstDifferentState(f *testing.F) {
	fs := tokenize.FrameSep
	f.Add("a"+fs+"b"+fs+"c", "a"+fs+"x"+fs+"c")
	f.Add("", fs)
	f.Add("same", "same")
	f.Fuzz(func(t *testing.T, a, b string) {
		k, _, _, n := firstDifferentState(a, b)
		switch {
		case a == b && k != -1, a != b && k < 0:
			t.Fatalf("k = %d for equal = %v", k, a == b)
		case k >= max(n, len(splitStates(b))):
			t.Fatalf("k = %d beyond the parts (%d, %d)", k, n, len(splitStates(b)))
		}
	})
}

// sampleDataset writes shards of synthetic rows (levels, directions) into a memory store and
// returns the store and a manifest listing them: shard i holds sizes[i] rows per (level,
// direction) of groups.
func sampleDataset(t *testing.T, sizes []int) (*store.Store, *dataset.Manifest) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "mem://sample")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	groups := [][2]string{{"function", "forward"}, {"function", "inverse"}, {"repository", "forward"}}
	m := &dataset.Manifest{}
	for i, n := range sizes {
		var rows []schemas.Row
		for _, g := range groups {
			for k := 0; k < n; k++ {
				r := schemas.Row{ID: fmt.Sprintf("%d-%s-%s-%d", i, g[0], g[1], k), Level: g[0], Direction: g[1],
					Tokenizer: "t", InputIDs: []int32{1}, LossMask: []bool{true}, NumTokens: 1, NumLearned: 1}
				if g[0] == "function" {
					r.InputSource = schemas.InputSourceCorpus
				}
				rows = append(rows, r)
			}
		}
		info, err := dataset.WriteShard(ctx, st, fmt.Sprintf("part-%02d", i), rows)
		if err != nil {
			t.Fatal(err)
		}
		m.Shards = append(m.Shards, info)
	}
	return st, m
}

// TestDrawSample draws samples from a dataset of shards: the sample has the size asked for (or
// every row), covers every stratum (shard, level, direction) when it is at least as large as
// their number, never takes more of a stratum than its share, and is the same for the same seed.
func TestDrawSample(t *testing.T) {
	ctx := context.Background()
	st, m := sampleDataset(t, []int{40, 5, 1, 20}) // 4 shards × 3 groups: 12 strata, 198 rows
	draw := func(n int, seed uint64) ([]schemas.Row, []stratum) {
		strata, err := countStrata(ctx, st, m)
		if err != nil {
			t.Fatal(err)
		}
		allocate(strata, n, seed)
		rows, err := drawRows(ctx, st, strata, seed)
		if err != nil {
			t.Fatal(err)
		}
		return rows, strata
	}
	ids := func(rows []schemas.Row) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		n    int
		seed uint64
	}{{1, 0}, {5, 1}, {12, 2}, {30, 3}, {100, 4}, {198, 5}, {500, 6}} {
		t.Run(fmt.Sprintf("n%d-seed%d", tc.n, tc.seed), func(t *testing.T) {
			rows, strata := draw(tc.n, tc.seed)
			if len(strata) != 12 {
				t.Fatalf("%d strata, want 12", len(strata))
			}
			if want := min(tc.n, 198); len(rows) != want {
				t.Fatalf("drew %d rows, want %d", len(rows), want)
			}
			per := map[string]int{}
			seen := map[string]bool{}
			for _, r := range rows {
				per[r.ID[:strings.LastIndex(r.ID, "-")]]++
				if seen[r.ID] {
					t.Errorf("row %s drawn twice", r.ID)
				}
				seen[r.ID] = true
			}
			for _, s := range strata {
				shard := strings.TrimSuffix(strings.TrimPrefix(s.Shard, "data/part-"), ".parquet")
				shard = strings.TrimLeft(shard, "0")
				if shard == "" {
					shard = "0"
				}
				got := per[shard+"-"+s.Level+"-"+s.Direction]
				if got != s.Take {
					t.Errorf("stratum %s/%s/%s: drew %d, allocated %d", s.Shard, s.Level, s.Direction, got, s.Take)
				}
				if tc.n >= len(strata) && got == 0 {
					t.Errorf("stratum %s/%s/%s left out", s.Shard, s.Level, s.Direction)
				}
			}
			again, _ := draw(tc.n, tc.seed)
			if !slices.Equal(ids(rows), ids(again)) {
				t.Error("the same seed drew other rows")
			}
			if other, _ := draw(tc.n, tc.seed+100); tc.n >= 5 && tc.n < 198 && slices.Equal(ids(rows), ids(other)) {
				t.Error("another seed drew the same rows")
			}
		})
	}
}
