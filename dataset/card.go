package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ndtrace/ndtrace/internal/numfmt"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// The dataset card: README.md at the dataset root, in the Hugging Face dataset card format (YAML
// front matter, then Markdown). Its configs tell `datasets.load_dataset(DIR)` (and the Hub's
// viewer) which files make each configuration: "default", the trajectory rows (data/*.parquet),
// and "packed", the packed sequences (packed/*.parquet), so no side file is ever read as data.
// The card is a pure function of the manifest, its shard list and the statistics (RenderCard), so
// the same version always gives the same bytes; the pipeline writes it when a version becomes the
// head (WriteCard), after manifest.json.
const (
	// CardKey is the dataset card's key relative to the dataset root.
	CardKey = "README.md"
	// DefaultLicense is the card's license when the spec names none: the Hub's identifier for "a
	// license not in its list" (the traced code keeps its own licenses).
	DefaultLicense = "other"
	// RowsConfig and PackedConfig are the card's configuration names.
	RowsConfig   = "default"
	PackedConfig = "packed"
)

// CardMeta is the card's YAML front matter: the documented fields of the Hugging Face dataset
// card metadata that ndtrace fills, in the order written.
type CardMeta struct {
	License        string        `yaml:"license"`
	PrettyName     string        `yaml:"pretty_name"`
	Tags           []string      `yaml:"tags"`
	TaskCategories []string      `yaml:"task_categories"`
	SizeCategories []string      `yaml:"size_categories"`
	Configs        []CardConfig  `yaml:"configs"`
	DatasetInfo    []CardDataset `yaml:"dataset_info"`
}

// CardConfig is one configuration: its name and the files of its splits (one split, train).
type CardConfig struct {
	ConfigName string          `yaml:"config_name"`
	DataFiles  []CardDataFiles `yaml:"data_files"`
	Default    bool            `yaml:"default,omitempty"`
}

// CardDataFiles names the files of one split by glob patterns relative to the dataset root.
type CardDataFiles struct {
	Split string   `yaml:"split"`
	Path  []string `yaml:"path"`
}

// CardDataset is the dataset_info of one configuration: its features (columns) and split sizes.
type CardDataset struct {
	ConfigName   string        `yaml:"config_name"`
	Features     []CardFeature `yaml:"features"`
	Splits       []CardSplit   `yaml:"splits"`
	DownloadSize int64         `yaml:"download_size"`
}

// CardFeature is one column: a scalar has a dtype (string, int32, int64, bool, timestamp[...]),
// a list column the dtype of its elements under list.
type CardFeature struct {
	Name  string `yaml:"name"`
	Dtype string `yaml:"dtype,omitempty"`
	List  string `yaml:"list,omitempty"`
}

// CardSplit is a split's size in rows (num_examples). num_bytes, the split's size in memory as
// Arrow, is left out: ndtrace knows only the Parquet size (download_size).
type CardSplit struct {
	Name        string `yaml:"name"`
	NumExamples int64  `yaml:"num_examples"`
}

// CardFeatures describes the columns of a row type (schemas.Row or schemas.PackedRow) as card
// features, in column order, from the struct's parquet tags.
func CardFeatures(row any) []CardFeature {
	t := reflect.TypeOf(row)
	var out []CardFeature
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		if name == "" || name == "-" {
			continue
		}
		cf := CardFeature{Name: name}
		if f.Type == reflect.TypeOf(time.Time{}) {
			cf.Dtype = "timestamp[us, tz=UTC]"
		} else if f.Type.Kind() == reflect.Slice {
			cf.List = dtypeOf(f.Type.Elem().Kind())
		} else {
			cf.Dtype = dtypeOf(f.Type.Kind())
		}
		out = append(out, cf)
	}
	return out
}

func dtypeOf(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int32:
		return "int32"
	case reflect.Int64:
		return "int64"
	}
	return k.String()
}

// cardSpec is what the card reads from the manifest's config (the pipeline's spec).
type cardSpec struct {
	Name       string       `json:"name"`
	License    string       `json:"license"`
	Policy     string       `json:"policy"`
	Seed       json.Number  `json:"seed"`
	Mask       string       `json:"mask"`
	Directions []string     `json:"directions"`
	Sources    []cardSource `json:"sources"`
	// Split is the spec's split: names and shares of the functions (schemas.SplitSpec).
	Split schemas.SplitSpec `json:"split"`
}

