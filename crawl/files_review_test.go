package crawl

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/ndtrace/ndtrace/schemas"
)

// TestScanFilesParquetDictionaryBomb (outside review): a dictionary-encoded, compressed content
// column holds one file of 16 KiB once (and in its statistics), and 40,000 rows that all point at
// it. The file is 60 KiB, within the rows-per-byte bound (64 a byte), yet it gives 640 MiB of
// files (a terabyte at full scale, each row an item's file, each traced): the bytes of files a
// shard gives are bounded by its size too, and the bound holds across pages (SourceCursor.Bytes).
func TestScanFilesParquetDictionaryBomb(t *testing.T) {
	type dictRow struct {
		Content string `parquet:"content,dict,zstd"`
	}
	text := "def f(x):\n    return x\n" + strings.Repeat("# padding padding padding\n", 600)
	rows := make([]dictRow, 40000)
	for i := range rows {
		rows[i].Content = text
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[dictRow](&buf, parquet.Compression(&zstd.Codec{Level: zstd.SpeedBestCompression}),
		parquet.SkipPageBounds("content"), parquet.ColumnIndexSizeLimit(func([]string) int { return 16 }))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "bomb.parquet")
	putFile(t, p, buf.Bytes())
	src := schemas.SourceSpec{Kind: "files", Path: p, ContentColumn: "content", FilesPerItem: 1}
	var got int64
	var cur SourceCursor
	var err error
	for calls := 0; calls < 10000; calls++ {
		var done bool
		cur, done, err = (&Fetcher{}).Scan(context.Background(), src, cur, 100, func(e Entry) error {
			if e.Item != nil {
				for _, f := range e.Item.Repo.Resolved.Files {
					got += int64(len(f.Content))
				}
			}
			return nil
		})
		if err != nil || done {
			break
		}
	}
	t.Logf("%d bytes of Parquet gave %d bytes of files (%v)", buf.Len(), got, err)
	if limit := int64(maxParquetBytesPerByte)*int64(buf.Len()) + maxParquetBytesSlack; got > limit {
		t.Errorf("%d bytes of Parquet gave %d bytes of files, more than %d", buf.Len(), got, limit)
	}
	if err == nil || !strings.Contains(err.Error(), "bytes of files in") {
		t.Errorf("error %v, want the shard's bytes bound", err)
	}
}

// TestParseJSONLRowNotUTF8 (outside review): a JSONL row whose bytes are not UTF-8 is a reject, as
// a .py file or a Parquet value that is not UTF-8 is: encoding/json took it, each bad byte silently
// turned into U+FFFD, a file the corpus never held. Duplicate keys take the last value (as
// Python's json does); a non-string content is a reject.
func TestParseJSONLRowNotUTF8(t *testing.T) {
	cols := filesColumns{content: "content", path: "path", repo: "repo", license: "license"}
	for _, tc := range []struct {
		line, content, reject string
	}{
		{"{\"content\": \"def f():\\n    return '\xff'\\n\"}", "", "not UTF-8"},
		{"{\"content\": \"x = 1\\n\", \"license\": \"MIT\xc3\"}", "", "not UTF-8"},
		{`{"content": "a = 1\n", "content": "b = 2\n"}`, "b = 2\n", ""},
		{`{"content": ["a"]}`, "", "not a string"},
		{`{"content": "\ud800"}`, "\ufffd", ""}, // an escaped lone surrogate: valid JSON, read as U+FFFD
	} {
		var r filesRow
		parseJSONLRow([]byte(tc.line), cols, &r)
		if tc.reject != "" {
			if !strings.Contains(r.reject, tc.reject) {
				t.Errorf("%q: reject %q, want %q", tc.line, r.reject, tc.reject)
			}
			continue
		}
		if r.reject != "" || r.content != tc.content {
			t.Errorf("%q: content %q, reject %q; want %q", tc.line, r.content, r.reject, tc.content)
		}
	}
}

