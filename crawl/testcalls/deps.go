package testcalls

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Bounds of the import walk of one module (depWalker.walk): past any of them, the module's
// dependencies are not known and its item's Deps is the checkout's pin.
const (
	// maxDepFileBytes caps one file read; maxDepBytes the bytes of all files of one walk, and
	// maxDepFiles their number.
	maxDepFileBytes = 1 << 20
	maxDepBytes     = 16 << 20
	maxDepFiles     = 512
	// maxDirEntries caps the entries read of one folder, and maxFileImports the modules and
	// names the import statements of one file name.
	maxDirEntries  = 4096
	maxFileImports = 4096
	// maxWalkerBytes, maxWalkerFiles and maxWalkerImports bound what one repository's walks
	// read and keep in all (its modules share the files read): past them, the modules not yet
	// known have the pin as their Deps.
	maxWalkerBytes   = 64 << 20
	maxWalkerFiles   = 8192
	maxWalkerImports = 1 << 16
)

// depWalker finds, for the modules of one checkout, the repository's own files each runs when
// its code runs with the checkout and its import roots on sys.path (as a function found in its
// tests is traced): the module, and transitively the modules its import statements name that are
// files of the checkout. Files and folders read are cached, so the modules of one repository
// share the work.
type depWalker struct {
	dir   string   // the checkout
	real  string   // the checkout with its symlinks resolved
	roots []string // where absolute imports are looked for, relative to dir, slash-separated: the import roots, then "."
	pin   string   // the checkout's commit or content hash
	// startup is the reason the interpreter's own start-up may run repository code that no
	// import names (a .pth file, sitecustomize, usercustomize at a root), "" if none.
	startup string
	// env lists the requirements installed for the items (canonical, in order; nil without an
	// environment): the packages they import from there are part of what they run.
	env   []string
	files map[string]*depFile
	dirs  map[string]map[string][]depEntry
	deps  map[string]string
	// truncated holds the folders with more than maxDirEntries entries; overflow is the last of
	// them the current walk consulted ("" if none).
	truncated map[string]bool
	overflow  string
	// read, nfiles and nimports count what the walks read and keep (maxWalkerBytes...).
	read, nfiles, nimports int
}

// depFile is what the walk read of one file of the checkout.
type depFile struct {
	sum     [32]byte
	size    int
	imports []importStmt
	// why is the reason the file's dependencies cannot be known statically ("" if they can).
	why string
}

// depEntry is a folder entry that may be a module: a file (name.py, name.pyc, name*.so) or a
// folder (a package).
type depEntry struct {
	name string
	dir  bool
}

// newDepWalker returns the walker of checkout dir with import roots (crawl.ImportRoots, relative
// to dir) and pin (crawl.Resolved.Pin).
func newDepWalker(dir string, roots []string, pin string) *depWalker {
	w := &depWalker{dir: dir, pin: pin, files: map[string]*depFile{}, dirs: map[string]map[string][]depEntry{},
		deps: map[string]string{}, truncated: map[string]bool{}}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	w.real = real
	for _, r := range roots {
		r = path.Clean(filepath.ToSlash(r))
		if r != "." && r != ".." && !strings.HasPrefix(r, "../") && !path.IsAbs(r) {
			w.roots = append(w.roots, r)
		}
	}
	w.roots = append(w.roots, ".")
	for _, r := range w.roots {
		fh, err := os.Open(filepath.Join(dir, filepath.FromSlash(r)))
		if err != nil {
			continue
		}
		ents, _ := fh.ReadDir(maxDirEntries + 1)
		fh.Close()
		if len(ents) > maxDirEntries {
			w.startup = fmt.Sprintf("%s has more than %d entries", r, maxDirEntries)
			break
		}
		for _, e := range ents {
			n := e.Name()
			if strings.HasSuffix(n, ".pth") {
				w.startup = fmt.Sprintf("%s runs at start-up", path.Join(r, n))
			}
			if b, _, _ := strings.Cut(n, "."); (b == "sitecustomize" || b == "usercustomize") && w.startup == "" {
				w.startup = fmt.Sprintf("%s runs at start-up", path.Join(r, n))
			}
		}
	}
	return w
}

