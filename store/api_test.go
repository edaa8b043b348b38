package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestAPIHidesDriver checks that nothing exported from package store names a gocloud.dev type:
// callers see PutOptions, ObjectInfo and IsNotExist/IsExist, never the driver's options or codes.
func TestAPIHidesDriver(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatal("no Go files in store")
	}
	check := func(file *ast.File, what string, n ast.Node) {
		if n == nil {
			return
		}
		ast.Inspect(n, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && driverImport(file, id.Name) {
				t.Errorf("%s: exported %s names %s.%s", fset.Position(sel.Pos()), what, id.Name, sel.Sel.Name)
			}
			return true
		})
	}
	for _, file := range files {
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d.Recv)) {
					check(file, d.Name.Name, d.Type)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, f := range st.Fields.List {
								if len(f.Names) == 0 || f.Names[0].IsExported() {
									check(file, s.Name.Name, f.Type)
								}
							}
							continue
						}
						check(file, s.Name.Name, s.Type)
					case *ast.ValueSpec:
						for _, name := range s.Names {
							if name.IsExported() {
								check(file, name.Name, s.Type)
							}
						}
					}
				}
			}
		}
	}
}

// driverImport reports whether name is the local name of a gocloud.dev import of file.
func driverImport(file *ast.File, name string) bool {
	for _, imp := range file.Imports {
		p := strings.Trim(imp.Path.Value, `"`)
		if !strings.HasPrefix(p, "gocloud.dev/") {
			continue
		}
		local := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			local = imp.Name.Name
		}
		if local == name {
			return true
		}
	}
	return false
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}