type cardSource struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	Path string `json:"path"`
	URL  string `json:"url"`
	Ref  string `json:"ref"`
	List string `json:"list"`
}

// filePatterns returns the glob patterns that cover the head's copies of shards (ViewPath):
// <folder>/*.parquet for each folder they are in (data/, or shards/ for shards a version reused
// from a dataset written before the data/ layout), sorted.
func filePatterns(shards []ShardInfo, dflt string) []string {
	var out []string
	for _, s := range shards {
		p := path.Dir(ViewPath(s.Path)) + "/*" + ShardExt
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		out = append(out, dflt+"/*"+ShardExt)
	}
	slices.Sort(out)
	return out
}

// sizeCategory is the Hub's size category of n rows.
func sizeCategory(n int64) string {
	switch {
	case n < 1_000:
		return "n<1K"
	case n < 10_000:
		return "1K<n<10K"
	case n < 100_000:
		return "10K<n<100K"
	case n < 1_000_000:
		return "100K<n<1M"
	case n < 10_000_000:
		return "1M<n<10M"
	case n < 100_000_000:
		return "10M<n<100M"
	case n < 1_000_000_000:
		return "100M<n<1B"
	}
	return "1B<n<10B"
}

func sumBytes(shards []ShardInfo) int64 {
	var n int64
	for _, s := range shards {
		n += s.Bytes
	}
	return n
}

