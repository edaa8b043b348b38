package rows_test

import (
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// TestFunctionIDBothLevels checks the function_id and split columns: a repository function
// traced by a test (repository level, its entry) and the function-level item made of it
// (testcalls: Func is its source) have the same id, crawl.FunctionID of its source; a lambda entry
// takes its enclosing function's; the split is the spec's assignment of that id, the same for
// every seed; and a forward function-level row starts at the function's call unless
// forward_start is main.
func TestFunctionIDBothLevels(t *testing.T) {
	const file = "/repo/pkg/m.py"
	double := "def double(x):\n    return (lambda y: y * 2)(x)\n"
	funcs := []schemas.FuncSource{{File: file, QualName: "double", FirstLine: 1, LastLine: 2, Source: double}}
	four := "4"
	ev := func(kind, fn, src string, line, frame, depth int, value *string) schemas.Event {
		return schemas.Event{Event: kind, Func: fn, File: file, Src: src, Lineno: line, Frame: frame, Depth: depth,
			Locals: schemas.Locals{{Name: "x", Value: "2"}}, Value: value}
	}
	events := []schemas.Event{
		ev("call", "double", "def double(x):", 1, 1, 0, nil),
		ev("line", "double", "    return (lambda y: y * 2)(x)", 2, 1, 0, nil),
		ev("call", "double.<locals>.<lambda>", "    return (lambda y: y * 2)(x)", 2, 2, 1, nil),
		ev("return", "double.<locals>.<lambda>", "    return (lambda y: y * 2)(x)", 2, 2, 1, &four),
		ev("return", "double", "    return (lambda y: y * 2)(x)", 2, 1, 0, &four),
	}
	tt := schemas.TestTrace{Test: "tests/test_m.py::test_double", Status: schemas.StatusOK, Events: events, Functions: funcs}
	repo := crawl.Item{Key: "git:x@1", Path: "https://example.com/x.git", Repo: &crawl.RepoTarget{Resolved: crawl.Resolved{Commit: "1"}}}
	split := schemas.SplitSpec{"validation": 0.5}
	opts := rows.Options{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), Split: split}
	want := crawl.FunctionID(double)
	entries := map[string]bool{}
	for seed := uint64(0); seed < 16; seed++ {
		r, err := rows.RepoRow(repo, tt, nil, debugger.Forward, seed, debugger.PaperPolicy(), opts)
		if err != nil {
			t.Fatal(err)
		}
		entries[r.QualName] = true
		if r.FunctionID != want || r.Split != split.Assign(want) {
			t.Errorf("seed %d, entry %s: function_id %q split %q, want %q %q", seed, r.QualName, r.FunctionID, r.Split, want, split.Assign(want))
		}
	}
	if !entries["double"] || !entries["double.<locals>.<lambda>"] {
		t.Errorf("entries drawn: %v, want double and its lambda", entries)
	}

	// The function-level item testcalls makes of it.
	fi := crawl.Item{Key: "git:x@1#pkg/m.py:double:0", Path: "pkg/m.py", Code: "import os\n\n" + double, Filename: "pkg/m.py",
		Call: "double(2)", QualName: "double", Func: double, RepoURL: "https://example.com/x.git", Commit: "1"}
	fevents := []schemas.Event{
		ev("call", "double", "def double(x):", 3, 1, 0, nil),
		ev("line", "double", "    return (lambda y: y * 2)(x)", 4, 1, 0, nil),
		ev("call", "double.<locals>.<lambda>", "    return (lambda y: y * 2)(x)", 4, 2, 1, nil),
		ev("return", "double.<locals>.<lambda>", "    return (lambda y: y * 2)(x)", 4, 2, 1, &four),
		ev("return", "double", "    return (lambda y: y * 2)(x)", 4, 1, 0, &four),
	}
	traced := execute.TracedItem{Item: fi, Status: schemas.StatusOK, Events: fevents, Blocks: []schemas.Block{{Start: 3, End: 4}}}
	for _, start := range []string{"", schemas.ForwardStartMain} {
		for _, seed := range []uint64{0, 9} {
			spec := schemas.Spec{Directions: []string{"forward", "inverse"}, TrajectoriesPerTrace: 2, Seed: seed,
				ForwardStart: start, Split: split}.WithDefaults()
			rs, rej, err := rows.Of(traced, spec, debugger.PaperPolicy(), rows.Options{Tokenizer: tokenize.Bytes()}, schemas.Counts{})
			if err != nil || rej != nil || len(rs) != 4 {
				t.Fatalf("start %q: %d rows, %v %+v", start, len(rs), err, rej)
			}
			for _, r := range rs {
				if r.FunctionID != want || r.Split != split.Assign(want) {
					t.Errorf("function level: function_id %q split %q, want %q %q", r.FunctionID, r.Split, want, split.Assign(want))
				}
				traj, err := tokenize.Parse(r.Text)
				if err != nil {
					t.Fatal(err)
				}
				first := traj.Steps[0].State
				wantSrc := "def double(x):"
				if start == schemas.ForwardStartMain && r.Direction == "forward" {
					wantSrc = "def main():"
				} else if r.Direction == "inverse" {
					wantSrc = "    return (lambda y: y * 2)(x)" // its inv_return
				}
				if first.Src != wantSrc {
					t.Errorf("start %q, %s row: first state %s %q, want %q", start, r.Direction, first.Kind, first.Src, wantSrc)
				}
			}
		}
	}
}
