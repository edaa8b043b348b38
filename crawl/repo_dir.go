package crawl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// resolveDir hashes a local directory's contents.
func resolveDir(ctx context.Context, r Repo) (string, error) {
	return copyTree(ctx, r, r.URL, "", nil)
}

// checkoutDir copies a local directory into base/src and checks that its contents are still the
// resolved ones.
func checkoutDir(ctx context.Context, r Resolved, base string, lim CheckoutLimits) (string, error) {
	dst := filepath.Join(base, "src")
	if err := os.Mkdir(dst, 0o755); err != nil {
		return "", err
	}
	sum, err := copyTree(ctx, r.Repo, r.URL, dst, &lim)
	if err != nil {
		return "", err
	}
	if sum != strings.ToLower(r.ContentHash) {
		return "", &RepoError{Repo: r.Repo, Reason: "directory changed since it was resolved"}
	}
	return dst, nil
}

// copyTree hashes the tree at src (see Fetcher.Resolve for what counts) and, if dst is not empty,
// copies it into the existing folder dst within lim. Special files are refused.
func copyTree(ctx context.Context, r Repo, src, dst string, lim *CheckoutLimits) (string, error) {
	st, err := os.Stat(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", &RepoError{Repo: r, Reason: "directory not found", Err: err}
	case err != nil:
		return "", &RepoError{Repo: r, Reason: "unreadable directory: " + pathErrText(err), Err: err}
	case !st.IsDir():
		return "", &RepoError{Repo: r, Reason: "not a directory"}
	}
	root, err := filepath.EvalSymlinks(src)
	if err != nil {
		return "", &RepoError{Repo: r, Reason: "unreadable directory: " + pathErrText(err), Err: err}
	}
	c := &treeCopier{ctx: ctx, repo: r, dst: dst, lim: lim, h: sha256.New()}
	if err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		rel, relErr := filepath.Rel(root, p)
		if relErr != nil {
			return relErr
		}
		return c.visit(p, filepath.ToSlash(rel), d, err)
	}); err != nil {
		return "", err
	}
	return hex.EncodeToString(c.h.Sum(nil)), nil
}

// treeCopier hashes, and optionally copies, one tree.
type treeCopier struct {
	ctx   context.Context
	repo  Repo
	dst   string
	lim   *CheckoutLimits
	h     hash.Hash
	files int
	dirs  int
	bytes int64
}

// field writes a length-prefixed field to the hash, so no two trees hash alike.
func (c *treeCopier) field(s string) { fmt.Fprintf(c.h, "%d:%s", len(s), s) }

func (c *treeCopier) fail(format string, args ...any) error {
	return &RepoError{Repo: c.repo, Reason: fmt.Sprintf(format, args...)}
}

func (c *treeCopier) visit(p, rel string, d fs.DirEntry, err error) error {
	if ctxErr := c.ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if err != nil {
		return &RepoError{Repo: c.repo, Reason: fmt.Sprintf("unreadable: %s: %s", rel, pathErrText(err)), Err: err}
	}
	if rel == "." {
		return nil
	}
	if d.Name() == ".git" {
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	}
	out := filepath.Join(c.dst, filepath.FromSlash(rel))
	switch t := d.Type(); {
	case t.IsDir():
		c.dirs++
		if c.lim != nil && c.dirs > c.lim.MaxFiles {
			return c.fail("too many directories: %d > %d", c.dirs, c.lim.MaxFiles)
		}
		c.field("d")
		c.field(rel)
		if c.dst != "" {
			return os.Mkdir(out, 0o755)
		}
	case t.IsRegular():
		info, err := d.Info()
		if err != nil {
			return c.fail("unreadable: %s: %s", rel, pathErrText(err))
		}
		if err := c.countFile(info.Size()); err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		c.field("f")
		c.field(rel)
		c.field(strconv.FormatUint(uint64(mode), 8))
		c.field(strconv.FormatInt(info.Size(), 10))
		return c.copyFile(p, out, rel, mode, info.Size())
	case t&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return c.fail("unreadable: %s: %s", rel, pathErrText(err))
		}
		if err := c.countFile(0); err != nil {
			return err
		}
		c.field("l")
		c.field(rel)
		c.field(target)
		if c.dst != "" {
			return os.Symlink(target, out)
		}
	default:
		return c.fail("unsupported file type: %s (%s)", rel, typeName(t))
	}
	return nil
}

