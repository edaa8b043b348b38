package crawl

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// ImportRoots returns the folders of a checkout (relative to dir, slash-separated, sorted) that
// an editable install of the project would put on sys.path besides dir itself: where its packages
// live when that is not the top level. It reads the declarations, and runs none of the project's
// code (setup.py is never executed):
//
//   - pyproject.toml: [tool.setuptools] package-dir {"" = "src"}, [tool.setuptools.packages.find]
//     where, [tool.poetry] packages' "from", [tool.hatch.build.targets.wheel] packages ("src/pkg"
//     gives "src"), [tool.flit.module] and [tool.pdm.build] package-dir;
//   - setup.cfg: [options] package_dir (the "=src" entry) and [options.packages.find] where;
//   - otherwise a src/ folder that holds a package or a module (the src layout's convention).
//
// A declared folder that does not exist, or that escapes dir, is left out. A malformed
// pyproject.toml or setup.cfg, one larger than MaxConfigBytes, one that is not a regular file or
// that links out of dir is an error naming the file. The files are read inside dir only, and
// the work is linear in their size; ctx stops it.
func ImportRoots(ctx context.Context, dir string) ([]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	defer root.Close()
	var roots []string
	add := func(p string) {
		p = path.Clean(strings.TrimSpace(filepath.ToSlash(p)))
		if p == "." || p == "" || strings.HasPrefix(p, "../") || p == ".." || path.IsAbs(p) {
			return
		}
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err != nil || !fi.IsDir() {
			return
		}
		if !slices.Contains(roots, p) {
			roots = append(roots, p)
		}
	}
	declared, err := pyprojectRoots(ctx, root)
	if err != nil {
		return nil, err
	}
	cfg, err := setupCfgRoots(ctx, root)
	if err != nil {
		return nil, err
	}
	for _, p := range append(declared, cfg...) {
		add(p)
	}
	if len(roots) == 0 && holdsPython(filepath.Join(dir, "src")) {
		add("src")
	}
	slices.Sort(roots)
	return roots, nil
}

// MaxConfigBytes is the largest configuration file (pyproject.toml, setup.cfg) read from a
// checkout: a larger one is an error naming the file and this cap, which makes the repository a
// reject, before it is read (the TOML library takes some 70 times a file's size in memory).
const MaxConfigBytes = 1 << 20

// pyprojectRoots reads the import roots the pyproject.toml of root declares (none if it is
// missing).
func pyprojectRoots(ctx context.Context, root *os.Root) ([]string, error) {
	data, err := readIn(ctx, root, "pyproject.toml", MaxConfigBytes)
	if err != nil || data == nil {
		return nil, err
	}
	var doc struct {
		Tool struct {
			Setuptools struct {
				PackageDir map[string]string `toml:"package-dir"`
				Packages   any               `toml:"packages"` // a list, or {find = {where = [...]}}
			} `toml:"setuptools"`
			Poetry struct {
				Packages []struct {
					From string `toml:"from"`
				} `toml:"packages"`
			} `toml:"poetry"`
			Hatch struct {
				Build struct {
					Targets struct {
						Wheel struct {
							Packages []string `toml:"packages"`
						} `toml:"wheel"`
					} `toml:"targets"`
				} `toml:"build"`
			} `toml:"hatch"`
			PDM struct {
				Build struct {
					PackageDir string `toml:"package-dir"`
				} `toml:"build"`
			} `toml:"pdm"`
		} `toml:"tool"`
	}
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("crawl: pyproject.toml: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("crawl: pyproject.toml: %w", err)
	}
	var roots []string
	st := doc.Tool.Setuptools
	if d, ok := st.PackageDir[""]; ok {
		roots = append(roots, d)
	}
	if m, ok := st.Packages.(map[string]any); ok {
		if find, ok := m["find"].(map[string]any); ok {
			if where, ok := find["where"].([]any); ok {
				for _, w := range where {
					if s, ok := w.(string); ok {
						roots = append(roots, s)
					}
				}
			}
		}
	}
	for _, p := range doc.Tool.Poetry.Packages {
		if p.From != "" {
			roots = append(roots, p.From)
		}
	}
	for _, p := range doc.Tool.Hatch.Build.Targets.Wheel.Packages {
		if d := path.Dir(filepath.ToSlash(p)); d != "." {
			roots = append(roots, d)
		}
	}
	if d := doc.Tool.PDM.Build.PackageDir; d != "" {
		roots = append(roots, d)
	}
	return roots, nil
}

