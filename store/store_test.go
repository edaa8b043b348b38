package store_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/emulators"
	"github.com/ndtrace/ndtrace/store"
	_ "github.com/ndtrace/ndtrace/store/drivers"
	"github.com/ndtrace/ndtrace/store/storetest"
)

// open opens a store that is closed when the test ends.
func open(t testing.TB, rawURL string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), rawURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the conformance suite on every kind of store: a local folder (by plain path
// and by file URL), memory, and S3, GCS and Azure Blob through their emulators on loopback
// (versitygw, fake-gcs-server, Azurite; each skipped when not installed, unless CI is set).
func TestConformance(t *testing.T) {
	backends := []struct {
		name string
		// server is set for a store on an emulator server (skipped by -short).
		server bool
		// start prepares one bucket (or folder) for the run and returns the URL of a prefix in it.
		start func(t *testing.T) func(prefix string) string
	}{
		{"path", false, func(t *testing.T) func(string) string {
			root := t.TempDir()
			return func(prefix string) string { return filepath.Join(root, "data", prefix) }
		}},
		{"file", false, func(t *testing.T) func(string) string {
			root := t.TempDir()
			return func(prefix string) string { return "file://" + root + "/" + prefix }
		}},
		{"mem", false, func(t *testing.T) func(string) string {
			// Every mem:// store is a bucket of its own.
			return func(prefix string) string { return "mem://bucket/" + prefix }
		}},
		{"s3-versitygw", true, func(t *testing.T) func(string) string { return emulators.S3(t).URL }},
		{"gs-fake-gcs-server", true, func(t *testing.T) func(string) string { return emulators.GCS(t).URL }},
		{"azblob-azurite", true, func(t *testing.T) func(string) string { return emulators.Azurite(t).URL }},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if b.server && testing.Short() {
				t.Skip("a store on an emulator server: long integration test; run without -short")
			}
			urlFor := b.start(t)
			storetest.Run(t, func(t testing.TB, prefix string) *store.Store { return open(t, urlFor(prefix)) })
		})
	}
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
		{"file://localhost" + dir + "/x2", ""},
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
			s, err := store.Open(ctx, tc.url)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if s.URL() != tc.url {
					t.Errorf("URL() = %q; want %q", s.URL(), tc.url)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded, want an error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "store: ") {
				t.Errorf("error %q does not start with store: and contain %q", err, tc.wantErr)
			}
			if tc.url != "" && !strings.Contains(err.Error(), strings.SplitN(tc.url, "?", 2)[0]) {
				t.Errorf("error %q does not name the URL", err)
			}
		})
	}
}

// TestOpenRedactsPassword checks that a password in the URL appears in neither URL() nor errors.
func TestOpenRedactsPassword(t *testing.T) {
	_, err := store.Open(context.Background(), "ftp://user:hunter2@host/x")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v shows the password", err)
	}
}

// TestFileLayout checks where a local store puts things: the root is the folder itself, keys are
// plain files under it (so DuckDB and pyarrow can read them), metadata goes to .attrs sidecars, and
// no temporary file is left.
func TestFileLayout(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		url  func(dir string) string
	}{
		{"file-url", func(dir string) string { return "file://" + dir }},
		{"plain-path", func(dir string) string { return dir }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "created", "on-open")
			s := open(t, tc.url(dir))
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				t.Fatalf("the folder was not created: %v", err)
			}
			if _, err := s.PutOnce(ctx, "shards/part-00000.parquet", []byte("PAR1"), "application/vnd.apache.parquet", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.PutFirst(ctx, "work/lease", []byte("me"), "text/plain"); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(ctx, "manifest.json", []byte("{}"), nil); err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]string{"manifest.json": "{}", "shards/part-00000.parquet": "PAR1", "work/lease": "me"} {
				data, err := os.ReadFile(filepath.Join(dir, p))
				if err != nil || string(data) != want {
					t.Errorf("%s: %q, %v", p, data, err)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "shards", "part-00000.parquet.attrs")); err != nil {
				t.Errorf("no metadata sidecar: %v", err)
			}
			var tmp []string
			filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
				if strings.HasSuffix(p, ".tmp") {
					tmp = append(tmp, p)
				}
				return nil
			})
			if len(tmp) > 0 {
				t.Errorf("temporary files left: %v", tmp)
			}
		})
	}
}

