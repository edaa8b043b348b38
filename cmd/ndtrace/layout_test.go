package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/dataset"
)

// writeOldLayoutDataset writes a dataset as ndtrace wrote it before the data/ layout: two shards
// (3 and 2 rows, the bytes WriteShard writes) under shards/, a format 2 manifest naming them, and
// stats.parquet and stats.json at the root beside them.
func writeOldLayoutDataset(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "old")
	ctx := context.Background()
	st := openStore(t, dir)
	var infos []dataset.ShardInfo
	for s, rows := range cliShards(t) {
		data, info, err := dataset.EncodeShard(rows)
		if err != nil {
			t.Fatal(err)
		}
		info.Path = fmt.Sprintf("%s/part-%05d%s", dataset.LegacyShardDir, s, dataset.ShardExt)
		if _, err := st.PutOnce(ctx, info.Path, data, dataset.ShardContentType, nil); err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	m, err := dataset.WriteManifest(ctx, st, dataset.Manifest{CreatedAt: cliCreated, Shards: infos,
		Versions: dataset.Versions{Tracer: "t1", Pipeline: "p1", Tokenizer: "bytes"}})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := dataset.ComputeStats(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := dataset.WriteStats(ctx, st, stats); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{dataset.StatsKey, dataset.StatsParquetKey, "shards/part-00001.parquet"} {
		if ok, err := st.Exists(ctx, k); err != nil || !ok {
			t.Fatalf("old layout lacks %s (%v)", k, err)
		}
	}
	return dir
}

// TestOldLayoutDataset: validate, inspect, stats and the dashboard accept a dataset written
// before the data/ layout (shards/, stats.json and stats.parquet at the root).
func TestOldLayoutDataset(t *testing.T) {
	dir := writeOldLayoutDataset(t)
	tests := []struct {
		name string
		args []string
		has  []string
	}{
		{"validate", []string{"validate", dir}, []string{"ok: " + dir + ": 2 shards, 5 rows, "}},
		{"inspect", []string{"inspect", "--rows", "4", dir}, []string{"── shards/part-00000.parquet row 0 ──", "── shards/part-00001.parquet row 0 ──"}},
		{"inspect old shard path", []string{"inspect", dir, "--shard", "shards/part-00001.parquet"}, []string{"── shards/part-00001.parquet row 1 ──"}},
		{"inspect shard name", []string{"inspect", dir, "--shard", "part-00001"}, []string{"── shards/part-00001.parquet row 0 ──"}},
		{"stats", []string{"stats", dir}, []string{"stats.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCmd(tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, h := range tc.has {
				if !strings.Contains(stdout, h) {
					t.Errorf("stdout lacks %q:\n%s", h, stdout)
				}
			}
		})
	}
	ds, err := loadDashboardDatasets(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if ds := ds[0]; ds.From != "from stats.json" || ds.Stats.Totals.Rows != 5 {
		t.Errorf("dashboard loads the old layout's statistics from %q, %d rows; want \"from stats.json\", 5", ds.From, ds.Stats.Totals.Rows)
	}
}

// TestRunsWithOtherSeedsOneVersionPerRead runs the built-in examples three times into one folder,
// each with another seed (issue 27: after a re-run data/ and the card held both versions' shards,
// with a metadata sidecar beside each): data/ and packed/ then hold exactly the head's shards, as
// Parquet files only, the card's row count is the head's, validate passes, and the earlier
// versions stay whole through their own manifests.
func TestRunsWithOtherSeedsOneVersionPerRead(t *testing.T) {
	if testing.Short() {
		t.Skip("three ndtrace runs into one folder: long integration test; run without -short")
	}
	ctx := context.Background()
	dir := t.TempDir()
	out := filepath.Join(dir, "ds")
	var ids []string
	for i, seed := range []int{1, 2, 3} {
		spec := writeSpec(t, dir, fmt.Sprintf("name: seeds\noutput: %s\nsources:\n  - kind: examples\npack_length: 1024\nseed: %d\ncreated_at: 2026-11-2%dT00:00:00Z\n", out, seed, i+1))
		runSpec(t, spec)
		st, m := openHead(t, out)
		ids = append(ids, m.Version)
		want := map[string]bool{}
		shards, err := m.AllShards(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		packed, err := m.AllPacked(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range append(shards, packed...) {
			if !strings.HasPrefix(s.Path, dataset.PoolDir+"/") {
				t.Errorf("version %s names %s, outside the pool", m.Version, s.Path)
			}
			want[dataset.ViewPath(s.Path)] = true
		}
		var got []string
		for _, sub := range []string{dataset.ShardDir, dataset.PackedDir} {
			entries, err := os.ReadDir(filepath.Join(out, sub))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				got = append(got, sub+"/"+e.Name())
				if !want[sub+"/"+e.Name()] {
					t.Errorf("run %d: %s/%s is not a shard of the head %s", i+1, sub, e.Name(), m.Version)
				}
			}
		}
		if len(got) != len(want) {
			t.Errorf("run %d: data/ and packed/ hold %d files, the head has %d shards", i+1, len(got), len(want))
		}
		card, err := os.ReadFile(filepath.Join(out, dataset.CardKey))
		if err != nil {
			t.Fatal(err)
		}
		if s := fmt.Sprintf("`data/*.parquet` | %d |", m.Totals.Rows); !strings.Contains(string(card), s) {
			t.Errorf("run %d: the card lacks %q", i+1, s)
		}
		if _, stderr, code := runCmd("validate", out); code != 0 {
			t.Errorf("run %d: validate: exit %d: %s", i+1, code, stderr)
		}
	}
	pooled, _ := os.ReadDir(filepath.Join(out, dataset.PoolDir, dataset.ShardDir))
	rows, _ := os.ReadDir(filepath.Join(out, dataset.ShardDir))
	if len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 3 || len(pooled) <= len(rows) {
		t.Errorf("versions %v, %d pooled shards, %d in data/: want three versions with shards of their own", ids, len(pooled), len(rows))
	}
	t.Logf("versions %v: %d shards in the pool, %d in data/", ids, len(pooled), len(rows))
	st := openStore(t, out)
	for _, id := range ids {
		m, err := dataset.ReadVersion(ctx, st, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.EachShard(ctx, st, func(s dataset.ShardInfo) error {
			same, err := st.Holds(ctx, s.Path, s.Bytes, s.SHA256)
			if err == nil && !same {
				err = fmt.Errorf("%s differs from the manifest", s.Path)
			}
			return err
		}); err != nil {
			t.Errorf("version %s: %v", id, err)
		}
	}
}

// TestRunMetadataSkip runs the examples twice into a local folder opened with fileblob's
// metadata=skip (no sidecar files anywhere): the write-once checks fall back to hashing, the
// version's references (dedup keys included) carry the sha256 of what they name, and validate
// passes.
func TestRunMetadataSkip(t *testing.T) {
	if testing.Short() {
		t.Skip("two ndtrace runs into a folder without metadata: long integration test; run without -short")
	}
	ctx := context.Background()
	dir := t.TempDir()
	out := filepath.Join(dir, "ds")
	url := "file://" + out + "?metadata=skip"
	for i, seed := range []int{1, 2} {
		spec := writeSpec(t, dir, fmt.Sprintf("name: skip\noutput: %s\nsources:\n  - kind: examples\nseed: %d\ncreated_at: 2026-11-2%dT00:00:00Z\n", url, seed, i+1))
		runSpec(t, spec)
		if _, stderr, code := runCmd("validate", url); code != 0 {
			t.Errorf("run %d: validate: exit %d: %s", i+1, code, stderr)
		}
	}
	st, m := openHead(t, url)
	if len(m.DedupKeys) == 0 {
		t.Fatal("the version has no dedup keys")
	}
	for _, ref := range m.DedupKeys {
		if _, err := dataset.ReadObject(ctx, st, ref); err != nil {
			t.Errorf("dedup keys %s: %v", ref.Key, err)
		}
	}
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".attrs") {
			t.Errorf("sidecar %s with metadata=skip", p)
		}
		return err
	})
}