// setupCfgRoots reads the import roots the setup.cfg of root declares (none if it is missing).
func setupCfgRoots(ctx context.Context, root *os.Root) ([]string, error) {
	data, err := readIn(ctx, root, "setup.cfg", MaxConfigBytes)
	if err != nil || data == nil {
		return nil, err
	}
	values, err := parseSetupCfg(ctx, data)
	if err != nil {
		return nil, err
	}
	var roots []string
	// package_dir: "=src" on its line, or on a continuation line; "pkg = dir" entries map one
	// package to a folder (its parent is not a root, so they are not roots).
	for _, entry := range strings.Split(values["options.package_dir"], "\n") {
		if k, v, ok := strings.Cut(entry, "="); ok && strings.TrimSpace(k) == "" {
			roots = append(roots, strings.TrimSpace(v))
		}
	}
	for _, w := range strings.Fields(strings.ReplaceAll(values["options.packages.find.where"], ",", " ")) {
		roots = append(roots, w)
	}
	return roots, nil
}

// holdsPython reports whether dir holds a Python package (a folder with Python files) or module.
func holdsPython(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case !e.IsDir() && strings.HasSuffix(name, ".py"):
			return true
		case e.IsDir() && !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, ".egg-info"):
			sub, err := os.ReadDir(filepath.Join(dir, name))
			if err != nil {
				continue
			}
			for _, f := range sub {
				if strings.HasSuffix(f.Name(), ".py") {
					return true // a package, or a namespace package
				}
			}
		}
	}
	return false
}

// cancelEvery is how many lines (or entries) a reader of untrusted input handles between two
// checks of its context.
const cancelEvery = 1024

// parseSetupCfg parses a setup.cfg's content: its values by "section.key". It reads the INI
// format's sections and keys, with continuation lines (joined by \n), as setuptools does. Its work
// is linear in len(data): a key's value grows in one buffer, never copied whole per line.
// Content larger than MaxConfigBytes is an error; ctx is checked every cancelEvery lines.
func parseSetupCfg(ctx context.Context, data []byte) (map[string]string, error) {
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("crawl: setup.cfg: larger than %d bytes, the cap on this file", MaxConfigBytes)
	}
	buffers := map[string]*strings.Builder{} // "section.key" -> its value (continuation lines joined by \n)
	section, last := "", ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxConfigBytes+1)
	for n := 1; sc.Scan(); n++ {
		if n%cancelEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("crawl: setup.cfg: line %d: %w", n, err)
			}
		}
		line := sc.Bytes()
		trimmed := bytes.TrimSpace(line)
		switch {
		case len(trimmed) == 0 || trimmed[0] == '#' || trimmed[0] == ';':
		case trimmed[0] == '[' && bytes.LastIndexByte(trimmed, ']') > 1:
			// As configparser's SECTCRE (`\[(?P<header>.+)\]`, matched at the line's start): the
			// header ends at the line's last ']', so "[upload_sphinx] # a comment" is a header.
			section, last = strings.TrimSpace(string(trimmed[1:bytes.LastIndexByte(trimmed, ']')])), ""
		case (line[0] == ' ' || line[0] == '\t') && last != "":
			b := buffers[last]
			b.WriteByte('\n')
			b.Write(trimmed)
		default:
			k, v, ok := bytes.Cut(trimmed, []byte("="))
			if !ok {
				k, v, ok = bytes.Cut(trimmed, []byte(":"))
			}
			if !ok {
				return nil, fmt.Errorf("crawl: setup.cfg: [%.200s]: line %.200q is not key = value", section, trimmed)
			}
			last = section + "." + string(bytes.TrimSpace(k))
			b := &strings.Builder{}
			b.Write(bytes.TrimSpace(v))
			buffers[last] = b
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("crawl: setup.cfg: %w", err)
	}
	values := make(map[string]string, len(buffers))
	for k, b := range buffers {
		values[k] = b.String()
	}
	return values, nil
}
