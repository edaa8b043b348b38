// Package store is ndtrace's object storage: a folder or a bucket prefix (S3, GCS, Azure Blob, memory)
// behind one small API over gocloud.dev/blob, with immutable writes (PutOnce, PutFirst), plain
// writes, reads, listing and deletion. Datasets, repository tarballs and the pipeline's work area
// live in stores.
//
// Package store registers no blob driver, so importing it pulls in no cloud SDK. A program opens a
// URL only if the driver of its scheme is linked in: binaries and tests import
// github.com/ndtrace/ndtrace/store/drivers for its side effects (all five drivers), or the single
// gocloud.dev/blob driver they need. Package store/storetest is the conformance suite every kind of
// store passes.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Store is a root in object storage: a local folder, or a prefix inside a bucket. Every key is
// relative to that root. A Store is safe for concurrent use.
type Store struct {
	url    string // the URL it was opened with, for messages (credentials redacted)
	bucket *blob.Bucket
	azure  bool   // an azblob:// store: writes go through Bucket.Upload (see putObject)
	dir    string // a local store: its absolute folder (conditional writes lock, see putObject); else ""
}

// ErrConflict is returned (wrapped) when PutOnce finds a key that already holds different content.
// Objects written with PutOnce are immutable: a key, once written, is never overwritten.
var ErrConflict = errors.New("conflict")

// driversPackage is the package that links in every blob driver Open knows.
const driversPackage = "github.com/ndtrace/ndtrace/store/drivers"

// Open opens the store at rawURL:
//
//	./ndtrace-data, /abs/dir         a local folder (created if missing)
//	file:///abs/dir                  the same, as a URL (fileblob; query: see below)
//	mem://                           an in-memory bucket, private to this Store (tests)
//	s3://bucket/prefix?region=…      Amazon S3 or any S3-compatible server: add
//	                                 endpoint=http://host:port&use_path_style=true&disable_https=true
//	gs://bucket/prefix               Google Cloud Storage
//	azblob://container/prefix        Azure Blob Storage
//
// For object stores the store's root is the URL's path (the prefix) inside the bucket; query
// parameters go to the gocloud.dev driver (for example s3blob's region, endpoint, use_path_style,
// disable_https, profile, anonymous). The "prefix" and "key" parameters are refused: put the prefix in
// the path. For local folders (plain paths and file URLs), create_dir and no_tmp_dir default to on
// (temporary files are written next to their target, so the final rename never crosses a
// filesystem); the other fileblob parameters (metadata, dir_file_mode, base_url, secret_key_path)
// pass through. Credentials come from each cloud's usual environment: see docs/dataset.md.
//
// The driver of the URL's scheme must be linked in (see the package comment); local folders need
// the file driver too.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	if strings.TrimSpace(rawURL) == "" {
		return nil, errors.New("store: open: empty storage URL")
	}
	if !strings.Contains(rawURL, "://") {
		return openDir(ctx, rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store: open %q: %w", rawURL, err)
	}
	shown := rawURL
	if _, ok := u.User.Password(); ok {
		shown = u.Redacted()
	}
	q := u.Query()
	if q.Has("prefix") || q.Has("key") {
		return nil, fmt.Errorf("store: open %s: the prefix goes in the URL's path, not in a prefix or key parameter", shown)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("store: open %s: a file URL needs an absolute path (file:///abs/dir), not host %q", shown, u.Host)
		}
		if u.Path == "" || u.Path == "/" {
			return nil, fmt.Errorf("store: open %s: a file URL needs a folder path, e.g. file:///srv/datasets/run-1", shown)
		}
		return openFolder(ctx, shown, filepath.Clean(u.Path), q)
	case "mem", "s3", "gs", "azblob":
		if u.Scheme != "mem" && u.Host == "" {
			return nil, fmt.Errorf("store: open %s: missing bucket name (%s://BUCKET/PREFIX)", shown, u.Scheme)
		}
		prefix := strings.Trim(u.Path, "/")
		if strings.Contains(prefix, "//") || hasDotSegment(prefix) {
			return nil, fmt.Errorf("store: open %s: bad prefix %q", shown, prefix)
		}
		bucketURL := u.Scheme + "://" + u.Host
		if u.RawQuery != "" {
			bucketURL += "?" + u.RawQuery
		}
		b, err := openBucket(ctx, shown, u.Scheme, bucketURL)
		if err != nil {
			return nil, err
		}
		if prefix != "" {
			b = blob.PrefixedBucket(b, prefix+"/")
		}
		return &Store{url: shown, bucket: b, azure: u.Scheme == "azblob"}, nil
	default:
		return nil, fmt.Errorf("store: open %s: unsupported scheme %q (want file, mem, s3, gs or azblob)", shown, u.Scheme)
	}
}

// openDir opens a plain local path: the folder, made absolute, as a file URL with no query.
func openDir(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return openFolder(ctx, path, abs, url.Values{})
}

// openFolder opens the local folder dir (absolute and clean) with the fileblob parameters in q,
// defaulting create_dir and no_tmp_dir to on. shown names the store in messages.
func openFolder(ctx context.Context, shown, dir string, q url.Values) (*Store, error) {
	if !q.Has("create_dir") {
		q.Set("create_dir", "1")
	}
	if !q.Has("no_tmp_dir") {
		q.Set("no_tmp_dir", "1")
	}
	v := url.URL{Scheme: "file", Path: filepath.ToSlash(dir), RawQuery: q.Encode()}
	b, err := openBucket(ctx, shown, "file", v.String())
	if err != nil {
		return nil, err
	}
	return &Store{url: shown, bucket: b, dir: dir}, nil
}

// openBucket opens bucketURL through gocloud.dev's default URL mux, saying which package to import
// when no driver for scheme is linked in.
func openBucket(ctx context.Context, shown, scheme, bucketURL string) (*blob.Bucket, error) {
	if !blob.DefaultURLMux().ValidBucketScheme(scheme) {
		return nil, fmt.Errorf("store: open %s: no blob driver for %q is linked into this program (import %s)", shown, scheme, driversPackage)
	}
	b, err := blob.OpenBucket(ctx, bucketURL)
	if err != nil {
		return nil, &opError{"store: open " + shown, err}
	}
	return b, nil
}

func hasDotSegment(p string) bool {
	for _, s := range strings.Split(p, "/") {
		if s == "." || s == ".." {
			return true
		}
	}
	return false
}

// URL returns the URL or path the store was opened with (any user:password redacted).
func (s *Store) URL() string { return s.url }

// Close releases the store's resources.
func (s *Store) Close() error {
	if err := s.bucket.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.url, err)
	}
	return nil
}

// IsNotExist reports whether err means that an object does not exist.
func IsNotExist(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

// IsExist reports whether err means that a conditional write (PutOptions.IfNotExist) was refused
// because the key exists.
func IsExist(err error) bool { return gcerrors.Code(err) == gcerrors.FailedPrecondition }

func (s *Store) wrap(op, key string, err error) error {
	return &opError{fmt.Sprintf("store: %s %s in %s", op, key, s.url), err}
}

// opError is the error of an operation on a store: its message names the operation, the key and
// the store; Unusable reads only these, never the errors of code that merely holds a store.
type opError struct {
	msg string
	err error
}

func (e *opError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// local reports whether the store is a local folder.
func (s *Store) local() bool { return s.dir != "" }

// Local reports whether the store is a local folder (where Copy makes hard links).
func (s *Store) Local() bool { return s.local() }
