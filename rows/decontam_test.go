package rows_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestDecontaminateFunctionItem: a function-level item whose module holds a function of an
// evaluation set (here a renamed copy beside an unrelated function, which the exact hash of the
// whole module misses) is a reject of class decontaminated naming the set and the item; an item
// whose module holds none is not.
func TestDecontaminateFunctionItem(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "e.jsonl")
	os.WriteFile(p, []byte(`{"id":"sample_7","code":"def f(nums):\n    output = []\n    for n in nums:\n        output.append((nums.count(n), n))\n    output.sort(reverse=True)\n    return output"}`+"\n"), 0o644)
	set, err := crawl.ReadEvalSet(context.Background(), "crux", p)
	if err != nil {
		t.Fatal(err)
	}
	opts := rows.Options{Decontaminate: func(code string) (string, string, bool) {
		item, hit := set.Match(code)
		return "crux", item, hit
	}}
	contaminated := "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n\n\ndef tally(values):\n    \"\"\"Counts.\"\"\"\n    res = []\n    for v in values:\n        res.append((values.count(v), v))\n    res.sort(reverse=True)\n    return res\n"
	it := crawl.Item{Key: "m.py#1", Path: "m.py", Code: contaminated, Call: "clamp(5, 0, 3)"}
	_, rej, err := rows.Of(execute.TracedItem{Item: it, Status: schemas.StatusOK}, schemas.Spec{}.WithDefaults(), debugger.PaperPolicy(), opts, schemas.Counts{})
	if err != nil || rej == nil {
		t.Fatalf("reject %v, error %v", rej, err)
	}
	want := schemas.Reject{Source: it.Origin(), Key: it.Key, Class: schemas.RejectDecontaminated, Reason: "decontaminated: crux matches sample_7", EvalSet: "crux"}
	if *rej != want {
		t.Errorf("reject %+v, want %+v", *rej, want)
	}
	clean := crawl.Item{Key: "m.py#2", Path: "m.py", Code: "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n", Call: "clamp(5, 0, 3)"}
	_, rej, _ = rows.Of(execute.TracedItem{Item: clean, Status: schemas.StatusOK}, schemas.Spec{}.WithDefaults(), debugger.PaperPolicy(), opts, schemas.Counts{})
	if rej != nil && rej.Class == schemas.RejectDecontaminated {
		t.Errorf("an unrelated item is decontaminated: %+v", *rej)
	}
}
