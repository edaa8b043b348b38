package crawl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// pqRow is a row of the Parquet fixtures: a corpus of files with optional path, repository and
// license columns.
type pqRow struct {
	Content string  `parquet:"content"`
	Path    *string `parquet:"path,optional"`
	Repo    string  `parquet:"repo"`
	License string  `parquet:"license"`
	Stars   int64   `parquet:"stars"` // a column the scan never reads
}

func strp(s string) *string { return &s }

// parquetBytes writes rows as a Parquet file of row groups of at most perGroup rows.
func parquetBytes(t testing.TB, rows []pqRow, perGroup int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[pqRow](&buf, parquet.MaxRowsPerRowGroup(perGroup), parquet.PageBufferSize(4096))
	for i := 0; i < len(rows); i += 1000 {
		if _, err := w.Write(rows[i:min(i+1000, len(rows))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// jsonlBytes writes rows as JSONL (the same columns as pqRow; a nil path left out).
func jsonlBytes(t testing.TB, rows []pqRow) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, r := range rows {
		m := map[string]any{"content": r.Content, "repo": r.Repo, "license": r.License, "stars": r.Stars}
		if r.Path != nil {
			m["path"] = *r.Path
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

func putFile(t testing.TB, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// scanFilesAll pages through src with Scan, page items at a time (each page from the cursor the last
// returned, through JSON as a planner keeps it), and returns every entry.
func scanFilesAll(t testing.TB, f *Fetcher, src schemas.SourceSpec, page int) []Entry {
	t.Helper()
	var out []Entry
	var cur SourceCursor
	for calls := 0; ; calls++ {
		if calls > 1_000_000 {
			t.Fatal("no end")
		}
		next, done, err := f.Scan(context.Background(), src, cur, page, func(e Entry) error {
			out = append(out, e)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(next)
		cur = SourceCursor{}
		if err := json.Unmarshal(b, &cur); err != nil {
			t.Fatal(err)
		}
		if done {
			return out
		}
	}
}

// groups is the files (path=content) of each item of entries, and the rejects' reasons.
func groups(entries []Entry) (items [][]string, rejects []string) {
	for _, e := range entries {
		if e.Reject != nil {
			rejects = append(rejects, e.Reject.Key+" "+e.Reject.Reason)
			continue
		}
		var g []string
		for _, f := range e.Item.Repo.Resolved.Files {
			g = append(g, f.Path+"="+f.Content)
		}
		items = append(items, g)
	}
	return items, rejects
}

func TestScanFilesFolder(t *testing.T) {
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "a", "x.py"), []byte("def x(): return 1\n"))
	putFile(t, filepath.Join(dir, "a", "y.py"), []byte("def y(): return 2\n"))
	putFile(t, filepath.Join(dir, "a", "z.txt"), []byte("not python"))
	putFile(t, filepath.Join(dir, "b", "c", "z.py"), []byte("def z(): return 3\n"))
	putFile(t, filepath.Join(dir, "b", "e.py"), nil)
	putFile(t, filepath.Join(dir, ".git", "h.py"), []byte("def h(): pass\n"))
	putFile(t, filepath.Join(dir, "top.py"), []byte("import a\n"))
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "a", "link.py")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	src := schemas.SourceSpec{Kind: "files", Path: dir, FrozenClock: true, PythonPath: []string{"/sp"}}
	entries := scanFilesAll(t, &Fetcher{}, src, 10)
	items, rejects := groups(entries)
	want := [][]string{
		{"a/x.py=def x(): return 1\n", "a/y.py=def y(): return 2\n"},
		{"b/c/z.py=def z(): return 3\n"},
		{"top.py=import a\n"},
	}
	if !reflect.DeepEqual(items, want) {
		t.Errorf("groups %q, want %q", items, want)
	}
	if len(rejects) != 0 {
		t.Errorf("rejects %q, want none (b/e.py is empty, and alone in its folder: no item)", rejects)
	}
	it := entries[0].Item
	r := it.Repo
	if it.Key != dir+"#0" || it.Path != "files:"+dir || it.SourceID != "0" || r.Resolved.URL != "files:"+dir+"#0" || r.Resolved.Kind != KindFiles || !r.NoTests || !r.FunctionsAll || r.TraceOnce ||
		!r.FrozenClock || !reflect.DeepEqual(r.PythonPath, []string{"/sp"}) || r.Resolved.ContentHash != FilesHash(r.Resolved.Files) ||
		r.Resolved.Key != "files:files:"+dir+"#0@"+r.Resolved.ContentHash {
		t.Errorf("item %+v, repo %+v", it, r)
	}
	// The same run from a file URL, and a single file.
	if got, _ := groups(scanFilesAll(t, &Fetcher{}, schemas.SourceSpec{Kind: "files", Path: "file://" + dir}, 1)); !reflect.DeepEqual(got, want) {
		t.Errorf("file URL: %q", got)
	}
	one, _ := groups(scanFilesAll(t, &Fetcher{}, schemas.SourceSpec{Kind: "files", Path: filepath.Join(dir, "top.py")}, 1))
	if !reflect.DeepEqual(one, [][]string{{"top.py=import a\n"}}) {
		t.Errorf("one file: %q", one)
	}
}

// corpus is a corpus of n rows from repositories of 1 to 5 files each.
func corpus(n int) []pqRow {
	var rows []pqRow
	for i := 0; len(rows) < n; i++ {
		for j := range i%5 + 1 {
			if len(rows) == n {
				break
			}
			rows = append(rows, pqRow{Content: fmt.Sprintf("def f%d_%d():\n    return %d\n", i, j, j), Path: strp(fmt.Sprintf("pkg%d/m%d.py", i, j)),
				Repo: fmt.Sprintf("github.com/o/r%d", i), License: "mit", Stars: int64(i)})
		}
	}
	return rows
}

func TestScanFilesGrouping(t *testing.T) {
	rows := []pqRow{
		{Content: "a = 1\n", Path: strp("a.py"), Repo: "r1", License: "mit"},
		{Content: "b = 1\n", Path: strp("a.py"), Repo: "r1"},             // a duplicate path
		{Content: "c = 1\n", Path: strp("../../etc/passwd"), Repo: "r1"}, // traversal
		{Content: "d = 1\n", Path: strp("/abs/d.py"), Repo: "r2"},        // absolute
		{Content: "e = 1\n", Path: strp("x\x00y.py"), Repo: "r2"},        // NUL in the path
		{Content: "f = 1\n", Path: strp("dir\\win\\f"), Repo: "r2"},      // backslashes, no .py
		{Content: "g = 1\n", Path: nil, Repo: "r2"},                      // no path
		{Content: "h\x00 = 1\n", Path: strp("h.py"), Repo: "r2"},         // NUL in the text
		{Content: "i = '\xff'\n", Path: strp("i.py"), Repo: "r2"},        // not UTF-8
		{Content: strings.Repeat("#", MaxInlineFile+1), Repo: "r2"},      // too large
		{Content: "", Path: strp("empty.py"), Repo: "r2"},                // empty
		{Content: "j = 1\n", Path: strp("j.py"), Repo: "r2"},
		{Content: "k = 1\n", Path: strp("k.py"), Repo: "r2"},
		{Content: "l = 1\n", Path: strp("dir/win/f.py/x.py"), Repo: "r2"}, // files_per_item closes the group here
		{Content: "m = 1\n", Path: strp("a.py"), Repo: "r1"},              // r1 again: a new group
	}
	want := [][]string{
		{"a.py=a = 1\n", "a_2.py=b = 1\n", "file_2.py=c = 1\n"},
		{"file_3.py=d = 1\n", "file_4.py=e = 1\n", "dir/win/f.py=f = 1\n", "file_6.py=g = 1\n"},
		{"empty.py=", "j.py=j = 1\n", "k.py=k = 1\n", "dir/win/f.py/x.py=l = 1\n"},
		{"a.py=m = 1\n"},
	}
	wantRejects := []string{"#7 row 7: a NUL byte in the text", "#8 row 8: not UTF-8 text", "#9 row 9: file larger than 1048576 bytes"}
	dir := t.TempDir()
	pq := filepath.Join(dir, "c.parquet")
	putFile(t, pq, parquetBytes(t, rows, 4))
	jl := filepath.Join(dir, "c.jsonl")
	// JSON cannot carry invalid UTF-8 (it reads as U+FFFD): that row is a file there.
	putFile(t, jl, jsonlBytes(t, rows))
	for _, p := range []string{pq, jl} {
		t.Run(filepath.Ext(p), func(t *testing.T) {
			src := schemas.SourceSpec{Kind: "files", Path: p, ContentColumn: "content", PathColumn: "path", RepoColumn: "repo", LicenseColumn: "license", FilesPerItem: 4}
			entries := scanFilesAll(t, &Fetcher{}, src, 1)
			items, rejects := groups(entries)
			wantItems := want
			wantRej := []string{wantRejects[0], wantRejects[1], wantRejects[2]}
			if p == jl {
				wantItems = [][]string{want[0], want[1], {"i.py=i = '\ufffd'\n"}, want[2], want[3]}
				wantRej = []string{wantRejects[0], wantRejects[2]}
			}
			for i := range wantRej {
				wantRej[i] = p + wantRej[i]
			}
			if !reflect.DeepEqual(items, wantItems) {
				t.Errorf("groups\n%q\nwant\n%q", items, wantItems)
			}
			if !reflect.DeepEqual(rejects, wantRej) {
				t.Errorf("rejects %q, want %q", rejects, wantRej)
			}
			if f := entries[0].Item.Repo.Resolved.Files[0]; f.Repo != "r1" || f.License != "mit" {
				t.Errorf("file %+v: want repo r1, license mit", f)
			}
		})
	}
}

func TestScanFilesLimitAndCursorLast(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.parquet")
	putFile(t, p, parquetBytes(t, corpus(100), 7))
	src := schemas.SourceSpec{Kind: "files", Path: p, RepoColumn: "repo", Limit: 5}
	entries := scanFilesAll(t, &Fetcher{}, src, 2)
	if items, _ := groups(entries); len(items) != 5 {
		t.Fatalf("%d items, want the limit of 5", len(items))
	}
	if len(entries) != 5 {
		t.Errorf("%d entries", len(entries))
	}
}

// TestScanFilesGroupBytes checks that a group stays within the fetcher's MaxGroupBytes
// (limits.repo_bytes): a file that would take it past starts the next group, and a file larger
// than it alone is a reject.
func TestScanFilesGroupBytes(t *testing.T) {
	rows := []pqRow{
		{Content: strings.Repeat("a", 40), Repo: "r"}, {Content: strings.Repeat("b", 40), Repo: "r"},
		{Content: strings.Repeat("c", 40), Repo: "r"}, {Content: strings.Repeat("d", 101), Repo: "r"},
		{Content: strings.Repeat("e", 100), Repo: "r"},
	}
	p := filepath.Join(t.TempDir(), "c.jsonl")
	putFile(t, p, jsonlBytes(t, rows))
	src := schemas.SourceSpec{Kind: "files", Path: p, ContentColumn: "content", RepoColumn: "repo"}
	items, rejects := groups(scanFilesAll(t, &Fetcher{MaxGroupBytes: 100}, src, 10))
	if len(items) != 3 || len(items[0]) != 2 || len(items[1]) != 1 || len(items[2]) != 1 {
		t.Errorf("groups %q", items)
	}
	if len(rejects) != 1 || !strings.Contains(rejects[0], "row 3: file larger than limits.repo_bytes (100 bytes)") {
		t.Errorf("rejects %q", rejects)
	}
}

// TestScanFilesPaging checks that paging through a source with any page size gives exactly the
// entries of one pass, for each kind of reader.
func TestScanFilesPaging(t *testing.T) {
	ctx := context.Background()
	rows := corpus(600)
	for i := range rows {
		if i%37 == 0 {
			rows[i].Content = "" // rejects between groups and inside them
		}
	}
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "one.parquet"), parquetBytes(t, rows, 50))
	putFile(t, filepath.Join(dir, "one.jsonl"), jsonlBytes(t, rows))
	for i := range 3 {
		putFile(t, filepath.Join(dir, "pq", fmt.Sprintf("shard-%d.parquet", i)), parquetBytes(t, rows[i*200:(i+1)*200], 33))
		putFile(t, filepath.Join(dir, "jl", fmt.Sprintf("shard-%d.jsonl", i)), jsonlBytes(t, rows[i*200:(i+1)*200]))
	}
	for i, r := range rows[:150] {
		putFile(t, filepath.Join(dir, "py", *r.Path), []byte(r.Content))
		_ = i
	}
	mem, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for i, r := range rows[:2500%len(rows)] {
		if _, err := mem.PutOnce(ctx, fmt.Sprintf("corpus/py/%s", *r.Path), []byte(r.Content), "", nil); err != nil {
			t.Fatal(err)
		}
		_ = i
	}
	put := func(key string, data []byte) {
		if _, err := mem.PutOnce(ctx, key, data, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		put(fmt.Sprintf("corpus/pq/shard-%d.parquet", i), parquetBytes(t, rows[i*200:(i+1)*200], 33))
		put(fmt.Sprintf("corpus/jl/shard-%d.jsonl", i), jsonlBytes(t, rows[i*200:(i+1)*200]))
	}
	put("corpus/pq/README.md", []byte("not a shard"))
	f := &Fetcher{Stores: map[string]*store.Store{"mem://": mem}}
	cols := func(src schemas.SourceSpec) schemas.SourceSpec {
		src.Kind, src.PathColumn, src.RepoColumn, src.FilesPerItem = "files", "path", "repo", 3
		return src
	}
	sources := []schemas.SourceSpec{
		cols(schemas.SourceSpec{Path: filepath.Join(dir, "one.parquet")}),
		cols(schemas.SourceSpec{Path: filepath.Join(dir, "one.jsonl")}),
		cols(schemas.SourceSpec{Path: filepath.Join(dir, "pq")}),
		cols(schemas.SourceSpec{Path: filepath.Join(dir, "jl")}),
		{Kind: "files", Path: filepath.Join(dir, "py"), FilesPerItem: 2},
		{Kind: "files", Path: "mem://corpus/py", FilesPerItem: 2},
		cols(schemas.SourceSpec{Path: "mem://corpus/pq"}),
		cols(schemas.SourceSpec{Path: "mem://corpus/jl"}),
		cols(schemas.SourceSpec{Path: "mem://corpus/pq/shard-1.parquet"}),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, src := range sources {
		t.Run(strings.ReplaceAll(strings.TrimPrefix(src.Path, dir), "/", "_"), func(t *testing.T) {
			whole := scanFilesAll(t, f, src, 1<<20)
			items, rejects := groups(whole)
			if len(items) < 10 {
				t.Fatalf("%d items, %d rejects", len(items), len(rejects))
			}
			for range 8 {
				page := 1 + rng.IntN(40)
				got := scanFilesAll(t, f, src, page)
				if !reflect.DeepEqual(got, whole) {
					gi, gr := groups(got)
					t.Fatalf("page %d: %d items, %d rejects; one pass: %d items, %d rejects", page, len(gi), len(gr), len(items), len(rejects))
				}
			}
		})
	}
	// Files of one folder make one group: the folder source's groups never mix folders.
	for _, e := range scanFilesAll(t, f, sources[4], 5) {
		if e.Item == nil {
			continue
		}
		fs := e.Item.Repo.Resolved.Files
		if filepath.Dir(fs[0].Path) != filepath.Dir(fs[len(fs)-1].Path) {
			t.Errorf("a group across folders: %v, %v", fs[0].Path, fs[len(fs)-1].Path)
		}
	}
}

func TestScanFilesHostileParquet(t *testing.T) {
	dir := t.TempDir()
	good := parquetBytes(t, corpus(20), 10)
	type intRow struct {
		Content int64 `parquet:"content"`
	}
	var ib bytes.Buffer
	w := parquet.NewGenericWriter[intRow](&ib)
	w.Write([]intRow{{1}, {2}})
	w.Close()
	cases := []struct {
		name string
		data []byte
		src  schemas.SourceSpec
		want string
	}{
		{"no_column", good, schemas.SourceSpec{ContentColumn: "text"}, `no column "text" (columns: content, path, repo, license, stars)`},
		{"no_path_column", good, schemas.SourceSpec{PathColumn: "filepath"}, `no column "filepath"`},
		{"wrong_type", ib.Bytes(), schemas.SourceSpec{}, `column "content" is INT64, not a string column`},
		{"number_column", good, schemas.SourceSpec{RepoColumn: "stars"}, `column "stars" is INT64, not a string column`},
		{"truncated", good[:len(good)/2], schemas.SourceSpec{}, "not a readable Parquet file"},
		{"garbage", []byte("PAR1 not really a parquet file at all PAR1"), schemas.SourceSpec{}, "not a readable Parquet file"},
		{"huge_footer", append([]byte("PAR1xxxxxxxxxxxxxxxxxxxx"), 0xff, 0xff, 0xff, 0x7f, 'P', 'A', 'R', '1'), schemas.SourceSpec{}, "footer of"},
		{"empty", nil, schemas.SourceSpec{}, "too short"},
	}
	// Corrupt bytes in the middle of a good file: an error or rows, never a panic.
	for i := 0; i < 40; i++ {
		b := bytes.Clone(good)
		for j := range 8 {
			b[(i*131+j*977)%(len(b)-8)] ^= byte(1 + i + j)
		}
		cases = append(cases, struct {
			name string
			data []byte
			src  schemas.SourceSpec
			want string
		}{fmt.Sprintf("flipped_%d", i), b, schemas.SourceSpec{}, ""})
	}
	// Rows of nulls: a few KiB claiming millions of rows.
	type nullRow struct {
		Content *string `parquet:"content,optional"`
	}
	var nb bytes.Buffer
	nw := parquet.NewGenericWriter[nullRow](&nb)
	for range 40 {
		nw.Write(make([]nullRow, 100000))
	}
	nw.Close()
	cases = append(cases, struct {
		name string
		data []byte
		src  schemas.SourceSpec
		want string
	}{"null_bomb", nb.Bytes(), schemas.SourceSpec{}, "claims 4000000 rows in"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".parquet")
			putFile(t, p, tc.data)
			src := tc.src
			src.Kind, src.Path = "files", p
			if src.ContentColumn == "" {
				src.ContentColumn = "content"
			}
			_, _, err := (&Fetcher{}).Items(context.Background(), src)
			if tc.want == "" {
				return // no panic is all
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestScanFilesHostileJSONL(t *testing.T) {
	dir := t.TempDir()
	long := `{"content": "` + strings.Repeat("x", maxFilesLine) + `"}`
	lines := []string{
		`{"content": "a = 1\n", "path": "../../../../etc/cron.d/x"}`,
		`not json`,
		`[1, 2]`,
		`{"text": "no content column"}`,
		`{"content": 5}`,
		`{"content": "b = 1\n", "path": 7}`,
		`{"content": "c\u0000 = 1\n"}`,
		long,
		`{"content": "d = 1\n", "path": null, "repo": null}`,
		`{"content": "` + strings.Repeat("y", MaxInlineFile+1) + `"}`,
	}
	p := filepath.Join(dir, "h.jsonl")
	putFile(t, p, []byte(strings.Join(lines, "\n")+"\n"))
	items, rejects, err := (&Fetcher{}).Items(context.Background(), schemas.SourceSpec{Kind: "files", Path: p, ContentColumn: "content", PathColumn: "path", RepoColumn: "repo", FilesPerItem: 10})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, r := range rejects {
		reasons = append(reasons, r.Reason)
	}
	want := []string{"row 1: malformed JSON", "row 2: malformed JSON", `row 3: no column "content"`, `row 4: column "content" is not a string`,
		`row 5: column "path" is not a string`, "row 6: a NUL byte", "row 7: row longer than", "row 9: file larger than"}
	if len(reasons) != len(want) {
		t.Fatalf("rejects %q, want %q", reasons, want)
	}
	for i := range want {
		if !strings.HasPrefix(reasons[i], want[i]) {
			t.Errorf("reject %d: %q, want %q", i, reasons[i], want[i])
		}
	}
	// The traversal's path is dropped (file_0.py); each reject closes the group before it.
	if len(items) != 2 || items[0].Repo.Resolved.Files[0].Path != "file_0.py" || items[1].Repo.Resolved.Files[0].Path != "file_8.py" {
		t.Errorf("items %+v", items)
	}
}

// TestScanFilesEmptyRows reads 10^5 empty rows without paths: skipped, in one pass whatever the
// page.
func TestScanFilesEmptyRows(t *testing.T) {
	rows := make([]pqRow, 100000)
	rows[len(rows)-1].Content = "x = 1\n"
	p := filepath.Join(t.TempDir(), "e.parquet")
	putFile(t, p, parquetBytes(t, rows, 1<<20))
	entries := scanFilesAll(t, &Fetcher{}, schemas.SourceSpec{Kind: "files", Path: p, ContentColumn: "content"}, 1)
	items, rejects := groups(entries)
	if len(items) != 1 || len(rejects) != 0 {
		t.Errorf("%d items, %d rejects", len(items), len(rejects))
	}
}

func TestScanFilesErrors(t *testing.T) {
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "x.jsonl.gz"), []byte("gz"))
	putFile(t, filepath.Join(dir, "x.csv"), []byte("a,b"))
	for _, tc := range []struct {
		src  schemas.SourceSpec
		want string
	}{
		{schemas.SourceSpec{Path: filepath.Join(dir, "missing")}, "no such file"},
		{schemas.SourceSpec{Path: filepath.Join(dir, "x.jsonl.gz")}, "gzip-compressed JSONL"},
		{schemas.SourceSpec{Path: filepath.Join(dir, "x.csv")}, "say format"},
		{schemas.SourceSpec{Path: dir, Format: "csv"}, `unknown format "csv"`},
		{schemas.SourceSpec{Path: "mem://nothing/here.parquet"}, "here.parquet"},
	} {
		tc.src.Kind = "files"
		_, _, err := (&Fetcher{}).Items(context.Background(), tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.src.Path, err, tc.want)
		}
	}
}

func TestCheckFilesSource(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "py", "m.py"), []byte("x = 1\n"))
	putFile(t, filepath.Join(dir, "empty", "notes.txt"), []byte("no python"))
	putFile(t, filepath.Join(dir, "c.parquet"), parquetBytes(t, corpus(3), 10))
	mem, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	f := &Fetcher{Stores: map[string]*store.Store{"mem://": mem}}
	for _, tc := range []struct {
		src  schemas.SourceSpec
		want string
	}{
		{schemas.SourceSpec{Path: filepath.Join(dir, "py")}, ""},
		{schemas.SourceSpec{Path: filepath.Join(dir, "c.parquet"), ContentColumn: "content"}, ""},
		{schemas.SourceSpec{Path: filepath.Join(dir, "c.parquet"), ContentColumn: "text"}, `no column "text"`},
		{schemas.SourceSpec{Path: filepath.Join(dir, "empty")}, "holds no .py files"},
		{schemas.SourceSpec{Path: "mem://corpus/none/"}, "holds no .py files"},
		{schemas.SourceSpec{Path: "mem://corpus/none/", Format: "parquet"}, "holds no *.parquet shards"},
	} {
		tc.src.Kind = "files"
		err := f.CheckFilesSource(ctx, tc.src)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.src.Path, err, tc.want)
		}
	}
}

// TestScanFilesRefusedEntry checks that an entry fn refuses is not consumed: the cursor returned
// gives it again.
func TestScanFilesRefusedEntry(t *testing.T) {
	rows := corpus(40)
	rows[6].Content = ""
	p := filepath.Join(t.TempDir(), "c.parquet")
	putFile(t, p, parquetBytes(t, rows, 9))
	src := schemas.SourceSpec{Kind: "files", Path: p, ContentColumn: "content", RepoColumn: "repo"}
	whole := scanFilesAll(t, &Fetcher{}, src, 1000)
	for refuse := range len(whole) {
		var got []Entry
		var cur SourceCursor
		n := 0
		for {
			next, done, err := (&Fetcher{}).Scan(context.Background(), src, cur, 3, func(e Entry) error {
				if n++; n == refuse+1 {
					return fmt.Errorf("refused")
				}
				got = append(got, e)
				return nil
			})
			cur = next
			if err == nil && done {
				break
			}
		}
		if !reflect.DeepEqual(got, whole) {
			t.Fatalf("refusing entry %d: %d entries, want %d", refuse, len(got), len(whole))
		}
	}
}

func TestSanitizeFilePath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a.py", "a.py"},
		{"pkg/mod.py", "pkg/mod.py"},
		{"./pkg//mod.py", "pkg/mod.py"},
		{"pkg\\mod", "pkg/mod.py"},
		{"setup", "setup.py"},
		{".py", ".py.py"},
		{"pkg/", "pkg.py"},
		{"../x.py", ""},
		{"a/../../x.py", ""},
		{"a/..", ""},
		{"/etc/passwd", ""},
		{"\\\\server\\share\\x.py", ""},
		{"C:\\x.py", ""},
		{"a\x00.py", ""},
		{"a\n.py", ""},
		{"a\u0085.py", ""},
		{"\xff.py", ""},
		{"", ""},
		{".", ""},
		{".git/hooks/x.py", ""},
		{strings.Repeat("a/", 300) + "x.py", ""},
		{strings.Repeat("a", 256) + ".py", ""},
		{"ünïcode/mod.py", "ünïcode/mod.py"},
	} {
		got, err := SanitizeFilePath(tc.in)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("SanitizeFilePath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func FuzzSanitizeFilePath(f *testing.F) {
	for _, s := range []string{"a.py", "../x", "/abs", "a\\b", "a/./b", "a\x00b", ".git/x", "x/.py", "a//b/", strings.Repeat("ab/", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := SanitizeFilePath(in)
		if err != nil {
			return
		}
		again, err := SanitizeFilePath(p)
		if err != nil || again != p {
			t.Fatalf("%q -> %q -> %q, %v: not a fixed point", in, p, again, err)
		}
		if len(p) > MaxInlinePath || strings.HasPrefix(p, "/") || !strings.HasSuffix(p, ".py") || strings.Contains(p, "\\") {
			t.Fatalf("%q -> %q", in, p)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == ".." || seg == "." || seg == "" {
				t.Fatalf("%q -> %q: segment %q", in, p, seg)
			}
		}
		if filepath.Join("/root", p) == "/root" || !strings.HasPrefix(filepath.Join("/root", p), "/root/") {
			t.Fatalf("%q -> %q escapes", in, p)
		}
	})
}

func FuzzParseJSONLRow(f *testing.F) {
	for _, s := range []string{`{"content": "x"}`, `{"content": 1}`, `{"content": "a", "path": "../b", "repo": "r"}`, `[]`, `null`, `{"content": null}`, `{"content": "\u0000"}`, `{`, "{\"content\": \"\xff\"}", `{"content": "a", "content": "b"}`} {
		f.Add([]byte(s))
	}
	cols := filesColumns{content: "content", path: "path", repo: "repo", license: "license"}
	f.Fuzz(func(t *testing.T, line []byte) {
		var r filesRow
		parseJSONLRow(line, cols, &r)
		if r.reject != "" {
			return
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%q taken, but not JSON: %v", line, err)
		}
		if c, _ := m["content"].(string); c != r.content {
			t.Fatalf("%q: content %q, want %q", line, r.content, c)
		}
	})
}

func TestCheckoutFiles(t *testing.T) {
	ctx := context.Background()
	files := []InlineFile{{Path: "pkg/__init__.py", Content: ""}, {Path: "pkg/m.py", Content: "def f(x):\n    return x\n"}, {Path: "top.py", Content: "import pkg\n"}}
	res := Resolved{Repo: Repo{URL: "files:/c.parquet#0"}, Kind: KindFiles, Files: files, ContentHash: FilesHash(files)}
	res.setKey()
	w, err := Checkout(ctx, res, t.TempDir(), CheckoutLimits{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Remove()
	for _, f := range files {
		p := filepath.Join(w.Dir, filepath.FromSlash(f.Path))
		data, err := os.ReadFile(p)
		fi, _ := os.Lstat(p)
		if err != nil || string(data) != f.Content || fi.Mode() != 0o644 {
			t.Errorf("%s: %q, %v, mode %v", f.Path, data, err, fi.Mode())
		}
	}
	if fi, _ := os.Stat(filepath.Join(w.Dir, "pkg")); fi.Mode().Perm() != 0o755 {
		t.Errorf("pkg: mode %v", fi.Mode())
	}
	if w.Files != 3 {
		t.Errorf("%d files", w.Files)
	}
	// Forged items: every unsafe group is refused as a repository's problem, nothing written.
	forged := func(fs ...InlineFile) Resolved {
		r := Resolved{Repo: Repo{URL: "files:x#0"}, Kind: KindFiles, Files: fs, ContentHash: FilesHash(fs)}
		r.setKey()
		return r
	}
	badHash := forged(InlineFile{Path: "a.py", Content: "x"})
	badHash.ContentHash = FilesHash([]InlineFile{{Path: "a.py", Content: "y"}})
	notFiles := forged(InlineFile{Path: "a.py", Content: "x"})
	notFiles.URL = "/etc"
	dirWithFiles := Resolved{Repo: Repo{URL: t.TempDir()}, Kind: KindDir, Files: files, ContentHash: FilesHash(files)}
	for _, tc := range []struct {
		name string
		r    Resolved
		lim  CheckoutLimits
		want string
	}{
		{"traversal", forged(InlineFile{Path: "../../x.py", Content: "x"}), CheckoutLimits{}, "unsafe path"},
		{"inner_traversal", forged(InlineFile{Path: "a/../../x.py", Content: "x"}), CheckoutLimits{}, "unsafe path"},
		{"absolute", forged(InlineFile{Path: "/tmp/x.py", Content: "x"}), CheckoutLimits{}, "unsafe path"},
		{"unclean", forged(InlineFile{Path: "a//x.py", Content: "x"}), CheckoutLimits{}, "unsafe path"},
		{"not_py", forged(InlineFile{Path: "a.so", Content: "x"}), CheckoutLimits{}, "unsafe path"},
		{"nul", forged(InlineFile{Path: "a\x00.py", Content: "x"}), CheckoutLimits{}, "unsafe path"},
		{"git", forged(InlineFile{Path: ".git/config.py", Content: "x"}), CheckoutLimits{}, "unsafe path"},
		{"twice", forged(InlineFile{Path: "a.py", Content: "x"}, InlineFile{Path: "a.py", Content: "y"}), CheckoutLimits{}, "given twice"},
		{"under_file", forged(InlineFile{Path: "a.py", Content: "x"}, InlineFile{Path: "a.py/b.py", Content: "y"}), CheckoutLimits{}, "under the file"},
		{"dir_then_file", forged(InlineFile{Path: "a.py/b.py", Content: "x"}, InlineFile{Path: "a.py", Content: "y"}), CheckoutLimits{}, "given twice"},
		{"nul_content", forged(InlineFile{Path: "a.py", Content: "x\x00"}), CheckoutLimits{}, "NUL"},
		{"too_large", forged(InlineFile{Path: "a.py", Content: "xxxx"}, InlineFile{Path: "b.py", Content: "xxxx"}), CheckoutLimits{MaxBytes: 7}, "too large"},
		{"too_many", forged(InlineFile{Path: "a.py", Content: "x"}, InlineFile{Path: "b.py", Content: "x"}), CheckoutLimits{MaxFiles: 1}, "too many files"},
		{"hash", badHash, CheckoutLimits{}, "changed since"},
		{"empty", forged(), CheckoutLimits{}, "no files"},
		{"not_files_url", notFiles, CheckoutLimits{}, "not files:"},
		{"dir_with_inline_files", dirWithFiles, CheckoutLimits{}, "inline files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scratch := t.TempDir()
			w, err := Checkout(ctx, tc.r, scratch, tc.lim)
			if err == nil {
				w.Remove()
				t.Fatal("checked out")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if left, _ := os.ReadDir(scratch); len(left) != 0 {
				t.Errorf("left %v in scratch", left)
			}
		})
	}
}

// TestScanFilesMemory checks that a scan holds one page, not the source: scanning 200,000 rows
// page by page, the heap in use never grows by more than a few MiB over a page's worth.
func TestScanFilesMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("files memory: writes a 200,000-row corpus; run without -short")
	}
	p := filepath.Join(t.TempDir(), "big.parquet")
	rows := corpus(200000)
	putFile(t, p, parquetBytes(t, rows, 50000))
	size := int64(0)
	for _, r := range rows {
		size += int64(len(r.Content) + len(*r.Path) + len(r.Repo))
	}
	rows = nil
	peak := scanPeakHeap(t, schemas.SourceSpec{Kind: "files", Path: p, ContentColumn: "content", PathColumn: "path", RepoColumn: "repo"}, 64)
	t.Logf("corpus text %d bytes; peak heap growth %d bytes", size, peak)
	if peak > size/2 {
		t.Errorf("peak heap growth %d bytes for a corpus of %d: the scan holds more than a page", peak, size)
	}
}

// scanPeakHeap pages through src, page items a page, and returns the largest growth of the heap in
// use over its start (live objects: after a collection), sampled every 1000 entries.
func scanPeakHeap(t testing.TB, src schemas.SourceSpec, page int) int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := int64(ms.HeapAlloc)
	var peak int64
	var cur SourceCursor
	n := 0
	for {
		next, done, err := (&Fetcher{}).Scan(context.Background(), src, cur, page, func(e Entry) error {
			if n++; n%1000 == 0 {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				peak = max(peak, int64(ms.HeapAlloc)-base)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		cur = next
		if done {
			return peak
		}
	}
}

func benchmarkScanFiles(b *testing.B, name string, data []byte, page int) {
	p := filepath.Join(b.TempDir(), name)
	putFile(b, p, data)
	src := schemas.SourceSpec{Kind: "files", Path: p, ContentColumn: "content", PathColumn: "path", RepoColumn: "repo"}
	peak := scanPeakHeap(b, src, page) // once, outside the timed loop: it collects garbage often
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		n := len(scanFilesAll(b, &Fetcher{}, src, page))
		if n == 0 {
			b.Fatal("no entries")
		}
	}
	b.ReportMetric(float64(peak), "peak-heap-B")
}

// PlanningPage is the pipeline's page of items (pipeline.PageItems).
const PlanningPage = 16384

// BenchmarkScanFilesParquet scans 200,000 small files from one Parquet file (row groups of 50,000
// rows), and the same rows from JSONL (the baseline), 64 items a page and a planning page at a
// time: bytes/op and the peak growth of the live heap during the scan.
func BenchmarkScanFilesParquet(b *testing.B) {
	rows := corpus(200000)
	// The kind jsonl's scanner (CruxEval's rows: one function-level item a row) over the same
	// texts: the baseline of a line scanner.
	var crux bytes.Buffer
	for i, r := range rows {
		line, _ := json.Marshal(map[string]string{"id": fmt.Sprint(i), "code": r.Content, "input": "1"})
		crux.Write(line)
		crux.WriteByte('\n')
	}
	for _, page := range []int{64, PlanningPage} {
		b.Run(fmt.Sprintf("parquet/page=%d", page), func(b *testing.B) { benchmarkScanFiles(b, "c.parquet", parquetBytes(b, rows, 50000), page) })
		b.Run(fmt.Sprintf("jsonl/page=%d", page), func(b *testing.B) { benchmarkScanFiles(b, "c.jsonl", jsonlBytes(b, rows), page) })
		b.Run(fmt.Sprintf("kind-jsonl/page=%d", page), func(b *testing.B) {
			p := filepath.Join(b.TempDir(), "crux.jsonl")
			putFile(b, p, crux.Bytes())
			src := schemas.SourceSpec{Kind: "jsonl", Path: p, Func: "f"}
			peak := scanPeakHeap(b, src, page)
			b.SetBytes(int64(crux.Len()))
			b.ReportAllocs()
			for b.Loop() {
				scanFilesAll(b, &Fetcher{}, src, page)
			}
			b.ReportMetric(float64(peak), "peak-heap-B")
		})
	}
}

// FuzzScanFilesParquet reads arbitrary bytes as a Parquet shard: an error or entries, never a
// panic or a hang.
func FuzzScanFilesParquet(f *testing.F) {
	good := parquetBytes(f, corpus(12), 5)
	f.Add(good)
	f.Add(good[:len(good)-10])
	f.Add(append([]byte("PAR1"), good[len(good)-200:]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "f.parquet")
		putFile(t, p, data)
		src := schemas.SourceSpec{Kind: "files", Path: p, ContentColumn: "content", PathColumn: "path", RepoColumn: "repo"}
		(&Fetcher{}).Items(context.Background(), src)
	})
}
