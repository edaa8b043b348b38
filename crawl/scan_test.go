package crawl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/schemas"
)

// legacyReject, legacyItems and legacyParseRepoList are the load-everything readers that Scan
// replaced, kept as they were (but for their names): the oracle that Scan gives the same items, in
// the same order, and the same rejects.
type legacyReject struct {
	Source string `json:"source"`
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

func legacyItems(ctx context.Context, f *Fetcher, src schemas.SourceSpec) ([]Item, []legacyReject, error) {
	if src.Kind == "repository" {
		return legacyRepoItems(ctx, f, src)
	}
	var items []Item
	var rejects []legacyReject
	switch src.Kind {
	case "examples":
		for i, c := range exampleCalls {
			items = append(items, Item{Key: fmt.Sprintf("examples#%d", i), Path: "examples/functions.py",
				SourceID: fmt.Sprint(i), Code: examplesCode, Filename: "functions.py", Call: c, QualName: funcName(c)})
		}
		sum := sha256.Sum256(ExamplesRepoTar())
		res := Resolved{Repo: Repo{URL: ExamplesRepoURL}, Kind: KindTar, ContentHash: hex.EncodeToString(sum[:])}
		res.setKey()
		items = append(items, repoItem(res, src))
	case "python":
		data, err := ReadFile(ctx, src.Path)
		if err != nil {
			return nil, nil, err
		}
		for i, c := range src.Calls {
			items = append(items, Item{Key: fmt.Sprintf("%s#%d", src.Path, i), Path: src.Path, SourceID: fmt.Sprint(i),
				Code: string(data), Filename: path.Base(src.Path), Call: c, QualName: funcName(c)})
		}
	case "jsonl":
		data, err := ReadFile(ctx, src.Path)
		if err != nil {
			return nil, nil, err
		}
		err = EachLine(bytes.NewReader(data), func(line int, text []byte) error {
			key := fmt.Sprintf("%s:%d", src.Path, line)
			var row struct {
				ID, Code, Input string
			}
			if err := json.Unmarshal(text, &row); err != nil {
				rejects = append(rejects, legacyReject{Source: src.Path, Key: key, Reason: "malformed JSON: " + err.Error()})
				return nil
			}
			if row.ID != "" {
				key = src.Path + "#" + row.ID
			}
			if strings.TrimSpace(row.Code) == "" {
				rejects = append(rejects, legacyReject{Source: src.Path, Key: key, Reason: "missing code"})
				return nil
			}
			id := row.ID
			if id == "" {
				id = fmt.Sprintf("line-%d", line)
			}
			items = append(items, Item{Key: key, Path: src.Path, SourceID: id, Code: row.Code, Filename: "main.py",
				Call: fmt.Sprintf("%s(%s)", src.Func, row.Input), QualName: src.Func})
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", src.Path, err)
		}
	default:
		return nil, nil, fmt.Errorf("crawl: unsupported source kind %q", src.Kind)
	}
	if src.Limit > 0 && len(items) > src.Limit {
		items = items[:src.Limit]
	}
	return items, rejects, nil
}

func legacyRepoItems(ctx context.Context, f *Fetcher, src schemas.SourceSpec) ([]Item, []legacyReject, error) {
	repos := []Repo{{URL: src.URL, Ref: src.Ref}}
	listed := src.URL
	if src.List != "" {
		data, err := ReadFile(ctx, src.List)
		if err != nil {
			return nil, nil, err
		}
		if repos, err = legacyParseRepoList(data); err != nil {
			return nil, nil, fmt.Errorf("crawl list %s: %w", src.List, err)
		}
		listed = src.List
	}
	var items []Item
	var rejects []legacyReject
	for _, r := range repos {
		if src.Limit > 0 && len(items) >= src.Limit {
			break
		}
		res, err := f.Resolve(ctx, r)
		var re *RepoError
		switch {
		case errors.As(err, &re) && !re.Transient:
			rejects = append(rejects, legacyReject{Source: listed, Key: r.String(), Reason: re.Reason})
			continue
		case err != nil:
			return nil, nil, err
		}
		items = append(items, repoItem(res, src))
	}
	return items, rejects, nil
}

func legacyParseRepoList(data []byte) ([]Repo, error) {
	var repos []Repo
	for i, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		for j, f := range fields {
			if strings.HasPrefix(f, "#") {
				fields = fields[:j]
				break
			}
		}
		if len(fields) == 0 {
			continue
		}
		if len(fields) > 2 {
			return nil, fmt.Errorf("crawl: repository list line %d: want URL [REF], got %d fields", i+1, len(fields))
		}
		r := Repo{URL: fields[0]}
		if len(fields) == 2 {
			r.Ref = fields[1]
		}
		if _, err := r.Kind(); err != nil {
			return nil, fmt.Errorf("crawl: repository list line %d: %s: %w", i+1, redactURL(r.URL), err)
		}
		repos = append(repos, r)
	}
	return repos, nil
}

// unbounded is a maxItems larger than any test source.
const unbounded = 1 << 30

// scanAll scans src from cur with pages of at most maxItems items and returns every entry, the
// cursors after each page, and the last cursor. It fails the test if a page that is not the last
// gives no item (Scan would loop forever) or more than maxItems.
func scanAll(t testing.TB, f *Fetcher, src schemas.SourceSpec, cur SourceCursor, maxItems int) ([]Entry, []SourceCursor, error) {
	t.Helper()
	var all []Entry
	var cursors []SourceCursor
	for page := 0; ; page++ {
		if page > 100000 {
			t.Fatalf("scan of %+v does not end", src)
		}
		items := 0
		next, done, err := f.Scan(context.Background(), src, cur, maxItems, func(e Entry) error {
			if (e.Item == nil) == (e.Reject == nil) {
				t.Fatalf("entry %+v: want exactly one of an item and a reject", e)
			}
			if e.Item != nil {
				items++
			}
			all = append(all, e)
			return nil
		})
		if err != nil {
			return all, cursors, err
		}
		cursors = append(cursors, next)
		if items > maxItems {
			t.Fatalf("a page of at most %d items gave %d", maxItems, items)
		}
		if done {
			return all, cursors, nil
		}
		if items == 0 {
			t.Fatalf("page %d from %+v gave no item and is not done", page, cur)
		}
		cur = next
	}
}

// entriesText renders entries for messages.
func entriesText(es []Entry) string {
	var b strings.Builder
	for i, e := range es {
		if e.Item != nil {
			fmt.Fprintf(&b, "\n  %d: item %s (%s)", i, e.Item.Key, e.Item.SourceID)
		} else {
			fmt.Fprintf(&b, "\n  %d: reject %s %s: %s", i, e.Reject.Key, e.Reject.Class, e.Reject.Reason)
		}
	}
	return b.String()
}

func sameEntries(t testing.TB, what string, got, want []Entry) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %d entries:%s\nwant %d:%s", what, len(got), entriesText(got), len(want), entriesText(want))
	}
}

