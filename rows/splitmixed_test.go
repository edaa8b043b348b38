package rows

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// TestRepoRowSplitMixed: a repository row whose entry f calls g, with f and g in two splits, is
// dropped (ErrSplitMixed): kept, g's code and run would be in a train row and its own rows in
// validation. A row entered at g shows g alone and is kept; without splits nothing is dropped.
func TestRepoRowSplitMixed(t *testing.T) {
	split := schemas.SplitSpec{"validation": 0.5}
	var fSrc, gSrc, g string
	for k := 0; ; k++ {
		g = fmt.Sprintf("g%d", k)
		fSrc = "def f(x):\n    return " + g + "(x) + 1"
		gSrc = "def " + g + "(x):\n    return x * 2"
		if split.Assign(crawl.FunctionID(fSrc)) != split.Assign(crawl.FunctionID(gSrc)) {
			break
		}
	}
	fLine := "    return " + g + "(x) + 1"
	funcs := []schemas.FuncSource{
		{File: "m.py", QualName: "f", FirstLine: 1, LastLine: 2, Source: fSrc},
		{File: "m.py", QualName: g, FirstLine: 4, LastLine: 5, Source: gSrc},
	}
	loc := schemas.Locals{{Name: "x", Value: "1"}}
	two, three := "2", "3"
	tt := schemas.TestTrace{Test: "tests/test_m.py::test_f", Status: schemas.StatusOK, Functions: funcs,
		Events: []schemas.Event{
			{Event: "call", Frame: 1, Func: "f", File: "m.py", Lineno: 1, Src: "def f(x):", Locals: loc},
			{Event: "line", Frame: 1, Func: "f", File: "m.py", Lineno: 2, Src: fLine, Locals: loc},
			{Event: "call", Frame: 2, Func: g, File: "m.py", Lineno: 4, Depth: 1, Src: "def " + g + "(x):", Locals: loc},
			{Event: "line", Frame: 2, Func: g, File: "m.py", Lineno: 5, Depth: 1, Src: "    return x * 2", Locals: loc},
			{Event: "return", Frame: 2, Func: g, File: "m.py", Lineno: 5, Depth: 1, Src: "    return x * 2", Locals: loc, Value: &two},
			{Event: "return", Frame: 1, Func: "f", File: "m.py", Lineno: 2, Src: fLine, Locals: loc, Value: &three},
		}}
	it := crawl.Item{Path: "repo", Repo: &crawl.RepoTarget{}}
	o := Options{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), Split: split}
	mixed, kept := 0, 0
	for seed := uint64(0); seed < 40; seed++ {
		row, err := RepoRow(it, tt, nil, debugger.Forward, seed, debugger.PaperPolicy(), o)
		switch {
		case errors.Is(err, ErrSplitMixed):
			mixed++
			if reasonKey(err) != "split_mixed" {
				t.Errorf("reason key %q", reasonKey(err))
			}
		case err != nil:
			t.Fatal(err)
		default:
			kept++
			if row.QualName != g || row.Split != split.Assign(crawl.FunctionID(gSrc)) {
				t.Errorf("kept a row entered at %s in %s", row.QualName, row.Split)
			}
		}
		o2 := o
		o2.Split = nil
		if _, err := RepoRow(it, tt, nil, debugger.Forward, seed, debugger.PaperPolicy(), o2); err != nil {
			t.Fatalf("without splits: %v", err)
		}
	}
	if mixed == 0 || kept == 0 {
		t.Errorf("%d rows dropped as mixed, %d kept: want both", mixed, kept)
	}
}
