package testcalls

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// fmtImports renders imports as "LEVEL:MODULE:NAME,NAME" joined by spaces.
func fmtImports(imps []importStmt) string {
	var out []string
	for _, m := range imps {
		out = append(out, fmt.Sprintf("%d:%s:%s", m.Level, m.Module, strings.Join(m.Names, ",")))
	}
	return strings.Join(out, " ")
}

func TestScanImports(t *testing.T) {
	tests := []struct {
		src     string
		want    string
		dynamic bool
	}{
		{"import a", "0:a:", false},
		{"import a.b.c as d, e", "0:a.b.c: 0:e:", false},
		{"import a . b", "0:a.b:", false},
		{"from a.b import c as d, e", "0:a.b:c,e", false},
		{"from . import x", "1::x", false},
		{"from .. import x", "2::x", false},
		{"from ...p.q import (x,\n    y as z,\n)\n", "3:p.q:x,y", false},
		{"from .m import *", "1:m:*", false},
		{"from x import \\\n    y", "0:x:y", false},
		{"def f():\n    import a\n    if b:\n        from c import d\n", "0:a: 0:c:d", false},
		{"try:\n    import a\nexcept ImportError: import b", "0:a: 0:b:", false},
		{"x = 1; import a; import b", "0:a: 0:b:", false},
		{"# import a\n'import b'\n\"\"\"\nimport c\n\"\"\"\nx = 'from d import e'", "", false},
		{"s = '''\\'''\nimport a\n'''\nimport b", "0:b:", false},
		{"x = (1,\nimport_)", "", false},
		{"yield from a\nraise E from b", "", false},
		{"from import x", "", false},
		{"import", "", false},
		{"f(\nimport a", "", false}, // an open bracket: no statement starts
		{"import importlib", "0:importlib:", true},
		{"m = __import__('helper')", "", true},
		{"exec('import helper')", "", true},
		{"x = eval(s)", "", true},
		{"p = re.compile('x')", "", false},
		{"df.eval('a')", "", false},
		{"sys.path.insert(0, 'lib')", "", true},
		{"import sys\nsys.modules", "0:sys:", false},
		{"here = __file__", "", true},
		{"import inspect\nsrc = inspect.getfile(f)", "0:inspect:", true},
		{"f = sys._getframe(0).f_code.co_filename", "", true},
		{"import hélper", "0:hélper:", true},
		{"x = 'unterminated\nimport a", "0:a:", false},
		{"import a\r\nimport b\rimport c", "0:a: 0:b: 0:c:", false},
	}
	for _, tc := range tests {
		imps, dyn := scanImports([]byte(tc.src))
		if got := fmtImports(imps); got != tc.want || dyn != tc.dynamic {
			t.Errorf("scanImports(%q) = %q, dynamic %v; want %q, %v", tc.src, got, dyn, tc.want, tc.dynamic)
		}
	}
}

// allocBytes returns the bytes f allocates.
func allocBytes(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// maxScanAlloc bounds what scanImports may allocate for n bytes of source: its copy of the source,
// and what it returns (a name of a from-import per two bytes at most, 16 bytes each, times the
// slice's growth), the dotted names built.
func maxScanAlloc(n int) uint64 { return 64*uint64(n) + 64<<10 }

// TestScanImportsCost gives scanImports inputs shaped to be quadratic for a naive scanner (long
// dotted names, many names, many dots, open strings and brackets): what it allocates stays linear
// in the input's size.
func TestScanImportsCost(t *testing.T) {
	const n = 1 << 20
	for name, src := range map[string]string{
		"dotted":   "import a" + strings.Repeat(".a", n/2),
		"names":    "from a import a" + strings.Repeat(",a", n/2),
		"dots":     "from " + strings.Repeat(".", n) + " import a",
		"imports":  strings.Repeat("import a\n", n/9),
		"strings":  strings.Repeat("'''", n/3),
		"brackets": strings.Repeat("(", n),
		"escapes":  "'" + strings.Repeat("\\", n),
	} {
		got := allocBytes(func() { scanImports([]byte(src)) })
		if got > maxScanAlloc(len(src)) {
			t.Errorf("%s: %d bytes of source allocate %d bytes, over %d", name, len(src), got, maxScanAlloc(len(src)))
		}
	}
}

// FuzzScanImports checks that scanImports never panics, that what it reads comes from the
// source, and that it allocates at most linearly in the source's size.
func FuzzScanImports(f *testing.F) {
	for _, s := range []string{"import a.b as c, d", "from ..x import (y, z)\n", "from . import *", "def f():\n  import a; exec(s)",
		"'''\nimport a\n'''", "x = \\\nimport a", "from a import b as", "import sys\nsys.path.append(1)"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var imps []importStmt
		got := allocBytes(func() { imps, _ = scanImports(src) })
		if got > maxScanAlloc(len(src)) {
			t.Fatalf("%d bytes of source allocate %d bytes, over %d", len(src), got, maxScanAlloc(len(src)))
		}
		for _, m := range imps {
			if m.Level > len(src) || len(m.Module) > len(src) {
				t.Fatalf("import %+v longer than its source %q", m, src)
			}
			for _, p := range strings.Split(m.Module, ".") {
				if m.Module != "" && !strings.Contains(string(src), p) {
					t.Fatalf("module part %q is not in the source %q", p, src)
				}
			}
		}
	})
}
