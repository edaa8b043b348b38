package crawl

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// checkoutFiles writes the inline files of a KindFiles group into base/src, checking each path
// again (an item may have been forged: it crossed a queue), the limits and the content hash.
func checkoutFiles(ctx context.Context, r Resolved, base string, lim CheckoutLimits) (string, error) {
	fail := func(format string, args ...any) error {
		return &RepoError{Repo: r.Repo, Reason: fmt.Sprintf(format, args...)}
	}
	if len(r.Files) == 0 {
		return "", fail("a group of no files")
	}
	if len(r.Files) > lim.MaxFiles {
		return "", fail("too many files: %d > %d", len(r.Files), lim.MaxFiles)
	}
	var total int64
	files := map[string]bool{}
	dirs := map[string]bool{}
	for _, f := range r.Files {
		p, err := SanitizeFilePath(f.Path)
		if err != nil || p != f.Path {
			reason := "not in its checked form"
			if err != nil {
				reason = err.Error()
			}
			return "", fail("unsafe path %q: %s", clip(f.Path, 200), reason)
		}
		if files[p] || dirs[p] {
			return "", fail("path given twice: %s", p)
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if files[d] {
				return "", fail("path %s is under the file %s", p, d)
			}
			dirs[d] = true
		}
		files[p] = true
		if reason := checkInlineContent(f.Content); reason != "" {
			return "", fail("file %s: %s", p, reason)
		}
		total += int64(len(f.Content))
		if total > lim.MaxBytes {
			return "", fail("too large: more than %d bytes", lim.MaxBytes)
		}
	}
	if len(dirs) > lim.MaxFiles {
		return "", fail("too many directories: %d > %d", len(dirs), lim.MaxFiles)
	}
	if sum := FilesHash(r.Files); sum != strings.ToLower(r.ContentHash) {
		return "", fail("files changed since they were read: hash %s, want %s", sum, r.ContentHash)
	}
	dst := filepath.Join(base, "src")
	if err := os.Mkdir(dst, 0o755); err != nil {
		return "", err
	}
	for _, f := range r.Files {
		if err := ctx.Err(); err != nil {
			return "", context.Cause(ctx)
		}
		out := filepath.Join(dst, filepath.FromSlash(f.Path))
		if !strings.HasPrefix(out, dst+string(filepath.Separator)) {
			return "", fail("unsafe path %q", clip(f.Path, 200))
		}
		if err := mkdirsUnder(dst, path.Dir(f.Path)); err != nil {
			return "", err
		}
		w, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o644)
		if err != nil {
			return "", fmt.Errorf("write %s: %w", f.Path, err)
		}
		_, werr := w.WriteString(f.Content)
		if cerr := w.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", fmt.Errorf("write %s: %w", f.Path, werr)
		}
		if err := os.Chmod(out, 0o644); err != nil { // whatever the umask
			return "", err
		}
	}
	return dst, nil
}

// mkdirsUnder makes the folders of rel (slash-separated, checked) under root, one at a time,
// refusing any that exists as something other than a folder (a symlink).
func mkdirsUnder(root, rel string) error {
	if rel == "." || rel == "" {
		return nil
	}
	d := root
	for _, seg := range strings.Split(rel, "/") {
		d = filepath.Join(d, seg)
		err := os.Mkdir(d, 0o755)
		if err == nil {
			if err := os.Chmod(d, 0o755); err != nil {
				return err
			}
			continue
		}
		if !os.IsExist(err) {
			return err
		}
		fi, lerr := os.Lstat(d)
		if lerr != nil {
			return lerr
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a folder", d)
		}
	}
	return nil
}
