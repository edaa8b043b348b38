package crawl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/emulators"
	"github.com/ndtrace/ndtrace/store"
)

// TestOpenAt reads a file by plain path and by file URL from an offset, and checks that bucket URLs
// are opened through store (its messages, its refusals).
func TestOpenAt(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "corpus.jsonl")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{p, "file://" + p} {
		r, err := OpenAt(ctx, name, 4)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		data, err := io.ReadAll(r)
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		if err != nil || string(data) != "456789" {
			t.Errorf("%s from 4: %q, %v; want 456789", name, data, err)
		}
	}
	if _, err := OpenAt(ctx, "file://"+p+".missing", 0); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v; want a not-exist error", err)
	}
	for _, tc := range []struct{ url, err string }{
		{"ftp://host/x.jsonl", `unsupported scheme "ftp"`},
		{"s3://bucket/x.jsonl?prefix=a/", "the prefix goes in the URL's path"},
		{"mem://bucket/x.jsonl", "store: read x.jsonl in mem://bucket"}, // a fresh memory bucket is empty
	} {
		_, err := OpenAt(ctx, tc.url, 0)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v; want an error containing %q", tc.url, err, tc.err)
		}
		if tc.url == "mem://bucket/x.jsonl" && !store.IsNotExist(err) {
			t.Errorf("%s: %v; want an error for which store.IsNotExist is true", tc.url, err)
		}
	}
}

// TestOpenAtS3 reads an object of an S3 bucket from an offset, by its URL (s3://bucket/key?…).
func TestOpenAtS3(t *testing.T) {
	ctx := context.Background()
	b := emulators.S3(t)
	st, err := store.Open(ctx, b.URL("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(ctx, "corpus.jsonl", []byte("0123456789"), nil); err != nil {
		t.Fatal(err)
	}
	u := b.URL("in/corpus.jsonl")
	data, err := ReadFile(ctx, u)
	if err != nil || string(data) != "0123456789" {
		t.Fatalf("ReadFile(%s) = %q, %v", u, data, err)
	}
	r, err := OpenAt(ctx, u, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if data, err := io.ReadAll(r); err != nil || string(data) != "789" {
		t.Errorf("from 7: %q, %v; want 789", data, err)
	}
	if _, err := ReadFile(ctx, b.URL("in/missing.jsonl")); !store.IsNotExist(err) {
		t.Errorf("missing object: %v; want an error for which store.IsNotExist is true", err)
	}
}

// TestOpenAtS3Fake reads an s3:// URL from an offset against a minimal S3 endpoint on loopback (GET
// of one object, with a Range), so the bucket path runs without versitygw too.
func TestOpenAtS3Fake(t *testing.T) {
	emulators.SetAWSEnv(t)
	const content = "0123456789"
	var ranges []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/bucket/in/corpus.jsonl" {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>`)
			return
		}
		ranges = append(ranges, r.Header.Get("Range"))
		off := 0
		if rg := r.Header.Get("Range"); rg != "" {
			fmt.Sscanf(rg, "bytes=%d-", &off)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(content)-off))
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, len(content)-1, len(content)))
		w.Header().Set("ETag", `"e"`)
		w.WriteHeader(http.StatusPartialContent)
		io.WriteString(w, content[off:])
	}))
	defer srv.Close()
	ctx := context.Background()
	u := emulators.S3URL("bucket", "in/corpus.jsonl", srv.URL)
	r, err := OpenAt(ctx, u, 7)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(r)
	if cerr := r.Close(); cerr != nil {
		t.Error(cerr)
	}
	if err != nil || string(data) != "789" {
		t.Errorf("%s from 7: %q, %v; want 789 (ranges asked: %q)", u, data, err, ranges)
	}
	if _, err := ReadFile(ctx, emulators.S3URL("bucket", "in/missing.jsonl", srv.URL)); !store.IsNotExist(err) {
		t.Errorf("missing object: %v; want an error for which store.IsNotExist is true", err)
	}
}
