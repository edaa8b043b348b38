package crawl

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// SourceCursor is a position in one source: where its next entry starts. The zero cursor is the
// source's beginning. It is small and plain, so a planner can keep it between pages.
type SourceCursor struct {
	// Offset is the byte offset of the next line (jsonl corpora, repository lists).
	Offset int64 `json:"offset,omitempty"`
	// Line counts the lines consumed (a jsonl item's key uses its line number).
	Line int `json:"line,omitempty"`
	// Index counts the entries consumed (a python source's calls, the examples, a single
	// repository; a files source's rows).
	Index int `json:"index,omitempty"`
	// Emitted counts the items given so far (a source's limit counts items).
	Emitted int `json:"emitted,omitempty"`
	// Files sources: Format is the source's format, found at its start; Shard the file or shard
	// (relative to the source's folder or prefix) the next row is in, Page the bucket listing's
	// page token (base64) of the page it is on, Row the row's number in a Parquet shard (1 past a
	// folder's .py file once read); Offset and Line are within a JSONL shard, Index counts the
	// rows read (a group's key uses its first row's number).
	Format string `json:"format,omitempty"`
	Shard  string `json:"shard,omitempty"`
	Page   string `json:"page,omitempty"`
	Row    int64  `json:"row,omitempty"`
	// Bytes counts the bytes of the values read in a Parquet shard before Row (bounded by the
	// shard's size: a dictionary-encoded file given in every row).
	Bytes int64 `json:"bytes,omitempty"`
}

// Entry is one entry of a source, in order: an item, or a reject (a malformed entry, a repository
// that does not resolve). Exactly one of Item and Reject is set.
type Entry struct {
	Item   *Item
	Reject *schemas.Reject
}

// resolveParallelism bounds the repositories resolved at once (git ls-remote and the like).
const resolveParallelism = 8

