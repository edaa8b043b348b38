package schemas

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNothingAbove checks the house's import rule for schemas, the package every other one
// imports: its code imports only the standard library and YAML, nothing of this module (a parser
// that a spec check needs lives above it, as crawl.CheckRequirements does for pyreq).
func TestImportsNothingAbove(t *testing.T) {
	const module = "github.com/ndtrace/ndtrace"
	allowed := map[string]bool{"gopkg.in/yaml.v3": true} // third-party leaves schemas may import
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(p, "/")
			switch {
			case p == module || strings.HasPrefix(p, module+"/"):
				t.Errorf("%s imports %s: schemas must import nothing of this module", name, p)
			case strings.Contains(first, ".") && !allowed[p]:
				t.Errorf("%s imports %s: schemas imports only the standard library and %v", name, p, allowed)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go files in schemas")
	}
}
