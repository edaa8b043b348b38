package crawl

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMkdirFixedLength checks that checkout folders are new, private, and of one name length.
func TestMkdirFixedLength(t *testing.T) {
	dir := t.TempDir()
	seen := map[string]bool{}
	for range 50 {
		p, err := mkdirFixedLength(dir, "repo-")
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(p) != dir || len(filepath.Base(p)) != len("repo-")+16 || seen[p] {
			t.Fatalf("folder %s", p)
		}
		seen[p] = true
		fi, err := os.Stat(p)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v", p, fi, err)
		}
	}
	if _, err := mkdirFixedLength(filepath.Join(dir, "missing"), "repo-"); err == nil {
		t.Error("a folder in a missing parent")
	}
}
