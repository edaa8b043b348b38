package dataset

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreConformance runs every store operation the dataset layer uses against every kind of store:
// memory, a local folder (file URL and plain path) and S3 (an in-process S3 server on loopback).
func TestStoreConformance(t *testing.T) {
	for _, kind := range storeKinds() {
		t.Run(kind.name, func(t *testing.T) {
			for _, tc := range conformanceCases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, kind.open(t)) })
			}
		})
	}
}

var conformanceCases = []struct {
	name string
	run  func(t *testing.T, s *Store)
}{
	{"put-read-stat", func(t *testing.T, s *Store) {
		ctx := context.Background()
		data := []byte("hello, object storage")
		created, err := s.PutOnce(ctx, "a/b.txt", data, "text/plain", map[string]string{"Rows": "3"})
		if err != nil || !created {
			t.Fatalf("PutOnce = %v, %v; want created", created, err)
		}
		got, err := s.ReadAll(ctx, "a/b.txt")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ReadAll = %q, %v", got, err)
		}
		info, err := s.Stat(ctx, "a/b.txt")
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != int64(len(data)) || info.Metadata["rows"] != "3" || len(info.Metadata["sha256"]) != 64 {
			t.Errorf("Stat = %+v", info)
		}
		if ok, err := s.Exists(ctx, "a/b.txt"); !ok || err != nil {
			t.Errorf("Exists = %v, %v", ok, err)
		}
	}},
	{"missing", func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.ReadAll(ctx, "nope"); !IsNotExist(err) {
			t.Errorf("ReadAll of a missing key: %v, want not-exist", err)
		}
		if _, err := s.Stat(ctx, "nope"); !IsNotExist(err) {
			t.Errorf("Stat of a missing key: %v, want not-exist", err)
		}
		if ok, err := s.Exists(ctx, "nope"); ok || err != nil {
			t.Errorf("Exists = %v, %v", ok, err)
		}
		if _, err := ReadManifest(ctx, s); !IsNotExist(err) {
			t.Errorf("ReadManifest of an empty store: %v, want not-exist", err)
		}
	}},
	{"put-once-idempotent-and-conflict", func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.PutOnce(ctx, "k", []byte("one"), "", nil); err != nil {
			t.Fatal(err)
		}
		created, err := s.PutOnce(ctx, "k", []byte("one"), "", nil)
		if err != nil || created {
			t.Fatalf("same content again: created=%v err=%v; want no write, no error", created, err)
		}
		_, err = s.PutOnce(ctx, "k", []byte("two"), "", nil)
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "k") {
			t.Fatalf("other content: %v, want a conflict naming the key", err)
		}
		if got, _ := s.ReadAll(ctx, "k"); string(got) != "one" {
			t.Errorf("after the conflict the key holds %q, want the first content", got)
		}
	}},
	{"cancelled-write-leaves-nothing", func(t *testing.T, s *Store) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.PutOnce(ctx, "c", []byte("data"), "", nil); err == nil {
			t.Fatal("PutOnce with a cancelled context succeeded")
		}
		if ok, _ := s.Exists(context.Background(), "c"); ok {
			t.Error("a cancelled write left an object")
		}
	}},
	{"shard-idempotent-and-conflict", func(t *testing.T, s *Store) {
		ctx := context.Background()
		rows := makeRows(t, 0, 5)
		first, err := WriteShard(ctx, s, "part-00000", rows)
		if err != nil {
			t.Fatal(err)
		}
		if first.Path != "shards/part-00000.parquet" || first.Rows != 5 || first.Bytes == 0 {
			t.Errorf("info = %+v", first)
		}
		again, err := WriteShard(ctx, s, "part-00000", rows)
		if err != nil || again != first {
			t.Fatalf("rewrite of the same rows: %+v, %v; want %+v", again, err, first)
		}
		_, err = WriteShard(ctx, s, "part-00000", makeRows(t, 100, 5))
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "shards/part-00000.parquet") {
			t.Fatalf("other rows under the same name: %v, want a conflict naming the shard", err)
		}
		info, err := s.Stat(ctx, first.Path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Metadata["sha256"] != first.SHA256 || info.Metadata["rows"] != "5" {
			t.Errorf("shard metadata = %v", info.Metadata)
		}
	}},
	{"dataset-round-trip", func(t *testing.T, s *Store) {
		ctx := context.Background()
		m := writeTestDataset(t, s, 3, 4)
		got, err := ReadManifest(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := m.Marshal()
		b, _ := got.Marshal()
		if !bytes.Equal(a, b) {
			t.Errorf("manifest read back differs:\n%s\nwant\n%s", b, a)
		}
		if err := Validate(ctx, s, testLookup); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		rows, err := ReadRows(ctx, s, m.Shards[1].Path, 0)
		if err != nil || len(rows) != 4 || rows[0].Seed != 4 {
			t.Fatalf("ReadRows = %d rows, %v", len(rows), err)
		}
		// Committing the same manifest again is a no-op; another one is a conflict.
		same := *m
		if _, err := WriteManifest(ctx, s, same); err != nil {
			t.Errorf("recommit: %v", err)
		}
		other := *m
		other.Counts = map[string]int64{"x": 1}
		if _, err := WriteManifest(ctx, s, other); !errors.Is(err, ErrConflict) {
			t.Errorf("commit of another manifest: %v, want a conflict", err)
		}
	}},
	{"manifest-refuses-missing-shard", func(t *testing.T, s *Store) {
		ctx := context.Background()
		info, err := WriteShard(ctx, s, "part-00000", makeRows(t, 0, 2))
		if err != nil {
			t.Fatal(err)
		}
		ghost := info
		ghost.Path = "shards/part-00001.parquet"
		_, err = WriteManifest(ctx, s, Manifest{CreatedAt: testCreated, Shards: []ShardInfo{info, ghost}})
		if err == nil || !strings.Contains(err.Error(), "part-00001") {
			t.Fatalf("WriteManifest naming a missing shard: %v", err)
		}
		if ok, _ := s.Exists(ctx, ManifestKey); ok {
			t.Error("a manifest was written")
		}
	}},
	{"validate-detects-overwrite", func(t *testing.T, s *Store) {
		ctx := context.Background()
		m := writeTestDataset(t, s, 2, 3)
		// Replace the second shard behind the dataset's back (a plain write, not PutOnce).
		data, _, err := EncodeShard(makeRows(t, 50, 3))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Bucket().WriteAll(ctx, m.Shards[1].Path, data, nil); err != nil {
			t.Fatal(err)
		}
		err = Validate(ctx, s, testLookup)
		var p *Problem
		if !errors.As(err, &p) || p.Shard != m.Shards[1].Path {
			t.Fatalf("Validate = %v, want a problem of %s", err, m.Shards[1].Path)
		}
	}},
}

