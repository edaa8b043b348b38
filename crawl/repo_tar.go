package crawl

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/store"
)

// maxTrailing bounds the bytes read after a tar archive's end-of-archive marker (normally zero
// padding to the next 10240-byte record).
const maxTrailing = 1 << 20

// Caps of what a tar archive holds besides its files (CheckoutLimits bounds those): past one, the
// repository is a reject naming the cap.
const (
	// maxEntryOverhead is what the archive's (uncompressed) stream may hold per entry its limits
	// allow besides the files' contents: a header, a PAX or long-name record, padding. The stream
	// is read up to CheckoutLimits.MaxBytes plus this much per entry, so that headers the
	// limits do not count (global headers, repeated folders) cannot make its work unbounded.
	maxEntryOverhead = 8 << 10
	// maxExtraEntries is how many entries an archive may hold beyond the files and folders its
	// limits count (global headers, a folder listed again).
	maxExtraEntries = 64
	// maxEntryName bounds an entry's name (and a link's target) in bytes (PATH_MAX), and
	// maxNameComponent one part of it (NAME_MAX): longer ones could not be created.
	maxEntryName     = 4096
	maxNameComponent = 255
)

// openTar opens the tarball r names: a plain path, a file URL (read from the file system), or a bucket
// URL (read from a store in f.Stores, or else opened with store.Open).
func (f *Fetcher) openTar(ctx context.Context, r Repo) (io.ReadCloser, error) {
	if !strings.Contains(r.URL, "://") {
		return openLocalTar(r, r.URL)
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, &RepoError{Repo: r, Reason: "bad URL"}
	}
	if strings.EqualFold(u.Scheme, "file") {
		return openLocalTar(r, u.Path)
	}
	st, key, closeStore, err := f.bucketOf(ctx, u)
	if err != nil {
		if u.RawQuery != "" && ctx.Err() == nil {
			// The parameters are the list's: a retry opens the same bucket the same way.
			return nil, &RepoError{Repo: r, Reason: "cannot open the bucket with this URL's parameters", Err: err}
		}
		return nil, fmt.Errorf("open the bucket of %s: %w", redactURL(r.URL), err)
	}
	rd, err := st.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		closeStore()
		if store.IsNotExist(err) {
			return nil, &RepoError{Repo: r, Reason: "archive not found", Err: err}
		}
		return nil, fmt.Errorf("read %s: %w", redactURL(r.URL), err)
	}
	return readCloser{rd, func() error { return errors.Join(rd.Close(), closeStore()) }}, nil
}

// storeName is a bucket URL without its query: scheme://host/path.
func storeName(u *url.URL) string { return strings.ToLower(u.Scheme) + "://" + u.Host + u.Path }

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

func openLocalTar(r Repo, p string) (io.ReadCloser, error) {
	f, err := os.Open(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &RepoError{Repo: r, Reason: "archive not found", Err: err}
	case err != nil:
		return nil, &RepoError{Repo: r, Reason: "unreadable archive: " + pathErrText(err), Err: err}
	}
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		f.Close()
		return nil, &RepoError{Repo: r, Reason: "archive is not a regular file"}
	}
	return f, nil
}

