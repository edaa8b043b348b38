package crawl

import (
	"bytes"
	"context"
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