// writeFile writes a test file and returns its path.
func writeFile(t testing.TB, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// testCorpus is a jsonl corpus with every kind of line: rows with and without ids, rows that are
// not JSON or have no code, blank and space-only lines, a CRLF line, a last line without a line
// break.
var testCorpus = strings.Join([]string{
	`{"id": "a", "code": "def f(x):\n    return x", "input": "1", "output": "1"}`,
	`not json`,
	`{"id": "b", "code": "  ", "input": "1"}`,
	``,
	"  \t ",
	`{"code": "def f(x):\n    return x + 1", "input": "2"}`,
	`{"code": ""}`,
	"  {\"id\": \"c\", \"code\": \"def f(x):\\n    return -x\", \"input\": \"[1, 2]\"}\r",
	`{"id": "d", "code": "def f():\n    return 0", "input": ""}`,
	`[1, 2]`,
	`{"id": 5, "code": "x"}`,
	`{"id": "a", "code": "def f(x):\n    return x", "input": "1"}`,
	`{"id": "e", "code": "def g(): pass", "input": "3"}`,
}, "\n")

type scanCase struct {
	name string
	src  schemas.SourceSpec
}

// scanCases builds a source of every kind, with and without limits, from local files and local
// repositories.
func scanCases(t *testing.T) []scanCase {
	t.Helper()
	dir := t.TempDir()
	corpus := writeFile(t, dir, "c.jsonl", testCorpus)
	tail := writeFile(t, dir, "tail.jsonl", "\n"+`{"id": "x", "code": "def f(): pass"}`+"\n\n  \n")
	empty := writeFile(t, dir, "empty.jsonl", "")
	blank := writeFile(t, dir, "blank.jsonl", "\n\n \r\n")
	bad := writeFile(t, dir, "bad.jsonl", "x\n{}\n{\"code\": 1}\n")
	py := writeFile(t, dir, "m.py", "def g(x):\n    return x\n")

	passURL, _ := testrepos.Git(t, "passing")
	failURL, _ := testrepos.Git(t, "failing")
	unitURL, _ := testrepos.Git(t, "unittest_only")
	repoDir := testrepos.Dir(t, "passing")
	tarPath := writeFile(t, dir, "passing.tar.gz", string(testrepos.Tarball(t, "passing", "passing-1.0/")))
	list := writeFile(t, dir, "repos.txt", strings.Join([]string{
		"# crawl list",
		passURL + " v1.0",
		failURL + " no-such-ref",
		"",
		"file:///nonexistent/repo   # gone",
		repoDir,
		tarPath,
		passURL + " v1.0",
		unitURL,
		"ftp://example.invalid/x.tgz", // a line that names no repository: a malformed reject
		failURL + " main",
		"# the end",
	}, "\n"))
	// The old reader refused a list with a bad line: the lists compared with it must parse as a whole.
	goodList := writeFile(t, dir, "good.txt", strings.Replace(mustRead(t, list), "ftp://example.invalid/x.tgz", "/nonexistent/dir", 1))

	cases := []scanCase{
		{"examples", schemas.SourceSpec{Kind: "examples"}},
		{"examples_limit3", schemas.SourceSpec{Kind: "examples", Limit: 3}},
		{"examples_limit_all", schemas.SourceSpec{Kind: "examples", Limit: len(exampleCalls) + 1}},
		{"examples_options", schemas.SourceSpec{Kind: "examples", MaxTests: 7, Runner: "unittest", Functions: new(schemas.FunctionsMode)}},
		{"python", schemas.SourceSpec{Kind: "python", Path: py, Calls: []string{"g(1)", "g('x')", "g([])", "h()", "g(g(2))"}}},
		{"python_limit2", schemas.SourceSpec{Kind: "python", Path: py, Calls: []string{"g(1)", "g('x')", "g([])"}, Limit: 2}},
		{"python_file_url", schemas.SourceSpec{Kind: "python", Path: "file://" + py, Calls: []string{"g(1)", "g(2)"}}},
		{"python_no_calls", schemas.SourceSpec{Kind: "python", Path: py}},
		{"jsonl", schemas.SourceSpec{Kind: "jsonl", Path: corpus, Func: "f"}},
		{"jsonl_file_url", schemas.SourceSpec{Kind: "jsonl", Path: "file://" + corpus, Func: "f"}},
		{"jsonl_limit1", schemas.SourceSpec{Kind: "jsonl", Path: corpus, Func: "f", Limit: 1}},
		{"jsonl_limit2", schemas.SourceSpec{Kind: "jsonl", Path: corpus, Func: "f", Limit: 2}},
		{"jsonl_limit4", schemas.SourceSpec{Kind: "jsonl", Path: corpus, Func: "main", Limit: 4}},
		{"jsonl_limit_over", schemas.SourceSpec{Kind: "jsonl", Path: corpus, Func: "f", Limit: 50}},
		{"jsonl_tail", schemas.SourceSpec{Kind: "jsonl", Path: tail, Func: "f"}},
		{"jsonl_empty", schemas.SourceSpec{Kind: "jsonl", Path: empty, Func: "f"}},
		{"jsonl_blank", schemas.SourceSpec{Kind: "jsonl", Path: blank, Func: "f"}},
		{"jsonl_rejects_only", schemas.SourceSpec{Kind: "jsonl", Path: bad, Func: "f"}},
		{"jsonl_rejects_only_limit", schemas.SourceSpec{Kind: "jsonl", Path: bad, Func: "f", Limit: 1}},
		{"repo_git_tag", schemas.SourceSpec{Kind: "repository", URL: passURL, Ref: "v1.0"}},
		{"repo_git_head", schemas.SourceSpec{Kind: "repository", URL: passURL, Runner: "unittest", MaxTests: 3}},
		{"repo_git_bad_ref", schemas.SourceSpec{Kind: "repository", URL: passURL, Ref: "no-such-ref"}},
		{"repo_missing", schemas.SourceSpec{Kind: "repository", URL: "file:///nonexistent/repo"}},
		{"repo_bad_url", schemas.SourceSpec{Kind: "repository", URL: "ftp://example.invalid/x"}},
		{"repo_dir", schemas.SourceSpec{Kind: "repository", URL: repoDir, Functions: new(schemas.FunctionsMode)}},
		{"repo_tar", schemas.SourceSpec{Kind: "repository", URL: tarPath, Limit: 1}},
		{"list", schemas.SourceSpec{Kind: "repository", List: goodList, TrustList: true}},
		{"list_limit1", schemas.SourceSpec{Kind: "repository", List: goodList, Limit: 1, TrustList: true}},
		{"list_limit2", schemas.SourceSpec{Kind: "repository", List: goodList, Limit: 2, TrustList: true}},
		{"list_limit3", schemas.SourceSpec{Kind: "repository", List: goodList, Limit: 3, TrustList: true}},
		{"list_bad_line", schemas.SourceSpec{Kind: "repository", List: list, TrustList: true}}, // not comparable with the old reader
	}
	return cases
}

func mustRead(t testing.TB, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestScanMatchesLegacy checks that Items, now a loop over Scan, gives exactly the items and
// rejects of the old readers for every kind of source, the rejects now with their class.
func TestScanMatchesLegacy(t *testing.T) {
	ctx := context.Background()
	f := &Fetcher{}
	for _, tc := range scanCases(t) {
		if tc.name == "list_bad_line" {
			continue // see TestScanBadListLine
		}
		t.Run(tc.name, func(t *testing.T) {
			items, rejects, err := f.Items(ctx, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			oldItems, oldRejects, err := legacyItems(ctx, f, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(items, oldItems) {
				t.Errorf("items differ from the old reader's:\n got %+v\nwant %+v", items, oldItems)
			}
			for i := range items {
				if i < len(oldItems) && items[i].Hash() != oldItems[i].Hash() {
					t.Errorf("item %d: hash %s, the old reader's %s", i, items[i].Hash(), oldItems[i].Hash())
				}
			}
			class := schemas.RejectMalformed
			if tc.src.Kind == "repository" {
				class = schemas.RejectRepository
			}
			var got []legacyReject
			for _, r := range rejects {
				if r.Class != class {
					t.Errorf("reject %+v: class %q, want %q", r, r.Class, class)
				}
				got = append(got, legacyReject{Source: r.Source, Key: r.Key, Reason: r.Reason})
			}
			if !reflect.DeepEqual(got, oldRejects) {
				t.Errorf("rejects differ from the old reader's:\n got %+v\nwant %+v", got, oldRejects)
			}
		})
	}
}

// TestScanPages checks, for every kind of source, that scanning it in pages of 1, 2, 3, 7 or
// unboundedly many items, each page resuming from the cursor the last one returned, gives the very
// entries of one unbounded scan, in order; and that an unbounded scan from any of those cursors gives
// the rest of them.
func TestScanPages(t *testing.T) {
	f := &Fetcher{}
	for _, tc := range scanCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			want, cursors, err := scanAll(t, f, tc.src, SourceCursor{}, unbounded)
			if err != nil {
				t.Fatal(err)
			}
			if len(cursors) != 1 {
				t.Fatalf("an unbounded scan took %d pages", len(cursors))
			}
			end := cursors[0]
			for _, m := range []int{1, 2, 3, 7, unbounded} {
				got, cursors, err := scanAll(t, f, tc.src, SourceCursor{}, m)
				if err != nil {
					t.Fatal(err)
				}
				sameEntries(t, fmt.Sprintf("pages of %d", m), got, want)
				if last := cursors[len(cursors)-1]; last != end {
					t.Errorf("pages of %d end at %+v, an unbounded scan at %+v", m, last, end)
				}
			}
			// Resume an unbounded scan from every cursor of a scan one item at a time.
			var given []Entry
			cur := SourceCursor{}
			for {
				next, done, err := f.Scan(context.Background(), tc.src, cur, 1, func(e Entry) error {
					given = append(given, e)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if next.Offset < cur.Offset || next.Line < cur.Line || next.Index < cur.Index || next.Emitted < cur.Emitted {
					t.Fatalf("cursor went back: %+v after %+v", next, cur)
				}
				rest, _, err := scanAll(t, f, tc.src, next, unbounded)
				if err != nil {
					t.Fatal(err)
				}
				sameEntries(t, fmt.Sprintf("from %+v", next), append(append([]Entry(nil), given...), rest...), want)
				if done {
					break
				}
				cur = next
			}
		})
	}
}

// TestScanResumesMidFile checks that a cursor resumes a jsonl corpus or a repository list at its
// byte offset: what comes before it is not read again (here it is overwritten with lines that would
// be rejects, and shift the line numbers, if read again).
func TestScanResumesMidFile(t *testing.T) {
	dir := t.TempDir()
	passURL, _ := testrepos.Git(t, "passing")
	repoDir := testrepos.Dir(t, "unittest_only")
	corpus := writeFile(t, dir, "c.jsonl", testCorpus)
	list := writeFile(t, dir, "repos.txt", "# list\n"+repoDir+"\n"+passURL+" v1.0\n/nonexistent/dir\n"+passURL+"\n"+repoDir+"\n")
	f := &Fetcher{}
	tests := []struct {
		name string
		src  schemas.SourceSpec
		file string
	}{
		{"jsonl", schemas.SourceSpec{Kind: "jsonl", Path: corpus, Func: "f"}, corpus},
		{"jsonl_file_url", schemas.SourceSpec{Kind: "jsonl", Path: "file://" + corpus, Func: "f"}, corpus},
		{"list", schemas.SourceSpec{Kind: "repository", List: list, TrustList: true}, list},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := mustRead(t, tc.file)
			defer os.WriteFile(tc.file, []byte(orig), 0o644)
			want, _, err := scanAll(t, f, tc.src, SourceCursor{}, unbounded)
			if err != nil {
				t.Fatal(err)
			}
			var first []Entry
			cur, done, err := f.Scan(context.Background(), tc.src, SourceCursor{}, 2, func(e Entry) error {
				first = append(first, e)
				return nil
			})
			if err != nil || done {
				t.Fatalf("first page: %+v, %v, %v", cur, done, err)
			}
			// The cursor is just past its last line.
			lines := strings.SplitAfter(orig, "\n")
			if int64(len(strings.Join(lines[:cur.Line], ""))) != cur.Offset {
				t.Fatalf("cursor %+v: offset is not the end of line %d", cur, cur.Line)
			}
			// Overwrite everything before it (same length, line breaks kept, so line numbers would
			// stay right if the scan counted them again).
			garbage := []byte(orig[:cur.Offset])
			for i, c := range garbage {
				if c != '\n' {
					garbage[i] = '-'
				}
			}
			if err := os.WriteFile(tc.file, append(garbage, orig[cur.Offset:]...), 0o644); err != nil {
				t.Fatal(err)
			}
			if again, _, err := scanAll(t, f, tc.src, SourceCursor{}, unbounded); err == nil && reflect.DeepEqual(again, want) {
				t.Fatal("the overwritten prefix changes nothing from the start: the test proves nothing")
			}
			rest, _, err := scanAll(t, f, tc.src, cur, unbounded)
			if err != nil {
				t.Fatal(err)
			}
			sameEntries(t, "resumed", append(first, rest...), want)
		})
	}
}

// fakeGit writes a git wrapper: the shell script body (where $real is the real git), then the real
// git with the same arguments.
func fakeGit(t *testing.T, body string) string {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	p := filepath.Join(t.TempDir(), "git")
	script := "#!/bin/sh\nreal='" + real + "'\n" + body + "\nexec \"$real\" \"$@\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestScanRepoListParallel checks that a repository list's repositories are resolved in parallel
// (every git ls-remote waits until all have started, and the first finishes last) while their
// entries come in list order, and that a repository listed twice is given twice.
func TestScanRepoListParallel(t *testing.T) {
	dir := t.TempDir()
	var urls []string
	for _, name := range []string{"passing", "failing", "unittest_only", "forking", "hanging"} {
		u, _ := testrepos.Git(t, name)
		urls = append(urls, u)
	}
	repoDir := testrepos.Dir(t, "passing")
	listed := []string{urls[0] + " v1.0", urls[1], repoDir, urls[2] + " no-such-ref", urls[3], urls[0] + " v1.0", urls[4]}
	list := writeFile(t, dir, "repos.txt", "# parallel\n"+strings.Join(listed, "\n")+"\n")
	lsRemotes := len(listed) - 1 // all but the directory
	need := min(lsRemotes, resolveParallelism)
	if need < 2 {
		t.Fatalf("resolveParallelism is %d: nothing is resolved in parallel", resolveParallelism)
	}
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, "started"), 0o755); err != nil {
		t.Fatal(err)
	}
	git := fakeGit(t, fmt.Sprintf(`state='%s'
case " $* " in
*" ls-remote "*)
	touch "$state/started/$$"
	i=0
	while [ ! -e "$state/timeout" ] && [ "$(ls "$state/started" | wc -l)" -lt %d ]; do
		i=$((i+1))
		if [ "$i" -gt 3000 ]; then touch "$state/timeout"; break; fi
		sleep 0.01
	done
	case " $* " in *" %s "*) sleep 0.5;; esac
	;;
esac`, state, need, urls[0]))
	f := &Fetcher{Git: git}
	src := schemas.SourceSpec{Kind: "repository", List: list, TrustList: true}
	got, _, err := scanAll(t, f, src, SourceCursor{}, unbounded)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, "timeout")); err == nil {
		t.Fatalf("the ls-remotes did not run %d at a time", need)
	}
	if n := len(mustReadDir(t, filepath.Join(state, "started"))); n != lsRemotes {
		t.Errorf("%d ls-remotes, want %d", n, lsRemotes)
	}
	// The order is the list's: compare with the old, sequential reader and with the list itself.
	want, _, err := scanAll(t, &Fetcher{}, src, SourceCursor{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "parallel", got, want)
	oldItems, oldRejects, err := legacyItems(context.Background(), &Fetcher{}, src)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(listed) || len(oldItems) != 6 || len(oldRejects) != 1 {
		t.Fatalf("%d entries for %d lines; the old reader gave %d items, %d rejects", len(got), len(listed), len(oldItems), len(oldRejects))
	}
	oi := 0
	for i, e := range got {
		line := listed[i]
		if e.Reject != nil {
			if e.Reject.Key != line || !strings.Contains(e.Reject.Reason, "not found") || e.Reject.Class != schemas.RejectRepository {
				t.Errorf("entry %d (%s): reject %+v", i, line, e.Reject)
			}
			continue
		}
		if !reflect.DeepEqual(*e.Item, oldItems[oi]) {
			t.Errorf("entry %d (%s): item %+v, the old reader's %+v", i, line, e.Item, oldItems[oi])
		}
		if u := e.Item.Repo.Resolved.URL; !strings.HasPrefix(line, u) {
			t.Errorf("entry %d is %s, the list has %s", i, u, line)
		}
		oi++
	}
	if !reflect.DeepEqual(got[0].Item, got[5].Item) {
		t.Errorf("a repository listed twice gives %+v and %+v", got[0].Item, got[5].Item)
	}
}