// resolveTar hashes a tarball's bytes.
func (f *Fetcher) resolveTar(ctx context.Context, r Repo) (string, error) {
	rc, err := f.openTar(ctx, r)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, rc}); err != nil {
		return "", fmt.Errorf("read %s: %w", redactURL(r.URL), err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkoutTar extracts a tarball into base/src, hashing its bytes as it goes, and checks the hash.
func (f *Fetcher) checkoutTar(ctx context.Context, r Resolved, base string, lim CheckoutLimits) (string, error) {
	rc, err := f.openTar(ctx, r.Repo)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	src := filepath.Join(base, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	h := sha256.New()
	br := bufio.NewReader(io.TeeReader(ctxReader{ctx, rc}, h))
	bad := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &RepoError{Repo: r.Repo, Reason: "bad archive: " + err.Error(), Err: err}
	}
	var ar io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return "", bad(err)
		}
		ar = gz
	}
	x := &extractor{repo: r.Repo, root: src, lim: lim}
	maxStream := lim.MaxBytes + int64(2*lim.MaxFiles+maxExtraEntries)*maxEntryOverhead
	capped := &cappedReader{r: ar, n: maxStream}
	if err := x.extract(ctx, tar.NewReader(capped), bad); err != nil {
		if capped.over {
			return "", x.fail("bad archive: its uncompressed stream exceeds %d bytes (the size limit plus %d bytes per entry)", maxStream, maxEntryOverhead)
		}
		return "", err
	}
	// Hash every byte: the padding after the end marker, then anything after the gzip stream.
	for _, rd := range []io.Reader{ar, br} {
		n, err := io.Copy(io.Discard, io.LimitReader(rd, maxTrailing+1))
		if err != nil {
			return "", bad(err)
		}
		if n > maxTrailing {
			return "", &RepoError{Repo: r.Repo, Reason: "bad archive: data after the end of the archive"}
		}
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != strings.ToLower(r.ContentHash) {
		return "", &RepoError{Repo: r.Repo, Reason: fmt.Sprintf("archive changed since it was resolved (sha256 %s, resolved %s)", sum, r.ContentHash)}
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	if len(entries) == 1 && entries[0].IsDir() {
		return filepath.Join(src, entries[0].Name()), nil
	}
	return src, nil
}

// cappedReader reads at most n bytes of r, then fails, setting over.
type cappedReader struct {
	r    io.Reader
	n    int64
	over bool
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.over = true
		return 0, errors.New("archive stream too large")
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

// extractor writes a tar archive's entries under root, refusing anything unsafe.
type extractor struct {
	repo    Repo
	root    string
	lim     CheckoutLimits
	files   int
	dirs    int
	entries int
	bytes   int64
}

func (x *extractor) fail(format string, args ...any) error {
	return &RepoError{Repo: x.repo, Reason: clip(fmt.Sprintf(format, args...), maxReason)}
}

// maxReason bounds a reason that holds an archive's names (a PAX name may be 1 MiB long).
const maxReason = 1000

// clip cuts s to at most n bytes, on a character boundary, marking the cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// extract writes every entry; bad turns a read error into the error to return.
func (x *extractor) extract(ctx context.Context, tr *tar.Reader, bad func(error) error) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return bad(err)
		}
		if x.entries++; x.entries > 2*x.lim.MaxFiles+maxExtraEntries {
			return x.fail("too many entries in archive: more than %d", 2*x.lim.MaxFiles+maxExtraEntries)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := x.cleanName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "" {
			if hdr.Typeflag == tar.TypeDir {
				continue // the archive's root
			}
			return x.fail("bad archive: entry %q has no name", hdr.Name)
		}
		if err := x.entry(ctx, tr, hdr, name, bad); err != nil {
			if nameTooLong(err) {
				// A name (or a link's target) longer than the file system takes is the
				// archive's, never something a retry fixes.
				return x.fail("name too long: %s", clip(name, 200))
			}
			return err
		}
	}
}

// entry writes one entry named name (cleaned).
func (x *extractor) entry(ctx context.Context, tr *tar.Reader, hdr *tar.Header, name string, bad func(error) error) error {
	switch hdr.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeGNUSparse, tar.TypeSymlink, tar.TypeLink:
	case tar.TypeChar, tar.TypeBlock:
		return x.fail("unsupported entry in archive: %s (device)", name)
	case tar.TypeFifo:
		return x.fail("unsupported entry in archive: %s (FIFO)", name)
	default:
		return x.fail("unsupported entry in archive: %s (type %q)", name, hdr.Typeflag)
	}
	out, err := x.parent(name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if fi, err := os.Lstat(out); err == nil {
			if fi.IsDir() {
				return nil
			}
			return x.fail("duplicate entry in archive: %s", name)
		}
		if err := x.countDir(); err != nil {
			return err
		}
		return os.Mkdir(out, 0o755)
	case tar.TypeSymlink:
		if err := x.count(name, 0); err != nil {
			return err
		}
		if hdr.Linkname == "" {
			return x.fail("bad archive: symlink %s has no target", name)
		}
		if len(hdr.Linkname) > maxEntryName {
			return x.fail("bad archive: symlink %s has a target longer than %d bytes", name, maxEntryName)
		}
		if filepath.IsAbs(hdr.Linkname) {
			return x.fail("symlink escapes checkout: %s -> %s", name, hdr.Linkname)
		}
		if err := os.Symlink(hdr.Linkname, out); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return x.fail("duplicate entry in archive: %s", name)
			}
			return err
		}
		return nil
	case tar.TypeLink:
		target, err := x.cleanName(hdr.Linkname)
		if err != nil {
			return err
		}
		from, err := x.regular(target)
		if err != nil {
			return x.fail("hard link %s -> %s: %v", name, hdr.Linkname, err)
		}
		in, err := os.OpenFile(from, os.O_RDONLY|oNoFollow, 0)
		if err != nil {
			return err
		}
		defer in.Close()
		st, err := in.Stat()
		if err != nil {
			return err
		}
		return x.write(ctx, name, out, st.Mode().Perm(), st.Size(), in, func(err error) error { return err })
	default: // regular
		mode := fs.FileMode(0o644)
		if hdr.Mode&0o111 != 0 {
			mode = 0o755
		}
		return x.write(ctx, name, out, mode, hdr.Size, tr, bad)
	}
}

