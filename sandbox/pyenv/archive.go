package pyenv

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// MaxEntries caps the entries of an environment's archive.
const MaxEntries = 500_000

// TooLargeError is an environment larger than its limit.
type TooLargeError struct {
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the installed packages are larger than %d bytes (environments.max_bytes)", e.Limit)
}

// RefusedError is an environment whose installed files an archive cannot hold as Extract takes
// them back (a name with a backslash, a link out of it, a device, too many entries): the
// packages' doing, never the worker's.
type RefusedError struct {
	What string
}

func (e *RefusedError) Error() string {
	return "the installed packages hold what an environment cannot: " + e.What
}

// validName reports whether an entry's name (without a trailing slash) is one Extract takes.
func validName(name string) bool {
	return name != "" && !path.IsAbs(name) && path.Clean(name) == name && name != ".." && !strings.HasPrefix(name, "../") &&
		!strings.ContainsAny(name, "\\\x00")
}

// Archive makes a tar of the folder dir, its entries named prefix/...: folders, regular files and
// symbolic links that stay inside dir (others are refused), after the files of extra (name ->
// content) at the top. It returns the archive and the size and number of dir's files; a dir
// larger than maxBytes is a *TooLargeError, one holding what Extract would refuse (a name it
// does not take, a link out of dir, another type of file, more than MaxEntries entries in all) a
// *RefusedError.
func Archive(dir, prefix string, maxBytes int64, extra map[string][]byte) ([]byte, int64, int, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var total int64
	var files, entries int
	names := make([]string, 0, len(extra))
	for n := range extra {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		entries++
		hdr := &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(extra[n])), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, 0, 0, fmt.Errorf("pyenv: archive %s: %w", dir, err)
		}
		if _, err := tw.Write(extra[n]); err != nil {
			return nil, 0, 0, fmt.Errorf("pyenv: archive %s: %w", dir, err)
		}
	}
	// The folders above dir, so that the archive extracts on its own.
	parts := strings.Split(strings.Trim(prefix, "/"), "/")
	for i := 1; i < len(parts); i++ {
		entries++
		hdr := &tar.Header{Name: strings.Join(parts[:i], "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, 0, 0, fmt.Errorf("pyenv: archive %s: %w", dir, err)
		}
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := path.Join(prefix, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		if files++; entries+files > MaxEntries {
			return &RefusedError{What: fmt.Sprintf("more than %d entries", MaxEntries)}
		}
		if !validName(name) {
			return &RefusedError{What: fmt.Sprintf("a file named %q", rel)}
		}
		hdr := &tar.Header{Name: name, ModTime: info.ModTime().Truncate(1e9), Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, name+"/", 0o755
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if !linkInside(name, target, prefix) {
				return &RefusedError{What: fmt.Sprintf("%s: a symbolic link to %s, outside the environment", rel, target)}
			}
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, target, 0o777
		case d.Type().IsRegular():
			if total += info.Size(); total > maxBytes {
				return &TooLargeError{Limit: maxBytes}
			}
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, info.Size(), fileMode(info.Mode())
		default:
			return &RefusedError{What: fmt.Sprintf("%s: not a regular file, folder or link (%s)", rel, d.Type())}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		var big *TooLargeError
		var refused *RefusedError
		if errors.As(err, &big) || errors.As(err, &refused) {
			return nil, 0, 0, err
		}
		return nil, 0, 0, fmt.Errorf("pyenv: archive %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return nil, 0, 0, fmt.Errorf("pyenv: archive %s: %w", dir, err)
	}
	return buf.Bytes(), total, files, nil
}

// fileMode is the mode a file gets in an environment: readable by everyone (the sandbox runs code
// as another uid), executable by everyone if it was by its owner, writable by nobody else.
func fileMode(m fs.FileMode) int64 {
	if m&0o100 != 0 {
		return 0o755
	}
	return 0o644
}

// linkInside reports whether a symbolic link named name (slash-separated, relative) pointing to
// target stays inside the tree under root (a prefix of name, "" for all).
func linkInside(name, target, root string) bool {
	if target == "" || path.IsAbs(target) || strings.ContainsRune(target, 0) {
		return false
	}
	to := path.Join(path.Dir(name), target)
	if root == "" || root == "." {
		return to != ".." && !strings.HasPrefix(to, "../")
	}
	return strings.HasPrefix(to+"/", strings.TrimSuffix(root, "/")+"/")
}

// Extract extracts a tar made by Archive into root (which must not exist; it is made): folders,
// regular files and symbolic links that stay inside root, everything readable by every uid. It
// refuses absolute names, names with .. or that are not clean, devices, FIFOs, hard links and links
// that point outside root, writing through links, more than maxBytes of files and more than
// MaxEntries entries. On error, root may hold part of the archive: the caller removes it.
func Extract(r io.Reader, root string, maxBytes int64) error {
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	rt, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer rt.Close()
	tr := tar.NewReader(r)
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if n >= MaxEntries {
			return fmt.Errorf("more than %d entries", MaxEntries)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if !validName(name) {
			return fmt.Errorf("entry %q: not a clean relative name", hdr.Name)
		}
		local := filepath.FromSlash(name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := rt.Mkdir(local, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("entry %s: %w", name, err)
			}
			if err := rt.Chmod(local, 0o755); err != nil {
				return fmt.Errorf("entry %s: %w", name, err)
			}
		case tar.TypeReg:
			if total += hdr.Size; hdr.Size < 0 || total > maxBytes {
				return fmt.Errorf("entry %s: more than %d bytes in all", name, maxBytes)
			}
			mode := fs.FileMode(fileMode(fs.FileMode(hdr.Mode)))
			f, err := rt.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return fmt.Errorf("entry %s: %w", name, err)
			}
			_, err = io.CopyN(f, tr, hdr.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = rt.Chmod(local, mode)
			}
			if err != nil {
				return fmt.Errorf("entry %s: %w", name, err)
			}
			if !hdr.ModTime.IsZero() {
				// Keep the modification time: compiled .pyc files name their source's.
				_ = rt.Chtimes(local, hdr.ModTime, hdr.ModTime)
			}
		case tar.TypeSymlink:
			if !linkInside(name, hdr.Linkname, "") {
				return fmt.Errorf("entry %s: a link to %q, outside the environment", name, hdr.Linkname)
			}
			if err := rt.Symlink(hdr.Linkname, local); err != nil {
				return fmt.Errorf("entry %s: %w", name, err)
			}
		default:
			return fmt.Errorf("entry %s: type %q is refused (only folders, files and links inside)", name, hdr.Typeflag)
		}
	}
}
