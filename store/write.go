package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gocloud.dev/blob"
)

// uploadBuffer is the upload buffer of immutable writes: objects up to this size go up in one
// request, larger ones as a multipart (S3), resumable (GCS) or block (Azure) upload.
const uploadBuffer = 8 << 20

// PutOnce writes data under key unless the key exists, with a conditional write (IfNotExist), with
// the given content type and metadata plus "sha256" (the hex SHA-256 of data). If the key already
// holds the same bytes (by its sha256 metadata, or by hashing it when the backend kept no metadata)
// PutOnce succeeds without writing (created is false); if it holds other bytes the error wraps
// ErrConflict. It looks before writing (so a retry uploads nothing) and the write itself is
// conditional (so two writers racing for a key cannot both win). The object is readable only once
// complete: a failed or cancelled write leaves nothing.
//
// The check is atomic on S3, GCS, Azure and memory; on a local folder it is atomic only within one
// process (fileblob checks, then renames; the Store serializes conditional writes of a file in one
// process), so processes sharing a folder must write distinct keys.
func (s *Store) PutOnce(ctx context.Context, key string, data []byte, contentType string, metadata map[string]string) (created bool, err error) {
	digest := sha256Hex(data)
	md := make(map[string]string, len(metadata)+1)
	for k, v := range metadata {
		md[strings.ToLower(k)] = v
	}
	md["sha256"] = digest
	// A retry of a completed write finds the object and uploads nothing.
	switch same, err := s.Holds(ctx, key, int64(len(data)), digest); {
	case err == nil && same:
		return false, nil
	case err == nil:
		return false, s.conflict(key)
	case !IsNotExist(err):
		return false, err
	}
	opts := &blob.WriterOptions{
		ContentType: contentType,
		Metadata:    md,
		IfNotExist:  true,
		BufferSize:  uploadBuffer,
	}
	err = s.putObject(ctx, key, data, opts)
	if err == nil {
		return true, nil
	}
	if !IsExist(err) {
		return false, s.wrap("write", key, err)
	}
	same, err := s.Holds(ctx, key, int64(len(data)), digest)
	if err != nil {
		return false, err
	}
	if !same {
		return false, s.conflict(key)
	}
	return false, nil
}

// PutFirst writes data under key unless the key exists, with a conditional write (IfNotExist), with
// the given content type and the metadata "sha256" (the hex SHA-256 of data): the first writer
// wins. If the key already exists, PutFirst returns created=false and a nil error whatever the key
// holds (it compares nothing: use PutOnce for content-addressed objects). It looks before writing,
// and the write itself is conditional, so of writers racing for a key exactly one creates it. The
// object is readable only once complete. Atomicity is as for PutOnce.
func (s *Store) PutFirst(ctx context.Context, key string, data []byte, contentType string) (created bool, err error) {
	return s.putFirst(ctx, key, sha256Hex(data), contentType, func(opts *blob.WriterOptions) error {
		return s.putObject(ctx, key, data, opts)
	})
}

// PutFirstFrom is PutFirst for an object too large to hold whole in memory: write writes its
// bytes, those whose hex SHA-256 is digest (the caller hashed them before), as they are uploaded,
// a piece at a time. A write that fails, or whose bytes do not hash to digest, leaves nothing under
// key.
func (s *Store) PutFirstFrom(ctx context.Context, key, digest, contentType string, write func(io.Writer) error) (created bool, err error) {
	return s.putFirst(ctx, key, digest, contentType, func(opts *blob.WriterOptions) error {
		return s.putFrom(ctx, key, digest, write, opts)
	})
}

// putFirst is PutFirst with put writing the object (of hex SHA-256 digest) with the options given.
func (s *Store) putFirst(ctx context.Context, key, digest, contentType string, put func(*blob.WriterOptions) error) (bool, error) {
	switch ok, err := s.Exists(ctx, key); {
	case err != nil:
		return false, err
	case ok:
		return false, nil
	}
	err := put(&blob.WriterOptions{
		ContentType: contentType,
		Metadata:    map[string]string{"sha256": digest},
		IfNotExist:  true,
		BufferSize:  uploadBuffer,
	})
	switch {
	case err == nil:
		return true, nil
	case IsExist(err):
		return false, nil
	default:
		return false, s.wrap("write", key, err)
	}
}

