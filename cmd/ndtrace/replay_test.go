package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/replay"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// TestReplayRunRows replays on bdb the forward rows a small `ndtrace run` wrote (20 CruxEval
// functions), through execute.Tracer.Replay as verify calls it: every row agrees or differs by
// a named kind; none is an unexplained mismatch; inverse rows are not replayed.
func TestReplayRunRows(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	dir := t.TempDir()
	corpus := filepath.Join(dir, "crux20.jsonl")
	writeFirstLines(t, cruxeval.Path(t), corpus, 20)
	out := filepath.Join(dir, "data")
	spec := writeSpec(t, dir, fmt.Sprintf("name: replay\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\nseed: 5\ncreated_at: 2026-11-22T00:00:00Z\n", out, corpus))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr.String())
	}
	byID := map[string]cruxeval.Row{}
	for _, r := range cruxeval.Rows(t) {
		byID[r.ID] = r
	}
	ctx := context.Background()
	st, err := store.Open(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pool := execute.NewSandboxPool(sandbox.Config{}, 1)
	defer pool.Close()
	trc := &execute.Tracer{Sandboxes: pool}
	counts := map[string]int{}
	for _, sh := range resolvedManifest(t, st).Shards {
		rows, err := dataset.ReadRows(ctx, st, sh.Path, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			src, ok := byID[row.SourceID]
			if !ok {
				t.Fatalf("row %s: no corpus row %q", row.ID, row.SourceID)
			}
			it := crawl.Item{Key: corpus + "#" + src.ID, Path: corpus, SourceID: src.ID, Code: src.Code, Filename: "main.py",
				Call: sandbox.CallFromInput("f", src.Input), QualName: "f"}
			o, err := trc.Replay(ctx, it, row, schemas.Spec{}.WithDefaults())
			if err != nil {
				t.Fatalf("row %s: %v", row.ID, err)
			}
			k := "agreed"
			switch {
			case !o.Replayed:
				k = "not replayed (" + row.Direction + ")"
				if row.Direction == "forward" {
					t.Errorf("forward row %s not replayed: %s", row.ID, o.Detail)
				}
			case !o.Agreed:
				k = o.Kind
				if k == replay.Mismatch || k == replay.Tampered {
					t.Errorf("row %s: %s: %s", row.ID, k, o.Detail)
				}
			}
			counts[k]++
		}
	}
	t.Logf("rows of the run replayed on bdb: %v", counts)
	if counts["agreed"] == 0 {
		t.Errorf("no row agreed: %v", counts)
	}
}
