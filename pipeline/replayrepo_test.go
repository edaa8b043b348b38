package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/pipeline"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// TestReplayRepositoryRows traces ndtrace's example repository (crawl's textstats: six pytest
// tests, the functions found in them) through Tracer.TraceRepo as verify does and replays on bdb,
// in its checkout and environment, every forward row the pipeline builds from it: its
// repository-level rows (from their entry call inside the test) and the function-level rows of
// its functions. Every row agrees or differs by a named kind (no mismatch), and a row whose text
// was altered is caught.
func TestReplayRepositoryRows(t *testing.T) {
	ctx := context.Background()
	f, done, err := crawl.NewFetcher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	items, _, err := crawl.Items(ctx, schemas.SourceSpec{Kind: "examples"})
	if err != nil {
		t.Fatal(err)
	}
	it := items[len(items)-1]
	if it.Repo == nil {
		t.Fatalf("the examples' last item is not the repository: %+v", it)
	}
	spec := schemas.Spec{Name: "replay-repo", Sources: []schemas.SourceSpec{{Kind: "examples"}}, TrajectoriesPerTrace: 4}.WithDefaults()
	p, err := debugger.PolicyByName(spec.Policy)
	if err != nil {
		t.Fatal(err)
	}
	opts := pipeline.RowOptions{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC), TracerVersion: sandbox.TracerVersion}
	pool := pipeline.NewSandboxPool(sandbox.Config{}, 1)
	defer pool.Close()
	trc := &pipeline.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
	counts := map[string]int{}
	within := func(tr pipeline.TracedItem, rep pipeline.RowReplayer) error {
		check := func(it crawl.Item, row schemas.Row) schemas.ReplayOutcome {
			t.Helper()
			out, err := rep.Replay(ctx, it, row, spec)
			if err != nil {
				t.Fatalf("row %s: %v", row.ID, err)
			}
			return out
		}
		var altered bool
		tally := func(it crawl.Item, rows []schemas.Row) {
			for _, row := range rows {
				if row.Direction != "forward" {
					continue
				}
				level := row.Level + map[bool]string{true: "/repo-function", false: ""}[row.Level == "function"]
				out := check(it, row)
				k := "agreed"
				switch {
				case !out.Replayed:
					k = "not replayed"
					t.Errorf("%s row %s not replayed: %s", level, row.ID, out.Detail)
				case !out.Agreed:
					k = out.Kind
					if k == pipeline.ReplayMismatch || k == pipeline.ReplayTampered {
						t.Errorf("%s row %s: %s: %s\n%s", level, row.ID, k, out.Detail, row.Text)
					}
				}
				counts[level+" "+k]++
				if row.Level == "repository" && !altered && out.Agreed {
					if bad, ok := alterValue(row); ok {
						altered = true
						out := check(it, bad)
						if out.Agreed || out.Kind != pipeline.ReplayMismatch {
							t.Errorf("altered row %s: %+v\n%s", row.ID, out, bad.Text)
						}
					}
				}
			}
		}
		rows, rej := pipeline.ItemRows(tr, spec, p, opts, map[string]int64{})
		if rej != nil {
			t.Fatalf("the repository gave no rows: %+v", rej)
		}
		tally(it, rows)
		for _, fi := range tr.Repo.Functions {
			rows, rej := pipeline.ItemRows(fi, spec, p, opts, map[string]int64{})
			if rej == nil {
				tally(fi.Item, rows)
			}
		}
		if !altered {
			t.Error("no repository-level row was altered")
		}
		return nil
	}
	if _, err := trc.TraceRepo(ctx, it, spec, func() {}, within); err != nil {
		t.Fatal(err)
	}
	t.Logf("replays: %v", counts)
	if counts["repository agreed"] == 0 || counts["function/repo-function agreed"] == 0 {
		t.Errorf("no repository-level or function-level row agreed: %v", counts)
	}
}

// alterValue changes the first number shown in a state after the first one of a row (its
// input_ids are not the replay's concern).
func alterValue(row schemas.Row) (schemas.Row, bool) {
	parts := strings.Split(row.Text, tokenize.FrameSep)
	for k := 2; k < len(parts)-1; k++ {
		for i := 0; i < len(parts[k]); i++ {
			if c := parts[k][i]; c >= '0' && c <= '9' && i > 0 && parts[k][i-1] == '"' {
				parts[k] = parts[k][:i] + fmt.Sprint((int(c-'0')+1)%10) + parts[k][i+1:]
				row.Text = strings.Join(parts, tokenize.FrameSep)
				return row, true
			}
		}
	}
	return row, false
}
