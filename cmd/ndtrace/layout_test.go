package main

import (
	"context"
	"fmt"
	"path/filepath"
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