// Scan reads the source src from cur and calls fn with each entry, in source order, until it has
// given maxItems items or the source ends. It returns the cursor after the last entry given and
// whether the source is done. Scan is the one reader of every kind of source:
//
//   - examples: the built-in calls (keys examples#I), then the built-in example repository.
//   - python: one item per call of src.Calls (keys PATH#I), all with the file's whole text.
//   - jsonl: one entry per non-blank line (CruxEval's format: id, code, input): an item keyed
//     PATH#ID, or PATH:LINE if the row has no id; a line that is not JSON, or has no code, is a
//     reject of class schemas.RejectMalformed.
//   - files: Python files (a folder, a bucket prefix, Parquet or JSONL shards; see scanFiles),
//     grouped by src.FilesPerItem (and by repository) into repository-level items of KindFiles
//     that carry the files inline; a file that cannot be taken is a reject of class
//     schemas.RejectMalformed naming its row.
//   - repository: src.URL (and src.Ref), or every repository of the list src.List ("URL [REF]"
//     lines, see ParseRepoLine), each resolved (Fetcher.Resolve) to one repository-level item. A
//     list is resolved resolveParallelism repositories at a time; the entries still come in list
//     order, and a repository listed twice is given twice. A repository that cannot be resolved
//     for good is a reject of class schemas.RejectRepository, a list line that names no repository
//     one of class schemas.RejectMalformed.
//
// A source's limit (src.Limit) counts items. A jsonl corpus is read to its end even past its
// limit: its rows past the limit are skipped but its malformed rows are still rejects. The other
// kinds end at their limit.
//
// The same cursor always gives the same entries, except that a repository's ref may resolve to a
// newer commit. An unreadable source (a missing file) is an error, and so is a transient failure to
// resolve a repository (the network): then the cursor returned follows the last entry fn took, never
// the failing repository, so the caller can resume from it (or scan the page again). An error of fn
// is returned likewise, the entry fn refused not consumed.
func (f *Fetcher) Scan(ctx context.Context, src schemas.SourceSpec, cur SourceCursor, maxItems int, fn func(Entry) error) (SourceCursor, bool, error) {
	if maxItems <= 0 {
		return cur, false, fmt.Errorf("crawl: scan: maxItems is %d, want a positive number", maxItems)
	}
	// room is how many items this call gives at most: maxItems, or fewer near the limit.
	room := maxItems
	if src.Limit > 0 {
		room = min(room, src.Limit-cur.Emitted)
	}
	switch src.Kind {
	case "examples":
		if room <= 0 {
			return cur, true, nil
		}
		return scanList(src, cur, room, len(exampleCalls)+1, fn, func(i int) Entry {
			if i < len(exampleCalls) {
				c := exampleCalls[i]
				return Entry{Item: &Item{Key: fmt.Sprintf("examples#%d", i), Path: "examples/functions.py",
					SourceID: fmt.Sprint(i), Code: examplesCode, Filename: "functions.py", Call: c, QualName: funcName(c)}}
			}
			sum := sha256.Sum256(ExamplesRepoTar())
			res := Resolved{Repo: Repo{URL: ExamplesRepoURL}, Kind: KindTar, ContentHash: hex.EncodeToString(sum[:])}
			res.setKey()
			it := repoItem(res, src)
			return Entry{Item: &it}
		})
	case "python":
		if room <= 0 {
			return cur, true, nil
		}
		data, err := ReadFile(ctx, src.Path)
		if err != nil {
			return cur, false, err
		}
		return scanList(src, cur, room, len(src.Calls), fn, func(i int) Entry {
			c := src.Calls[i]
			return Entry{Item: &Item{Key: fmt.Sprintf("%s#%d", src.Path, i), Path: src.Path, SourceID: fmt.Sprint(i),
				Code: string(data), Filename: path.Base(src.Path), Call: c, QualName: funcName(c)}}
		})
	case "jsonl":
		return scanJSONL(ctx, src, cur, maxItems, fn)
	case "files":
		return f.scanFiles(ctx, src, cur, maxItems, fn)
	case "repository":
		if src.List != "" {
			return f.scanRepoList(ctx, src, cur, maxItems, fn)
		}
		if room <= 0 || cur.Index > 0 {
			return cur, true, nil
		}
		e, err := f.repoEntry(ctx, src, src.URL, Repo{URL: src.URL, Ref: src.Ref})
		if err != nil {
			return cur, false, err
		}
		if err := fn(e); err != nil {
			return cur, false, err
		}
		cur.Index = 1
		if e.Item != nil {
			cur.Emitted++
		}
		return cur, true, nil
	default:
		return cur, false, fmt.Errorf("crawl: unsupported source kind %q", src.Kind)
	}
}

// itemsPage is how many items Items asks Scan for at a time.
const itemsPage = 1024