// Deps is the Deps of an item whose module is rel (relative to the checkout, slash-separated): the
// hex SHA-256 of "ndtrace deps 1\n"; then, with an environment, "env:", "LEN:REQ;" for each of its
// requirements and "\n"; then, for each file the module runs (walk) in order of path, "LEN:PATH;"
// and the hex SHA-256 of its bytes, ";". Where those files cannot be known (walk's reason), it is
// the hex SHA-256 of "ndtrace deps pin\n", "LEN:PATH;", "LEN:PIN;" and the same environment part:
// the module as the checkout at its commit or content hash has it.
func (w *depWalker) Deps(rel string) string {
	if d, ok := w.deps[rel]; ok {
		return d
	}
	h := sha256.New()
	files, why := w.walk(rel)
	if why != "" {
		fmt.Fprintf(h, "ndtrace deps pin\n%d:%s;%d:%s;", len(rel), rel, len(w.pin), w.pin)
	} else {
		h.Write([]byte("ndtrace deps 1\n"))
	}
	if w.env != nil {
		h.Write([]byte("env:"))
		for _, r := range w.env {
			fmt.Fprintf(h, "%d:%s;", len(r), r)
		}
		h.Write([]byte("\n"))
	}
	for _, f := range files {
		fmt.Fprintf(h, "%d:%s;%x;", len(f), f, w.files[f].sum)
	}
	d := hex.EncodeToString(h.Sum(nil))
	w.deps[rel] = d
	return d
}

// walk returns the files of the checkout the module rel runs when its code runs (rel itself, and
// transitively every file an import statement of one of them may load from the checkout: absolute
// imports looked up under each import root and the checkout's top, relative ones from the
// importing file's package; the packages on the way, with their __init__; every candidate a name
// may resolve to, not only the first), sorted; or the reason they cannot be known: a file that
// uses dynamic imports or its own path (scanImports), a file past maxDepFileBytes, a symlink out of
// the checkout, a file that cannot be read, code the interpreter's start-up runs (a .pth file),
// more than maxDepFiles files or maxDepBytes bytes in all, or the repository's walks past their
// bounds (maxWalkerBytes...). Imports that name nothing of the checkout
// (the standard library, installed packages) are left out, and so is a relative import that
// climbs out of the checkout.
func (w *depWalker) walk(rel string) ([]string, string) {
	if w.startup != "" {
		return nil, w.startup
	}
	w.overflow = ""
	seen := map[string]bool{rel: true}
	queue := []string{rel}
	var files []string
	total := 0
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		if len(files) >= maxDepFiles {
			return nil, fmt.Sprintf("more than %d files", maxDepFiles)
		}
		df := w.file(f)
		if df.why != "" {
			return nil, df.why
		}
		if total += df.size; total > maxDepBytes {
			return nil, fmt.Sprintf("more than %d bytes", maxDepBytes)
		}
		files = append(files, f)
		for _, imp := range df.imports {
			got := w.resolve(f, imp)
			if w.overflow != "" {
				return nil, fmt.Sprintf("%s has more than %d entries", w.overflow, maxDirEntries)
			}
			for _, g := range got {
				if !seen[g] {
					seen[g] = true
					queue = append(queue, g)
				}
			}
		}
	}
	sort.Strings(files)
	return files, ""
}

// file reads and scans the file rel of the checkout, once.
func (w *depWalker) file(rel string) *depFile {
	if df, ok := w.files[rel]; ok {
		return df
	}
	df := &depFile{}
	w.files[rel] = df
	if w.read > maxWalkerBytes || w.nfiles >= maxWalkerFiles || w.nimports > maxWalkerImports {
		df.why = "the repository's modules are past the walks' bounds"
		return df
	}
	w.nfiles++
	abs := filepath.Join(w.dir, filepath.FromSlash(rel))
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		df.why = fmt.Sprintf("%s: %v", rel, err)
		return df
	}
	if real != w.real && !strings.HasPrefix(real, w.real+string(filepath.Separator)) {
		df.why = fmt.Sprintf("%s is a symlink out of the checkout", rel)
		return df
	}
	fh, err := os.Open(real)
	if err != nil {
		df.why = fmt.Sprintf("%s: %v", rel, err)
		return df
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxDepFileBytes+1))
	switch {
	case err != nil:
		df.why = fmt.Sprintf("%s: %v", rel, err)
		return df
	case len(data) > maxDepFileBytes:
		df.why = fmt.Sprintf("%s is over %d bytes", rel, maxDepFileBytes)
		return df
	}
	df.sum, df.size = sha256.Sum256(data), len(data)
	w.read += len(data)
	if !strings.HasSuffix(rel, ".py") {
		// Compiled code (.pyc, an extension): what it imports is not read.
		df.why = fmt.Sprintf("%s is compiled code", rel)
		return df
	}
	imps, dynamic := scanImports(data)
	n := 0
	for _, m := range imps {
		n += 1 + len(m.Names)
	}
	switch {
	case dynamic:
		df.why = fmt.Sprintf("%s imports or reads files dynamically", rel)
	case n > maxFileImports:
		df.why = fmt.Sprintf("%s imports more than %d names", rel, maxFileImports)
	default:
		// Kept apart from the file's text, which is not kept.
		for _, m := range imps {
			m.Module, m.Names = strings.Clone(m.Module), slices.Clone(m.Names)
			for i := range m.Names {
				m.Names[i] = strings.Clone(m.Names[i])
			}
			df.imports = append(df.imports, m)
		}
		w.nimports += n
	}
	return df
}