// TestFileListHidesTemporaryFiles checks that List on a local folder leaves out the temporary file
// of a write in progress (fileblob writes <key>.<hex nanoseconds>.tmp next to its target).
func TestFileListHidesTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.Put(context.Background(), "a/k", []byte("k"), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "k2.18a2b3c4d5e6f708.tmp"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := s.List(context.Background(), "", func(key string, _ int64) error { keys = append(keys, key); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, ",") != "a/k" {
		t.Errorf("List = %v; want [a/k]", keys)
	}
}

// TestS3Prefix checks that an s3 store lives under the URL's path inside the bucket.
func TestS3Prefix(t *testing.T) {
	if testing.Short() {
		t.Skip("a store on versitygw: long integration test; run without -short")
	}
	ctx := context.Background()
	b := emulators.S3(t)
	s := open(t, b.URL("team/run-7"))
	if _, err := s.PutOnce(ctx, "shards/part-00000.parquet", []byte("PAR1"), "", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "manifest.json", []byte("{}"), nil); err != nil {
		t.Fatal(err)
	}
	root := open(t, b.URL(""))
	for _, key := range []string{"team/run-7/manifest.json", "team/run-7/shards/part-00000.parquet"} {
		if ok, err := root.Exists(ctx, key); !ok || err != nil {
			t.Errorf("%s: exists=%v err=%v", key, ok, err)
		}
	}
	// versitygw's posix backend keeps the objects as plain files.
	if data, err := os.ReadFile(filepath.Join(b.Dir, "team", "run-7", "manifest.json")); err != nil || string(data) != "{}" {
		t.Errorf("manifest on the gateway's disk: %q, %v", data, err)
	}
}

// TestNoCloudSDK checks that importing package store (or its conformance suite) pulls in no cloud
// SDK: only store/drivers links the drivers in.
func TestNoCloudSDK(t *testing.T) {
	goTool := emulators.RequireTool(t, "go", "it lists the packages' dependencies")
	for _, pkg := range []string{"github.com/ndtrace/ndtrace/store", "github.com/ndtrace/ndtrace/store/storetest"} {
		out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "aws") || strings.Contains(dep, "azure") || strings.Contains(dep, "cloud.google") ||
				strings.HasPrefix(dep, "gocloud.dev/blob/") && !strings.HasPrefix(dep, "gocloud.dev/blob/driver") {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
}

// TestFileCopyLinks checks Copy in a local folder: the copy is a hard link to the source's file,
// with no metadata sidecar beside it and no temporary file left, and it replaces a file (and the
// sidecar) written at its key before.
func TestFileCopyLinks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := s.PutOnce(ctx, "pool/data/p.parquet", []byte("PAR1 one"), "application/vnd.apache.parquet", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutOnce(ctx, "data/q.parquet", []byte("PAR1 other"), "application/vnd.apache.parquet", nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"data/p.parquet", "data/q.parquet"} {
		if err := s.Copy(ctx, k, "pool/data/p.parquet"); err != nil {
			t.Fatal(err)
		}
		src, _ := os.Stat(filepath.Join(dir, "pool", "data", "p.parquet"))
		dst, err := os.Stat(filepath.Join(dir, filepath.FromSlash(k)))
		if err != nil || !os.SameFile(src, dst) {
			t.Errorf("%s is not a hard link to the pool's file: %v", k, err)
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(k)) + ".attrs"); !os.IsNotExist(err) {
			t.Errorf("%s has a metadata sidecar: %v", k, err)
		}
		if data, err := s.ReadAll(ctx, k); err != nil || string(data) != "PAR1 one" {
			t.Errorf("ReadAll(%s) = %q, %v", k, data, err)
		}
		// Holds has no metadata to go by here: it hashes the file.
		if same, err := s.Holds(ctx, k, 8, "ae60e7e7a2a3a8d5d9f09f98b8e6e9ea2b2d8b6a3e0f8ab71b1cf4fa7ad7e1c3"); err != nil || same {
			t.Errorf("Holds(%s, wrong sha256) = %v, %v", k, same, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "data"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "p.parquet q.parquet" {
		t.Errorf("data/ holds %v, want the two Parquet files and nothing else", names)
	}
	root, _ := os.ReadDir(dir)
	for _, e := range root {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
