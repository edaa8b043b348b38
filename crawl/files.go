package crawl

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// The formats of a files source (schemas.SourceSpec.Format).
const (
	// FilesFolder is Python files (*.py): a folder or bucket prefix of them, or one file.
	FilesFolder = "folder"
	// FilesParquet is a Parquet file, or a folder or prefix of *.parquet shards, one file a row.
	FilesParquet = "parquet"
	// FilesJSONL is a JSONL file, or a folder or prefix of *.jsonl shards, one file a line.
	FilesJSONL = "jsonl"
)

// Bounds of a files source's rows and groups.
const (
	// MaxInlineFile is the largest file a files source takes (bigger rows are rejects).
	MaxInlineFile = 1 << 20
	// MaxInlinePath is the longest path of a file of a group, in bytes.
	MaxInlinePath = 512
	// maxInlineLicense and maxInlineRepo bound a row's license and repository values.
	maxInlineLicense = 128
	maxInlineRepo    = 1024
	// maxFilesLine is the longest JSONL row read (a 1 MiB file escaped, and its other columns);
	// a longer row is a reject, and the line is skipped without being held.
	maxFilesLine = 8 << 20
	// filesListPage is the page size of a bucket's listing; maxDirEntries bounds the entries of
	// one local folder (read whole to sort them), maxDirDepth the depth of a walk.
	filesListPage = 1000
	maxDirEntries = 1 << 20
	maxDirDepth   = 64
	// detectEntries bounds the entries a format's detection looks at.
	detectEntries = 10000
	// parquetBatch is how many rows are read from each column at a time.
	parquetBatch = 64
	// maxParquetChunk bounds a column chunk's uncompressed size: a page is held whole.
	maxParquetChunk = 1 << 30
	// maxParquetRowsPerByte bounds a Parquet file's rows by its size (plus 2^20).
	maxParquetRowsPerByte = 64
	// maxParquetBytesPerByte and maxParquetBytesSlack bound the bytes of the values a Parquet
	// shard gives by its size: a dictionary-encoded, compressed column can give one 1 MiB file in
	// each of millions of rows from a few KiB (outside review).
	maxParquetBytesPerByte = 256
	maxParquetBytesSlack   = 64 << 20
)

// filesRow is one row of a files source: a file, or the reason it is a reject.
type filesRow struct {
	at      SourceCursor // the cursor at this row
	content string
	path    string // as the source gives it (unsanitised), or "" for none
	hasPath bool
	repo    string
	license string
	group   string // what groups rows: the repository column, or a folder source's directory
	reject  string // non-empty: the row is a reject of this reason
	empty   bool   // a reject because its content is empty
}

// filesScan is the state of one Scan of a files source.
type filesScan struct {
	f        *Fetcher
	src      schemas.SourceSpec
	format   string
	perItem  int
	maxBytes int64

	bucket *store.Store // nil for a local source
	root   string       // local: the file or folder; bucket: the object's key or the prefix
	single bool         // root is one file (a shard, or one .py file), not a folder or prefix

	fn       func(Entry) error
	maxItems int
	given    int

	// The open group.
	open    bool
	start   SourceCursor // the cursor at its first row
	files   []InlineFile
	bytes   int64
	key     string
	used    map[string]bool // paths and folders taken in the group
	isDir   map[string]bool
	emitted int

	stopAt *SourceCursor // set when the scan stops: the cursor returned
}

// errStopScan stops a walk once a page is full.
var errStopScan = errors.New("stop")

// scanFiles gives the entries of a files source from cur (see Scan).
func (f *Fetcher) scanFiles(ctx context.Context, src schemas.SourceSpec, cur SourceCursor, maxItems int, fn func(Entry) error) (SourceCursor, bool, error) {
	if src.Limit > 0 && cur.Emitted >= src.Limit {
		return cur, true, nil
	}
	s := &filesScan{f: f, src: src, fn: fn, maxItems: maxItems, perItem: src.FilesPerItem, maxBytes: f.MaxGroupBytes}
	if s.perItem <= 0 {
		s.perItem = schemas.DefaultFilesPerItem
	}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxBytes
	}
	if src.ContentColumn == "" {
		s.src.ContentColumn = "content"
	}
	closeFn, err := s.openSource(ctx, cur)
	if err != nil {
		return cur, false, err
	}
	defer closeFn()
	cur.Format = s.format
	s.emitted = cur.Emitted
	last := cur // the cursor after the last row read
	err = s.eachShard(ctx, cur, func(name, page string) error {
		at := SourceCursor{Shard: name, Page: page, Format: s.format}
		if name == cur.Shard && page == cur.Page {
			at.Row, at.Offset, at.Line, at.Bytes = cur.Row, cur.Offset, cur.Line, cur.Bytes
		}
		at.Index = last.Index
		end, err := s.readShard(ctx, name, at, func(r filesRow) error {
			last = r.at
			return s.add(ctx, r)
		})
		if err != nil {
			return err
		}
		last = end
		return nil
	})
	if errors.Is(err, errStopScan) {
		return *s.stopAt, s.src.Limit > 0 && s.emitted >= s.src.Limit, nil
	}
	last.Emitted = s.emitted
	if err != nil {
		if s.stopAt != nil { // fn refused an entry
			return *s.stopAt, false, err
		}
		if s.open {
			return s.start, false, err
		}
		return last, false, err
	}
	// The source's end: the last group.
	last.Emitted = s.emitted
	if s.open {
		start := s.start
		if err := s.emit(); err != nil {
			return start, false, err
		}
	}
	last.Emitted = s.emitted
	return last, true, nil
}

