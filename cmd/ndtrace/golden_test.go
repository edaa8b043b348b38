package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/dataset"

	"github.com/ndtrace/ndtrace/internal/cruxeval"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden-shards.json from this run")

// goldenShard is one shard of the golden dataset: what identifies its bytes.
type goldenShard struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Rows   int64  `json:"rows"`
}

// TestGoldenShards runs a fixed spec (300 CruxEval items, duplicates and all, and the built-in
// examples: functions and a repository's tests, so both planning phases) and compares every shard,
// packed ones included, with testdata/golden-shards.json: a change of the pipeline that is meant
// to keep the data must keep these bytes. Regenerate with -update-golden when the data is meant to
// change (a new tracer version, a new row format), and say why in the commit.
func TestGoldenShards(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	dir := t.TempDir()
	// The corpus path is part of every item's key (and so of the batches' hashes): a fixed one.
	corpus := filepath.Join(os.TempDir(), "ndtrace-golden", "crux300.jsonl")
	if err := os.MkdirAll(filepath.Dir(corpus), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFirstLines(t, cruxeval.Path(t), corpus, 300)
	out := filepath.Join(dir, "data")
	spec := writeSpec(t, dir, fmt.Sprintf(`name: golden
output: %s
sources:
  - kind: jsonl
    path: %s
  - kind: examples
batch_size: 32
pack_length: 1024
seed: 11
created_at: 2026-11-22T00:00:00Z
`, out, corpus))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr.String())
	}
	got := goldenShards(t, out)
	path := filepath.Join("testdata", "golden-shards.json")
	if *updateGolden {
		data, _ := json.MarshalIndent(got, "", " ")
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d shards", path, len(got))
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []goldenShard
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d shards, golden has %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("shard %d: %+v, golden %+v", i, got[i], want[i])
		}
	}
	checkFolderLayout(t, out)
}

// checkFolderLayout checks the dataset folder a run left at dir as a reader that lists it sees it:
// every Parquet file is a shard under data/, a packed shard under packed/ (the head's copies),
// one of those in the pool (pool/data/, pool/packed/), or a version's statistics table under
// versions/ (so data/**/*.parquet reaches the rows and nothing else); data/ and packed/ hold
// nothing but Parquet files (no metadata sidecars); and the dataset card README.md names both
// configurations and the default license.
func checkFolderLayout(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		view := (strings.HasPrefix(rel, "data/") || strings.HasPrefix(rel, "packed/")) && strings.Count(rel, "/") == 1
		if view && !strings.HasSuffix(rel, ".parquet") {
			t.Errorf("%s: not a Parquet file, in a folder readers glob", rel)
		}
		if !strings.HasSuffix(p, ".parquet") {
			return nil
		}
		pooled := (strings.HasPrefix(rel, "pool/data/") || strings.HasPrefix(rel, "pool/packed/")) && strings.Count(rel, "/") == 2
		ok := view || pooled ||
			strings.HasPrefix(rel, dataset.VersionsDir) && strings.HasSuffix(rel, "/"+dataset.StatsParquetKey)
		if !ok {
			t.Errorf("Parquet file %s outside data/, packed/, the pool and the versions' statistics", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	card, err := os.ReadFile(filepath.Join(dir, dataset.CardKey))
	if err != nil {
		t.Fatalf("no dataset card: %v", err)
	}
	for _, s := range []string{"---\nlicense: other\n", "config_name: default", "- data/*.parquet", "config_name: packed",
		"- packed/*.parquet", "## Statistics", "| tokenizer | cl100k_base |"} {
		if !strings.Contains(string(card), s) {
			t.Errorf("dataset card lacks %q:\n%s", s, card)
		}
	}
}

// goldenShards lists the shards and packed shards of the dataset at url, in manifest order.
func goldenShards(t *testing.T, url string) []goldenShard {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := resolvedManifest(t, st)
	var out []goldenShard
	for _, s := range m.Shards {
		out = append(out, goldenShard{s.Path, s.SHA256, s.Rows})
	}
	if m.Packing != nil {
		for _, s := range m.Packing.Shards {
			out = append(out, goldenShard{s.Path, s.SHA256, s.Rows})
		}
	}
	return out
}

// writeFirstLines copies the first n lines of src to dst.
func writeFirstLines(t *testing.T, src, dst string, n int) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for i := 0; i < n && sc.Scan(); i++ {
		buf.Write(sc.Bytes())
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
