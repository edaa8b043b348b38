package execute

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

// MaxModuleBytes bounds the size of a checkout file whose module-level definitions are collected
// for CODE contexts (moduleDefs): a larger file gives none.
const MaxModuleBytes = 1 << 20

// moduleDefs collects the module-level definitions (imports, constants, class headers) that the
// functions a test visited may need in their CODE contexts (debugger.Module.Defs), from the files
// of the checkout dir; each file is read and analysed once per repository (linear in its size).
type moduleDefs struct {
	dir   string
	files map[string]*debugger.Module // nil for a file that cannot be used
}

func newModuleDefs(dir string) *moduleDefs {
	return &moduleDefs{dir: dir, files: map[string]*debugger.Module{}}
}

// defs returns the definitions funcs (with file names relative to the checkout) may need, files in
// the order funcs first name them, each file's in file order; nil for none.
func (m *moduleDefs) defs(funcs []schemas.FuncSource) []schemas.ModuleDef {
	var order []string
	byFile := map[string][]schemas.FuncSource{}
	for _, f := range funcs {
		if f.QualName == "<module>" {
			continue
		}
		if _, ok := byFile[f.File]; !ok {
			order = append(order, f.File)
		}
		byFile[f.File] = append(byFile[f.File], f)
	}
	var out []schemas.ModuleDef
	for _, file := range order {
		mod := m.module(file)
		if mod == nil {
			continue
		}
		out = append(out, mod.Defs(file, byFile[file])...)
	}
	return out
}

// module returns the analysis of the checkout file named file (relative), nil if it is not a
// relative path inside the checkout (links followed), cannot be read, is larger than MaxModuleBytes or is not UTF-8
// (the tracer's sources would then not be its bytes).
func (m *moduleDefs) module(file string) *debugger.Module {
	if mod, ok := m.files[file]; ok {
		return mod
	}
	var mod *debugger.Module
	if m.dir != "" && file != "" && !filepath.IsAbs(file) && filepath.IsLocal(filepath.FromSlash(file)) && strings.HasSuffix(file, ".py") {
		if src, ok := m.read(file); ok {
			src = strings.TrimPrefix(src, "\ufeff")
			if utf8.ValidString(src) {
				mod = debugger.ParseModule(src)
			}
		}
	}
	m.files[file] = mod
	return mod
}

// read reads the checkout file named file (relative) if it resolves, links followed, to a regular
// file inside the checkout of at most MaxModuleBytes: the names come from the traced process, and
// a link must not lead the worker to read a file of the host.
func (m *moduleDefs) read(file string) (string, bool) {
	root, err := filepath.EvalSymlinks(m.dir)
	if err != nil {
		return "", false
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return "", false
	}
	if rel, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(rel) {
		return "", false
	}
	return readSmall(real, MaxModuleBytes)
}

// readSmall reads the regular file path if it has at most limit bytes.
func readSmall(path string, limit int64) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() > limit {
		return "", false
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil || int64(len(data)) > limit {
		return "", false
	}
	return string(data), true
}