// TestScanFilesCollidingPaths (outside review): paths that are one after sanitising (a backslash,
// "./", "//", a missing .py), a file where another row wants a folder, a folder where another wants
// a file, and case variants are all given distinct, checked paths, and the group checks out.
func TestScanFilesCollidingPaths(t *testing.T) {
	paths := []string{"a/b.py", `a\b.py`, "a/./b.py", "a//b.py", "a/b", "x.py", "x.py/y.py", "d/e.py", "d", "A/b.py",
		"a/b_2.py", "", "../etc/passwd", "/abs.py", ".git/config", "ok.py"}
	var rows []pqRow
	for i, p := range paths {
		rows = append(rows, pqRow{Content: fmt.Sprintf("X = %d\n", i), Path: strp(p), Repo: "r"})
	}
	p := filepath.Join(t.TempDir(), "c.parquet")
	putFile(t, p, parquetBytes(t, rows, 100))
	src := schemas.SourceSpec{Kind: "files", Path: p, ContentColumn: "content", PathColumn: "path", RepoColumn: "repo", FilesPerItem: 100}
	entries := scanFilesAll(t, &Fetcher{}, src, 10)
	if len(entries) != 1 || entries[0].Item == nil {
		t.Fatalf("%d entries, want one item", len(entries))
	}
	res := entries[0].Item.Repo.Resolved
	seen := map[string]bool{}
	for _, f := range res.Files {
		if sp, err := SanitizeFilePath(f.Path); err != nil || sp != f.Path || seen[f.Path] {
			t.Errorf("path %q: %v (given twice: %v)", f.Path, err, seen[f.Path])
		}
		seen[f.Path] = true
	}
	if len(res.Files) != len(paths) {
		t.Errorf("%d files, want %d", len(res.Files), len(paths))
	}
	w, err := Checkout(context.Background(), res, t.TempDir(), CheckoutLimits{})
	if err != nil {
		t.Fatalf("checkout: %v (paths %v)", err, seen)
	}
	defer w.Remove()
	if w.Files != len(paths) {
		t.Errorf("checked out %d files, want %d", w.Files, len(paths))
	}
}

// TestScanFilesParquetListBomb (outside review): a Parquet footer of a few bytes whose schema
// list claims 2^31-1 elements made parquet-go ask for a 206 GB block (reflect.MakeSlice at the
// claimed size): a fatal out of memory, no recover, the planner gone. The footer's Thrift is
// walked first: a collection claims no more elements than bytes are left.
func TestScanFilesParquetListBomb(t *testing.T) {
	bomb := func(n uint64) []byte {
		footer := []byte{0x15, 0x02, 0x19, 0xfc} // version 1; schema: a list of structs, its size next
		footer = binary.AppendUvarint(footer, n)
		footer = append(footer, 0x00)
		b := append([]byte("PAR1"), footer...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(footer)))
		return append(b, "PAR1"...)
	}
	dir := t.TempDir()
	for _, n := range []uint64{1<<31 - 1, 1 << 40, 100} {
		p := filepath.Join(dir, fmt.Sprintf("bomb%d.parquet", n))
		putFile(t, p, bomb(n))
		_, _, err := (&Fetcher{}).Items(context.Background(), schemas.SourceSpec{Kind: "files", Path: p, ContentColumn: "content"})
		if err == nil || !strings.Contains(err.Error(), "not a readable Parquet file") {
			t.Errorf("%d elements: error %v", n, err)
		}
	}
	// A good file's footer passes the walk.
	good := parquetBytes(t, corpus(50), 7)
	n := int64(binary.LittleEndian.Uint32(good[len(good)-8:]))
	if err := checkThriftCompact(good[int64(len(good))-8-n : len(good)-8]); err != nil {
		t.Errorf("a good footer: %v", err)
	}
}

func FuzzCheckThriftCompact(f *testing.F) {
	good := parquetBytes(f, corpus(12), 5)
	n := int64(binary.LittleEndian.Uint32(good[len(good)-8:]))
	f.Add(good[int64(len(good))-8-n : len(good)-8])
	f.Add([]byte{0x15, 0x02, 0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00})
	f.Add([]byte{0x1b, 0xff, 0xff, 0xff, 0xff, 0x07, 0x88})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkThriftCompact(b) // linear, no panic
	})
}
