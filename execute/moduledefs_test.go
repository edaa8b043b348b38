package execute

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
)

// TestModuleDefs checks that the definitions of a test's functions are read from the checkout's
// files only: a relative .py path inside it (not a link leaving it), of at most MaxModuleBytes, in
// UTF-8 (a BOM allowed).
func TestModuleDefs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := "import os\nLIMIT = 3\ndef f():\n    return LIMIT, os\n"
	write("pkg/a.py", "\ufeff"+src)
	write("latin.py", "X = '\xe9'\ndef f():\n    return X\n")
	write("big.py", "X = 1\n"+strings.Repeat("#\n", MaxModuleBytes/2)+"def f():\n    return X\n")
	outside := filepath.Join(t.TempDir(), "host.py")
	if err := os.WriteFile(outside, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.py")); err != nil {
		t.Fatal(err)
	}
	fn := func(file string) schemas.FuncSource {
		return schemas.FuncSource{File: file, QualName: "f", FirstLine: 3, LastLine: 4, Source: "def f():\n    return LIMIT, os, X"}
	}
	m := newModuleDefs(dir)
	got := m.defs([]schemas.FuncSource{fn("pkg/a.py"), fn("latin.py"), fn("big.py"), fn("../a.py"), fn(filepath.Join(dir, "pkg/a.py")),
		fn("missing.py"), fn("link.py"), {File: "pkg/a.py", QualName: "<module>", FirstLine: 1, LastLine: 4, Source: src}})
	var names []string
	for _, d := range got {
		if d.File != "pkg/a.py" {
			t.Errorf("a definition of %s", d.File)
		}
		names = append(names, d.Names...)
	}
	if want := []string{"os", "LIMIT"}; !reflect.DeepEqual(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	if len(m.files) != 7 {
		t.Errorf("%d files analysed, want 7 (each once)", len(m.files))
	}
}