// countFile counts one file of size bytes against the limits.
func (c *treeCopier) countFile(size int64) error {
	c.files++
	c.bytes += size
	switch {
	case c.lim == nil:
	case c.files > c.lim.MaxFiles:
		return c.fail("too many files: %d > %d", c.files, c.lim.MaxFiles)
	case c.bytes > c.lim.MaxBytes:
		return c.fail("too large: %d > %d bytes", c.bytes, c.lim.MaxBytes)
	}
	return nil
}

// copyFile hashes the file at p (size bytes) and copies it to out if copying.
func (c *treeCopier) copyFile(p, out, rel string, mode fs.FileMode, size int64) error {
	in, err := os.OpenFile(p, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return c.fail("unreadable: %s: %s", rel, pathErrText(err))
	}
	defer in.Close()
	var w io.Writer = c.h
	var f *os.File
	if c.dst != "" {
		f, err = os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		defer f.Close()
		w = io.MultiWriter(c.h, f)
	}
	n, err := io.Copy(w, io.LimitReader(ctxReader{c.ctx, in}, size+1))
	if err != nil {
		if c.ctx.Err() != nil {
			return c.ctx.Err()
		}
		return c.fail("unreadable: %s: %s", rel, pathErrText(err))
	}
	if n != size {
		return c.fail("file changed while read: %s", rel)
	}
	if f != nil {
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// scanTree counts the files and bytes under dir within lim and checks every symlink: one whose
// target resolves outside dir fails the repository.
func scanTree(ctx context.Context, r Repo, dir string, lim CheckoutLimits) (files int, total int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch t := d.Type(); {
		case t.IsDir():
			return nil
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			escapes, err := linkEscapes(dir, rel)
			if err != nil {
				return err
			}
			if escapes {
				return &RepoError{Repo: r, Reason: fmt.Sprintf("symlink escapes checkout: %s -> %s", rel, target)}
			}
		default:
			return &RepoError{Repo: r, Reason: fmt.Sprintf("unsupported file type: %s (%s)", rel, typeName(t))}
		}
		files++
		switch {
		case files > lim.MaxFiles:
			return &RepoError{Repo: r, Reason: fmt.Sprintf("too many files: %d > %d", files, lim.MaxFiles)}
		case total > lim.MaxBytes:
			return &RepoError{Repo: r, Reason: fmt.Sprintf("too large: %d > %d bytes", total, lim.MaxBytes)}
		}
		return nil
	})
	return files, total, err
}

// maxLinkHops bounds how many symlinks one resolution follows (Linux gives up after 40).
const maxLinkHops = 255

// linkEscapes reports whether following the symlink at rel (slash-separated, relative to root, in a
// real directory) ever leaves root, following chains of links as the kernel would. Components that
// do not exist are taken lexically. A chain too long to resolve is not an escape: the kernel gives
// up on it too.
func linkEscapes(root, rel string) (bool, error) {
	parts := strings.Split(rel, "/")
	stack := append([]string(nil), parts[:len(parts)-1]...) // the link's folder
	todo := []string{parts[len(parts)-1]}
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return true, nil
			}
			stack = stack[:len(stack)-1]
			continue
		}
		cur := filepath.Join(root, filepath.Join(stack...), c)
		fi, err := os.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			stack = append(stack, c)
			continue
		}
		if hops++; hops > maxLinkHops {
			return false, nil
		}
		target, err := os.Readlink(cur)
		if err != nil {
			return false, fmt.Errorf("read link %s: %w", cur, err)
		}
		if filepath.IsAbs(target) {
			return true, nil
		}
		todo = append(strings.Split(filepath.ToSlash(target), "/"), todo...)
	}
	return false, nil
}

// removeAll deletes dir after making every directory under it writable and searchable.
func removeAll(dir string) error {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("crawl: remove %s: %w", dir, err)
	}
	return nil
}

// typeName names a file type for messages.
func typeName(t fs.FileMode) string {
	switch {
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "device"
	case t&fs.ModeNamedPipe != 0:
		return "FIFO"
	case t&fs.ModeSocket != 0:
		return "socket"
	}
	return "irregular file"
}

// pathErrText is an error's message without the path a *fs.PathError repeats.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