// openSource finds the source's format and opens its bucket, if any. It returns what closes it.
func (s *filesScan) openSource(ctx context.Context, cur SourceCursor) (func() error, error) {
	p := s.src.Path
	u, err := url.Parse(p)
	local := err != nil || u.Scheme == "" || len(u.Scheme) == 1 || strings.EqualFold(u.Scheme, "file")
	closeFn := func() error { return nil }
	if local {
		s.root = p
		if err == nil && strings.EqualFold(u.Scheme, "file") {
			s.root = u.Path
			if u.Host == "." {
				s.root = strings.TrimPrefix(s.root, "/")
			}
		}
		fi, err := os.Stat(s.root)
		if err != nil {
			return nil, fmt.Errorf("crawl: files source %s: %w", p, err)
		}
		s.single = !fi.IsDir()
	} else {
		st, key, c, err := s.f.bucketOf(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("crawl: files source %s: %w", redactURL(p), err)
		}
		s.bucket, s.root, closeFn = st, key, c
		s.single = hasShardExt(key) || strings.HasSuffix(key, ".py")
		if !s.single && s.root != "" && !strings.HasSuffix(s.root, "/") {
			s.root += "/"
		}
	}
	s.format = s.src.Format
	if s.format == "" {
		s.format = cur.Format
	}
	if s.format == "" {
		s.format, err = s.detect(ctx)
		if err != nil {
			closeFn()
			return nil, err
		}
	}
	switch s.format {
	case FilesFolder, FilesParquet, FilesJSONL:
	default:
		closeFn()
		return nil, fmt.Errorf("crawl: files source %s: unknown format %q (folder, parquet or jsonl)", redactURL(p), s.format)
	}
	return closeFn, nil
}

// hasShardExt reports whether name is a Parquet or JSONL file by its name.
func hasShardExt(name string) bool {
	return strings.HasSuffix(name, ".parquet") || strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".jsonl.gz")
}

