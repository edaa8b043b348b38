package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ndtrace/ndtrace/workflows"
)

// TestScheduleSkipsUnchangedSources creates a schedule on a real in-process server, fires it twice
// with one of two sources changed in between, and checks that the second run re-traces only the
// changed source and writes a second version that shares the unchanged shard.
func TestScheduleSkipsUnchangedSources(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	_, c := testCluster(t)
	stop, err := startWorkers(context.Background(), c, workerFlags{traceSlots: 1, ioSlots: 2, queues: "trace,io"}, sandboxFlags{backend: "namespaces", python: "/usr/bin/python3", timeout: 10 * time.Second, maxEvents: 100000, valueChars: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.py"), filepath.Join(dir, "b.py")
	os.WriteFile(a, []byte("def f(x):\n    return x + 1\n"), 0o644)
	os.WriteFile(b, []byte("def g(x):\n    return x * 2\n"), 0o644)
	out := filepath.Join(dir, "data")
	spec, err := loadSpec(writeSpec(t, dir, fmt.Sprintf("name: sched\noutput: %s\nbatch_size: 1\nsources:\n  - kind: python\n    path: %s\n    calls: ['f(1)']\n  - kind: python\n    path: %s\n    calls: ['g(2)']\n", out, a, b)), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, err := createSchedule(ctx, c, spec, "test-schedule", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Delete(context.Background())

	fire := func(n int) workflows.DatasetResult {
		t.Helper()
		if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
			t.Fatal(err)
		}
		var id string
		for id == "" {
			d, err := h.Describe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if acts := d.Info.RecentActions; len(acts) >= n {
				id = acts[n-1].StartWorkflowResult.WorkflowID
			} else if ctx.Err() != nil {
				t.Fatal("the schedule did not fire")
			} else {
				time.Sleep(100 * time.Millisecond)
			}
		}
		var res workflows.DatasetResult
		if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			t.Fatalf("scheduled run %d: %v", n, err)
		}
		return res
	}
	first := fire(1)
	if first.Progress.BatchesDone != 2 || first.Progress.Reused != 0 || first.Final.Totals.Rows != 4 {
		t.Fatalf("first run: %+v %+v", first.Progress, first.Final.Totals)
	}
	os.WriteFile(b, []byte("def g(x):\n    y = x * 3\n    return y\n"), 0o644)
	time.Sleep(1100 * time.Millisecond) // versions are named by their start second
	second := fire(2)
	if second.Progress.BatchesDone != 2 || second.Progress.Reused != 1 || second.Final.Totals.Rows != 4 {
		t.Fatalf("second run: %+v %+v", second.Progress, second.Final.Totals)
	}
	m, _ := checkDataset(t, out)
	versions, _ := filepath.Glob(filepath.Join(out, "versions", "*", "manifest.json"))
	shards, _ := filepath.Glob(filepath.Join(out, "pool", "data", "*.parquet"))
	head, _ := filepath.Glob(filepath.Join(out, "data", "*.parquet"))
	// Two versions; three shards in all (the pool): a's (shared), b's old and b's new; data/ holds
	// the latest version's two.
	if len(versions) != 2 || len(shards) != 3 || len(m.Shards) != 2 || len(head) != 2 {
		t.Fatalf("%d versions, %d shard files, %d shards in the latest manifest, %d in data/", len(versions), len(shards), len(m.Shards), len(head))
	}
}
