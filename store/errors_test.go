package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/emulators"
	"github.com/ndtrace/ndtrace/store"
)

// TestUnusableFolder checks store.Unusable on a real folder's failures: a file where a folder is
// expected (for every user, root included), a folder of mode 0555 (not for root, who writes in it
// all the same), and a missing object, which is not the store's fault.
func TestUnusableFolder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.Put(ctx, "work", []byte("a file"), nil); err != nil {
		t.Fatal(err)
	}
	err := s.Put(ctx, "work/runs/x", []byte("x"), nil)
	if reason, ok := store.Unusable(err); !ok || !strings.HasPrefix(reason, "a file stands where a folder is expected") {
		t.Errorf("a file in the way: Unusable(%v) = %q, %v", err, reason, ok)
	}
	_, err = s.ReadAll(ctx, "missing")
	if reason, ok := store.Unusable(err); ok || !store.IsNotExist(err) {
		t.Errorf("a missing object: Unusable(%v) = %q, %v; want not unusable, and not found", err, reason, ok)
	}
	if _, err := store.Open(ctx, filepath.Join(dir, "work", "ds")); err == nil {
		t.Error("a store under a file opened")
	} else if reason, ok := store.Unusable(err); !ok || !strings.HasPrefix(reason, "a file stands where a folder is expected") {
		t.Errorf("open under a file: Unusable(%v) = %q, %v", err, reason, ok)
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		err := open(t, ro).Put(ctx, "k", []byte("x"), nil)
		if reason, ok := store.Unusable(err); !ok || !strings.HasPrefix(reason, "permission denied") {
			t.Errorf("a read-only folder: Unusable(%v) = %q, %v", err, reason, ok)
		}
	}
	if _, ok := store.Unusable(os.ErrPermission); ok {
		t.Error("an error of no store operation is taken as the store's")
	}
}

// TestUnusableS3 checks store.Unusable on a real S3 server's answers: a missing bucket and an
// invalid bucket name cannot be used; an endpoint nothing listens on may be an outage, and is not
// called unusable.
func TestUnusableS3(t *testing.T) {
	if testing.Short() {
		t.Skip("S3 server: long integration test; run without -short")
	}
	ctx := context.Background()
	b := emulators.S3(t)
	endpoint, closed := b.Endpoint(), emulators.ClosedEndpoint(t)
	for _, tc := range []struct {
		name, url, reason string
	}{
		{"missing bucket", emulators.S3URL("no-such-bucket", "ds", endpoint), "the bucket does not exist"},
		{"invalid bucket name", emulators.S3URL("Bad_Bucket", "ds", endpoint), "the bucket's name is invalid"},
		{"closed port", emulators.S3URL(emulators.BucketName, "ds", closed), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := open(t, tc.url).Put(ctx, "work/probe", []byte("x"), nil)
			if err == nil {
				t.Fatal("written")
			}
			reason, ok := store.Unusable(err)
			if ok != (tc.reason != "") || !strings.HasPrefix(reason, tc.reason) {
				t.Errorf("Unusable(%v) = %q, %v; want %q", err, reason, ok, tc.reason)
			}
		})
	}
}
