package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/testrepos"
)

// TestRunCodeContexts runs the linked_list fixture repository through the whole pipeline and
// checks that its rows' CODE contexts (repository-level, and function-level of the functions its
// tests call) carry the module-level definitions their
// code names: the constants PREV and NEXT where links are indexed by them, the defaultdict import,
// the header of the class of each method shown, and TAGS with DEFAULT_TAG (one level on).
func TestRunCodeContexts(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	dir := t.TempDir()
	url, _ := testrepos.Git(t, "linked_list")
	listPath := filepath.Join(dir, "repos.txt")
	if err := os.WriteFile(listPath, []byte(url+" main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "data")
	spec := writeSpec(t, dir, fmt.Sprintf(`name: ctx
output: %s
sources:
  - kind: repository
    list: %s
    trust_list: true
limits:
  timeout: 5s
created_at: 2026-11-22T00:00:00Z
`, out, listPath))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr.String())
	}
	checkDataset(t, out)
	n, bad, funcs := 0, 0, 0
	for _, r := range allRows(t, out) {
		if r.Level == "repository" {
			n++
		} else {
			funcs++
		}
		text := r.Text
		var missing []string
		need := func(use, def string) {
			if strings.Contains(text, use) && !strings.Contains(text, def) {
				missing = append(missing, def)
			}
		}
		need("[PREV]", "PREV, NEXT = 0, 1")
		need("NEXT", "PREV, NEXT = 0, 1")
		need("defaultdict(list)", "from collections import defaultdict")
		need("itertools.combinations", "import itertools")
		need("TAGS", "TAGS = (DEFAULT_TAG")
		need("TAGS = (DEFAULT_TAG", "DEFAULT_TAG = \"item\"")
		need("    def append(self", "class LinkedList:")
		need("    def step(self", "class Node:")
		if len(missing) > 0 || r.CodeOmitted != 0 {
			bad++
			t.Errorf("row %s (%s): code_omitted %d, lacks %q:\n%s", r.ID, r.QualName, r.CodeOmitted, missing, text)
		}
	}
	t.Logf("%d repository rows, %d function-level rows, %d lacking a definition", n, funcs, bad)
	if n == 0 || funcs == 0 {
		t.Fatal("rows of a level missing")
	}
}
