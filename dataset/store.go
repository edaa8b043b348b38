package dataset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"

	// The blob drivers a dataset URL may name: file, mem, s3, gs and azblob.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"
)

// Store is a dataset root in object storage: the folder or bucket prefix that holds manifest.json and
// shards/. Every key used by this package is relative to that root. A Store is safe for concurrent use.
type Store struct {
	url    string // the URL it was opened with, for messages (credentials redacted)
	bucket *blob.Bucket
	azure  bool // an azblob:// store: PutOnce writes with Bucket.Upload (see putObject)
}

// ErrConflict is returned (wrapped) when a shard or manifest already exists with different content.
// Datasets are immutable: a key, once written, is never overwritten.
var ErrConflict = errors.New("conflict")

// Open opens the dataset at rawURL:
//
//	./ndtrace-data, /abs/dir         a local folder (created if missing)
//	file:///abs/dir                  the same, as a URL (fileblob; query: see below)
//	mem://                           an in-memory bucket, private to this Store (tests)
//	s3://bucket/prefix?region=…      Amazon S3 or any S3-compatible server: add
//	                                 endpoint=http://host:port&use_path_style=true&disable_https=true
//	gs://bucket/prefix               Google Cloud Storage
//	azblob://container/prefix        Azure Blob Storage
//
// For object stores the dataset lives under the URL's path (the prefix) inside the bucket; query
// parameters go to the gocloud.dev driver (for example s3blob's region, endpoint, use_path_style,
// disable_https, profile, anonymous). The "prefix" and "key" parameters are refused: put the prefix in
// the path. For file URLs, create_dir and no_tmp_dir default to on (temporary files are written next to
// their target, so the final rename never crosses a filesystem); the other fileblob parameters
// (metadata, dir_file_mode, base_url, secret_key_path) pass through. Credentials come from each
// cloud's usual environment: see docs/dataset.md.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	if strings.TrimSpace(rawURL) == "" {
		return nil, errors.New("dataset: open: empty storage URL")
	}
	if !strings.Contains(rawURL, "://") {
		return openDir(rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("dataset: open %q: %w", rawURL, err)
	}
	shown := rawURL
	if _, ok := u.User.Password(); ok {
		shown = u.Redacted()
	}
	q := u.Query()
	if q.Has("prefix") || q.Has("key") {
		return nil, fmt.Errorf("dataset: open %s: the prefix goes in the URL's path, not in a prefix or key parameter", shown)
	}
	switch u.Scheme {
	case fileblob.Scheme:
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("dataset: open %s: a file URL needs an absolute path (file:///abs/dir), not host %q", shown, u.Host)
		}
		if u.Path == "" || u.Path == "/" {
			return nil, fmt.Errorf("dataset: open %s: a file URL needs a folder path, e.g. file:///srv/datasets/run-1", shown)
		}
		if !q.Has("create_dir") {
			q.Set("create_dir", "1")
		}
		if !q.Has("no_tmp_dir") {
			q.Set("no_tmp_dir", "1")
		}
		v := url.URL{Scheme: fileblob.Scheme, Path: u.Path, RawQuery: q.Encode()}
		b, err := blob.OpenBucket(ctx, v.String())
		if err != nil {
			return nil, fmt.Errorf("dataset: open %s: %w", shown, err)
		}
		return &Store{url: shown, bucket: b}, nil
	case "mem", "s3", "gs", "azblob":
		if u.Scheme != "mem" && u.Host == "" {
			return nil, fmt.Errorf("dataset: open %s: missing bucket name (%s://BUCKET/PREFIX)", shown, u.Scheme)
		}
		prefix := strings.Trim(u.Path, "/")
		if strings.Contains(prefix, "//") || hasDotSegment(prefix) {
			return nil, fmt.Errorf("dataset: open %s: bad prefix %q", shown, prefix)
		}
		bucketURL := u.Scheme + "://" + u.Host
		if u.RawQuery != "" {
			bucketURL += "?" + u.RawQuery
		}
		b, err := blob.OpenBucket(ctx, bucketURL)
		if err != nil {
			return nil, fmt.Errorf("dataset: open %s: %w", shown, err)
		}
		if prefix != "" {
			b = blob.PrefixedBucket(b, prefix+"/")
		}
		return &Store{url: shown, bucket: b, azure: u.Scheme == "azblob"}, nil
	default:
		return nil, fmt.Errorf("dataset: open %s: unsupported scheme %q (want file, mem, s3, gs or azblob)", shown, u.Scheme)
	}
}

// openDir opens a plain local path as a fileblob bucket, creating the folder.
func openDir(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: open %s: %w", path, err)
	}
	if err := os.MkdirAll(abs, 0o777); err != nil {
		return nil, fmt.Errorf("dataset: open %s: %w", path, err)
	}
	b, err := fileblob.OpenBucket(abs, &fileblob.Options{NoTempDir: true})
	if err != nil {
		return nil, fmt.Errorf("dataset: open %s: %w", path, err)
	}
	return &Store{url: path, bucket: b}, nil
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

// Bucket returns the underlying gocloud.dev bucket, already scoped to the dataset root.
func (s *Store) Bucket() *blob.Bucket { return s.bucket }

// Close releases the store's resources.
func (s *Store) Close() error {
	if err := s.bucket.Close(); err != nil {
		return fmt.Errorf("dataset: close %s: %w", s.url, err)
	}
	return nil
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Size int64
	// Metadata is the user metadata stored with the object (keys lowercase).
	Metadata map[string]string
}