func mustReadDir(t testing.TB, dir string) []os.DirEntry {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestScanTransient checks that a transient failure to resolve a repository (here a fake git whose
// connection is reset) is an error, with the cursor after the last entry given and not past the
// failing repository, from which the scan resumes once the network is back.
func TestScanTransient(t *testing.T) {
	dir := t.TempDir()
	passURL, _ := testrepos.Git(t, "passing")
	flakyURL, _ := testrepos.Git(t, "unittest_only")
	failURL, _ := testrepos.Git(t, "failing")
	repoDir := testrepos.Dir(t, "passing")
	lines := []string{passURL + " v1.0", repoDir, flakyURL, failURL + " no-such-ref", failURL}
	list := writeFile(t, dir, "repos.txt", strings.Join(lines, "\n")+"\n")
	state := t.TempDir()
	down := filepath.Join(state, "down")
	git := fakeGit(t, fmt.Sprintf(`case " $* " in
*" ls-remote "*" %s "*)
	if [ -e '%s' ]; then
		echo "fatal: unable to access 'https://flaky.invalid/r/': Recv failure: Connection reset by peer" >&2
		exit 128
	fi;;
esac`, flakyURL, down))
	f := &Fetcher{Git: git}
	src := schemas.SourceSpec{Kind: "repository", List: list, TrustList: true}
	want, _, err := scanAll(t, f, src, SourceCursor{}, unbounded)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != len(lines) {
		t.Fatalf("%d entries for %d lines", len(want), len(lines))
	}
	if err := os.WriteFile(down, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	checkTransient := func(t *testing.T, err error) {
		t.Helper()
		var re *RepoError
		if !errors.As(err, &re) || !re.Transient || !strings.Contains(err.Error(), "line 3") {
			t.Fatalf("error %v, want a transient RepoError naming line 3", err)
		}
	}
	after2 := SourceCursor{Offset: int64(len(lines[0]) + len(lines[1]) + 2), Line: 2, Emitted: 2}
	for _, m := range []int{1, 2, 3, unbounded} {
		t.Run(fmt.Sprint(m), func(t *testing.T) {
			var given []Entry
			var cur SourceCursor
			var err error
			for page := 0; page < 10; page++ {
				var next SourceCursor
				next, _, err = f.Scan(context.Background(), src, cur, m, func(e Entry) error {
					given = append(given, e)
					return nil
				})
				if err != nil {
					if next != cur && next != after2 {
						t.Fatalf("failed page from %+v returned %+v", cur, next)
					}
					cur = next
					break
				}
				cur = next
			}
			checkTransient(t, err)
			if cur != after2 {
				t.Fatalf("cursor %+v after the failure, want %+v (just before the failing repository)", cur, after2)
			}
			sameEntries(t, "before the failure", given, want[:2])
		})
	}
	// A single repository: the cursor does not move.
	cur, done, err := f.Scan(context.Background(), schemas.SourceSpec{Kind: "repository", URL: flakyURL}, SourceCursor{}, 5, func(Entry) error {
		t.Fatal("an entry for a repository that did not resolve")
		return nil
	})
	if done || cur != (SourceCursor{}) {
		t.Errorf("single repository: cursor %+v, done %v", cur, done)
	}
	var re *RepoError
	if !errors.As(err, &re) || !re.Transient {
		t.Errorf("single repository: error %v, want a transient RepoError", err)
	}
	// The network is back: the scan resumes where it failed.
	if err := os.Remove(down); err != nil {
		t.Fatal(err)
	}
	rest, _, err := scanAll(t, f, src, after2, 1)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "resumed", append(append([]Entry(nil), want[:2]...), rest...), want)
}

// TestScanBadListLine checks that a repository list line that names no repository is a malformed
// reject (the old reader refused the whole list), the list going on after it.
func TestScanBadListLine(t *testing.T) {
	dir := t.TempDir()
	repoDir := testrepos.Dir(t, "passing")
	list := writeFile(t, dir, "repos.txt", repoDir+"\nhttps://h/a main extra\n\n./x ref # a ref for a directory\n"+repoDir+"\n")
	items, rejects, err := (&Fetcher{}).Items(context.Background(), schemas.SourceSpec{Kind: "repository", List: list, TrustList: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []schemas.Reject{
		{Source: list, Key: list + ":2", Class: schemas.RejectMalformed, Reason: "repository list line 2: want URL [REF], got 3 fields"},
		{Source: list, Key: list + ":4", Class: schemas.RejectMalformed, Reason: `repository list line 4: ./x: ref "ref" given for a dir source: refs apply to git repositories only`},
	}
	if len(items) != 2 || !reflect.DeepEqual(rejects, want) {
		t.Errorf("%d items, rejects %+v; want 2 items, rejects %+v", len(items), rejects, want)
	}
	if _, err := ParseRepoList([]byte(mustRead(t, list))); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("ParseRepoList: %v, want an error for line 2", err)
	}
}

// TestScanListUntrusted (attacker's review, issue 26): a crawl list is data, made by a crawl or by
// someone else, yet its lines could name the worker's own folders (its home, its credentials),
// file URLs and tarballs in its buckets, or ssh repositories reached with its ssh identity, read
// with the worker's access and turned into rows.
// Without trust_list each such line is a reject; with it, a local repository is read.
func TestScanListUntrusted(t *testing.T) {
	dir := t.TempDir()
	repoDir := testrepos.Dir(t, "passing")
	list := writeFile(t, dir, "repos.txt", repoDir+"\nfile://"+repoDir+"\nmem://b/x.tgz\n"+filepath.Join(dir, "x.tar.gz")+
		"\ngit@github.com:private/repo.git\nssh://git@h/private/repo\n")
	items, rejects, err := (&Fetcher{}).Items(context.Background(), schemas.SourceSpec{Kind: "repository", List: list})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 0 || len(rejects) != 6 {
		t.Fatalf("%d items, rejects %+v; want 6 rejects", len(items), rejects)
	}
	for _, r := range rejects {
		if r.Class != schemas.RejectRepository || !strings.Contains(r.Reason, "trust_list") {
			t.Errorf("reject %+v, want a repository reject naming trust_list", r)
		}
	}
	local := writeFile(t, dir, "local.txt", repoDir+"\n") // (the ssh lines would reach the network)
	items, _, err = (&Fetcher{}).Items(context.Background(), schemas.SourceSpec{Kind: "repository", List: local, TrustList: true})
	if err != nil || len(items) == 0 {
		t.Fatalf("trusted: %d items, %v; want the folder's", len(items), err)
	}
}

// TestScanErrors checks the errors of Scan: a bad page size, an unknown kind, a missing file (which
// the planner tells apart with fs.ErrNotExist), and fn's error, returned with the cursor before the
// entry fn refused.
func TestScanErrors(t *testing.T) {
	ctx := context.Background()
	f := &Fetcher{}
	dir := t.TempDir()
	corpus := writeFile(t, dir, "c.jsonl", testCorpus)
	nop := func(Entry) error { return nil }
	if _, _, err := f.Scan(ctx, schemas.SourceSpec{Kind: "examples"}, SourceCursor{}, 0, nop); err == nil {
		t.Error("maxItems 0 is not an error")
	}
	if _, _, err := f.Scan(ctx, schemas.SourceSpec{Kind: "csv"}, SourceCursor{}, 1, nop); err == nil || !strings.Contains(err.Error(), `"csv"`) {
		t.Errorf("unknown kind: %v", err)
	}
	missing := filepath.Join(dir, "missing")
	for _, src := range []schemas.SourceSpec{
		{Kind: "jsonl", Path: missing},
		{Kind: "jsonl", Path: "file://" + missing},
		{Kind: "python", Path: missing, Calls: []string{"f()"}},
		{Kind: "repository", List: missing, TrustList: true},
	} {
		if _, _, err := f.Scan(ctx, src, SourceCursor{}, 1, nop); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%+v: error %v, want fs.ErrNotExist", src, err)
		}
	}
	stop := errors.New("stop")
	for _, src := range []schemas.SourceSpec{
		{Kind: "jsonl", Path: corpus, Func: "f"},
		{Kind: "examples"},
	} {
		want, _, err := scanAll(t, f, src, SourceCursor{}, unbounded)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		cur, done, err := f.Scan(ctx, src, SourceCursor{}, unbounded, func(Entry) error {
			if n++; n == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || done {
			t.Fatalf("%s: %v, %v; want fn's error", src.Kind, err, done)
		}
		rest, _, err := scanAll(t, f, src, cur, unbounded)
		if err != nil {
			t.Fatal(err)
		}
		sameEntries(t, src.Kind+" after fn's error", rest, want[2:])
	}
}

// FuzzScanJSONL reads arbitrary bytes as a jsonl corpus: Scan never panics, every non-blank line
// is exactly one item or one reject (with no limit), the entries are the old reader's, and a scan
// resumed after any entry gives the rest.
func FuzzScanJSONL(f *testing.F) {
	f.Add([]byte(testCorpus), uint8(0))
	f.Add([]byte(testCorpus), uint8(2))
	f.Add([]byte("\n\n"), uint8(0))
	f.Add([]byte(`{"code": "x"}`+"\r\n"+`{"id": "", "code": "y", "input": 1}`), uint8(1))
	f.Add([]byte("{\"id\":\"\xff\",\"code\":\"\\u0000\"}\n \x00 \n\v\f{}\u2028"), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, limit uint8) {
		p := filepath.Join(t.TempDir(), "c.jsonl")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		fe := &Fetcher{}
		src := schemas.SourceSpec{Kind: "jsonl", Path: p, Func: "f", Limit: int(limit % 4)}
		all, cursors, err := scanAll(t, fe, src, SourceCursor{}, unbounded)
		if err != nil {
			t.Fatal(err)
		}
		if end := cursors[0]; end.Offset != int64(len(data)) {
			t.Fatalf("the scan ends at %+v, the file has %d bytes", end, len(data))
		}
		// The old reader's entries.
		items, rejects, err := legacyItems(context.Background(), fe, src)
		if err != nil {
			t.Fatal(err)
		}
		var gotItems []Item
		var gotRejects []legacyReject
		for _, e := range all {
			if e.Item != nil {
				gotItems = append(gotItems, *e.Item)
			} else {
				if e.Reject.Class != schemas.RejectMalformed {
					t.Fatalf("reject %+v: class %q", e.Reject, e.Reject.Class)
				}
				gotRejects = append(gotRejects, legacyReject{Source: e.Reject.Source, Key: e.Reject.Key, Reason: e.Reject.Reason})
			}
		}
		if !reflect.DeepEqual(gotItems, items) || !reflect.DeepEqual(gotRejects, rejects) {
			t.Fatalf("got %+v, %+v\nthe old reader %+v, %+v", gotItems, gotRejects, items, rejects)
		}
		if src.Limit == 0 {
			lines := 0
			for _, l := range bytes.Split(data, []byte("\n")) {
				if len(bytes.TrimSpace(l)) > 0 {
					lines++
				}
			}
			if len(all) != lines {
				t.Fatalf("%d entries for %d non-blank lines:%s", len(all), lines, entriesText(all))
			}
		}
		// Stop after every entry (fn refuses the next one) and resume from the cursor returned. In
		// a long corpus, after every step-th entry and the last ones, to bound the work.
		stop := errors.New("stop")
		step := max(1, len(all)/64)
		for k := 0; k <= len(all); k++ {
			if k%step != 0 && k < len(all)-1 {
				continue
			}
			n := 0
			cur, done, err := fe.Scan(context.Background(), src, SourceCursor{}, unbounded, func(Entry) error {
				if n == k {
					return stop
				}
				n++
				return nil
			})
			if k < len(all) && (!errors.Is(err, stop) || done) {
				t.Fatalf("stopping after %d entries: %v, %v", k, err, done)
			}
			if k == len(all) {
				if err != nil || !done {
					t.Fatalf("the whole corpus: %v, %v", err, done)
				}
				continue
			}
			rest, _, err := scanAll(t, fe, src, cur, unbounded)
			if err != nil {
				t.Fatal(err)
			}
			sameEntries(t, fmt.Sprintf("resumed after %d entries at %+v", k, cur), rest, all[k:])
		}
		// Pages of one item.
		paged, _, err := scanAll(t, fe, src, SourceCursor{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		sameEntries(t, "pages of 1", paged, all)
	})
}
