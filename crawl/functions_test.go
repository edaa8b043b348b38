package crawl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/ndtrace/ndtrace/store/drivers"

	"github.com/ndtrace/ndtrace/schemas"
)

func TestItems(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	corpus := filepath.Join(dir, "c.jsonl")
	os.WriteFile(corpus, []byte(strings.Join([]string{
		`{"id": "a", "code": "def f(x):\n    return x", "input": "1", "output": "1"}`,
		`not json`,
		`{"id": "b", "code": "", "input": "1"}`,
		``,
		`{"code": "def f(x):\n    return x", "input": "2"}`,
	}, "\n")), 0o644)
	py := filepath.Join(dir, "m.py")
	os.WriteFile(py, []byte("def g(x):\n    return x\n"), 0o644)

	tests := []struct {
		name    string
		src     schemas.SourceSpec
		items   int
		rejects int
		check   func(t *testing.T, items []Item)
	}{
		{name: "examples", src: schemas.SourceSpec{Kind: "examples"}, items: len(exampleCalls) + 1,
			check: func(t *testing.T, items []Item) {
				if r := items[len(items)-1].Repo; r == nil || r.Resolved.URL != ExamplesRepoURL || !r.Functions || r.MaxTests != 500 {
					t.Errorf("the last example item is not the example repository: %+v", items[len(items)-1])
				}
				if items[0].QualName != "running_max" || !strings.Contains(items[0].Code, "def running_max") {
					t.Errorf("item %+v", items[0])
				}
			}},
		{name: "jsonl", src: schemas.SourceSpec{Kind: "jsonl", Path: corpus, Func: "f"}, items: 2, rejects: 2,
			check: func(t *testing.T, items []Item) {
				if items[0].Call != "f(1)" || items[0].Key != corpus+"#a" || items[1].SourceID != "line-5" {
					t.Errorf("items %+v", items)
				}
			}},
		// The limit counts items: the rejects past it are still given, as they always were.
		{name: "jsonl_limit", src: schemas.SourceSpec{Kind: "jsonl", Path: corpus, Func: "f", Limit: 1}, items: 1, rejects: 2},
		{name: "python", src: schemas.SourceSpec{Kind: "python", Path: py, Calls: []string{"g(1)", "g('x')"}}, items: 2,
			check: func(t *testing.T, items []Item) {
				if items[1].Call != "g('x')" || items[1].Filename != "m.py" || items[1].QualName != "g" {
					t.Errorf("item %+v", items[1])
				}
			}},
		{name: "python_file_url", src: schemas.SourceSpec{Kind: "python", Path: "file://" + py, Calls: []string{"g(1)"}}, items: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			items, rejects, err := Items(ctx, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != tc.items || len(rejects) != tc.rejects {
				t.Fatalf("%d items, %d rejects (%v)", len(items), len(rejects), rejects)
			}
			for _, r := range rejects {
				if r.Reason == "" || r.Class != schemas.RejectMalformed || r.Source != tc.src.Path {
					t.Errorf("reject %+v: want a reason, class %q and source %s", r, schemas.RejectMalformed, tc.src.Path)
				}
			}
			if tc.check != nil {
				tc.check(t, items)
			}
		})
	}
	if _, _, err := Items(ctx, schemas.SourceSpec{Kind: "jsonl", Path: filepath.Join(dir, "missing.jsonl")}); err == nil {
		t.Error("a missing corpus is not an error")
	}
	a := Item{Key: "k", Code: "x", Call: "f()"}
	b := a
	b.Code = "y"
	if a.Hash() == b.Hash() || a.Hash() != (Item{Key: "k", Code: "x", Call: "f()"}).Hash() {
		t.Error("Hash does not follow the content")
	}
}
