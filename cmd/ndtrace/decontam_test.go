package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestRunDecontaminatesRepository: a repository holding CruxEval functions (renamed, with a
// docstring, among unrelated functions), traced through its tests, gives rows whose CODE shows
// them when nothing is decontaminated; with CruxEval named in decontaminate, no row of either
// level shows one (repository rows are counted per set, function-level items are rejects naming
// the CruxEval item matched), the unrelated function keeps its repository rows (its
// function-level items go with their module, which holds CruxEval functions), and the statistics
// count each removal once, under the set.
func TestRunDecontaminatesRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	corpus := cruxeval.Path(t)
	rows := cruxeval.Rows(t)
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	os.MkdirAll(filepath.Join(repo, "pkg"), 0o755)
	os.MkdirAll(filepath.Join(repo, "tests"), 0o755)
	var mod, tests strings.Builder
	mod.WriteString("\"\"\"Helpers.\"\"\"\n\n\ndef clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n\n\n")
	tests.WriteString("from pkg.mod import *\n\n\ndef test_clamp():\n    assert clamp(5, 0, 3) == 3\n    assert clamp(-1, 0, 3) == 0\n")
	for _, i := range []int{0, 1, 3, 5} {
		r := rows[i]
		name := fmt.Sprintf("helper_%d", i)
		// The function renamed, with a docstring.
		code := strings.Replace(r.Code, "def f(", "def "+name+"(", 1)
		code = strings.Replace(code, ":\n", ":\n    \"\"\"A helper of the package.\"\"\"\n", 1)
		fmt.Fprintf(&mod, "%s\n\n\n", code)
		fmt.Fprintf(&tests, "\n\ndef test_%s():\n    assert %s(%s) == %s\n", name, name, r.Input, r.Output)
	}
	os.WriteFile(filepath.Join(repo, "pkg", "__init__.py"), nil, 0o644)
	os.WriteFile(filepath.Join(repo, "pkg", "mod.py"), []byte(mod.String()), 0o644)
	os.WriteFile(filepath.Join(repo, "tests", "test_mod.py"), []byte(tests.String()), 0o644)

	set, err := crawl.ReadEvalSet(context.Background(), "cruxeval", corpus)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		rows, contaminated, clamp int
		counts                    schemas.Counts
		rejects                   string
		decon                     map[string]int64
	}
	runWith := func(name, extra string) result {
		out := filepath.Join(dir, name)
		spec := writeSpec(t, dir, fmt.Sprintf("name: %s\noutput: %s\nsources:\n  - kind: repository\n    url: %s\n%slimits:\n  timeout: 10s\ncreated_at: 2026-11-22T00:00:00Z\n", name, out, repo, extra))
		runSpec(t, spec)
		m, _ := checkDataset(t, out)
		r := result{counts: m.Counts, rejects: readRejects(t, out)}
		for _, row := range allRows(t, out) {
			r.rows++
			if _, hit := set.Match(rowCode(row.Text)); hit {
				r.contaminated++
			}
			if strings.Contains(row.Text, "def clamp(") {
				r.clamp++
			}
		}
		so, se, code := runCmd("stats", "--json", out)
		if code != 0 {
			t.Fatalf("stats: %s", se)
		}
		var stats struct {
			Dataset struct {
				Decontaminated map[string]int64 `json:"decontaminated"`
			} `json:"dataset"`
		}
		if err := json.Unmarshal([]byte(so), &stats); err != nil {
			t.Fatal(err)
		}
		r.decon = stats.Dataset.Decontaminated
		return r
	}
	before := runWith("plain", "")
	after := runWith("decon", fmt.Sprintf("decontaminate:\n  - name: cruxeval\n    path: %s\n", corpus))
	t.Logf("without decontamination: %d rows, %d showing a CruxEval function; with: %d rows, %d showing one, counts %v, stats %v",
		before.rows, before.contaminated, after.rows, after.contaminated, after.counts, after.decon)
	if before.contaminated == 0 {
		t.Fatalf("no row shows a CruxEval function without decontamination (%d rows): the fixture tests nothing", before.rows)
	}
	if after.contaminated != 0 {
		t.Errorf("%d rows show a CruxEval function after decontamination", after.contaminated)
	}
	if after.clamp == 0 {
		t.Errorf("no row of the unrelated clamp is left")
	}
	n := after.counts[schemas.CountDecontaminated("cruxeval")]
	if n == 0 {
		t.Errorf("nothing counted as decontaminated: %v", after.counts)
	}
	if !strings.Contains(after.rejects, `"eval_set":"cruxeval"`) || !strings.Contains(after.rejects, "matches sample_") {
		t.Errorf("no function-level reject naming the set and the item matched:\n%s", after.rejects)
	}
	if len(after.decon) != 1 || after.decon["cruxeval"] != n {
		t.Errorf("statistics count decontaminated %v, want cruxeval=%d only", after.decon, n)
	}
}

// rowCode is the CODE context of a row's text: between the context's start and the first frame.
func rowCode(text string) string {
	_, code, _ := strings.Cut(text, "<|trace_context_start|>")
	code, _, _ = strings.Cut(code, "<|frame_sep|>")
	return code
}