// ReadAll returns the content of key.
func (s *Store) ReadAll(ctx context.Context, key string) ([]byte, error) {
	data, err := s.bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, s.wrap("read", key, err)
	}
	return data, nil
}

// readLimited returns the content of key, refusing objects larger than limit bytes.
func (s *Store) readLimited(ctx context.Context, key string, limit int64) ([]byte, error) {
	r, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, s.wrap("read", key, err)
	}
	defer r.Close()
	if r.Size() > limit {
		return nil, fmt.Errorf("dataset: read %s in %s: %d bytes, more than the limit of %d", key, s.url, r.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, s.wrap("read", key, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("dataset: read %s in %s: more than the limit of %d bytes", key, s.url, limit)
	}
	return data, nil
}

// Stat returns the size and metadata of key. A missing key gives an error for which IsNotExist is true.
func (s *Store) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	a, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return ObjectInfo{}, s.wrap("stat", key, err)
	}
	return ObjectInfo{Size: a.Size, Metadata: a.Metadata}, nil
}

// Exists reports whether key exists.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	ok, err := s.bucket.Exists(ctx, key)
	if err != nil {
		return false, s.wrap("stat", key, err)
	}
	return ok, nil
}

// PutOnce writes data under key unless the key exists, with a conditional write (IfNotExist), with
// the given content type and metadata plus "sha256" (the hex SHA-256 of data). If the key already
// holds the same bytes (by its sha256 metadata, or by hashing it when the backend kept no metadata)
// PutOnce succeeds without writing (created is false); if it holds other bytes the error wraps
// ErrConflict. It looks before writing (so a retry uploads nothing) and the write itself is
// conditional (so two writers racing for a key cannot both win). The object is readable only once
// complete: a failed or cancelled write leaves nothing.
//
// The check is atomic on S3, GCS, Azure and memory; on a local folder it is atomic only within one
// process (fileblob checks, then renames), so processes sharing a folder must write distinct keys.
func (s *Store) PutOnce(ctx context.Context, key string, data []byte, contentType string, metadata map[string]string) (created bool, err error) {
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	md := make(map[string]string, len(metadata)+1)
	for k, v := range metadata {
		md[strings.ToLower(k)] = v
	}
	md["sha256"] = digest
	// A retry of a completed write finds the object and uploads nothing.
	switch same, err := s.holds(ctx, key, int64(len(data)), digest); {
	case err == nil && same:
		return false, nil
	case err == nil:
		return false, fmt.Errorf("dataset: write %s in %s: the key exists with different content: %w", key, s.url, ErrConflict)
	case !IsNotExist(err):
		return false, err
	}
	opts := &blob.WriterOptions{
		ContentType: contentType,
		Metadata:    md,
		IfNotExist:  true,
		BufferSize:  8 << 20,
	}
	err = s.putObject(ctx, key, data, opts)
	if err == nil {
		return true, nil
	}
	if gcerrors.Code(err) != gcerrors.FailedPrecondition {
		return false, s.wrap("write", key, err)
	}
	same, err := s.holds(ctx, key, int64(len(data)), digest)
	if err != nil {
		return false, err
	}
	if !same {
		return false, fmt.Errorf("dataset: write %s in %s: the key exists with different content: %w", key, s.url, ErrConflict)
	}
	return false, nil
}

// Put writes data under key, replacing what is there (for objects that are not content-addressed:
// the manifest, statistics, rejects, the work area). Use it rather than Bucket().WriteAll, which
// panics on Azure when a write fails (see putObject).
func (s *Store) Put(ctx context.Context, key string, data []byte, opts *blob.WriterOptions) error {
	return s.putObject(ctx, key, data, opts)
}

// putObject writes data under key. On Azure it uses Bucket.Upload rather than WriteAll: in
// gocloud.dev v0.47.0 the azureblob writer panics (nil *io.PipeReader in Close) when an upload that
// went through Write fails, as a write refused by IfNotExist does; Upload takes another path, which
// gocloud uses only when no ContentMD5 is set (WriteAll always sets one). Elsewhere WriteAll also
// sends the MD5 of data for the server to check.
func (s *Store) putObject(ctx context.Context, key string, data []byte, opts *blob.WriterOptions) error {
	if !s.azure {
		return s.bucket.WriteAll(ctx, key, data, opts)
	}
	var o blob.WriterOptions
	if opts != nil {
		o = *opts
	}
	if o.ContentType == "" {
		o.ContentType = http.DetectContentType(data) // what WriteAll would have detected
	}
	return s.bucket.Upload(ctx, key, bytes.NewReader(data), &o)
}

// holds reports whether key holds size bytes with the given hex SHA-256.
func (s *Store) holds(ctx context.Context, key string, size int64, digest string) (bool, error) {
	info, err := s.Stat(ctx, key)
	if err != nil {
		return false, err
	}
	if info.Size != size {
		return false, nil
	}
	if got, ok := info.Metadata["sha256"]; ok {
		return got == digest, nil
	}
	// No metadata (fileblob with metadata=skip, or an object written by someone else): hash it.
	data, err := s.ReadAll(ctx, key)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]) == digest, nil
}

// IsNotExist reports whether err means that an object does not exist.
func IsNotExist(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

func (s *Store) wrap(op, key string, err error) error {
	return fmt.Errorf("dataset: %s %s in %s: %w", op, key, s.url, err)
}
