package pylex

import (
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/costbound"
)

// pylexCost bounds what lexing hostile source allocates per byte (Uses, FreeUses, TopLevel): a
// repository's files are read outside the sandbox.
var pylexCost = costbound.Bound{PerByte: 512, Fixed: 1 << 20}

// FuzzPylex lexes any bytes (unterminated strings, unbalanced brackets, nested f-strings, NUL
// bytes, invalid UTF-8, lone "\r"): no panic, every token inside the source, statements' spans
// within its lines and in order, and a cost linear in its size.
func FuzzPylex(f *testing.F) {
	for _, s := range []string{
		"import os\nX = 1\nclass C(B):\n    a = 2\n    def m(self):\n        return a\n",
		"f'{x!r:{w}}' f\"{f'{y}'}\"", "x = (\n", "'''", "a = \\\r\n 1\r", "@d\ndef f(): pass\n",
		"if x:\n  def g(): pass\nelse:\n  g = 1\n", "\x00\xff\xfe = 1", "try:\n import a\nexcept: a = None\n",
		"def f():\n    global G\n    G = 1\n    nonlocal h\n", "x: int = 1; y += 2\n", "lambda a, *b, **c: a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		lines := 1 + strings.Count(src, "\n") + strings.Count(src, "\r")
		costbound.Check(t, "pylex", len(src), pylexCost, func() {
			l := NewLexer(src)
			for n := 0; ; n++ {
				tk := l.Next()
				if tk.Kind == End {
					break
				}
				if n > 2*len(src)+2 {
					t.Fatalf("more than %d tokens from %d bytes", n, len(src))
				}
				if tk.Offset < 0 || tk.Offset+len(tk.Text) > len(src) || src[tk.Offset:tk.Offset+len(tk.Text)] != tk.Text {
					t.Fatalf("token %+v is not the source's text at its offset", tk)
				}
			}
			Uses(src, func(n string) {
				if n == "" || !strings.Contains(src, n) {
					t.Fatalf("Uses reported %q", n)
				}
			})
			FreeUses(src, func(n string) {
				if n == "" || !strings.Contains(src, n) {
					t.Fatalf("FreeUses reported %q", n)
				}
			})
			last := 0
			for _, st := range TopLevel(src) {
				if st.Span.First < 1 || st.Span.Last < st.Span.First || st.Span.Last > lines || st.Span.First <= last {
					t.Fatalf("statement %+v: span outside the source's %d lines or out of order (last %d)", st, lines, last)
				}
				last = st.Span.Last
				for _, h := range st.Header {
					if h.First < st.Span.First || h.Last > st.Span.Last || h.Last < h.First {
						t.Fatalf("statement %+v: header span %+v outside it", st, h)
					}
				}
			}
		})
	})
}