func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tests := []struct {
		url     string
		wantErr string // "" means it opens
	}{
		{"mem://", ""},
		{"mem://bucket/some/prefix", ""},
		{"file://" + dir + "/x", ""},
		{"file://" + dir + "/y?metadata=skip", ""},
		{dir + "/plain", ""},
		{"", "empty storage URL"},
		{"ftp://host/x", `unsupported scheme "ftp"`},
		{"file://relative/x", "absolute path"},
		{"file:///", "folder path"},
		{"s3:///prefix", "missing bucket name"},
		{"mem://b/x?prefix=y", "prefix goes in the URL's path"},
		{"mem://b/../x", "bad prefix"},
		{"file://" + dir + "/z?bogus=1", "bogus"},
		{"mem://?bogus=1", "bogus"},
		{"http://[::1", "http://[::1"},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			s, err := Open(ctx, tc.url)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded, want an error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
			if tc.url != "" && !strings.Contains(err.Error(), strings.SplitN(tc.url, "?", 2)[0]) {
				t.Errorf("error %q does not name the URL", err)
			}
		})
	}
}

// TestFileLayout checks where a file store puts things: the dataset root is the folder itself, the
// manifest and the shards are plain files (so DuckDB can read them), and no temporary file is left.
func TestFileLayout(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, "file://"+dir)
	writeTestDataset(t, s, 2, 2)
	for _, p := range []string{"manifest.json", "shards/part-00000.parquet", "shards/part-00001.parquet"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Error(err)
		}
	}
	tmp, _ := filepath.Glob(filepath.Join(dir, "shards", "*.tmp"))
	if len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// TestS3Prefix checks that an s3 dataset lives under the URL's path inside the bucket.
func TestS3Prefix(t *testing.T) {
	ep := startFakeS3(t, "bkt")
	s := openTest(t, s3URL("bkt", "team/run-7", ep))
	writeTestDataset(t, s, 1, 2)
	root := openTest(t, s3URL("bkt", "", ep))
	for _, key := range []string{"team/run-7/manifest.json", "team/run-7/shards/part-00000.parquet"} {
		if ok, err := root.Exists(context.Background(), key); !ok || err != nil {
			t.Errorf("%s: exists=%v err=%v", key, ok, err)
		}
	}
}