// write creates the regular file out (for entry name) with size bytes from r.
func (x *extractor) write(ctx context.Context, name, out string, mode fs.FileMode, size int64, r io.Reader, bad func(error) error) error {
	if err := x.count(name, size); err != nil {
		return err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, mode)
	if errors.Is(err, fs.ErrExist) {
		return x.fail("duplicate entry in archive: %s", name)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(f, io.LimitReader(ctxReader{ctx, r}, size))
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return bad(err)
	}
	return f.Close()
}

// count counts one file of size bytes against the limits.
func (x *extractor) count(name string, size int64) error {
	x.files++
	x.bytes += size
	switch {
	case x.files > x.lim.MaxFiles:
		return x.fail("too many files: %d > %d", x.files, x.lim.MaxFiles)
	case x.bytes > x.lim.MaxBytes:
		return x.fail("too large: %d > %d bytes", x.bytes, x.lim.MaxBytes)
	}
	return nil
}

func (x *extractor) countDir() error {
	x.dirs++
	if x.dirs > x.lim.MaxFiles {
		return x.fail("too many directories: %d > %d", x.dirs, x.lim.MaxFiles)
	}
	return nil
}

// cleanName checks an entry's name (or a hard link's target) and cleans it: "" is the archive root.
func (x *extractor) cleanName(name string) (string, error) {
	if len(name) > maxEntryName {
		return "", x.fail("bad archive: a name longer than %d bytes: %.100s...", maxEntryName, name)
	}
	if strings.HasPrefix(name, "/") {
		return "", x.fail("absolute path in archive: %s", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", x.fail("path escapes archive: %s", name)
		}
		if len(part) > maxNameComponent {
			return "", x.fail("bad archive: a name with a part longer than %d bytes: %.100s...", maxNameComponent, name)
		}
	}
	if strings.ContainsRune(name, 0) {
		return "", x.fail("bad archive: NUL in name %q", name)
	}
	clean := path.Clean(name)
	if clean == "." {
		return "", nil
	}
	return clean, nil
}

// parent makes the folders that hold entry name (real folders only: never through a symlink or a
// file) and returns the entry's path.
func (x *extractor) parent(name string) (string, error) {
	parts := strings.Split(name, "/")
	cur := x.root
	for i, part := range parts[:len(parts)-1] {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := x.countDir(); err != nil {
				return "", err
			}
			if err := os.Mkdir(cur, 0o755); err != nil {
				return "", err
			}
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink != 0:
			return "", x.fail("archive entry %s goes through symlink %s", name, strings.Join(parts[:i+1], "/"))
		case !fi.IsDir():
			return "", x.fail("archive entry %s lies inside file %s", name, strings.Join(parts[:i+1], "/"))
		}
	}
	return filepath.Join(x.root, filepath.FromSlash(name)), nil
}

// regular returns the path of the already extracted regular file name, reached without symlinks.
func (x *extractor) regular(name string) (string, error) {
	parts := strings.Split(name, "/")
	cur := x.root
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case err != nil:
			return "", errors.New("target is not an earlier file of the archive")
		case fi.Mode()&fs.ModeSymlink != 0:
			return "", errors.New("target goes through a symlink")
		case i == len(parts)-1 && !fi.Mode().IsRegular():
			return "", errors.New("target is not a regular file")
		}
	}
	return cur, nil
}
