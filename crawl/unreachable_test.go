package crawl

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/schemas"
)

// quick is the bound an unreachable repository's failure must arrive within: far above the
// seconds it takes, far below the minutes of a retried scan.
const quick = 30 * time.Second

// TestScanUnresolvableHost checks that a repository whose host does not resolve is one reject of
// class repository, naming the host, in seconds, and that the repositories listed around it are
// resolved as usual (one host gone never stalls the list). No DNS query leaves the machine: git is a
// wrapper that answers for the gone host with git's own error text, and runs the real git for the
// others (local repositories).
func TestScanUnresolvableHost(t *testing.T) {
	passURL, _ := testrepos.Git(t, "passing")
	failURL, _ := testrepos.Git(t, "failing")
	gone := "https://gone.invalid/owner/repo.git"
	list := filepath.Join(t.TempDir(), "repos.txt")
	if err := os.WriteFile(list, []byte(passURL+"\n"+gone+"\n"+failURL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git := fakeGit(t, `case " $* " in
*" ls-remote "*"gone.invalid"*)
	echo "fatal: unable to access 'https://gone.invalid/owner/repo.git/': Could not resolve host: gone.invalid" >&2
	exit 128;;
esac`)
	f := &Fetcher{Git: git}
	for _, src := range []schemas.SourceSpec{
		{Kind: "repository", List: list, TrustList: true},
		{Kind: "repository", URL: gone},
	} {
		start := time.Now()
		items, rejects, err := f.Items(context.Background(), src)
		if took := time.Since(start); took > quick {
			t.Errorf("%+v: took %s", src, took)
		}
		if err != nil {
			t.Fatalf("%+v: %v, want a reject", src, err)
		}
		wantItems := 2
		if src.URL != "" {
			wantItems = 0
		}
		if len(items) != wantItems || len(rejects) != 1 {
			t.Fatalf("%+v: %d items, %d rejects; want %d and 1", src, len(items), len(rejects), wantItems)
		}
		r := rejects[0]
		if r.Class != schemas.RejectRepository || r.Reason != "ls-remote failed: could not resolve host gone.invalid (check the URL's host name)" {
			t.Errorf("%+v: reject %+v", src, r)
		}
	}
}

// TestResolveConnectionRefused runs the real git against a loopback port nothing listens on: the
// failure is a RepoError that is not transient (a reject of the repository, never a scan retried
// for hours) and says so, within seconds.
func TestResolveConnectionRefused(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // closed: connections are refused
	for _, u := range []string{"http://" + addr + "/r.git", "git://" + addr + "/r.git"} {
		start := time.Now()
		_, err := (&Fetcher{}).Resolve(context.Background(), Repo{URL: u})
		if took := time.Since(start); took > quick {
			t.Errorf("%s: took %s", u, took)
		}
		var re *RepoError
		if !errors.As(err, &re) || re.Transient || !strings.Contains(re.Reason, "the host refused the connection") {
			t.Errorf("%s: %v, want a RepoError, not transient, saying the host refused the connection", u, err)
		}
	}
}
