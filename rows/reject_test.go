package rows_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// TestRejectReasonBounded (attacker's review, issue 26): a reject's reason is the item's detail,
// which the repository or the traced code writes: a collection that fails after printing one long
// line to stderr (kept up to sandbox.KeptOutput, 64 KiB), an exception's message, a checkout's
// reason. Every reject of a page of such items went whole into the page's rejects object. A
// reason is now cut at rows.MaxRejectReason characters; short ones are kept as they are.
func TestRejectReasonBounded(t *testing.T) {
	long := strings.Repeat("é", 64<<10)
	repo := crawl.Item{Key: "git:x@1", Repo: &crawl.RepoTarget{}}
	fn := crawl.Item{Key: "f#1", Code: "def f():\n    raise ValueError('x')\n", Call: "f()"}
	for _, tc := range []struct {
		name string
		item execute.TracedItem
		want string // the reason's start
	}{
		{"repository", execute.TracedItem{Item: repo, Status: schemas.StatusInvalid, Stage: schemas.YieldCollection,
			Detail: "test collection failed: exception: (stderr: " + long + ")"}, "test collection failed: exception: (stderr: éé"},
		{"function", execute.TracedItem{Item: fn, Status: schemas.StatusTampered, Detail: "tampering: " + long}, "tampered: tampering: éé"},
		{"poison", execute.TracedItem{Item: fn, Poison: long}, "poison: éé"},
		{"short", execute.TracedItem{Item: repo, Status: schemas.StatusInvalid, Detail: "checkout: too large"}, "checkout: too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, rej, err := rows.Of(tc.item, schemas.Spec{}.WithDefaults(), debugger.PaperPolicy(), rows.Options{}, schemas.Counts{})
			if err != nil {
				t.Fatal(err)
			}
			if rej == nil {
				t.Fatalf("no reject: %d rows", len(rs))
			}
			if !strings.HasPrefix(rej.Reason, tc.want) {
				t.Errorf("reason %.80q..., want it to start with %q", rej.Reason, tc.want)
			}
			if n := utf8.RuneCountInString(rej.Reason); n > rows.MaxRejectReason+3 || !utf8.ValidString(rej.Reason) {
				t.Errorf("a reason of %d characters (valid UTF-8: %v)", n, utf8.ValidString(rej.Reason))
			}
		})
	}
}

// TestRejectRaisedBeforeCall: a function-level item whose module body (a failed import) or call
// expression raises has no events; its reject carries the exception instead of "the trace has no
// events", which hid the cause.
func TestRejectRaisedBeforeCall(t *testing.T) {
	fn := crawl.Item{Key: "m.py#0", Code: "import foo\ndef f():\n    return 1\n", Call: "f()"}
	counts := schemas.Counts{}
	_, rej, err := rows.Of(execute.TracedItem{Item: fn, Status: schemas.StatusException, Detail: "ModuleNotFoundError: No module named 'foo'"},
		schemas.Spec{}.WithDefaults(), debugger.PaperPolicy(), rows.Options{}, counts)
	if err != nil {
		t.Fatal(err)
	}
	want := "raised before the call, by the module body or the call expression: ModuleNotFoundError: No module named 'foo'"
	if rej == nil || rej.Reason != want || rej.Class != schemas.RejectNoTrajectory {
		t.Fatalf("reject %+v, want class no_trajectory and reason %q", rej, want)
	}
	// The per-direction counters still say why each direction was skipped.
	for _, dir := range (schemas.Spec{}).WithDefaults().Directions {
		if counts[schemas.CountSkipped(dir, "error")] != 1 {
			t.Errorf("counts %v: no skipped %s", counts, dir)
		}
	}
	// A run that ended ok without events (a call of a builtin) is not said to have raised.
	_, rej, _ = rows.Of(execute.TracedItem{Item: fn, Status: schemas.StatusOK}, schemas.Spec{}.WithDefaults(), debugger.PaperPolicy(), rows.Options{}, schemas.Counts{})
	if rej == nil || strings.Contains(rej.Reason, "raised") {
		t.Errorf("ok run without events: reject %+v", rej)
	}
}

// TestRejectRaisedBeforeCallSandbox traces, in the real sandbox, items whose module body or call
// expression raises, and one whose function raises (which gives rows, as every exit does).
func TestRejectRaisedBeforeCallSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sandbox: long integration test; run without -short")
	}
	pool := execute.NewSandboxPool(sandbox.Config{}, 1)
	defer pool.Close()
	trc := &execute.Tracer{Sandboxes: pool}
	spec := schemas.Spec{}.WithDefaults()
	opts := rows.Options{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC), TracerVersion: sandbox.TracerVersion}
	for _, tc := range []struct{ name, code, call, want string }{
		{"import", "import ndtrace_no_such_module\n\ndef f(x):\n    return x\n", "f(1)",
			"raised before the call, by the module body or the call expression: ModuleNotFoundError: No module named 'ndtrace_no_such_module'"},
		{"module body", "def f(x):\n    return x\n\nraise RuntimeError('no config')\n", "f(1)",
			"raised before the call, by the module body or the call expression: RuntimeError: no config"},
		{"call argument", "def f(x):\n    return x\n", "f(1 // 0)",
			"raised before the call, by the module body or the call expression: ZeroDivisionError: integer division or modulo by zero"},
		{"function raises", "def f(x):\n    return 1 // x\n", "f(0)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := crawl.Item{Key: "m.py#0", Path: "m.py", Filename: "m.py", Code: tc.code, Call: tc.call}
			traced, err := trc.Trace(context.Background(), it, spec, func() {})
			if err != nil {
				t.Fatal(err)
			}
			rs, rej, err := rows.Of(traced, spec, debugger.PaperPolicy(), opts, schemas.Counts{})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && (rej != nil || len(rs) == 0):
				t.Errorf("no rows: reject %+v", rej)
			case tc.want != "" && (rej == nil || rej.Reason != tc.want):
				t.Errorf("reject %+v (status %s, detail %q), want reason %q", rej, traced.Status, traced.Detail, tc.want)
			}
		})
	}
}