// detect finds the format of a source whose spec says none: by the file's name, or by the first
// *.parquet, *.jsonl or *.py file of a folder or prefix (in listing order; folder if none).
func (s *filesScan) detect(ctx context.Context) (string, error) {
	byName := func(name string) (string, bool) {
		switch {
		case strings.HasSuffix(name, ".parquet"):
			return FilesParquet, true
		case strings.HasSuffix(name, ".jsonl"):
			return FilesJSONL, true
		case strings.HasSuffix(name, ".py"):
			return FilesFolder, true
		}
		return "", false
	}
	if strings.HasSuffix(s.root, ".jsonl.gz") {
		return "", fmt.Errorf("crawl: files source %s: gzip-compressed JSONL is not read (it cannot be resumed in the middle): decompress it, or write Parquet", redactURL(s.src.Path))
	}
	if s.single {
		if f, ok := byName(s.root); ok {
			return f, nil
		}
		return "", fmt.Errorf("crawl: files source %s: cannot tell the format from the name: say format (folder, parquet or jsonl)", redactURL(s.src.Path))
	}
	found, n := FilesFolder, 0
	err := s.list(ctx, "", "", "", func(name, _ string) error {
		if f, ok := byName(name); ok {
			found = f
			return errStopScan
		}
		if n++; n >= detectEntries {
			return errStopScan
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return "", err
	}
	return found, nil
}

// ext is the file name suffix of the source's files or shards.
func (s *filesScan) ext() string {
	switch s.format {
	case FilesParquet:
		return ".parquet"
	case FilesJSONL:
		return ".jsonl"
	}
	return ".py"
}

// eachShard calls fn with each file or shard of the source from the one cur is in, in order,
// with the listing's page token it was found on (buckets).
func (s *filesScan) eachShard(ctx context.Context, cur SourceCursor, fn func(name, page string) error) error {
	if s.single {
		name := path.Base(filepath.ToSlash(s.root))
		if cur.Shard != "" && cur.Shard != name {
			return nil
		}
		return fn(name, "")
	}
	return s.list(ctx, s.ext(), cur.Shard, cur.Page, fn)
}

// list calls fn with the names (relative to the folder or prefix) of the regular files ending in
// ext ("": every file) from the name from on (walk order), and their page tokens.
func (s *filesScan) list(ctx context.Context, ext, from, page string, fn func(name, page string) error) error {
	if s.bucket == nil {
		var parts []string
		if from != "" {
			parts = strings.Split(from, "/")
		}
		return walkSorted(ctx, s.root, "", parts, ext, 0, fn)
	}
	token, err := base64.RawURLEncoding.DecodeString(page)
	if err != nil {
		return fmt.Errorf("crawl: files source %s: bad listing cursor: %w", redactURL(s.src.Path), err)
	}
	for {
		objs, next, err := s.bucket.ListPage(ctx, s.root, token, filesListPage)
		if err != nil {
			return fmt.Errorf("crawl: files source %s: %w", redactURL(s.src.Path), err)
		}
		pageStr := base64.RawURLEncoding.EncodeToString(token)
		for _, o := range objs {
			name := strings.TrimPrefix(o.Key, s.root)
			if name < from || !strings.HasSuffix(name, ext) {
				continue
			}
			if err := fn(name, pageStr); err != nil {
				return err
			}
		}
		if next == nil {
			return nil
		}
		token = next
		progress(ctx)
	}
}

// walkSorted walks the local folder dir (rel its path from the walk's root) in sorted order,
// calling fn with each regular file ending in ext from the path from (its components) on. It
// follows no symlink.
func walkSorted(ctx context.Context, dir, rel string, from []string, ext string, depth int, fn func(name, page string) error) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	if depth > maxDirDepth {
		return fmt.Errorf("crawl: files source: folders nested deeper than %d at %s", maxDirDepth, rel)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("crawl: files source: %w", err)
	}
	var entries []os.DirEntry
	for {
		part, err := d.ReadDir(4096)
		entries = append(entries, part...)
		if len(entries) > maxDirEntries {
			d.Close()
			return fmt.Errorf("crawl: files source: folder %s holds more than %d entries", dir, maxDirEntries)
		}
		if err == io.EOF || len(part) == 0 {
			break
		}
		if err != nil {
			d.Close()
			return fmt.Errorf("crawl: files source: %w", err)
		}
	}
	d.Close()
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		name := e.Name()
		var sub []string
		if len(from) > 0 {
			if name < from[0] {
				continue
			}
			if name == from[0] {
				sub = from[1:]
			}
			from = nil
		}
		if name == ".git" {
			continue
		}
		r := name
		if rel != "" {
			r = rel + "/" + name
		}
		switch t := e.Type(); {
		case t.IsDir():
			if err := walkSorted(ctx, filepath.Join(dir, name), r, sub, ext, depth+1, fn); err != nil {
				return err
			}
		case t.IsRegular() && strings.HasSuffix(name, ext) && len(sub) == 0:
			if err := fn(r, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// readShard reads the rows of the shard or file name from at (its Row, Offset and Line), calling
// each with every row. It returns the cursor after its last row.
func (s *filesScan) readShard(ctx context.Context, name string, at SourceCursor, each func(filesRow) error) (SourceCursor, error) {
	switch s.format {
	case FilesParquet:
		return s.readParquet(ctx, name, at, each)
	case FilesJSONL:
		return s.readJSONL(ctx, name, at, each)
	}
	if at.Row > 0 {
		return at, nil
	}
	r := filesRow{at: at, path: name, hasPath: true, group: path.Dir(name)}
	data, reason, err := s.readPy(ctx, name)
	if err != nil {
		return at, err
	}
	r.content, r.reject = data, reason
	r.empty = reason == "" && data == ""
	if err := each(r); err != nil {
		return at, err
	}
	at.Row = 1
	if at.Index++; at.Index%4096 == 0 {
		progress(ctx) // a long stretch of files that give nothing (empty, rejects)
	}
	return at, nil
}

// objectName is the local path or bucket key of the source's file or shard name.
func (s *filesScan) objectName(name string) string {
	if s.bucket != nil {
		if s.single {
			return s.root
		}
		return s.root + name
	}
	if s.single {
		return s.root
	}
	return filepath.Join(s.root, filepath.FromSlash(name))
}

// readPy reads one .py file of a folder source, up to MaxInlineFile bytes: its text, or the
// reason it is a reject.
func (s *filesScan) readPy(ctx context.Context, name string) (string, string, error) {
	var r io.ReadCloser
	if s.bucket != nil {
		rr, err := s.bucket.NewRangeReader(ctx, s.objectName(name), 0, MaxInlineFile+1)
		if err != nil {
			return "", "", fmt.Errorf("crawl: files source %s: %w", redactURL(s.src.Path), err)
		}
		r = rr
	} else {
		f, err := os.OpenFile(s.objectName(name), os.O_RDONLY|oNoFollow, 0)
		if err != nil {
			return "", "unreadable: " + pathErrText(err), nil
		}
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			f.Close()
			return "", "not a regular file", nil
		}
		r = f
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, MaxInlineFile+1))
	if err != nil {
		return "", "", fmt.Errorf("crawl: files source %s: read %s: %w", redactURL(s.src.Path), name, err)
	}
	if len(data) > MaxInlineFile {
		return "", fmt.Sprintf("file larger than %d bytes", MaxInlineFile), nil
	}
	return string(data), "", nil
}

// readJSONL reads the rows of a JSONL shard from at.Offset.
func (s *filesScan) readJSONL(ctx context.Context, name string, at SourceCursor, each func(filesRow) error) (SourceCursor, error) {
	var r io.ReadCloser
	if s.bucket != nil {
		rr, err := s.bucket.NewRangeReader(ctx, s.objectName(name), at.Offset, -1)
		if err != nil {
			return at, fmt.Errorf("crawl: files source %s: %w", redactURL(s.src.Path), err)
		}
		r = rr
	} else {
		f, err := os.Open(s.objectName(name))
		if err != nil {
			return at, fmt.Errorf("crawl: files source: %w", err)
		}
		if _, err := f.Seek(at.Offset, io.SeekStart); err != nil {
			f.Close()
			return at, fmt.Errorf("crawl: files source: %w", err)
		}
		r = f
	}
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	cols := s.columns()
	for {
		if err := ctx.Err(); err != nil {
			return at, fmt.Errorf("crawl: files source %s: %w", redactURL(s.src.Path), context.Cause(ctx))
		}
		line, n, long, rerr := readBoundedLine(br, maxFilesLine)
		if rerr != nil && rerr != io.EOF {
			return at, fmt.Errorf("crawl: files source %s: %s: line %d: %w", redactURL(s.src.Path), name, at.Line+1, rerr)
		}
		if n == 0 {
			return at, nil
		}
		next := at
		next.Offset += n
		next.Line++
		if next.Line%4096 == 0 {
			progress(ctx)
		}
		if t := trimSpace(line); len(t) > 0 || long {
			row := filesRow{at: at}
			if long {
				row.reject = fmt.Sprintf("row longer than %d bytes", maxFilesLine)
			} else {
				parseJSONLRow(t, cols, &row)
			}
			if err := each(row); err != nil {
				return at, err
			}
			next.Index++
		}
		at = next
		if rerr == io.EOF {
			return at, nil
		}
	}
}

// trimSpace trims ASCII white space.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

// readBoundedLine reads the next line of r with its line break: its text if it is at most max
// bytes, else (long) none, the rest of it being read and dropped. n is the line's length in bytes.
func readBoundedLine(r *bufio.Reader, max int) (line []byte, n int64, long bool, err error) {
	for {
		part, err := r.ReadSlice('\n')
		n += int64(len(part))
		if !long {
			if len(line)+len(part) > max {
				long, line = true, nil
			} else {
				line = append(line, part...)
			}
		}
		if err != bufio.ErrBufferFull {
			return line, n, long, err
		}
	}
}

// filesColumns are the columns a source reads.
type filesColumns struct {
	content, path, repo, license string
}

func (s *filesScan) columns() filesColumns {
	return filesColumns{content: s.src.ContentColumn, path: s.src.PathColumn, repo: s.src.RepoColumn, license: s.src.LicenseColumn}
}

// parseJSONLRow reads one JSONL row (a JSON object) into r: its content and optional path,
// repository and license (strings, or null), or the reason it is a reject.
func parseJSONLRow(line []byte, cols filesColumns, r *filesRow) {
	if !utf8.Valid(line) {
		// encoding/json would read each bad byte as U+FFFD: a file the corpus never held.
		r.reject = "not UTF-8 text"
		return
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		r.reject = "malformed JSON: " + clip(err.Error(), 200)
		return
	}
	str := func(col string) (string, bool, string) {
		raw, ok := obj[col]
		if !ok || string(raw) == "null" {
			return "", false, ""
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", false, fmt.Sprintf("column %q is not a string", clip(col, 100))
		}
		return v, true, ""
	}
	var bad string
	content, ok, bad := str(cols.content)
	if bad != "" {
		r.reject = bad
		return
	}
	if !ok {
		if _, present := obj[cols.content]; !present {
			r.reject = fmt.Sprintf("no column %q", clip(cols.content, 100))
			return
		}
	}
	r.content = content
	r.empty = content == ""
	for _, c := range []struct {
		col string
		dst *string
		has *bool
	}{{cols.path, &r.path, &r.hasPath}, {cols.repo, &r.repo, nil}, {cols.license, &r.license, nil}} {
		if c.col == "" {
			continue
		}
		v, ok, bad := str(c.col)
		if bad != "" {
			r.reject = bad
			return
		}
		*c.dst = v
		if c.has != nil {
			*c.has = ok
		}
	}
	r.group = r.repo
}

// readParquet reads the rows of a Parquet shard from at.Row: only the columns it needs, row group
// by row group, parquetBatch rows at a time.
func (s *filesScan) readParquet(ctx context.Context, name string, at SourceCursor, each func(filesRow) error) (end SourceCursor, err error) {
	shown := redactURL(s.src.Path)
	if !s.single {
		shown += " (" + name + ")"
	}
	defer func() {
		if p := recover(); p != nil { // parquet-go on a corrupt file
			end, err = at, fmt.Errorf("crawl: files source %s: corrupt Parquet: %v", shown, clip(fmt.Sprint(p), 200))
		}
	}()
	var ra io.ReaderAt
	var size int64
	if s.bucket != nil {
		r, err := s.bucket.NewReaderAt(ctx, s.objectName(name))
		if err != nil {
			return at, fmt.Errorf("crawl: files source %s: %w", shown, err)
		}
		ra, size = r, r.Size()
	} else {
		f, err := os.Open(s.objectName(name))
		if err != nil {
			return at, fmt.Errorf("crawl: files source: %w", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return at, fmt.Errorf("crawl: files source: %w", err)
		}
		ra, size = f, fi.Size()
	}
	if err := checkParquetFooter(ra, size); err != nil {
		return at, fmt.Errorf("crawl: files source %s: not a readable Parquet file: %w", shown, err)
	}
	openPq := func(skipIndex bool) (*parquet.File, error) {
		return parquet.OpenFile(ra, size, parquet.SkipPageIndex(skipIndex), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(1<<20))
	}
	pf, err := openPq(true)
	if err != nil {
		return at, fmt.Errorf("crawl: files source %s: not a readable Parquet file: %w", shown, err)
	}
	if at.Row > 0 && pageIndexBytes(pf) <= maxParquetFooter && checkParquetPageIndex(ra, size, pf) == nil {
		// Resuming inside the file: its page index lets each column seek to the row's page
		// instead of reading every page before it. Read only if its size is sane.
		if withIndex, err := openPq(false); err == nil {
			pf = withIndex
		}
	}
	var rows int64
	for _, rg := range pf.RowGroups() {
		rows += max(rg.NumRows(), 0)
	}
	if rows > maxParquetRowsPerByte*size+1<<20 {
		// Rows of nulls cost almost nothing to encode: without this, a few bytes could hold a
		// scan for as long as a corpus of billions of files.
		return at, fmt.Errorf("crawl: files source %s: claims %d rows in %d bytes", shown, rows, size)
	}
	cols := s.columns()
	names := []string{cols.content, cols.path, cols.repo, cols.license}
	leaves := make([]int, len(names)) // -1: not read
	for i, c := range names {
		leaves[i] = -1
		if c == "" {
			continue
		}
		leaf, ok := pf.Schema().Lookup(c)
		if !ok {
			return at, fmt.Errorf("crawl: files source %s: no column %q (columns: %s)", shown, clip(c, 100), clip(strings.Join(parquetColumns(pf), ", "), 300))
		}
		if leaf.MaxRepetitionLevel > 0 || leaf.Node.Type().Kind() != parquet.ByteArray {
			kind := leaf.Node.Type().Kind().String()
			if leaf.MaxRepetitionLevel > 0 {
				kind = "a list"
			}
			return at, fmt.Errorf("crawl: files source %s: column %q is %s, not a string column", shown, clip(c, 100), kind)
		}
		leaves[i] = leaf.ColumnIndex
	}
	var rgStart int64
	md := pf.Metadata()
	for i, rg := range pf.RowGroups() {
		n := rg.NumRows()
		if at.Row >= rgStart+n {
			rgStart += n
			continue
		}
		for _, l := range leaves {
			if l >= 0 && i < len(md.RowGroups) && l < len(md.RowGroups[i].Columns) {
				if sz := md.RowGroups[i].Columns[l].MetaData.TotalUncompressedSize; sz > maxParquetChunk {
					return at, fmt.Errorf("crawl: files source %s: a column chunk of %d bytes, more than %d", shown, sz, maxParquetChunk)
				}
			}
		}
		if err := s.readRowGroup(ctx, shown, rg, leaves, rgStart, maxParquetBytesPerByte*size+maxParquetBytesSlack, &at, each); err != nil {
			return at, err
		}
		rgStart += n
	}
	return at, nil
}

// maxParquetFooter bounds a Parquet file's footer (its metadata), read whole.
const maxParquetFooter = 64 << 20

// checkParquetFooter checks a Parquet file's ends before parquet-go reads its footer: the magic
// numbers, and a footer length within the file and maxParquetFooter.
func checkParquetFooter(r io.ReaderAt, size int64) error {
	if size < 12 {
		return fmt.Errorf("%d bytes, too short", size)
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if string(tail[4:]) != "PAR1" {
		return errors.New("no PAR1 magic number at its end")
	}
	n := int64(tail[0]) | int64(tail[1])<<8 | int64(tail[2])<<16 | int64(tail[3])<<24
	if n <= 0 || n > size-12 || n > maxParquetFooter {
		return fmt.Errorf("footer of %d bytes in a file of %d", n, size)
	}
	footer := make([]byte, n)
	if _, err := r.ReadAt(footer, size-8-n); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return checkThriftCompact(footer)
}

// checkParquetPageIndex checks a Parquet file's page index (its column and offset indexes) as
// checkParquetFooter checks its footer, before parquet-go reads it.
func checkParquetPageIndex(r io.ReaderAt, size int64, pf *parquet.File) error {
	for _, rg := range pf.Metadata().RowGroups {
		for _, c := range rg.Columns {
			for _, span := range [][2]int64{{c.ColumnIndexOffset, int64(c.ColumnIndexLength)}, {c.OffsetIndexOffset, int64(c.OffsetIndexLength)}} {
				off, n := span[0], span[1]
				if n == 0 {
					continue
				}
				if off < 0 || n < 0 || n > maxParquetFooter || off > size-n {
					return fmt.Errorf("a page index of %d bytes at %d in a file of %d", n, off, size)
				}
				b := make([]byte, n)
				if _, err := r.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
					return err
				}
				if err := checkThriftCompact(b); err != nil {
					return fmt.Errorf("page index: %w", err)
				}
			}
		}
	}
	return nil
}

// pageIndexBytes is the size of a Parquet file's page index (its column and offset indexes), as
// its footer says.
func pageIndexBytes(pf *parquet.File) int64 {
	var n int64
	for _, rg := range pf.Metadata().RowGroups {
		for _, c := range rg.Columns {
			n += int64(max(c.ColumnIndexLength, 0)) + int64(max(c.OffsetIndexLength, 0))
		}
	}
	return n
}

// parquetColumns lists a Parquet file's leaf columns.
func parquetColumns(pf *parquet.File) []string {
	var out []string
	for _, p := range pf.Schema().Columns() {
		out = append(out, strings.Join(p, "."))
	}
	return out
}

// readRowGroup reads the rows of one row group from at.Row (rgStart being its first row),
// advancing at after each row given. The bytes of the values read in the shard (at.Bytes) stay
// within maxBytes.
func (s *filesScan) readRowGroup(ctx context.Context, shown string, rg parquet.RowGroup, leaves []int, rgStart, maxBytes int64, at *SourceCursor, each func(filesRow) error) error {
	chunks := rg.ColumnChunks()
	readers := make([]parquet.ColumnChunkValueReader, len(leaves))
	defer func() {
		for _, r := range readers {
			if r != nil {
				r.Close()
			}
		}
	}()
	for i, l := range leaves {
		if l < 0 {
			continue
		}
		if l >= len(chunks) {
			return fmt.Errorf("crawl: files source %s: corrupt Parquet: column %d of %d", shown, l, len(chunks))
		}
		readers[i] = parquet.NewColumnChunkValueReader(chunks[l])
		if skip := at.Row - rgStart; skip > 0 {
			if err := readers[i].SeekToRow(skip); err != nil {
				return fmt.Errorf("crawl: files source %s: seek to row %d: %w", shown, at.Row, err)
			}
		}
	}
	left := rg.NumRows() - (at.Row - rgStart)
	buf := make([]parquet.Value, parquetBatch)
	vals := make([][4]string, parquetBatch)
	state := make([][4]int8, parquetBatch) // 0 null, 1 value, 2 too long
	for left > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("crawl: files source %s: %w", shown, context.Cause(ctx))
		}
		n := int(min(left, parquetBatch))
		for c, r := range readers {
			if r == nil {
				for i := range n {
					vals[i][c], state[i][c] = "", 0
				}
				continue
			}
			got := 0
			for got < n {
				k, err := r.ReadValues(buf[got:n])
				for i := got; i < got+k; i++ {
					v := buf[i]
					switch {
					case v.IsNull():
						vals[i][c], state[i][c] = "", 0
					case c == 0 && len(v.ByteArray()) > MaxInlineFile, c > 0 && len(v.ByteArray()) > MaxInlinePath+maxInlineRepo:
						vals[i][c], state[i][c] = "", 2
					default:
						vals[i][c], state[i][c] = string(v.ByteArray()), 1
					}
					buf[i] = parquet.Value{}
				}
				got += k
				if err == io.EOF && got < n {
					return fmt.Errorf("crawl: files source %s: corrupt Parquet: column %q ends at row %d of its row group", shown, s.columnName(c), at.Row-rgStart+int64(got)) // rows
				}
				if err != nil && err != io.EOF {
					return fmt.Errorf("crawl: files source %s: row %d: %w", shown, at.Row, err)
				}
			}
		}
		for i := range n {
			row := filesRow{at: *at, content: vals[i][0], path: vals[i][1], hasPath: state[i][1] == 1, repo: vals[i][2], license: vals[i][3]}
			row.group = row.repo
			switch {
			case state[i][0] == 2:
				row.reject = fmt.Sprintf("file larger than %d bytes", MaxInlineFile)
			case state[i][1] == 2 || state[i][2] == 2:
				row.reject = "path or repository value too long"
			}
			row.empty = row.reject == "" && row.content == ""
			n := int64(len(row.content) + len(row.path) + len(row.repo) + len(row.license))
			if at.Bytes+n > maxBytes {
				return fmt.Errorf("crawl: files source %s: more than %d bytes of files in %d bytes of Parquet", shown, maxBytes, (maxBytes-maxParquetBytesSlack)/maxParquetBytesPerByte)
			}
			if err := each(row); err != nil {
				return err
			}
			at.Bytes += n
			at.Row++
			at.Index++
			if at.Index%4096 == 0 {
				progress(ctx)
			}
		}
		left -= int64(n)
	}
	return nil
}

// columnName is the name of the c-th column read (content, path, repo, license).
func (s *filesScan) columnName(c int) string {
	return [4]string{s.src.ContentColumn, s.src.PathColumn, s.src.RepoColumn, s.src.LicenseColumn}[c]
}

// add takes one row into the scan. A file joins the open group, unless it belongs to another
// repository (or folder), the group is full, or it would take the group past maxBytes: then the
// group is given first, and a new one opened. An empty file joins its group if it has a path (an
// empty __init__.py makes a package) and is skipped otherwise. A row that cannot be taken closes
// the open group, which is given first, then is a reject: every entry given is before the cursor
// returned, and none after it, so that an entry fn refuses is given again from that cursor.
func (s *filesScan) add(ctx context.Context, r filesRow) error {
	if r.empty && !r.hasPath {
		return nil
	}
	if r.reject == "" {
		r.reject = checkInlineContent(r.content)
	}
	if r.reject == "" && int64(len(r.content)) > s.maxBytes {
		r.reject = fmt.Sprintf("file larger than limits.repo_bytes (%d bytes)", s.maxBytes)
	}
	if r.reject != "" {
		if s.open {
			if err := s.closeGroup(r.at); err != nil {
				return err
			}
		}
		where := "row " + strconv.Itoa(r.at.Index)
		if s.format == FilesFolder {
			where += " (" + clip(r.path, 200) + ")"
		}
		e := Entry{Reject: &schemas.Reject{Source: redactURL(s.src.Path), Key: fmt.Sprintf("%s#%d", redactURL(s.src.Path), r.at.Index),
			Class: schemas.RejectMalformed, Reason: where + ": " + r.reject}}
		if err := s.fn(e); err != nil {
			stop := r.at
			stop.Emitted = s.emitted
			s.stopAt = &stop
			return err
		}
		return nil
	}
	if s.open && (r.group != s.key || len(s.files) >= s.perItem || s.bytes+int64(len(r.content)) > s.maxBytes) {
		if err := s.closeGroup(r.at); err != nil {
			return err
		}
	}
	if !s.open {
		s.open, s.start, s.files, s.bytes, s.key = true, r.at, nil, 0, r.group
		s.start.Emitted = s.emitted
		s.used, s.isDir = map[string]bool{}, map[string]bool{}
	}
	p := fmt.Sprintf("file_%d.py", r.at.Index)
	if r.hasPath {
		if sp, err := SanitizeFilePath(r.path); err == nil {
			p = sp
		}
	}
	f := InlineFile{Path: s.place(p, int64(r.at.Index)), Content: r.content, Repo: clip(r.repo, maxInlineRepo), License: clipBytes(r.license, maxInlineLicense)}
	s.files = append(s.files, f)
	s.bytes += int64(len(r.content))
	return nil
}

// closeGroup gives the open group, next being the cursor after it, and stops the scan
// (errStopScan) if the page is full or the source's limit reached.
func (s *filesScan) closeGroup(next SourceCursor) error {
	if err := s.emit(); err != nil {
		return err
	}
	if s.given >= s.maxItems || s.src.Limit > 0 && s.emitted >= s.src.Limit {
		stop := next
		stop.Emitted = s.emitted
		s.stopAt = &stop
		return errStopScan
	}
	return nil
}

// emit gives the open group as an item, unless all its files are empty (nothing to trace).
func (s *filesScan) emit() error {
	s.open = false
	if !slices.ContainsFunc(s.files, func(f InlineFile) bool { return strings.TrimSpace(f.Content) != "" }) {
		s.files = nil
		return nil
	}
	it := filesItem(s.src, int64(s.start.Index), s.files)
	if err := s.fn(Entry{Item: &it}); err != nil {
		stop := s.start
		s.stopAt = &stop
		return err
	}
	s.files = nil
	s.emitted++
	s.given++
	return nil
}

// filesItem is the repository-level item of a group of files of src, its first row being row.
// Its Path is the source's ("files:PATH"), not the group's (Resolved.URL, "files:PATH#ROW"): the
// yield reports, rejects and generated items' repo_url of all its groups sum under one source, so
// that a corpus of 10^8 files is one source of the statistics, not millions.
func filesItem(src schemas.SourceSpec, row int64, files []InlineFile) Item {
	p := redactURL(src.Path)
	res := Resolved{Repo: Repo{URL: fmt.Sprintf("files:%s#%d", p, row)}, Kind: KindFiles, Files: files, ContentHash: FilesHash(files)}
	res.setKey()
	return Item{Key: fmt.Sprintf("%s#%d", p, row), Path: "files:" + p, SourceID: strconv.FormatInt(row, 10),
		Repo: &RepoTarget{Resolved: res, PythonPath: src.PythonPath, Venv: src.Venv, Env: src.Env,
			NoTests: true, FunctionsAll: true, TraceOnce: !src.ReexecuteOn(), FrozenClock: src.FrozenClock}}
}

// FilesHash is the content hash of a group of files: the SHA-256 of their paths and contents,
// each length-prefixed, in order.
func FilesHash(files []InlineFile) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%d:%s%d:%s", len(f.Path), f.Path, len(f.Content), f.Content)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkInlineContent is why a file's text cannot be taken ("" if it can): not UTF-8, or holding
// a NUL byte.
func checkInlineContent(c string) string {
	switch {
	case len(c) > MaxInlineFile:
		return fmt.Sprintf("file larger than %d bytes", MaxInlineFile)
	case !utf8.ValidString(c):
		return "not UTF-8 text"
	case strings.IndexByte(c, 0) >= 0:
		return "a NUL byte in the text"
	}
	return ""
}

// clipBytes cuts s to at most n bytes, at a character boundary.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// place returns p, or a name derived from it, that no file or folder of the open group has
// taken (and whose folders are not files of it), and takes it.
func (s *filesScan) place(p string, row int64) string {
	ok := func(c string) bool {
		if s.used[c] || s.isDir[c] {
			return false
		}
		for d := path.Dir(c); d != "."; d = path.Dir(d) {
			if s.used[d] {
				return false
			}
		}
		return true
	}
	take := func(c string) string {
		s.used[c] = true
		for d := path.Dir(c); d != "."; d = path.Dir(d) {
			s.isDir[d] = true
		}
		return c
	}
	if ok(p) {
		return take(p)
	}
	stem := strings.TrimSuffix(p, ".py")
	for i := 2; i <= 100; i++ {
		c := fmt.Sprintf("%s_%d.py", stem, i)
		if len(c) <= MaxInlinePath && ok(c) {
			return take(c)
		}
	}
	for i := 1; ; i++ {
		c := fmt.Sprintf("file_%d.py", row)
		if i > 1 {
			c = fmt.Sprintf("file_%d_%d.py", row, i)
		}
		if ok(c) {
			return take(c)
		}
	}
}

// SanitizeFilePath checks and normalizes the path a corpus gives a file: slash-separated
// (backslashes read as slashes), relative, clean, without "..", NUL or control characters,
// valid UTF-8, at most MaxInlinePath bytes with components of at most 255, ending in ".py" (added
// if missing). The result is a path SanitizeFilePath returns unchanged.
func SanitizeFilePath(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if len(p) > 4*MaxInlinePath {
		return "", fmt.Errorf("path longer than %d bytes", MaxInlinePath)
	}
	if !utf8.ValidString(p) {
		return "", errors.New("path not UTF-8")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return "", errors.New("control character in path")
		}
	}
	p = strings.ReplaceAll(p, "\\", "/")
	if strings.HasPrefix(p, "/") || len(p) >= 2 && p[1] == ':' {
		return "", errors.New("absolute path")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", errors.New(`".." in path`)
		}
	}
	p = path.Clean(p)
	if p == "." || p == "" {
		return "", errors.New("empty path")
	}
	if !strings.HasSuffix(p, ".py") || p == ".py" || strings.HasSuffix(p, "/.py") {
		p += ".py"
	}
	if len(p) > MaxInlinePath {
		return "", fmt.Errorf("path longer than %d bytes", MaxInlinePath)
	}
	for _, seg := range strings.Split(p, "/") {
		if len(seg) > maxNameComponent {
			return "", fmt.Errorf("path component longer than %d bytes", maxNameComponent)
		}
		if seg == ".git" {
			return "", errors.New(".git in path")
		}
	}
	return p, nil
}

