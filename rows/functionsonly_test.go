package rows_test

import (
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestFunctionsOnlyRepository: a repository of functions only (a files source's group of files,
// or a repository without tests whose functions got generated inputs) gives no rows of its own and
// is no reject while some function kept an input (each of its function-level items ends as rows
// or a reject of its own); it is a reject when none did. A repository whose tests gave nothing is
// a reject as before.
func TestFunctionsOnlyRepository(t *testing.T) {
	group := crawl.Item{Key: "c#0", Path: "files:c", Repo: &crawl.RepoTarget{NoTests: true, FunctionsAll: true}}
	repo := crawl.Item{Key: "git:x@1", Path: "x", Repo: &crawl.RepoTarget{FunctionsAll: true}}
	for _, tc := range []struct {
		name   string
		t      execute.TracedItem
		reject string
	}{
		{"group with inputs", execute.TracedItem{Item: group, Status: schemas.StatusOK, Repo: &execute.RepoTrace{Gen: &schemas.GenYield{Inputs: 3}}}, ""},
		{"group without inputs", execute.TracedItem{Item: group, Status: schemas.StatusOK, Repo: &execute.RepoTrace{Gen: &schemas.GenYield{Found: 2}}},
			"no function of its modules kept an input"},
		{"repository without tests", execute.TracedItem{Item: repo, Status: schemas.StatusOK,
			Repo: &execute.RepoTrace{NoTests: "no_tests: no tests found", Gen: &schemas.GenYield{Inputs: 1}}}, ""},
		{"repository whose tests gave nothing", execute.TracedItem{Item: repo, Status: schemas.StatusOK,
			Repo: &execute.RepoTrace{Tests: 1, Run: 1, Gen: &schemas.GenYield{Inputs: 1}}}, "no test gave a trajectory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, rej, err := rows.Of(tc.t, schemas.Spec{}.WithDefaults(), debugger.PaperPolicy(), rows.Options{}, schemas.Counts{})
			if err != nil || len(rs) != 0 {
				t.Fatalf("rows %d, err %v", len(rs), err)
			}
			switch {
			case tc.reject == "" && rej != nil:
				t.Errorf("reject %+v, want none", rej)
			case tc.reject != "" && (rej == nil || rej.Reason != tc.reject):
				t.Errorf("reject %+v, want %q", rej, tc.reject)
			}
		})
	}
}
