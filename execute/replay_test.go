package execute_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/internal/rowtest"
	"github.com/ndtrace/ndtrace/replay"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// TestTracerReplay replays real rows, built by the pipeline from a traced item, through
// Tracer.Replay (the method verify calls): forward rows agree, inverse rows are not replayed,
// and a row whose text was altered is caught with the first differing state.
func TestTracerReplay(t *testing.T) {
	code := "def helper(a):\n    return a * 2\n\ndef f(n):\n    total = 0\n    for i in range(n):\n        total += helper(i)\n    return total\n"
	it := rowtest.Item(t, code, "f(4)")
	opts := rows.Options{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), TracerVersion: sandbox.TracerVersion}
	pool := execute.NewSandboxPool(sandbox.Config{}, 1)
	defer pool.Close()
	trc := &execute.Tracer{Sandboxes: pool}
	spec := schemas.Spec{}.WithDefaults()
	citem := crawl.Item{Key: "t#0", Code: code, Filename: "main.py", Call: "f(4)"}
	for seed := uint64(0); seed < 8; seed++ {
		row, err := rowtest.Row(t, it, debugger.Forward, seed, opts)
		if err != nil {
			t.Fatal(err)
		}
		out, err := trc.Replay(context.Background(), citem, row, spec)
		if err != nil {
			t.Fatal(err)
		}
		// A breakpoint on main's line `return f(4)` taken from inside f lands on main's return
		// state, where pdb (which breaks at lines only) does not stop: a named difference.
		if !out.Replayed || (!out.Agreed && out.Kind != replay.BreakpointNonLine) {
			t.Errorf("seed %d: %+v\n%s", seed, out, row.Text)
		}
		if seed == 0 {
			bad := row
			bad.Text = strings.Replace(row.Text, `<|arg_sep|>"12"`, `<|arg_sep|>"13"`, 1)
			if bad.Text == row.Text {
				t.Fatalf("the test's alteration did not apply:\n%s", row.Text)
			}
			out, err := trc.Replay(context.Background(), citem, bad, spec)
			if err != nil {
				t.Fatal(err)
			}
			if out.Agreed || out.Kind != replay.Mismatch || !strings.Contains(out.Detail, `"13"`) || !strings.Contains(out.Detail, `"12"`) {
				t.Errorf("altered row: %+v", out)
			}
		}
	}
	// A program that looks at its caller's frame traces normally but cannot be replayed
	// honestly: the verdict fails closed.
	hostile := "import sys\ndef f(n):\n    up = sys._getframe(1).f_code.co_name\n    return n\n"
	hrow, err := rowtest.Row(t, rowtest.Item(t, hostile, "f(4)"), debugger.Forward, 2, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := trc.Replay(context.Background(), crawl.Item{Code: hostile, Filename: "main.py", Call: "f(4)"}, hrow, spec)
	if err != nil || out.Agreed || out.Kind != replay.Tampered {
		t.Errorf("hostile row: %+v %v", out, err)
	}
	// Rows that are not replayed say why.
	for _, c := range []struct {
		it  crawl.Item
		row schemas.Row
	}{
		{crawl.Item{Repo: &crawl.RepoTarget{}}, schemas.Row{Level: "repository", Direction: "forward"}},
		{crawl.Item{Code: code, Call: "f(4)", RepoURL: "https://example.invalid/r"}, schemas.Row{Level: "function", Direction: "forward"}},
	} {
		out, err := trc.Replay(context.Background(), c.it, c.row, spec)
		if err != nil || out.Replayed || out.Detail == "" {
			t.Errorf("%+v: %+v %v", c.row, out, err)
		}
	}
	inv, err := rowtest.Row(t, it, debugger.Inverse, 1, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err = trc.Replay(context.Background(), citem, inv, spec)
	if err != nil || out.Replayed || out.Detail == "" {
		t.Errorf("inverse row: %+v %v", out, err)
	}
}