// bucketOf opens the store a bucket URL is read from: one of f.Stores whose URL it starts with
// (the longest), or else the bucket opened with store.Open. It returns the store, the object's
// key or prefix in it, and what closes it.
func (f *Fetcher) bucketOf(ctx context.Context, u *url.URL) (*store.Store, string, func() error, error) {
	target := storeName(u)
	var st *store.Store
	var key, matched string
	for k, s := range f.Stores {
		ku, err := url.Parse(k)
		if err != nil {
			continue
		}
		prefix := storeName(ku)
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		if (strings.HasPrefix(target, prefix) || target+"/" == prefix) && len(prefix) > len(matched) {
			st, key, matched = s, strings.TrimPrefix(target, prefix), prefix
			if target+"/" == prefix {
				key = ""
			}
		}
	}
	if st != nil {
		return st, key, func() error { return nil }, nil
	}
	st, key, err := openBucketOf(ctx, u)
	if err != nil {
		return nil, "", nil, err
	}
	return st, key, st.Close, nil
}

// errCheckDone ends a CheckFilesSource at its first entry.
var errCheckDone = errors.New("checked")

// CheckFilesSource opens a files source as a scan does and reads it to its first entry (for
// preflight: a missing path, an unknown format, a Parquet file without the content column). It
// returns the problem found, if any.
func (f *Fetcher) CheckFilesSource(ctx context.Context, src schemas.SourceSpec) error {
	cur, _, err := f.scanFiles(ctx, src, SourceCursor{}, 1, func(Entry) error { return errCheckDone })
	switch {
	case errors.Is(err, errCheckDone):
		return nil
	case err != nil:
		return err
	}
	what := map[string]string{FilesFolder: ".py files", FilesParquet: "*.parquet shards with rows", FilesJSONL: "*.jsonl shards with rows"}[cur.Format]
	return fmt.Errorf("crawl: files source %s: holds no %s (nothing to read)", redactURL(src.Path), what)
}