// Items reads the whole source src with Scan and returns all its items and rejects, each in source
// order. It holds the whole source in memory: it is for tests and small tools; planners page
// through sources with Scan.
func (f *Fetcher) Items(ctx context.Context, src schemas.SourceSpec) ([]Item, []schemas.Reject, error) {
	var items []Item
	var rejects []schemas.Reject
	var cur SourceCursor
	for done := false; !done; {
		var err error
		cur, done, err = f.Scan(ctx, src, cur, itemsPage, func(e Entry) error {
			if e.Item != nil {
				items = append(items, *e.Item)
			} else {
				rejects = append(rejects, *e.Reject)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return items, rejects, nil
}

// Items is Fetcher.Items with a zero Fetcher (which resolves repositories but cannot read mem://
// tarballs): it loads the whole source, for tests and small tools.
func Items(ctx context.Context, src schemas.SourceSpec) ([]Item, []schemas.Reject, error) {
	return (&Fetcher{}).Items(ctx, src)
}

// scanList gives the entries [cur.Index, n) of an indexed source, up to room items. The source is
// done at its end or at its limit.
func scanList(src schemas.SourceSpec, cur SourceCursor, room, n int, fn func(Entry) error, entry func(i int) Entry) (SourceCursor, bool, error) {
	given := 0
	for cur.Index < n && given < room {
		e := entry(cur.Index)
		if err := fn(e); err != nil {
			return cur, false, err
		}
		cur.Index++
		if e.Item != nil {
			cur.Emitted++
			given++
		}
	}
	return cur, cur.Index >= n || src.Limit > 0 && cur.Emitted >= src.Limit, nil
}

// scanJSONL gives the entries of a jsonl corpus from cur: up to maxItems items and the rejects
// among them, and past the source's limit only the rejects, to the corpus's end.
func scanJSONL(ctx context.Context, src schemas.SourceSpec, cur SourceCursor, maxItems int, fn func(Entry) error) (SourceCursor, bool, error) {
	given := 0
	return scanLines(ctx, src.Path, cur, func(at *SourceCursor, n int, text []byte) (bool, error) {
		e := jsonlEntry(src, n, text)
		if e.Item != nil && src.Limit > 0 && at.Emitted >= src.Limit {
			return false, nil
		}
		if err := fn(e); err != nil {
			return false, err
		}
		if e.Item != nil {
			at.Emitted++
			given++
		}
		return given >= maxItems, nil
	})
}

// jsonlEntry is the entry of line number line of a jsonl corpus (CruxEval's format: id, code,
// input), text being the line without surrounding space.
func jsonlEntry(src schemas.SourceSpec, line int, text []byte) Entry {
	key := fmt.Sprintf("%s:%d", src.Path, line)
	var row struct {
		ID, Code, Input string
	}
	if err := json.Unmarshal(text, &row); err != nil {
		return Entry{Reject: &schemas.Reject{Source: src.Path, Key: key, Class: schemas.RejectMalformed, Reason: "malformed JSON: " + err.Error()}}
	}
	if row.ID != "" {
		key = src.Path + "#" + row.ID
	}
	if strings.TrimSpace(row.Code) == "" {
		return Entry{Reject: &schemas.Reject{Source: src.Path, Key: key, Class: schemas.RejectMalformed, Reason: "missing code"}}
	}
	id := row.ID
	if id == "" {
		id = fmt.Sprintf("line-%d", line)
	}
	return Entry{Item: &Item{Key: key, Path: src.Path, SourceID: id, Code: row.Code, Filename: "main.py",
		Call: fmt.Sprintf("%s(%s)", src.Func, row.Input), QualName: src.Func}}
}

// scanLines reads the file p (a local path or a bucket URL) line by line from cur. For each
// non-blank line it calls each with the cursor after the line (which each may update), the line's
// 1-based number and its text without surrounding space, until each says stop or the file ends
// (lines are numbered as EachLine numbers them). It returns the cursor after the last line read and
// whether the file is done; if each fails, the cursor before that line. A line longer than MaxLine
// is an error.
func scanLines(ctx context.Context, p string, cur SourceCursor, each func(at *SourceCursor, n int, text []byte) (stop bool, err error)) (SourceCursor, bool, error) {
	r, err := OpenAt(ctx, p, cur.Offset)
	if err != nil {
		return cur, false, err
	}
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10) // longer lines are read in parts
	for {
		if err := ctx.Err(); err != nil {
			return cur, false, fmt.Errorf("crawl: read %s: %w", p, context.Cause(ctx))
		}
		text, rerr := readLine(br)
		if rerr != nil && rerr != io.EOF {
			return cur, false, fmt.Errorf("crawl: read %s: line %d: %w", p, cur.Line+1, rerr)
		}
		if len(text) == 0 { // and rerr is io.EOF
			return cur, true, nil
		}
		next := cur
		next.Offset += int64(len(text))
		next.Line++
		if next.Line%4096 == 0 {
			progress(ctx) // a long stretch of lines that give nothing (past a limit, blank)
		}
		stop := false
		if t := bytes.TrimSpace(text); len(t) > 0 {
			if stop, err = each(&next, next.Line, t); err != nil {
				return cur, false, err
			}
		}
		cur = next
		if rerr == io.EOF {
			return cur, true, nil
		}
		if stop {
			return cur, false, nil
		}
	}
}

// readLine returns the next line of r with its line break, at most MaxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		part, err := r.ReadSlice('\n')
		out = append(out, part...)
		if len(out) > MaxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", MaxLine)
		}
		if err != bufio.ErrBufferFull {
			return out, err
		}
	}
}

