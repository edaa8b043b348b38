package crawl

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/schemas"
)

func TestFetcherItems(t *testing.T) {
	ctx := context.Background()
	passURL, passCommit := testrepos.Git(t, "passing")
	failURL, _ := testrepos.Git(t, "failing")
	list := filepath.Join(t.TempDir(), "repos.txt")
	os.WriteFile(list, []byte("# crawl list\n"+passURL+" v1.0\n"+failURL+" no-such-ref\nfile:///nonexistent/repo\n"), 0o644)
	f := &Fetcher{}
	tests := []struct {
		name    string
		src     schemas.SourceSpec
		items   int
		rejects []string // reasons, in order
	}{
		{"url", schemas.SourceSpec{Kind: "repository", URL: passURL, Ref: "main"}, 1, nil},
		{"list", schemas.SourceSpec{Kind: "repository", List: list, TrustList: true}, 1, []string{"ref not found", "not"}},
		{"limit", schemas.SourceSpec{Kind: "repository", List: list, Limit: 1, TrustList: true}, 1, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			items, rejects, err := f.Items(ctx, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != tc.items {
				t.Fatalf("%d items, want %d", len(items), tc.items)
			}
			it := items[0]
			if it.Repo == nil || it.Repo.Resolved.Commit != passCommit || it.Key != it.Repo.Resolved.Key || !it.Repo.Functions || it.Repo.MaxTests != 500 || !it.Repo.Reexecutes() || it.Repo.FrozenClock {
				t.Errorf("item %+v (repo %+v)", it, it.Repo)
			}
			if tc.rejects != nil && len(rejects) != len(tc.rejects) {
				t.Fatalf("rejects %+v, want %d", rejects, len(tc.rejects))
			}
			for i, r := range rejects {
				if i < len(tc.rejects) && !strings.Contains(r.Reason, tc.rejects[i]) {
					t.Errorf("reject %d = %+v, want reason with %q", i, r, tc.rejects[i])
				}
				if r.Class != schemas.RejectRepository || r.Source != list {
					t.Errorf("reject %d = %+v, want class %q and source %s", i, r, schemas.RejectRepository, list)
				}
			}
		})
	}
	// Function-level kinds go through Items.
	if items, _, err := f.Items(ctx, schemas.SourceSpec{Kind: "examples"}); err != nil || len(items) != len(exampleCalls)+1 {
		t.Errorf("examples through the Fetcher: %d items, %v", len(items), err)
	}
	// The hash follows the commit.
	a, _, _ := f.Items(ctx, schemas.SourceSpec{Kind: "repository", URL: passURL})
	b, _, _ := f.Items(ctx, schemas.SourceSpec{Kind: "repository", URL: passURL, Runner: "unittest"})
	if a[0].Hash() == b[0].Hash() {
		t.Error("another runner gives the same item hash")
	}
}

func TestExamplesRepo(t *testing.T) {
	ctx := context.Background()
	f, done, err := NewFetcher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if string(ExamplesRepoTar()) != string(ExamplesRepoTar()) {
		t.Fatal("not deterministic")
	}
	items, _, err := Items(ctx, schemas.SourceSpec{Kind: "examples"})
	if err != nil {
		t.Fatal(err)
	}
	repo := items[len(items)-1].Repo
	res, err := f.Resolve(ctx, Repo{URL: ExamplesRepoURL})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res, repo.Resolved) {
		t.Errorf("Resolve = %+v, the examples item has %+v", res, repo.Resolved)
	}
	scratch := t.TempDir()
	w, err := f.Checkout(ctx, res, scratch, CheckoutLimits{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Remove()
	// A sandbox's unprivileged uid must reach the checkout: every folder down to it is open.
	for d := w.Dir; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o055 != 0o055 {
			t.Errorf("%s is not readable and searchable by all: %v %v", d, fi.Mode(), err)
		}
		if d == scratch {
			break
		}
	}
	for _, name := range []string{"textstats.py", "tests/test_textstats.py", "tests/__init__.py"} {
		if _, err := os.Stat(filepath.Join(w.Dir, name)); err != nil {
			t.Error(err)
		}
	}
}
