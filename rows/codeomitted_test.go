package rows

import (
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// TestRepoRowCodeOmitted builds a repository-level row whose function names a constant (shown in
// the CODE context) and a table longer than a definition may be (left out): code_omitted counts it.
func TestRepoRowCodeOmitted(t *testing.T) {
	src := "LIMIT = 3\nTABLE = [\n" + strings.Repeat("    0,\n", debugger.MaxDefBytes/7+1) + "]\n"
	first := strings.Count(src, "\n") + 1
	fn := "def f(x):\n    return min(x, LIMIT), TABLE"
	src += fn + "\n"
	funcs := []schemas.FuncSource{{File: "m.py", QualName: "f", FirstLine: first, LastLine: first + 1, Source: fn}}
	v := "(1, [])"
	loc := schemas.Locals{}
	tt := schemas.TestTrace{Test: "tests/test_m.py::test_f", Status: schemas.StatusOK, Functions: funcs,
		Modules: debugger.ParseModule(src).Defs("m.py", funcs),
		Events: []schemas.Event{
			{Event: "call", Frame: 1, Func: "f", File: "m.py", Lineno: first, Src: "def f(x):", Locals: loc},
			{Event: "line", Frame: 1, Func: "f", File: "m.py", Lineno: first + 1, Src: "    return min(x, LIMIT), TABLE", Locals: loc},
			{Event: "return", Frame: 1, Func: "f", File: "m.py", Lineno: first + 1, Src: "    return min(x, LIMIT), TABLE", Locals: loc, Value: &v},
		}}
	it := crawl.Item{Path: "repo", Repo: &crawl.RepoTarget{}}
	o := Options{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
	row, err := RepoRow(it, tt, nil, debugger.Forward, 1, debugger.PaperPolicy(), o)
	if err != nil {
		t.Fatal(err)
	}
	if row.CodeOmitted != 1 || !strings.Contains(row.Text, "LIMIT = 3\n\ndef f(x):") || strings.Contains(row.Text, "TABLE = [") {
		t.Errorf("code_omitted %d, text:\n%s", row.CodeOmitted, row.Text)
	}
	// A trace stored before module definitions were collected: the function alone, nothing counted.
	tt.Modules = nil
	if row, err = RepoRow(it, tt, nil, debugger.Forward, 1, debugger.PaperPolicy(), o); err != nil || row.CodeOmitted != 0 || strings.Contains(row.Text, "LIMIT = 3") {
		t.Errorf("without modules: %v, code_omitted %d, text:\n%s", err, row.CodeOmitted, row.Text)
	}
}