// repoLine is a line of a repository list read by scanRepoList: the repository it names, or its
// entry if it names none (a malformed reject), with its number and the cursor after it. Once
// resolved, entry is the repository's entry, or err a transient failure.
type repoLine struct {
	n     int
	at    SourceCursor
	repo  *Repo
	entry Entry
	err   error
}

// scanRepoList reads a repository list from cur: each line names a repository (URL [REF]). It reads
// as many repositories as items may still be given, resolves them resolveParallelism at a time and
// gives their entries in list order, and goes on until it has given maxItems items, reached the
// source's limit or the list's end.
func (f *Fetcher) scanRepoList(ctx context.Context, src schemas.SourceSpec, cur SourceCursor, maxItems int, fn func(Entry) error) (SourceCursor, bool, error) {
	given := 0
	for {
		if src.Limit > 0 && cur.Emitted >= src.Limit {
			return cur, true, nil
		}
		room := maxItems - given
		if src.Limit > 0 {
			room = min(room, src.Limit-cur.Emitted)
		}
		if room <= 0 {
			return cur, false, nil
		}
		// Read up to room repositories; bad lines are rejects, comments nothing. Each may resolve to
		// an item or a reject, so the page may need more lines after them.
		var lines []repoLine
		repos := 0
		next, done, err := scanLines(ctx, src.List, cur, func(at *SourceCursor, n int, text []byte) (bool, error) {
			r, ok, err := ParseRepoLine(string(text))
			switch {
			case err != nil:
				lines = append(lines, repoLine{n: n, at: *at, entry: Entry{Reject: &schemas.Reject{Source: src.List,
					Key: fmt.Sprintf("%s:%d", src.List, n), Class: schemas.RejectMalformed,
					Reason: fmt.Sprintf("repository list line %d: %v", n, err)}}})
			case ok && !src.TrustList && !r.Anonymous():
				// A list's lines are data: without trust_list, never the worker's files, buckets
				// or ssh identity.
				lines = append(lines, repoLine{n: n, at: *at, entry: Entry{Reject: &schemas.Reject{Source: src.List,
					Key: fmt.Sprintf("%s:%d", src.List, n), Class: schemas.RejectRepository,
					Reason: fmt.Sprintf("repository list line %d: %s is not a git repository over https, http or git; "+
						"a list names local folders, file URLs, buckets or ssh repositories only with trust_list: true", n, clip(redactURL(r.URL), 200))}}})
			case ok:
				lines = append(lines, repoLine{n: n, at: *at, repo: &r})
				repos++
			}
			return repos >= room, nil
		})
		if err != nil {
			return cur, false, err
		}
		f.resolveLines(ctx, src, lines)
		for _, l := range lines {
			if l.err != nil {
				return cur, false, fmt.Errorf("crawl: repository list %s, line %d: %w", src.List, l.n, l.err)
			}
			if err := fn(l.entry); err != nil {
				return cur, false, err
			}
			l.at.Emitted = cur.Emitted
			cur = l.at
			if l.entry.Item != nil {
				cur.Emitted++
				given++
			}
		}
		next.Emitted = cur.Emitted
		cur = next
		if done {
			return cur, true, nil
		}
	}
}

// resolveLines resolves the repositories of lines, resolveParallelism at a time, setting each one's
// entry or, for a transient failure, err. Entries are given in list order up to the first failure,
// so after a failure no later repository is started.
func (f *Fetcher) resolveLines(ctx context.Context, src schemas.SourceSpec, lines []repoLine) {
	var failed atomic.Int64 // the first line known to fail
	failed.Store(int64(len(lines)))
	var g errgroup.Group
	g.SetLimit(resolveParallelism)
	for i := range lines {
		if lines[i].repo == nil {
			continue
		}
		if int64(i) > failed.Load() {
			break
		}
		g.Go(func() error {
			if int64(i) > failed.Load() {
				return nil
			}
			lines[i].entry, lines[i].err = f.repoEntry(ctx, src, src.List, *lines[i].repo)
			progress(ctx)
			for lines[i].err != nil {
				first := failed.Load()
				if int64(i) >= first || failed.CompareAndSwap(first, int64(i)) {
					break
				}
			}
			return nil
		})
	}
	g.Wait() // the goroutines return no errors: each line keeps its own
}

