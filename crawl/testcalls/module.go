package testcalls

import (
	"sort"
	"strings"

	"github.com/ndtrace/ndtrace/internal/pylex"
)

// ModuleName is the dotted name under which the module in file rel (slash-separated, relative to
// the checkout) is imported, with the checkout and its import roots (crawl.ImportRoots, relative
// to the checkout) on sys.path: relative to the deepest root that holds it (a src layout's
// src/pkg/mod.py is pkg.mod), else to the checkout. A package's __init__.py is the package.
// "" when the file has no such name: not a .py file, a part that is not an identifier (or is a
// keyword), or the checkout's own __init__.py; its item then runs as a standalone file.
func ModuleName(rel string, roots []string) string {
	if !strings.HasSuffix(rel, ".py") || strings.HasPrefix(rel, "/") {
		return ""
	}
	rs := make([]string, 0, len(roots))
	for _, r := range roots {
		if r = strings.Trim(r, "/"); r != "" && r != "." {
			rs = append(rs, r)
		}
	}
	// The deepest root first: a src layout's package is imported from src, not as src.pkg.
	sort.SliceStable(rs, func(i, j int) bool { return strings.Count(rs[i], "/") > strings.Count(rs[j], "/") })
	name := rel
	for _, r := range rs {
		if rest, ok := strings.CutPrefix(rel, r+"/"); ok {
			name = rest
			break
		}
	}
	parts := strings.Split(strings.TrimSuffix(name, ".py"), "/")
	if parts[len(parts)-1] == "__init__" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) == 0 {
		return ""
	}
	for _, p := range parts {
		if !isIdentifier(p) || pylex.IsKeyword(p) {
			return ""
		}
	}
	return strings.Join(parts, ".")
}
