package dataset

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// writeLegacyDataset writes a dataset as ndtrace wrote it before the data/ layout: shards under
// shards/ (the bytes WriteShard writes, at the old key), a format 2 manifest naming them, and
// stats.parquet and stats.json at the root beside them.
func writeLegacyDataset(t testing.TB, st *store.Store) *Manifest {
	t.Helper()
	ctx := context.Background()
	var infos []ShardInfo
	for s, n := range []int{4, 3} {
		data, info, err := EncodeShard(makeRows(t, s*10, n))
		if err != nil {
			t.Fatal(err)
		}
		info.Path = fmt.Sprintf("%s/part-%05d%s", LegacyShardDir, s, ShardExt)
		if err := putShard(ctx, st, info, data, nil); err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	m, err := WriteManifest(ctx, st, Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: infos,
		Config: []byte(`{"name": "old", "policy": "paper", "seed": 7}`)})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := ComputeStats(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteStats(ctx, st, stats); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLegacyLayout reads a dataset written before the data/ layout (shards/, stats at the root):
// it validates, its statistics are the stored ones, and its card names shards/.
func TestLegacyLayout(t *testing.T) {
	ctx := context.Background()
	st := openTest(t, t.TempDir())
	m := writeLegacyDataset(t, st)
	if m.Shards[0].Path != "shards/part-00000.parquet" {
		t.Fatalf("legacy shard path %s", m.Shards[0].Path)
	}
	if err := Validate(ctx, st, testLookup); err != nil {
		t.Fatalf("Validate of an old-layout dataset: %v", err)
	}
	s, computed, err := LoadStats(ctx, st, m)
	if err != nil || computed || s.Totals.Rows != 7 {
		t.Fatalf("LoadStats = %+v, computed %v, %v; want the stored stats.json of 7 rows", s, computed, err)
	}
	rows, err := ReadRows(ctx, st, m.Shards[1].Path, -1)
	if err != nil || len(rows) != 3 {
		t.Fatalf("ReadRows(%s) = %d rows, %v", m.Shards[1].Path, len(rows), err)
	}
	if err := WriteCard(ctx, st, m, s); err != nil {
		t.Fatal(err)
	}
	card, err := st.ReadAll(ctx, CardKey)
	if err != nil {
		t.Fatal(err)
	}
	meta := parseCard(t, card)
	if got := meta.Configs[0].DataFiles[0].Path; len(got) != 1 || got[0] != "shards/*.parquet" {
		t.Errorf("card of an old-layout dataset: data files %v, want [shards/*.parquet]", got)
	}
}

// parseCard splits a card into its YAML front matter and checks it against the Hugging Face dataset
// card metadata: the keys ndtrace writes are documented fields with the documented types
// (license a string, tags and task_categories lists of strings, configs a list of {config_name,
// data_files: [{split, path}], default}, dataset_info a list of {config_name, features: [{name,
// dtype | list}], splits: [{name, num_bytes, num_examples}], download_size}). Unknown keys fail.
func parseCard(t *testing.T, card []byte) CardMeta {
	t.Helper()
	rest, ok := bytes.CutPrefix(card, []byte("---\n"))
	if !ok {
		t.Fatalf("card does not start with YAML front matter:\n%s", card)
	}
	front, body, ok := bytes.Cut(rest, []byte("\n---\n"))
	if !ok {
		t.Fatalf("card's front matter is not closed by ---:\n%s", card)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		t.Error("card has no body")
	}
	// Generic decode: every key must be a documented card field of the right type.
	var generic map[string]any
	if err := yaml.Unmarshal(front, &generic); err != nil {
		t.Fatalf("card YAML: %v\n%s", err, front)
	}
	documented := map[string]string{"license": "string", "pretty_name": "string", "tags": "[]string",
		"task_categories": "[]string", "size_categories": "[]string", "configs": "[]map", "dataset_info": "[]map",
		"language": "[]string"}
	for k, v := range generic {
		want, ok := documented[k]
		if !ok {
			t.Errorf("card key %q is not a Hugging Face dataset card field", k)
			continue
		}
		switch want {
		case "string":
			if _, ok := v.(string); !ok {
				t.Errorf("card %s is %T, want a string", k, v)
			}
		case "[]string", "[]map":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				t.Errorf("card %s is %T, want a non-empty list", k, v)
				continue
			}
			for _, e := range list {
				if _, isStr := e.(string); isStr != (want == "[]string") {
					t.Errorf("card %s has an element of type %T", k, e)
				}
			}
		}
	}
	for _, k := range []string{"license", "configs", "dataset_info", "tags"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("card lacks %s", k)
		}
	}
	var meta CardMeta
	dec := yaml.NewDecoder(bytes.NewReader(front))
	dec.KnownFields(true)
	if err := dec.Decode(&meta); err != nil {
		t.Fatalf("card YAML does not have the card's shape: %v\n%s", err, front)
	}
	defaults := 0
	for _, c := range meta.Configs {
		if c.ConfigName == "" || len(c.DataFiles) == 0 {
			t.Errorf("config %+v lacks config_name or data_files", c)
		}
		for _, df := range c.DataFiles {
			if df.Split == "" || len(df.Path) == 0 {
				t.Errorf("config %s: data_files %+v lacks split or path", c.ConfigName, df)
			}
		}
		if c.Default {
			defaults++
		}
	}
	if defaults != 1 || meta.Configs[0].ConfigName != RowsConfig || !meta.Configs[0].Default {
		t.Errorf("configs %+v: want exactly one default, the rows (%s)", meta.Configs, RowsConfig)
	}
	if len(meta.DatasetInfo) != len(meta.Configs) {
		t.Errorf("%d dataset_info entries for %d configs", len(meta.DatasetInfo), len(meta.Configs))
	}
	for _, di := range meta.DatasetInfo {
		for _, f := range di.Features {
			if f.Name == "" || (f.Dtype == "") == (f.List == "") {
				t.Errorf("config %s: feature %+v needs a name and exactly one of dtype and list", di.ConfigName, f)
			}
		}
	}
	return meta
}