// repoEntry resolves one repository: its item, or a reject (listed is its source) if it cannot be
// used for good. A transient failure (the network, the server) is an error, returned as it is.
func (f *Fetcher) repoEntry(ctx context.Context, src schemas.SourceSpec, listed string, r Repo) (Entry, error) {
	res, err := f.Resolve(ctx, r)
	var re *RepoError
	switch {
	case errors.As(err, &re) && !re.Transient:
		return Entry{Reject: &schemas.Reject{Source: listed, Key: r.String(), Class: schemas.RejectRepository, Reason: re.Reason}}, nil
	case err != nil:
		return Entry{}, err
	}
	it := repoItem(res, src)
	return Entry{Item: &it}, nil
}

// ParseRepoLine parses one line of a repository list: "URL [REF]", with # starting a comment. ok
// is false for a blank or comment line.
func ParseRepoLine(line string) (r Repo, ok bool, err error) {
	fields := strings.Fields(line)
	for j, f := range fields {
		if strings.HasPrefix(f, "#") {
			fields = fields[:j]
			break
		}
	}
	if len(fields) == 0 {
		return Repo{}, false, nil
	}
	if len(fields) > 2 {
		return Repo{}, false, fmt.Errorf("want URL [REF], got %d fields", len(fields))
	}
	r = Repo{URL: fields[0]}
	if len(fields) == 2 {
		r.Ref = fields[1]
	}
	if _, err := r.Kind(); err != nil {
		return Repo{}, false, fmt.Errorf("%s: %w", clip(redactURL(r.URL), 200), err)
	}
	return r, true, nil
}

// OpenAt opens a local path, a file URL (read from the file system) or a bucket URL (read through
// store; see ReadFile) for reading from byte offset off.
func OpenAt(ctx context.Context, p string, off int64) (io.ReadCloser, error) {
	u, err := url.Parse(p)
	if err != nil || u.Scheme == "" || len(u.Scheme) == 1 || strings.EqualFold(u.Scheme, "file") {
		name := p
		if err == nil && strings.EqualFold(u.Scheme, "file") {
			name = u.Path
			if u.Host == "." { // file://./rel/x.jsonl: a relative path, as fileblob reads it
				name = strings.TrimPrefix(name, "/")
			}
		}
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("crawl: %w", err)
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			f.Close()
			return nil, fmt.Errorf("crawl: %w", err)
		}
		return f, nil
	}
	st, key, err := openBucketOf(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("crawl: open %s: %w", p, err)
	}
	r, err := st.NewRangeReader(ctx, key, off, -1)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("crawl: read %s: %w", p, err)
	}
	return readCloser{r, func() error { return errors.Join(r.Close(), st.Close()) }}, nil
}

// openBucketOf opens the store at the root of the bucket a bucket URL names (its scheme, host and
// query) and returns it with the object's key (the URL's path). The caller closes the store.
func openBucketOf(ctx context.Context, u *url.URL) (*store.Store, string, error) {
	bucket := url.URL{Scheme: u.Scheme, Host: u.Host, RawQuery: u.RawQuery}
	st, err := store.Open(ctx, bucket.String())
	if err != nil {
		return nil, "", err
	}
	return st, strings.TrimPrefix(u.Path, "/"), nil
}

// progressKey is the context key of a scan's progress function.
type progressKey struct{}

// WithProgress returns a context under which Scan calls fn as it makes progress that may not reach
// its callback for a while: after each repository resolved, and every few thousand lines read. A
// caller under a heartbeat timeout beats from fn. fn must be safe for concurrent use.
func WithProgress(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// progress calls the context's progress function, if any.
func progress(ctx context.Context) {
	if fn, ok := ctx.Value(progressKey{}).(func()); ok && fn != nil {
		fn()
	}
}
