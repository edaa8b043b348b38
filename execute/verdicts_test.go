package execute_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/replay"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// fixtureFiles is repository name of internal/testrepos, plus extra files (which may replace its
// own), as repoFixture takes them.
func fixtureFiles(t *testing.T, name string, extra map[string]string) map[string]string {
	files := map[string]string{}
	for p, data := range testrepos.Files(t, name) {
		files[p] = string(data)
	}
	for p, data := range extra {
		files[p] = data
	}
	return files
}

// traceFixture traces a repository made of files and fails unless it gives a repository trace.
func traceFixture(t *testing.T, name string, files map[string]string) *execute.RepoTrace {
	t.Helper()
	f, it, pool := repoFixture(t, name, files)
	trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
	tr, err := trc.Trace(context.Background(), it, schemas.Spec{}.WithDefaults(), func() {})
	if err != nil {
		t.Fatalf("trace: %v", err)
	}
	if tr.Repo == nil {
		t.Fatalf("no trace of the repository: %s %s %s", tr.Status, tr.Stage, tr.Detail)
	}
	return tr.Repo
}

// traced is the tests of rt that gave a trace (status ok), sorted.
func traced(rt *execute.RepoTrace) []string {
	var out []string
	for _, tt := range rt.Traces {
		if tt.Status == schemas.StatusOK {
			out = append(out, tt.Test)
		}
	}
	slices.Sort(out)
	return out
}

// TestDoctestsAreTraced (issue 29): doctest restores the trace function it found
// (sys.settrace(sys.gettrace())), which ended every doctest, and every test calling
// doctest.testmod or run_docstring_examples, as tampered. The doctests repository's six items
// (three doctests collected by --doctest-modules, three tests) now all give traces; a test that
// installs a trace function of its own is still lost alone.
func TestDoctestsAreTraced(t *testing.T) {
	rt := traceFixture(t, "doctests", fixtureFiles(t, "doctests", map[string]string{
		"tests/test_hook.py": "import sys\n\n\ndef test_hook():\n    sys.settrace(lambda *a: None)\n    sys.settrace(None)\n",
	}))
	want := []string{"tests/test_textfmt.py::test_run_docstring_examples", "tests/test_textfmt.py::test_shout",
		"tests/test_textfmt.py::test_testmod", "textfmt.py::textfmt", "textfmt.py::textfmt.pad", "textfmt.py::textfmt.shout"}
	if got := traced(rt); !slices.Equal(got, want) {
		t.Errorf("traced tests %q, want %q (quarantined %q, counts %v)", got, want, rt.Quarantined, rt.Counts)
	}
	if !slices.Equal(rt.Quarantined, []string{"tests/test_hook.py::test_hook"}) {
		t.Errorf("quarantined %q, want the test that installs a trace function", rt.Quarantined)
	}
	if n := rt.Counts[schemas.CountTracedOutcome("tampered")]; n != 1 {
		t.Errorf("%d traced runs tampered, want 1: %v", n, rt.Counts)
	}
	// The doctests' own lines are in their traces: shout's body ran traced.
	for _, tt := range rt.Traces {
		if tt.Test == "textfmt.py::textfmt.shout" && !slices.ContainsFunc(tt.Events, func(ev schemas.Event) bool {
			return ev.Func == "shout" && ev.Event == schemas.EventLine
		}) {
			t.Errorf("the doctest of shout has no line of shout: %d events", len(tt.Events))
		}
	}
}

// TestCollectionExcludesTamperingModule (issue 29): a test module that calls gc.get_objects()
// when it is imported ended the whole collection as tampered (no rows from the repository). The
// collection is now made again without that module, counted as collection_excluded:tampered with
// its reason; the other modules' tests are traced. Modules that tamper in the same way one after
// the other are each left out; gc introspection inside a test still loses that test.
func TestCollectionExcludesTamperingModule(t *testing.T) {
	rt := traceFixture(t, "gc_at_import", fixtureFiles(t, "gc_at_import", map[string]string{
		// tampering in a module another test module imports: its importer is left out
		"tests/helpers_gc.py":      "import gc\n\nREFS = len(gc.get_referrers(object))\n",
		"tests/test_uses_gc.py":    "from tests.helpers_gc import REFS\n\n\ndef test_refs():\n    assert REFS >= 0\n",
		"tests/test_gc_in_test.py": "import gc\n\n\ndef test_objects():\n    assert gc.get_objects()\n",
	}))
	want := []string{"tests/test_calc.py::test_add", "tests/test_calc.py::test_scale", "tests/test_more.py::test_add_negative"}
	if got := traced(rt); !slices.Equal(got, want) {
		t.Errorf("traced tests %q, want %q (counts %v)", got, want, rt.Counts)
	}
	if n := rt.Counts[schemas.CountCollectionExcluded("tampered")]; n != 2 {
		t.Errorf("%d files left out, want 2: %v %q", n, rt.Counts, rt.Excluded)
	}
	if len(rt.Excluded) != 2 || !strings.HasPrefix(rt.Excluded[0], "tests/test_gc.py: tampering") ||
		!strings.Contains(rt.Excluded[0], "gc introspection") || !strings.HasPrefix(rt.Excluded[1], "tests/test_uses_gc.py: ") {
		t.Errorf("excluded %q", rt.Excluded)
	}
	if !slices.Equal(rt.Quarantined, []string{"tests/test_gc_in_test.py::test_objects"}) {
		t.Errorf("quarantined %q, want the test that calls gc.get_objects", rt.Quarantined)
	}
}

