package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestRunDuplicateOfAnotherRepository is the attack of issue 26 (part 6): a hostile repository,
// listed first, ships a mod.py byte-identical to an honest repository's and another helper.py, the
// module mod.py imports. The function-level items found in the honest repository run other code
// than the hostile one's: none of them is a duplicate of the hostile repository's, and the honest
// repository's double gives rows. A byte-identical copy of the honest repository, listed last, still
// deduplicates: each of its function-level items is a duplicate of the honest repository's.
func TestRunDuplicateOfAnotherRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	mod := "from helper import scale\n\n\ndef double(x):\n    return scale(x, 2)\n"
	test := "from mod import double\n\n\ndef test_double():\n    assert double(3) in (5, 6)\n"
	repo := func(name, helper string) string {
		dir := filepath.Join(testrepos.MountableDir(t), name)
		for f, text := range map[string]string{"mod.py": mod, "helper.py": helper, "tests/__init__.py": "",
			"tests/test_mod.py": test} {
			p := filepath.Join(dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		testrepos.RunGit(t, dir, "init", "-q", "--template=", ".")
		testrepos.Commit(t, dir, "Add the repository")
		return "file://" + dir
	}
	hostile := repo("hostile", "def scale(x, k):\n    return x + k\n")
	honest := repo("honest", "def scale(x, k):\n    return x * k\n")
	copied := repo("copied", "def scale(x, k):\n    return x * k\n")
	out, m := runRepoList(t, "duplicates", []string{hostile + " " + testrepos.Branch, honest + " " + testrepos.Branch,
		copied + " " + testrepos.Branch}, "", "")

	dups := map[string]string{} // the key of each duplicate, to the key it duplicates
	for _, line := range strings.Split(strings.TrimSpace(readRejects(t, out)), "\n") {
		var r schemas.Reject
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("reject %q: %v", line, err)
		}
		if first, ok := strings.CutPrefix(r.Reason, "duplicate of "); ok {
			dups[r.Key] = first
		}
	}
	t.Logf("duplicates: %v; counts %v", dups, m.Counts)
	copiedDups := 0
	for k, first := range dups {
		switch {
		case strings.Contains(k, "/honest@"):
			t.Errorf("the honest repository's item %s is a duplicate of %s", k, first)
		case strings.Contains(k, "/copied@"):
			copiedDups++
			if !strings.Contains(first, "/honest@") {
				t.Errorf("the copy's item %s is a duplicate of %s, not of the honest repository's", k, first)
			}
		}
	}
	// The copy's function-level items: double(3) and scale(3, 2).
	if copiedDups != 2 {
		t.Errorf("%d of the copy's function-level items are duplicates, want 2: %v", copiedDups, dups)
	}
	// The honest repository's double gives function-level rows.
	rows := 0
	st := openStore(t, out)
	for _, s := range m.Shards {
		rs, err := dataset.ReadRows(context.Background(), st, s.Path, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Level == "function" && strings.HasSuffix(r.RepoURL, "/honest") && r.QualName == "double" {
				rows++
			}
		}
	}
	if rows == 0 {
		t.Errorf("no function-level row of the honest repository's double")
	}
}
