package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/emulators"
	"github.com/ndtrace/ndtrace/store"
)

// TestCheckRoot checks that CheckRoot tells a store whose folder or bucket is missing (ErrNoRoot)
// from one that exists, empty or not: a local folder, memory, and a real S3 server's bucket.
func TestCheckRoot(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ds")
	st := open(t, dir) // creates the folder
	if err := st.CheckRoot(ctx); err != nil {
		t.Errorf("empty folder: %v", err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := st.CheckRoot(ctx); !errors.Is(err, store.ErrNoRoot) {
		t.Errorf("removed folder: %v, want ErrNoRoot", err)
	}
	if err := open(t, "mem://").CheckRoot(ctx); err != nil {
		t.Errorf("memory: %v", err)
	}
	if testing.Short() {
		return // the S3 server is a long integration test
	}
	b := emulators.S3(t)
	if err := open(t, b.URL("no/such/prefix")).CheckRoot(ctx); err != nil {
		t.Errorf("S3 bucket, empty prefix: %v", err)
	}
	missing := strings.Replace(b.URL("p"), "s3://"+emulators.BucketName+"/", "s3://no-such-bucket/", 1)
	if err := open(t, missing).CheckRoot(ctx); !errors.Is(err, store.ErrNoRoot) {
		t.Errorf("S3, missing bucket: %v, want ErrNoRoot", err)
	}
}
