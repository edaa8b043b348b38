package rows_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/schemas"
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