// resolve returns the files of the checkout an import statement of file from may load.
func (w *depWalker) resolve(from string, imp importStmt) []string {
	var bases []string // the folders the module's first part is looked up in
	if imp.Level > 0 {
		base := path.Dir(from)
		for i := 1; i < imp.Level; i++ {
			if base == "." {
				return nil // out of the checkout
			}
			base = path.Dir(base)
		}
		bases = []string{base}
	} else {
		bases = w.roots
	}
	var parts []string
	if imp.Module != "" {
		parts = strings.Split(imp.Module, ".")
	}
	var out []string
	for _, b := range bases {
		pkgs := []string{b}
		if imp.Level > 0 {
			// The package the relative import is made from runs its __init__.
			out = append(out, w.modules(path.Dir(b), path.Base(b), true)...)
		}
		for _, p := range parts {
			var next []string
			for _, d := range pkgs {
				out = append(out, w.modules(d, p, false)...)
				if w.isDir(d, p) {
					next = append(next, path.Join(d, p))
				}
			}
			pkgs = next
		}
		if imp.Level == 0 && len(parts) == 0 {
			continue
		}
		for _, d := range pkgs {
			for _, n := range imp.Names {
				if n == "*" {
					// A star import of a package imports the submodules its __all__ names: all
					// of them, to be safe.
					for name := range w.listing(d) {
						out = append(out, w.modules(d, name, false)...)
					}
					continue
				}
				out = append(out, w.modules(d, n, false)...)
			}
		}
	}
	sort.Strings(out)
	return out
}

// modules returns the files that module name in folder d (relative) may load from: d/name.py,
// .pyc or a name*.so extension, and for a package d/name its __init__ files. With onlyInit, the
// package's __init__ files only.
func (w *depWalker) modules(d, name string, onlyInit bool) []string {
	if d == ".." || strings.HasPrefix(d, "../") {
		return nil
	}
	var out []string
	for _, e := range w.listing(d)[name] {
		switch {
		case e.dir:
			for _, i := range w.listing(path.Join(d, e.name))["__init__"] {
				if !i.dir {
					out = append(out, path.Join(d, e.name, i.name))
				}
			}
		case !onlyInit:
			out = append(out, path.Join(d, e.name))
		}
	}
	return out
}

// isDir reports whether d/name is a folder of the checkout.
func (w *depWalker) isDir(d, name string) bool {
	for _, e := range w.listing(d)[name] {
		if e.dir {
			return true
		}
	}
	return false
}

// listing returns the entries of folder d of the checkout that may be modules, by module name
// (the part of the file name before its first dot), read once and at most maxDirEntries of them.
func (w *depWalker) listing(d string) map[string][]depEntry {
	if l, ok := w.dirs[d]; ok {
		if w.truncated[d] {
			w.overflow = d
		}
		return l
	}
	l := map[string][]depEntry{}
	w.dirs[d] = l
	if d == ".." || strings.HasPrefix(d, "../") || path.IsAbs(d) {
		return l
	}
	fh, err := os.Open(filepath.Join(w.dir, filepath.FromSlash(d)))
	if err != nil {
		return l
	}
	defer fh.Close()
	ents, _ := fh.ReadDir(maxDirEntries + 1)
	if len(ents) > maxDirEntries {
		w.truncated[d], w.overflow = true, d
		ents = ents[:maxDirEntries]
	}
	for _, e := range ents {
		n := e.Name()
		isDir := e.IsDir()
		if e.Type()&os.ModeSymlink != 0 {
			fi, err := os.Stat(filepath.Join(w.dir, filepath.FromSlash(d), n))
			isDir = err == nil && fi.IsDir()
		}
		base, ext, dotted := strings.Cut(n, ".")
		switch {
		case isDir && !dotted:
			l[n] = append(l[n], depEntry{name: n, dir: true})
		case !isDir && dotted && (ext == "py" || ext == "pyc" || strings.HasSuffix(n, ".so")):
			l[base] = append(l[base], depEntry{name: n})
		}
	}
	return l
}
