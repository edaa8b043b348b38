package dataset

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
)

// TestYieldsMerge checks that yield reports sum per source the same in any grouping, survive a
// round trip through a part's JSON, and reach the statistics per source and for the dataset.
func TestYieldsMerge(t *testing.T) {
	ys := []schemas.RepoYield{
		{Source: "r/a", Key: "a", Collected: 6, Run: 6, PassedPlain: 6, PassedTraced: 5, Quarantined: 1, Rows: 10},
		{Source: "r/b", Key: "b", Rejected: "missing_module", Reason: "missing module x"},
		{Source: "r/c", Key: "c", Collected: 2, Run: 2, PassedPlain: 1, PassedTraced: 1, Neutralised: 2, Rejected: "no_trajectory"},
		{Source: "r/a", Key: "a2", Collected: 1, Run: 1, PassedPlain: 1, PassedTraced: 1, Rows: 2},
	}
	whole := &StatsPart{}
	whole.AddYields(ys)
	left, right := &StatsPart{}, &StatsPart{}
	left.AddYields(ys[2:])
	right.AddYields(ys[:2])
	left.Merge(right)
	a, _ := json.Marshal(whole)
	b, _ := json.Marshal(left)
	if string(a) != string(b) {
		t.Fatalf("merged parts differ:\n%s\n%s", a, b)
	}
	p, err := ParseStatsPart(a)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stats(&Manifest{})
	y := st.Repositories
	if y == nil || y.Repositories != 4 || y.WithRows != 2 || y.Run != 9 || y.PassedTraced != 7 || y.Neutralised != 2 ||
		y.RejectedByClass["missing_module"] != 1 || y.RejectedByClass["no_trajectory"] != 1 {
		t.Fatalf("dataset yield %+v", y)
	}
	var ra *Yield
	for _, s := range st.Sources {
		if s.Source == "r/a" {
			ra = s.Yield
		}
	}
	if ra == nil || ra.Repositories != 2 || ra.Rows != 12 || ra.Collected != 7 {
		t.Fatalf("yield of r/a: %+v", ra)
	}
	// A part whose yields break their invariants is refused.
	for _, bad := range []string{
		strings.Replace(string(a), `"with_rows":2`, `"with_rows":5`, 1),
		strings.Replace(string(a), `"source":"r/b"`, `"source":"r/0"`, 1),
	} {
		if _, err := ParseStatsPart([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