// RenderCard returns the dataset card (README.md) of the version m: shards and packed are its
// shards and packed shards (AllShards, AllPacked; only their folders and sizes are used), st its
// statistics (nil leaves the statistics
// section out). The license is the spec's (m.Config's "license"), DefaultLicense if it names none.
func RenderCard(m *Manifest, shards, packed []ShardInfo, st *Stats) ([]byte, error) {
	var spec cardSpec
	if len(m.Config) > 0 && string(m.Config) != "null" {
		dec := json.NewDecoder(bytes.NewReader(m.Config))
		dec.UseNumber()
		if err := dec.Decode(&spec); err != nil {
			// A config that is not a spec (a library caller's own) gives a card without its details.
			spec = cardSpec{}
		}
	}
	if spec.License == "" {
		spec.License = DefaultLicense
	}
	if spec.Name == "" {
		spec.Name = "ndtrace"
	}
	meta := CardMeta{
		License:        spec.License,
		PrettyName:     spec.Name,
		Tags:           []string{"ndtrace", "neural-debugger", "code", "python", "execution-traces", "debugger-trajectories"},
		TaskCategories: []string{"text-generation"},
		SizeCategories: []string{sizeCategory(m.Totals.Rows)},
		Configs: []CardConfig{{ConfigName: RowsConfig, Default: true,
			DataFiles: []CardDataFiles{{Split: "train", Path: filePatterns(shards, ShardDir)}}}},
		DatasetInfo: []CardDataset{{ConfigName: RowsConfig, Features: CardFeatures(schemas.Row{}),
			Splits:       []CardSplit{{Name: "train", NumExamples: m.Totals.Rows}},
			DownloadSize: sumBytes(shards)}},
	}
	if m.Packing != nil {
		meta.Configs = append(meta.Configs, CardConfig{ConfigName: PackedConfig,
			DataFiles: []CardDataFiles{{Split: "train", Path: filePatterns(packed, PackedDir)}}})
		meta.DatasetInfo = append(meta.DatasetInfo, CardDataset{ConfigName: PackedConfig,
			Features:     CardFeatures(schemas.PackedRow{}),
			Splits:       []CardSplit{{Name: "train", NumExamples: m.Packing.Totals.Rows}},
			DownloadSize: sumBytes(packed)})
	}
	var buf bytes.Buffer
	buf.WriteString("---\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(meta); err != nil {
		return nil, fmt.Errorf("dataset: card: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("dataset: card: %w", err)
	}
	buf.WriteString("---\n\n")
	writeCardBody(&buf, m, spec, shards, st)
	return buf.Bytes(), nil
}

// writeCardBody writes the card's Markdown: what the dataset is, how to read it, its statistics
// and how it was made.
func writeCardBody(b *bytes.Buffer, m *Manifest, spec cardSpec, shards []ShardInfo, st *Stats) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("# %s\n\n", spec.Name)
	p("Debugger trajectories of Python code for training neural debuggers, written by ndtrace: each row is\n")
	p("one trajectory (a traced execution stepped through by a debugger policy, forward or inverse) in the\n")
	p("neural-debugger grammar, with its token ids and loss mask.\n\n")
	p("## Configurations\n\n")
	p("| config | files | rows | tokens |\n|---|---|---|---|\n")
	p("| `%s` (default): trajectory rows | `%s` | %d | %d |\n", RowsConfig, strings.Join(filePatterns(shards, ShardDir), "`, `"), m.Totals.Rows, m.Totals.Tokens)
	if m.Packing != nil {
		p("| `%s`: sequences of exactly %d tokens | `%s/*%s` | %d | %d (padding excluded) |\n",
			PackedConfig, m.Packing.Length, PackedDir, ShardExt, m.Packing.Totals.Rows, m.Packing.Totals.Tokens)
	}
	p("\n`manifest.json` names every file with its size and SHA-256; everything else under this folder\n")
	p("(`versions/`, `work/`, `batches/`) is ndtrace's bookkeeping, not data.\n\n")
	p("```python\nfrom datasets import load_dataset\nrows = load_dataset(\"path/to/this/folder\", split=\"train\")\n")
	if m.Packing != nil {
		p("packed = load_dataset(\"path/to/this/folder\", \"%s\", split=\"train\")\n", PackedConfig)
	}
	p("```\n\n```sql\nSELECT count(*) FROM read_parquet('path/to/this/folder/%s/**/*%s');  -- DuckDB\n```\n\n", ShardDir, ShardExt)
	writeCardSplits(b, spec, st)
	if st != nil {
		p("## Statistics\n\n")
		d := st.Dataset
		// For people: counts with thousands separators, means and percentiles to one decimal
		// (stats.json keeps the exact values).
		n := numfmt.Thousands
		p("| | value |\n|---|---|\n")
		p("| trajectories | %s |\n| traces | %s |\n| tokens | %s |\n| learned tokens | %s |\n", n(d.Trajectories), n(d.Traces), n(d.Tokens), n(d.LearnedTokens))
		p("| input items | %s |\n| rejected items | %s |\n| sources | %s |\n", n(d.Items), n(d.Rejects), n(int64(len(st.Sources))))
		for _, dir := range sortedKeys(d.Directions) {
			p("| %s trajectories | %s |\n", dir, n(d.Directions[dir]))
		}
		for _, src := range sortedKeys(d.InputSources) {
			p("| trajectories of input source %s | %s |\n", src, n(d.InputSources[src]))
		}
		if y := st.Repositories; y != nil && y.Generation != nil {
			g := y.Generation
			p("| functions found without inputs | %s |\n| of them run as a unit | %s |\n| units with a generated input | %s (%s%%) |\n",
				n(g.Found), n(g.Units), n(g.WithInput), numfmt.Decimal(100*g.WithInputShare))
			if g.MedianCoverage >= 0 {
				p("| median line coverage of those units | %d%%+ |\n", g.MedianCoverage)
			}
		}
		p("\n| group | trajectories | tokens mean | tokens p50 | tokens p90 | actions mean | events mean |\n|---|---|---|---|---|---|---|\n")
		for _, g := range st.Groups {
			tok, act, ev := groupMetric(g, "tokens"), groupMetric(g, "actions"), groupMetric(g, "events")
			p("| %s | %s | %s | %s | %s | %s | %s |\n", g.Name, n(g.Trajectories), numfmt.Decimal(tok.Mean), numfmt.Decimal(tok.P50),
				numfmt.Decimal(tok.P90), numfmt.Decimal(act.Mean), numfmt.Decimal(ev.Mean))
		}
		if len(st.Rejects) > 0 {
			p("\n| reject class | items |\n|---|---|\n")
			for _, r := range st.Rejects {
				p("| %s | %s |\n", r.Class, n(r.Count))
			}
		}
		p("\n")
	}
	p("## How it was made\n\n")
	p("| | |\n|---|---|\n")
	p("| ndtrace (pipeline) version | %s |\n| tracer version | %s |\n| tokenizer | %s |\n", m.Versions.Pipeline, m.Versions.Tracer, m.Versions.Tokenizer)
	if spec.Policy != "" {
		p("| policy | %s |\n", spec.Policy)
	}
	if len(spec.Directions) > 0 {
		p("| directions | %s |\n", strings.Join(spec.Directions, ", "))
	}
	if spec.Mask != "" {
		p("| loss mask | %s |\n", spec.Mask)
	}
	if spec.Seed != "" {
		p("| seed | %s |\n", spec.Seed)
	}
	p("| created_at | %s |\n", m.CreatedAt.UTC().Format(time.RFC3339Nano))
	if m.Version != "" {
		p("| version | %s |\n", m.Version)
	}
	p("| license | %s |\n", spec.License)
	if len(spec.Sources) > 0 {
		p("\nSources:\n\n")
		for _, s := range spec.Sources {
			what := strings.TrimSpace(strings.Join(nonEmpty(s.Name, s.Path, s.URL, s.Ref, s.List), " "))
			if what == "" {
				p("- %s\n", s.Kind)
			} else {
				p("- %s: `%s`\n", s.Kind, what)
			}
		}
	}
	p("\nThe columns are documented in ndtrace's docs/dataset.md; the spec this dataset was made from is the\n`config` of `manifest.json`.\n")
}

