package rows_test

import (
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestOfRepositoryWithoutTests (outside review): a files group (NoTests) or a functions: all
// repository whose tests were not found gives its function items, and no rows of its own: that is
// no reject (every files group was a no_trajectory reject, one per 16 files of a corpus). A
// repository with tests that gave no trajectory still is.
func TestOfRepositoryWithoutTests(t *testing.T) {
	spec := schemas.Spec{}.WithDefaults()
	for _, tc := range []struct {
		name   string
		target crawl.RepoTarget
		trace  execute.RepoTrace
		reject bool
	}{
		{"files group", crawl.RepoTarget{NoTests: true, FunctionsAll: true}, execute.RepoTrace{Gen: &schemas.GenYield{Inputs: 1}}, false},
		{"functions all, no tests found", crawl.RepoTarget{FunctionsAll: true}, execute.RepoTrace{Gen: &schemas.GenYield{Inputs: 2}}, false},
		{"files group whose functions kept no input", crawl.RepoTarget{NoTests: true, FunctionsAll: true}, execute.RepoTrace{Gen: &schemas.GenYield{}}, true},
		{"functions all, tests gave nothing", crawl.RepoTarget{FunctionsAll: true}, execute.RepoTrace{Tests: 3, Run: 3}, true},
		{"tests only, none found", crawl.RepoTarget{}, execute.RepoTrace{}, true},
	} {
		target, trace := tc.target, tc.trace
		it := execute.TracedItem{Item: crawl.Item{Key: "files:x#0", Path: "files:x", Repo: &target}, Status: schemas.StatusOK, Repo: &trace}
		rs, rej, err := rows.Of(it, spec, debugger.PaperPolicy(), rows.Options{}, schemas.Counts{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 0 || (rej != nil) != tc.reject {
			t.Errorf("%s: %d rows, reject %+v, want a reject: %v", tc.name, len(rs), rej, tc.reject)
		}
		// The yield report still says the repository gave no rows of its own.
		if y := rows.Yield(it, 0, rej); y.Rejected != schemas.YieldNoTrajectory && y.Rejected != schemas.YieldOther {
			t.Errorf("%s: yield stage %q", tc.name, y.Rejected)
		}
	}
}