// putFrom uploads what write writes under key, through a pipe. gocloud's writer commits what it
// got when it is closed unless its context is cancelled: a write that fails, or whose bytes do not
// hash to digest, cancels the upload's context before the pipe ends, so nothing is committed.
func (s *Store) putFrom(ctx context.Context, key, digest string, write func(io.Writer) error, opts *blob.WriterOptions) error {
	if s.local() {
		unlock := fileLocks.lock(filepath.Join(s.dir, filepath.FromSlash(key)))
		defer unlock()
	}
	if opts.ContentType == "" {
		opts.ContentType = "application/octet-stream" // Upload needs one; nothing to detect it from
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pr, pw := io.Pipe()
	var werr error // the write's own failure, set before done closes
	done := make(chan struct{})
	go func() {
		defer close(done)
		h := sha256.New()
		werr = write(io.MultiWriter(pw, h))
		if werr == nil && hex.EncodeToString(h.Sum(nil)) != digest {
			werr = fmt.Errorf("the bytes written do not hash to %s", digest)
		}
		if werr != nil {
			cancel(werr) // before the reader sees the end: the upload is abandoned, not committed
		}
		pw.CloseWithError(werr)
	}()
	err := s.bucket.Upload(ctx, key, pr, opts)
	pr.CloseWithError(errUploadEnded) // a write still going fails and returns
	<-done
	if werr != nil && !errors.Is(werr, errUploadEnded) {
		return werr // the cause, not the "context canceled" the upload saw of it
	}
	return err
}

// errUploadEnded is what a write still going gets once the upload has returned.
var errUploadEnded = errors.New("the upload ended")

// PutOptions are the options of Put. The zero value (or a nil *PutOptions) writes with no content
// type (the backend detects one) and no metadata.
type PutOptions struct {
	// ContentType is the object's MIME type, e.g. "application/json".
	ContentType string
	// Metadata is the object's user metadata (keys are stored lowercase).
	Metadata map[string]string
	// IfNotExist makes the write conditional: the backend refuses it, with an error for which
	// IsExist is true, if the key exists. PutOnce and PutFirst are the usual way to write once;
	// this raw conditional write is for checking a backend (store/storetest).
	IfNotExist bool
}

// Put writes data under key, replacing what is there (for objects that are not content-addressed:
// the manifest, statistics, rejects, the work area). opts may be nil. The object is replaced only
// once the write is complete: a failed or cancelled write leaves the key as it was.
func (s *Store) Put(ctx context.Context, key string, data []byte, opts *PutOptions) error {
	var wo *blob.WriterOptions
	if opts != nil {
		wo = &blob.WriterOptions{ContentType: opts.ContentType, Metadata: opts.Metadata, IfNotExist: opts.IfNotExist}
		if opts.IfNotExist {
			wo.BufferSize = uploadBuffer // as PutOnce and PutFirst write
		}
	}
	if err := s.putObject(ctx, key, data, wo); err != nil {
		return s.wrap("write", key, err)
	}
	return nil
}

// Delete removes key. Deleting a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.bucket.Delete(ctx, key); err != nil && !IsNotExist(err) {
		return s.wrap("delete", key, err)
	}
	return nil
}

// putObject writes data under key. On Azure it uses Bucket.Upload rather than WriteAll: in
// gocloud.dev v0.47.0 the azureblob writer panics (nil *io.PipeReader in Close) when an upload that
// went through Write fails, as a write refused by IfNotExist does; Upload takes another path, which
// gocloud uses only when no ContentMD5 is set (WriteAll always sets one). Elsewhere WriteAll also
// sends the MD5 of data for the server to check.
//
// On a local folder a conditional write (IfNotExist) holds a lock on the file for the whole write:
// fileblob checks that the file is missing and then renames its temporary file over it, with nothing
// in between to stop a second writer doing the same.
func (s *Store) putObject(ctx context.Context, key string, data []byte, opts *blob.WriterOptions) error {
	if s.local() && opts != nil && opts.IfNotExist {
		unlock := fileLocks.lock(filepath.Join(s.dir, filepath.FromSlash(key)))
		defer unlock()
	}
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

// Holds reports whether key holds size bytes with the given hex SHA-256 (by the object's sha256
// metadata, which PutOnce and PutFirst write, or by hashing it). A missing key gives an error for
// which IsNotExist is true.
func (s *Store) Holds(ctx context.Context, key string, size int64, digest string) (bool, error) {
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
	return sha256Hex(data) == digest, nil
}

func (s *Store) conflict(key string) error {
	return fmt.Errorf("store: write %s in %s: the key exists with different content: %w", key, s.url, ErrConflict)
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// fileLocks serializes the conditional writes of one file within this process, across Stores.
var fileLocks = keyedMutex{locks: map[string]*refMutex{}}

// keyedMutex is a set of mutexes by name, each kept only while someone holds or waits for it.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*refMutex
}

type refMutex struct {
	sync.Mutex
	refs int
}

// lock locks name and returns the function that unlocks it.
func (k *keyedMutex) lock(name string) (unlock func()) {
	k.mu.Lock()
	m := k.locks[name]
	if m == nil {
		m = &refMutex{}
		k.locks[name] = m
	}
	m.refs++
	k.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		k.mu.Lock()
		if m.refs--; m.refs == 0 {
			delete(k.locks, name)
		}
		k.mu.Unlock()
	}
}