// writeCardSplits writes the card's section on the splits by function: their names, the share of
// functions the spec gives each and their rows (from the statistics, when there are any), and how
// to select one. The files hold every split: the configs' one file split, train, is all the rows
// (the Hub's loader checks a config's split sizes against its files, so the function splits
// cannot be file splits while a shard holds rows of several).
func writeCardSplits(b *bytes.Buffer, spec cardSpec, st *Stats) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Splits\n\n")
	p("Rows are split by function through the `split` column: every row of a function is in the same split,\n")
	p("drawn from its `function_id` (a hash of the function's normalized source) alone, so no function is in\n")
	p("two splits, whatever the seed or run. The files above hold every split (their one file split, `train`,\n")
	p("is all the rows): select one by its column.\n\n")
	var counts map[string]int64
	if st != nil {
		counts = st.Dataset.Splits
	}
	names := spec.Split.Names()
	for _, name := range sortedKeys(counts) {
		if !slices.Contains(names, name) {
			names = append(names, name) // a split of rows made with another spec
		}
	}
	rest := 1.0
	for _, name := range spec.Split.Names() { // in one order: a float sum's rounding depends on it
		if name != schemas.TrainSplit {
			rest -= spec.Split[name]
		}
	}
	p("| split | share of functions | rows |\n|---|---|---|\n")
	for _, name := range names {
		share := "-"
		if f, ok := spec.Split[name]; ok {
			share = numfmt.Decimal(100*f) + "%"
		} else if name == schemas.TrainSplit {
			share = numfmt.Decimal(100*max(rest, 0)) + "%"
		}
		rows := "-"
		if st != nil {
			rows = numfmt.Thousands(counts[name])
		}
		p("| `%s` | %s | %s |\n", name, share, rows)
	}
	p("\n```python\nvalidation = rows.filter(lambda r: r[\"split\"] == \"validation\")\n```\n\n")
}

// groupMetric returns the metric name of g (zero if g has none).
func groupMetric(g Group, name string) Metric {
	for _, m := range g.Metrics {
		if m.Name == name {
			return m
		}
	}
	return Metric{}
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// WriteCard renders the card of version m (its shard index read from st) and writes it as
// README.md at the dataset root, replacing the card of an earlier version. Memory is bounded by one
// index page: the card needs only the shards' folders and sizes.
func WriteCard(ctx context.Context, st *store.Store, m *Manifest, stats *Stats) error {
	var shards, packed []ShardInfo
	add := func(list *[]ShardInfo) func(ShardInfo) error {
		return func(s ShardInfo) error {
			dir := path.Dir(ViewPath(s.Path))
			for i := range *list {
				if path.Dir(ViewPath((*list)[i].Path)) == dir {
					(*list)[i].Bytes += s.Bytes
					return nil
				}
			}
			*list = append(*list, ShardInfo{Path: s.Path, Bytes: s.Bytes})
			return nil
		}
	}
	if err := m.EachShard(ctx, st, add(&shards)); err != nil {
		return err
	}
	if m.Packing != nil {
		for _, s := range m.Packing.Shards {
			_ = add(&packed)(s)
		}
		if err := readPages(ctx, st, m.Packing.Index, add(&packed)); err != nil {
			return err
		}
	}
	card, err := RenderCard(m, shards, packed, stats)
	if err != nil {
		return err
	}
	if err := st.Put(ctx, CardKey, card, &store.PutOptions{ContentType: "text/markdown; charset=utf-8"}); err != nil {
		return fmt.Errorf("dataset: write %s in %s: %w", CardKey, st.URL(), err)
	}
	return nil
}
