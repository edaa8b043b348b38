package crawl

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ndtrace/ndtrace/internal/testrepos"
)

// TestMkdirFixedLength checks that checkout folders are new, private, and of one name length.
func TestMkdirFixedLength(t *testing.T) {
	dir := t.TempDir()
	seen := map[string]bool{}
	for range 50 {
		p, err := mkdirFixedLength(dir, "repo-", "key")
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
	if _, err := mkdirFixedLength(filepath.Join(dir, "missing"), "repo-", "key"); err == nil {
		t.Error("a folder in a missing parent")
	}
}

// TestCheckoutFolderNamedByContent: the checkout's path is in every test's interpreter (sys.path,
// __file__), and a test that hashes it (hash(__file__), a set of paths, a cache key) computes
// something else for every name. Both traced runs of reexecute share one checkout, so such values
// agree there and would differ from one run of the spec to the next (attacker's review, issue 28):
// the same content checks out to the same folder, and a folder still taken gives another name.
func TestCheckoutFolderNamedByContent(t *testing.T) {
	ctx := context.Background()
	url, _ := testrepos.Git(t, "passing")
	res, err := ResolveRepo(ctx, Repo{URL: url, Ref: "main"})
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	a, err := Checkout(ctx, res, scratch, CheckoutLimits{})
	if err != nil {
		t.Fatal(err)
	}
	taken, err := Checkout(ctx, res, scratch, CheckoutLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if taken.Dir == a.Dir || len(taken.Dir) != len(a.Dir) {
		t.Errorf("a second checkout while the first is there: %s and %s", a.Dir, taken.Dir)
	}
	first := a.Dir
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := taken.Remove(); err != nil {
		t.Fatal(err)
	}
	b, err := Checkout(ctx, res, scratch, CheckoutLimits{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove()
	if b.Dir != first {
		t.Errorf("the same content checked out again: %s, then %s", first, b.Dir)
	}
}