// Copy makes dst hold the bytes of src, an object written once (PutOnce, PutFirst) that is never
// replaced: a dataset publishes its head's shards this way. On a local folder dst is a hard link
// to src's file (no space, and no metadata sidecar: dst has no metadata), or a copy where the
// filesystem cannot link; it appears whole, by a rename. Elsewhere it is a server-side copy, with
// src's metadata. A dst that already holds src (the same file, or the same size and sha256
// metadata) is left as it is; otherwise it is replaced.
func (s *Store) Copy(ctx context.Context, dst, src string) error {
	if s.local() {
		return s.copyLocal(ctx, dst, src)
	}
	si, err := s.Stat(ctx, src)
	if err != nil {
		return err
	}
	if sum, ok := si.Metadata["sha256"]; ok {
		if same, err := s.Holds(ctx, dst, si.Size, sum); err == nil && same {
			return nil
		}
	}
	if err := s.bucket.Copy(ctx, dst, src, nil); err != nil {
		return s.wrap("copy "+src+" to", dst, err)
	}
	return nil
}

// copyLocal is Copy in a local folder: a hard link made under a temporary name at the store's root
// (never beside dst, where a reader listing dst's folder would see it), renamed over dst.
func (s *Store) copyLocal(ctx context.Context, dst, src string) error {
	if _, err := s.Stat(ctx, src); err != nil {
		return err // not-exist as the store says it
	}
	sp := filepath.Join(s.dir, filepath.FromSlash(src))
	dp := filepath.Join(s.dir, filepath.FromSlash(dst))
	si, err := os.Stat(sp)
	if err != nil {
		return s.wrap("copy "+src+" to", dst, err)
	}
	if di, err := os.Stat(dp); err == nil && os.SameFile(si, di) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dp), 0o777); err != nil {
		return s.wrap("copy "+src+" to", dst, err)
	}
	tmp := filepath.Join(s.dir, fmt.Sprintf(".copy.%x.tmp", rand.Uint64()))
	if err := os.Link(sp, tmp); err != nil {
		if err := copyFile(sp, tmp); err != nil {
			os.Remove(tmp)
			return s.wrap("copy "+src+" to", dst, err)
		}
	}
	// A sidecar of an object written at dst before (gocloud's fileblob) would no longer describe
	// it: it goes first, so that a crash in between leaves no wrong metadata beside dst.
	if err := os.Remove(dp + ".attrs"); err != nil && !os.IsNotExist(err) {
		os.Remove(tmp)
		return s.wrap("copy "+src+" to", dst, err)
	}
	if err := os.Rename(tmp, dp); err != nil {
		os.Remove(tmp)
		return s.wrap("copy "+src+" to", dst, err)
	}
	return nil
}

// SameBytes reports whether keys a and b hold the same bytes: the same file (a hard link, Copy's
// in a local folder), or the same size and sha256 metadata, or else the same content hashed. A
// missing key gives an error for which IsNotExist is true.
func (s *Store) SameBytes(ctx context.Context, a, b string) (bool, error) {
	if s.local() {
		ai, aerr := os.Stat(filepath.Join(s.dir, filepath.FromSlash(a)))
		bi, berr := os.Stat(filepath.Join(s.dir, filepath.FromSlash(b)))
		if aerr == nil && berr == nil && os.SameFile(ai, bi) {
			return true, nil
		}
	}
	ai, err := s.Stat(ctx, a)
	if err != nil {
		return false, err
	}
	bi, err := s.Stat(ctx, b)
	if err != nil {
		return false, err
	}
	if ai.Size != bi.Size {
		return false, nil
	}
	as, aok := ai.Metadata["sha256"]
	bs, bok := bi.Metadata["sha256"]
	if aok && bok {
		return as == bs, nil
	}
	// No metadata on one side (a hard link's copy, fileblob with metadata=skip): hash both.
	ad, err := s.ReadAll(ctx, a)
	if err != nil {
		return false, err
	}
	bd, err := s.ReadAll(ctx, b)
	if err != nil {
		return false, err
	}
	return sha256Hex(ad) == sha256Hex(bd), nil
}

// copyFile copies the file src to the new file dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