// TestCollectionExclusionsAreBounded: a repository whose every module tampers at import is
// left out a bounded number of files at a time, then rejected as before.
func TestCollectionExclusionsAreBounded(t *testing.T) {
	files := map[string]string{"calc.py": "def add(a, b):\n    return a + b\n"}
	for _, c := range "abcdefghijk" {
		files["tests/test_"+string(c)+".py"] = "import gc\n\nN = len(gc.get_objects())\n\n\ndef test_n():\n    assert N\n"
	}
	f, it, pool := repoFixture(t, "all_tamper", files)
	trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
	tr, err := trc.Trace(context.Background(), it, schemas.Spec{}.WithDefaults(), func() {})
	if err != nil {
		t.Fatalf("trace: %v", err)
	}
	if tr.Repo != nil || tr.Stage != schemas.YieldCollection || !strings.Contains(tr.Detail, "tampered") {
		t.Errorf("%s %s %s, want a collection that ended tampered", tr.Status, tr.Stage, tr.Detail)
	}
}

// TestReplayDoctestRows (issue 29): the rows of doctests replay on bdb. The replay's driver shows
// the replayed code no trace function (sys.gettrace() is None there) and doctest ends with
// sys.settrace(saved): that restores nothing and changes nothing, where it ended every replay of a
// doctest's row as tampered.
func TestReplayDoctestRows(t *testing.T) {
	ctx := context.Background()
	f, it, pool := repoFixture(t, "doctests", fixtureFiles(t, "doctests", nil))
	it.Key = "doctests"
	spec := schemas.Spec{Name: "replay-doctests", Sources: []schemas.SourceSpec{{Kind: "examples"}}, TrajectoriesPerTrace: 8}.WithDefaults()
	p, err := debugger.PolicyByName(spec.Policy)
	if err != nil {
		t.Fatal(err)
	}
	opts := rows.Options{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), TracerVersion: sandbox.TracerVersion}
	trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
	counts := map[string]int{}
	within := func(tr execute.TracedItem, rep execute.RowReplayer) error {
		got, rej, err := rows.Of(tr, spec, p, opts, schemas.Counts{})
		if rej != nil || err != nil {
			t.Fatalf("no rows: %+v %v", rej, err)
		}
		for _, row := range got {
			if row.Direction != "forward" || row.Level != "repository" {
				continue
			}
			out, err := rep.Replay(ctx, it, row, spec)
			if err != nil {
				t.Fatalf("row %s: %v", row.ID, err)
			}
			doctest := strings.HasPrefix(row.SourceID, "textfmt.py::") || strings.Contains(row.SourceID, "::test_testmod") ||
				strings.Contains(row.SourceID, "::test_run_docstring_examples")
			switch {
			case !out.Replayed:
				t.Errorf("row %s (%s) not replayed: %s", row.ID, row.SourceID, out.Detail)
			case out.Kind == replay.Mismatch || out.Kind == replay.Tampered:
				t.Errorf("row %s (%s of %s): %s: %s", row.ID, row.QualName, row.SourceID, out.Kind, out.Detail)
			case out.Agreed && doctest:
				counts["doctest agreed"]++
			}
		}
		return nil
	}
	if _, err := trc.TraceRepo(ctx, it, spec, func() {}, within); err != nil {
		t.Fatal(err)
	}
	if counts["doctest agreed"] == 0 {
		t.Errorf("no row of a doctest agreed: %v", counts)
	}
	t.Logf("%v", counts)
}