// TestRenderCard renders the card of a packed dataset written by the pipeline's spec and checks
// its metadata (parsed as YAML), its determinism and its body.
func TestRenderCard(t *testing.T) {
	ctx := context.Background()
	st := openTest(t, "mem://")
	rows := makeRows(t, 0, 30)
	info, err := WriteShard(ctx, st, "part-00000", rows)
	if err != nil {
		t.Fatal(err)
	}
	seqs, _, err := Pack(rows, 2048, 0)
	if err != nil {
		t.Fatal(err)
	}
	pinfo, err := WritePackedShard(ctx, st, "part-00000", seqs, 2048)
	if err != nil {
		t.Fatal(err)
	}
	m, err := WriteManifest(ctx, st, Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: []ShardInfo{info},
		Packing: &Packing{Length: 2048, Shards: []ShardInfo{pinfo}},
		Config: []byte(`{"name": "crux", "license": "mit", "policy": "paper", "seed": 11, "mask": "states",
			"directions": ["forward", "inverse"], "sources": [{"kind": "jsonl", "path": "crux.jsonl"}, {"kind": "examples"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := ComputeStats(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	card, err := RenderCard(m, []ShardInfo{info}, []ShardInfo{pinfo}, stats)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := RenderCard(m, []ShardInfo{info}, []ShardInfo{pinfo}, stats)
	if !bytes.Equal(card, again) {
		t.Error("RenderCard is not deterministic")
	}
	meta := parseCard(t, card)
	if meta.License != "mit" || meta.PrettyName != "crux" {
		t.Errorf("license %q, pretty_name %q; want the spec's mit and crux", meta.License, meta.PrettyName)
	}
	if len(meta.Configs) != 2 || meta.Configs[1].ConfigName != PackedConfig ||
		fmt.Sprint(meta.Configs[0].DataFiles[0].Path) != "[data/*.parquet]" || fmt.Sprint(meta.Configs[1].DataFiles[0].Path) != "[packed/*.parquet]" {
		t.Errorf("configs = %+v", meta.Configs)
	}
	rowsInfo := meta.DatasetInfo[0]
	if len(rowsInfo.Features) != len(ArrowSchema().Fields()) || rowsInfo.Splits[0].NumExamples != 30 {
		t.Errorf("rows dataset_info: %d features (want %d), %+v", len(rowsInfo.Features), len(ArrowSchema().Fields()), rowsInfo.Splits)
	}
	for i, f := range ArrowSchema().Fields() {
		if rowsInfo.Features[i].Name != f.Name {
			t.Errorf("feature %d is %s, column %s", i, rowsInfo.Features[i].Name, f.Name)
		}
	}
	want := map[string]CardFeature{
		"input_ids":  {Name: "input_ids", List: "int32"},
		"loss_mask":  {Name: "loss_mask", List: "bool"},
		"seed":       {Name: "seed", Dtype: "int64"},
		"text":       {Name: "text", Dtype: "string"},
		"created_at": {Name: "created_at", Dtype: "timestamp[us, tz=UTC]"},
	}
	for _, f := range rowsInfo.Features {
		if w, ok := want[f.Name]; ok && f != w {
			t.Errorf("feature %+v, want %+v", f, w)
		}
	}
	if p := meta.DatasetInfo[1]; p.Splits[0].NumExamples != int64(len(seqs)) || len(p.Features) != 8 {
		t.Errorf("packed dataset_info = %+v", p)
	}
	body := string(card)
	for _, s := range []string{"## Statistics", "| trajectories | 30 |", "| tokenizer | test-bytes |", "| policy | paper |",
		"| created_at | 2026-", "- jsonl: `crux.jsonl`", "- examples", "| license | mit |", "load_dataset(\"path/to/this/folder\", \"packed\""} {
		if !strings.Contains(body, s) {
			t.Errorf("card lacks %q:\n%s", s, body)
		}
	}

	// No license in the spec: DefaultLicense; a config that is no spec still gives a valid card.
	m.Config = []byte(`[1, 2]`)
	card, err = RenderCard(m, []ShardInfo{info}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if meta := parseCard(t, card); meta.License != DefaultLicense {
		t.Errorf("license %q, want %q", meta.License, DefaultLicense)
	}
}

// TestCardFeatures covers every column type of both row types.
func TestCardFeatures(t *testing.T) {
	for _, f := range append(CardFeatures(schemas.Row{}), CardFeatures(schemas.PackedRow{})...) {
		switch f.Dtype + f.List {
		case "string", "int32", "int64", "bool", "timestamp[us, tz=UTC]":
		default:
			t.Errorf("feature %+v has a type the card does not document", f)
		}
	}
}

// TestCardStatisticsRounded checks that the card's statistics are written for people: counts with
// thousands separators, means and percentiles to one decimal (never 183.759375).
func TestCardStatisticsRounded(t *testing.T) {
	m := &Manifest{CreatedAt: testCreated, Versions: testVersions, Totals: Totals{Rows: 12345}}
	st := &Stats{
		Dataset: SourceStats{RowCounts: RowCounts{Trajectories: 12345, Traces: 4321, Tokens: 2268431, LearnedTokens: 1134215,
			Directions: map[string]int64{"forward": 6173, "inverse": 6172}, InputSources: map[string]int64{"corpus": 10000, "typed": 2345}},
			InputCounts: InputCounts{Items: 5000, Rejects: 1234}},
		Repositories: &Yield{Generation: &Generation{GenYield: schemas.GenYield{Found: 3000, Units: 2500, WithInput: 2000},
			WithInputShare: 0.8, MedianCoverage: 70}},
		Groups: []Group{{Name: "all", RowCounts: RowCounts{Trajectories: 12345}, Metrics: []Metric{
			{Name: "tokens", Mean: 183.759375, P50: 150.5, P90: 1234.25},
			{Name: "actions", Mean: 7.04},
			{Name: "events", Mean: 0.96},
		}}},
		Rejects: []RejectClass{{Class: "timeout", Count: 1234}},
	}
	card, err := RenderCard(m, nil, nil, st)
	if err != nil {
		t.Fatal(err)
	}
	body := string(card)
	for _, s := range []string{"| trajectories | 12,345 |", "| traces | 4,321 |", "| tokens | 2,268,431 |", "| learned tokens | 1,134,215 |",
		"| input items | 5,000 |", "| rejected items | 1,234 |", "| forward trajectories | 6,173 |",
		"| all | 12,345 | 183.8 | 150.5 | 1,234.3 | 7 | 1 |", "| timeout | 1,234 |", "| trajectories of input source typed | 2,345 |",
		"| functions found without inputs | 3,000 |", "| units with a generated input | 2,000 (80%) |", "| median line coverage of those units | 70%+ |"} {
		if !strings.Contains(body, s) {
			t.Errorf("card lacks %q:\n%s", s, body)
		}
	}
	if strings.Contains(body, "183.759375") {
		t.Errorf("card shows the unrounded mean:\n%s", body)
	}
}

// TestCardSplits checks the card's splits by function: the split column's row counts (from the
// statistics) with the spec's shares, the sentence on how rows are split, and the front matter's
// one file split still holding every row (the Hub's loader checks it against the files).
func TestCardSplits(t *testing.T) {
	ctx := context.Background()
	st := openTest(t, "mem://")
	rows := makeRows(t, 0, 30)
	for i := range rows {
		rows[i].Split = schemas.TrainSplit
		if i < 10 {
			rows[i].Split = "validation"
		}
	}
	info, err := WriteShard(ctx, st, "part-00000", rows)
	if err != nil {
		t.Fatal(err)
	}
	m, err := WriteManifest(ctx, st, Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: []ShardInfo{info},
		Config: []byte(`{"name": "crux", "split": {"validation": 0.05}}`)})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := ComputeStats(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	if got := stats.Dataset.Splits; got["validation"] != 10 || got[schemas.TrainSplit] != 20 || len(got) != 2 {
		t.Errorf("statistics' splits %v", got)
	}
	// The batches' parts merged give the same counts.
	part, err := NewStatsPart(rows[:10])
	if err != nil {
		t.Fatal(err)
	}
	rest, err := NewStatsPart(rows[10:])
	if err != nil {
		t.Fatal(err)
	}
	part.Merge(rest)
	if got := part.Stats(m).Dataset.Splits; got["validation"] != 10 || got[schemas.TrainSplit] != 20 {
		t.Errorf("merged parts' splits %v", got)
	}
	card, err := RenderCard(m, []ShardInfo{info}, nil, stats)
	if err != nil {
		t.Fatal(err)
	}
	body := string(card)
	for _, s := range []string{"## Splits", "split by function through the `split` column", "no function is in\ntwo splits",
		"| `validation` | 5% | 10 |", "| `train` | 95% | 20 |", `r["split"] == "validation"`} {
		if !strings.Contains(body, s) {
			t.Errorf("card lacks %q:\n%s", s, body)
		}
	}
	if meta := parseCard(t, card); len(meta.DatasetInfo[0].Splits) != 1 || meta.DatasetInfo[0].Splits[0].NumExamples != 30 {
		t.Errorf("front matter splits %+v, want the files' one split of every row", meta.DatasetInfo[0].Splits)
	}
	// Without a split in the spec or statistics: every row in train.
	m.Config = []byte(`{"name": "crux"}`)
	card, err = RenderCard(m, []ShardInfo{info}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := string(card); !strings.Contains(body, "| `train` | 100% | - |") || strings.Contains(body, "`validation`") {
		t.Errorf("card without splits:\n%s", body)
	}
}

// TestCardSplitsDeterministic: train's share is what the other splits leave, summed in one order:
// summed in map order, {validation: 0.09455, test: 0.06395} left 84.1% or 84.2% depending on
// the run, and the card of the same manifest was not the same bytes.
func TestCardSplitsDeterministic(t *testing.T) {
	m := &Manifest{CreatedAt: testCreated, Versions: testVersions,
		Config: []byte(`{"name": "crux", "split": {"validation": 0.09455, "test": 0.06395}}`)}
	first, err := RenderCard(m, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		card, err := RenderCard(m, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(card, first) {
			t.Fatalf("the same manifest gave two cards:\n%s\n---\n%s", first, card)
		}
	}
}
