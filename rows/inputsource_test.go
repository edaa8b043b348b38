package rows_test

import (
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// TestInputSourceColumn checks the input_source column (row schema 3): a function-level row
// records its item's InputSource, corpus for an item without one; a repository-level row has
// none. The row id does not depend on it.
func TestInputSourceColumn(t *testing.T) {
	const file = "/repo/m.py"
	code := "def double(x):\n    return 2 * x\n"
	four := "4"
	ev := func(kind string, line int, value *string) schemas.Event {
		return schemas.Event{Event: kind, Func: "double", File: file, Src: "    return 2 * x", Lineno: line, Frame: 1,
			Locals: schemas.Locals{{Name: "x", Value: "2"}}, Value: value}
	}
	events := []schemas.Event{ev("call", 1, nil), ev("line", 2, nil), ev("return", 2, &four)}
	spec := schemas.Spec{Directions: []string{"forward", "inverse"}, TrajectoriesPerTrace: 1}.WithDefaults()
	ids := map[string]bool{}
	for _, tc := range []struct{ source, want string }{
		{"", schemas.InputSourceCorpus},
		{schemas.InputSourceCorpus, schemas.InputSourceCorpus},
		{schemas.InputSourceTestCall, schemas.InputSourceTestCall},
		{schemas.InputSourceTyped, schemas.InputSourceTyped},
		{schemas.InputSourceFuzzed, schemas.InputSourceFuzzed},
	} {
		it := crawl.Item{Key: "k", Path: "m.py", Code: code, Filename: "m.py", Call: "double(2)", QualName: "double", InputSource: tc.source}
		if got := rows.InputSource(it); got != tc.want {
			t.Errorf("InputSource(%q) = %q, want %q", tc.source, got, tc.want)
		}
		traced := execute.TracedItem{Item: it, Status: schemas.StatusOK, Events: events, Blocks: []schemas.Block{{Start: 1, End: 2}}}
		rs, rej, err := rows.Of(traced, spec, debugger.PaperPolicy(), rows.Options{Tokenizer: tokenize.Bytes()}, schemas.Counts{})
		if err != nil || rej != nil || len(rs) != 2 {
			t.Fatalf("%q: %d rows, %v %+v", tc.source, len(rs), err, rej)
		}
		for _, r := range rs {
			if r.InputSource != tc.want {
				t.Errorf("item input source %q: row's %q, want %q", tc.source, r.InputSource, tc.want)
			}
			ids[r.ID] = true
		}
	}
	if len(ids) != 2 {
		t.Errorf("%d row ids over the input sources, want 2 (one per direction: the id does not cover input_source)", len(ids))
	}

	// An item with an input source none knows is a reject, not rows a shard would refuse.
	bad := crawl.Item{Key: "k", Path: "m.py", Code: code, Filename: "m.py", Call: "double(2)", QualName: "double", InputSource: "\x1b[2Jmade_up"}
	rs, rej, err := rows.Of(execute.TracedItem{Item: bad, Status: schemas.StatusOK, Events: events, Blocks: []schemas.Block{{Start: 1, End: 2}}},
		spec, debugger.PaperPolicy(), rows.Options{Tokenizer: tokenize.Bytes()}, schemas.Counts{})
	if err != nil || rs != nil || rej == nil || rej.Class != schemas.RejectMalformed || rej.Reason != `malformed: unknown input source "\x1b[2Jmade_up"` {
		t.Errorf("unknown input source: rows %v, reject %+v, error %v", rs, rej, err)
	}

	// A repository-level row has no input source.
	tt := schemas.TestTrace{Test: "tests/test_m.py::test_double", Status: schemas.StatusOK, Events: events,
		Functions: []schemas.FuncSource{{File: file, QualName: "double", FirstLine: 1, LastLine: 2, Source: code}}}
	repo := crawl.Item{Key: "git:x@1", Path: "https://example.com/x.git", Repo: &crawl.RepoTarget{Resolved: crawl.Resolved{Commit: "1"}}}
	r, err := rows.RepoRow(repo, tt, nil, debugger.Forward, 0, debugger.PaperPolicy(), rows.Options{Tokenizer: tokenize.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	if r.InputSource != "" {
		t.Errorf("repository row: input_source %q, want empty", r.InputSource)
	}
}
