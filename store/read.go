package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"

	"gocloud.dev/blob"
)

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Size int64
	// Metadata is the user metadata stored with the object (keys lowercase).
	Metadata map[string]string
}

// ReadAll returns the content of key. A missing key gives an error for which IsNotExist is true.
func (s *Store) ReadAll(ctx context.Context, key string) ([]byte, error) {
	data, err := s.bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, s.wrap("read", key, err)
	}
	return data, nil
}

// ReadLimit returns the content of key, refusing objects larger than limit bytes (for objects read
// whole into memory whose size a writer controls: manifests, statistics). A missing key gives an
// error for which IsNotExist is true.
func (s *Store) ReadLimit(ctx context.Context, key string, limit int64) ([]byte, error) {
	r, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, s.wrap("read", key, err)
	}
	defer r.Close()
	if r.Size() > limit {
		return nil, fmt.Errorf("store: read %s in %s: %d bytes, more than the limit of %d", key, s.url, r.Size(), limit)
	}
	// Into a buffer of the object's size, and the room ReadFrom asks for to see the end: io.ReadAll
	// would grow one by doubling, holding up to three times the object at once.
	buf := bytes.NewBuffer(make([]byte, 0, max(r.Size(), 0)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, s.wrap("read", key, err)
	}
	data := buf.Bytes()
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("store: read %s in %s: more than the limit of %d bytes", key, s.url, limit)
	}
	return data, nil
}

// NewRangeReader returns a reader of length bytes of key from offset on; a negative length reads to
// the end of the object. A range that extends past the end is cut short. A missing key gives an
// error for which IsNotExist is true. The caller closes the reader.
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	r, err := s.bucket.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, s.wrap("read", key, err)
	}
	return &rangeReader{r: r, s: s, key: key}, nil
}

// rangeReader wraps the errors of a blob.Reader (other than io.EOF) with the key and the store.
type rangeReader struct {
	r   *blob.Reader
	s   *Store
	key string
}

func (rr *rangeReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = rr.s.wrap("read", rr.key, err)
	}
	return n, err
}

func (rr *rangeReader) Close() error {
	if err := rr.r.Close(); err != nil {
		return rr.s.wrap("read", rr.key, err)
	}
	return nil
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

// List calls fn with every key that starts with prefix (a plain string prefix relative to the
// store's root: "a/" lists a/1 and a/2 but not ab/x; "" lists everything) and its size, in lexical
// order of the keys' bytes. It stops at fn's first error and returns that error as it is. Object
// stores are listed page by page as fn goes; a local folder is walked whole first (fileblob walks in
// directory order, not key order), and the temporary files of writes in progress are left out.
func (s *Store) List(ctx context.Context, prefix string, fn func(key string, size int64) error) error {
	if s.local() {
		return s.listLocal(ctx, prefix, fn)
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &opError{fmt.Sprintf("store: list %q in %s", prefix, s.url), err}
		}
		if obj.IsDir {
			continue
		}
		if err := fn(obj.Key, obj.Size); err != nil {
			return err
		}
	}
}

// fileblobTemp matches the name of a temporary file fileblob writes next to its target (with
// no_tmp_dir): the target's name, a dot, the time in hexadecimal nanoseconds, ".tmp".
var fileblobTemp = regexp.MustCompile(`.\.[0-9a-f]+\.tmp$`)

// listLocal lists a local folder whole, then calls fn in key order (see List). (Not ListPage with a
// huge page size: fileblob allocates a slice of the page size's capacity up front.)
func (s *Store) listLocal(ctx context.Context, prefix string, fn func(key string, size int64) error) error {
	var objs []*blob.ListObject
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &opError{fmt.Sprintf("store: list %q in %s", prefix, s.url), err}
		}
		if !o.IsDir && !fileblobTemp.MatchString(path.Base(o.Key)) {
			objs = append(objs, o)
		}
	}
	slices.SortFunc(objs, func(a, b *blob.ListObject) int { return strings.Compare(a.Key, b.Key) })
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return &opError{fmt.Sprintf("store: list %q in %s", prefix, s.url), err}
		}
		if err := fn(o.Key, o.Size); err != nil {
			return err
		}
	}
	return nil
}

// ListedObject is one object of a page of a listing (ListPage): its key and size.
type ListedObject struct {
	Key  string
	Size int64
}

// ListPage lists one page of at most size objects whose keys start with prefix (as List), from
// the page token (nil or empty: the first page), and returns them with the token of the next page
// (nil after the last page). Object stores list in lexical order of the keys' bytes; a local
// folder in fileblob's order (a walk of its folders), which is the same from call to call. The
// same token gives the same page of an unchanged store, so a caller that pages through a listing
// of any length keeps only one page and a token. Temporary files of writes in progress are left
// out of a local folder's pages (a page may then hold fewer than size objects).
func (s *Store) ListPage(ctx context.Context, prefix string, token []byte, size int) ([]ListedObject, []byte, error) {
	if size <= 0 {
		return nil, nil, fmt.Errorf("store: list %q in %s: page size %d, want a positive number", prefix, s.url, size)
	}
	if len(token) == 0 {
		token = blob.FirstPageToken
	}
	objs, next, err := s.bucket.ListPage(ctx, token, size, &blob.ListOptions{Prefix: prefix})
	if err != nil {
		return nil, nil, &opError{fmt.Sprintf("store: list %q in %s", prefix, s.url), err}
	}
	out := make([]ListedObject, 0, len(objs))
	for _, o := range objs {
		if o.IsDir || s.local() && fileblobTemp.MatchString(path.Base(o.Key)) {
			continue
		}
		out = append(out, ListedObject{Key: o.Key, Size: o.Size})
	}
	if len(next) == 0 {
		next = nil
	}
	return out, next, nil
}

// ReaderAt is an io.ReaderAt over one object: each ReadAt is a range read of the store (a Parquet
// reader reads a file's footer, then the pages it needs, without reading the whole object).
type ReaderAt struct {
	ctx  context.Context
	s    *Store
	key  string
	size int64
}

// NewReaderAt returns a ReaderAt over key, whose reads are made under ctx, and the object's size.
// A missing key gives an error for which IsNotExist is true.
func (s *Store) NewReaderAt(ctx context.Context, key string) (*ReaderAt, error) {
	a, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return nil, s.wrap("stat", key, err)
	}
	return &ReaderAt{ctx: ctx, s: s, key: key, size: a.Size}, nil
}

// Size returns the object's size when the ReaderAt was made.
func (r *ReaderAt) Size() int64 { return r.size }

// ReadAt reads len(p) bytes from offset off, as io.ReaderAt does: fewer only at the object's end
// (with io.EOF) or on an error.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("store: read %s in %s: negative offset %d", r.key, r.s.url, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), r.size-off)
	rd, err := r.s.bucket.NewRangeReader(r.ctx, r.key, off, want, nil)
	if err != nil {
		return 0, r.s.wrap("read", r.key, err)
	}
	defer rd.Close()
	n, err := io.ReadFull(rd, p[:want])
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return n, io.EOF // the object shrank since
		}
		return n, r.s.wrap("read", r.key, err)
	}
	if int64(n) < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}
