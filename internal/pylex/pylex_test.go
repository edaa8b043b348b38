package pylex

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func TestUses(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"return PREV + x.NEXT", []string{"PREV", "x"}},
		{"d = defaultdict(list)  # uses Counter\ns = 'NEXT'", []string{"d", "defaultdict", "list", "s"}},
		{"y = f'{PREV!r:>{WIDTH}} {{NOT}}' + rb'\\x00' + br\"B\"", []string{"y", "PREV", "r", "WIDTH"}},
		{"if a is not None and b in c: pass", []string{"a", "b", "c"}},
		{"x = '''multi\nline NAME'''\nz = 1.5e3 + 0x1F", []string{"x", "z"}},
		{"match = re.match(p, s)\n_ = type(x)", []string{"match", "re", "p", "s", "_", "type", "x"}},
		{"import os.path as p; from a import (b,\n c)\ntry: from x import y\nexcept E: z = 1\nraise V from w", []string{"E", "z", "V", "w"}},
	} {
		var got []string
		Uses(tc.src, func(n string) { got = append(got, n) })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Uses(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
}

func TestLexerLines(t *testing.T) {
	src := "a = (1,\n     2)\ns = '''x\ny'''\n  # c\nb = 3 \\\n  + 4\n"
	l := NewLexer(src)
	var got []string
	for tok := l.Next(); tok.Kind != End; tok = l.Next() {
		if tok.First {
			got = append(got, tok.Text+"@"+itoa(tok.Line))
		}
		if tok.Kind == String {
			got = append(got, "str"+itoa(tok.Line)+"-"+itoa(tok.EndLine))
		}
	}
	want := []string{"a@1", "s@3", "str3-4", "b@6"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestTopLevel(t *testing.T) {
	src := `"""Doc."""
import collections.abc, os.path as osp
from collections import defaultdict as dd, OrderedDict
from .x import (a,
    b as c)
PREV, NEXT = 0, 1
LIMIT: int = 10
COUNT += 1
table[PREV] = 3
obj.attr = 4
try:
    import simplejson as json
except ImportError:
    json = None

@decorate
class Node(Base):
    """A node."""
    kind = "node"

    def __init__(self):
        self.links = [None, None]

    @property
    def next(self):
        return self.links[NEXT]
    SLOTS = (
        "a",
    )

async def go(): pass
def f(x=PREV):
    def g(): pass
    return g
if TYPE_CHECKING:
    def helper(): local = 1
print(x); Y = 2
`
	got := TopLevel(src)
	type row struct {
		Kind   StmtKind
		Span   Span
		Binds  []string
		Header []Span
	}
	want := []row{
		{KindOther, Span{1, 1}, nil, nil},
		{KindImport, Span{2, 2}, []string{"collections", "osp"}, nil},
		{KindImport, Span{3, 3}, []string{"dd", "OrderedDict"}, nil},
		{KindImport, Span{4, 5}, []string{"a", "c"}, nil},
		{KindAssign, Span{6, 6}, []string{"PREV", "NEXT"}, nil},
		{KindAssign, Span{7, 7}, []string{"LIMIT"}, nil},
		{KindAssign, Span{8, 8}, []string{"COUNT"}, nil},
		{KindAssign, Span{9, 9}, nil, nil},
		{KindAssign, Span{10, 10}, nil, nil},
		{KindCompound, Span{11, 14}, []string{"json", "json"}, nil},
		{KindClass, Span{16, 29}, []string{"Node"}, []Span{{16, 17}, {19, 19}, {27, 29}}},
		{KindDef, Span{31, 31}, []string{"go"}, nil},
		{KindDef, Span{32, 34}, []string{"f"}, nil},
		{KindCompound, Span{35, 36}, []string{"helper"}, nil},
		{KindAssign, Span{37, 37}, []string{"Y"}, nil},
	}
	var rows []row
	for _, s := range got {
		rows = append(rows, row{s.Kind, s.Span, s.Binds, s.Header})
	}
	if !reflect.DeepEqual(rows, want) {
		for i := range rows {
			if i >= len(want) || !reflect.DeepEqual(rows[i], want[i]) {
				var w row
				if i < len(want) {
					w = want[i]
				}
				t.Errorf("stmt %d = %+v, want %+v", i, rows[i], w)
			}
		}
		if len(rows) < len(want) {
			t.Errorf("%d statements, want %d", len(rows), len(want))
		}
	}
}

// FuzzLexer checks that the lexer and the analyses never panic, end, and give tokens and spans
// within the source in order.
func FuzzLexer(f *testing.F) {
	for _, s := range []string{"", "a = 1\n", "class A:\n  x = 1\n  def f(s): pass\n", "f'{a}{{b}}{c'", "'''", "\\\r\n(\n",
		"@d\n@e\ndef f(): pass\nelse:\n", "try:\n import a\nexcept:\n a = None\n", "x: int\nimport a.b as c, d\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		lines := strings.Count(src, "\n") + strings.Count(src, "\r") + 1
		for _, o := range []Options{{}, {LFOnly: true, Floats: true, Ellipsis: true}, {Floats: true, NoHexSign: true},
			{LFOnly: true, Floats: true, NoHexSign: true, Ellipsis: true, StrayOps: true, SkipCRLines: true}} {
			l, prev, lines := NewLexerWith(src, o), -1, lines
			if o.LFOnly {
				lines = strings.Count(src, "\n") + 1
			}
			for n := 0; ; n++ {
				tok := l.Next()
				if tok.Kind == End {
					break
				}
				if n > len(src)+1 {
					t.Fatalf("%+v: more tokens than bytes", o)
				}
				if tok.Offset < prev || tok.Offset > len(src) || tok.Line < 1 || tok.EndLine < tok.Line || tok.EndLine > lines {
					t.Fatalf("%+v: token %+v out of order or range (prev %d, %d lines)", o, tok, prev, lines)
				}
				if tok.Kind != Newline && (tok.Text == "" || !strings.HasPrefix(src[tok.Offset:], tok.Text)) {
					t.Fatalf("%+v: token %+v is not the source's text", o, tok)
				}
				if tok.First && (tok.Indent > tok.Offset || tok.LineStart > tok.Offset-tok.Indent) {
					t.Fatalf("%+v: token %+v indented before the source", o, tok)
				}
				prev = tok.Offset
			}
		}
		uses := UsedSet(src)
		Uses(src, func(n string) {
			if n == "" || !strings.Contains(src, n) {
				t.Fatalf("use %q not in source", n)
			}
		})
		FreeUses(src, func(n string) {
			if !uses[n] {
				t.Fatalf("free use %q is not a use", n)
			}
		})
		last := 0
		for _, s := range TopLevel(src) {
			if s.Span.First <= last || s.Span.Last < s.Span.First || s.Span.Last > lines {
				t.Fatalf("statement %+v out of order (after line %d)", s, last)
			}
			for _, h := range s.Header {
				if h.First < s.Span.First || h.Last > s.Span.Last || h.Last < h.First {
					t.Fatalf("header %+v outside %+v", h, s.Span)
				}
			}
			for _, b := range s.Binds {
				if b == "" || !strings.Contains(src, b) {
					t.Fatalf("binding %q not in source", b)
				}
			}
			last = s.Span.Last
		}
	})
}

func TestIsStringPrefix(t *testing.T) {
	var yes []string
	for _, s := range []string{"r", "b", "f", "u", "rb", "BR", "fR", "Rf", "bb", "ub", "x", "rr", "abc", ""} {
		if isStringPrefix(s) {
			yes = append(yes, s)
		}
	}
	sort.Strings(yes)
	if want := []string{"BR", "Rf", "b", "f", "fR", "r", "rb", "u"}; !reflect.DeepEqual(yes, want) {
		t.Errorf("prefixes %q, want %q", yes, want)
	}
}

func TestFreeUses(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"def f(a, b=PREV, *args, c: int = NEXT, **kw):\n    return a + b + c + LIMIT", []string{"PREV", "int", "NEXT", "LIMIT"}},
		{"    def m(self):\n        node = self.head\n        for i, x in enumerate(node): total += x\n        return [y for y in x if y > K]",
			[]string{"enumerate", "K"}},
		{"def f(text):\n    global field\n    field = text\n    return field", []string{"field", "field", "field"}},
		{"def f(xs):\n    key = lambda v, w=W: v - w\n    with open(p) as fh:\n        import json as j\n    if (n := len(xs)) > N: pass\n    return sorted(xs, key=key), fh, j, n",
			[]string{"W", "open", "p", "len", "N", "sorted"}},
		{"def f():\n    def g(): return h\n    class C: pass\n    try:\n        pass\n    except E as e:\n        return e, g, C", []string{"h", "E"}},
	} {
		var got []string
		FreeUses(tc.src, func(n string) { got = append(got, n) })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("FreeUses(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
}

// TestLexerOptions: the Options change only what they say.
func TestLexerOptions(t *testing.T) {
	all := Options{LFOnly: true, Floats: true, NoHexSign: true, Ellipsis: true}
	for _, tc := range []struct {
		src  string
		o    Options
		want string // tokens: kind, text, line; / for a Newline
	}{
		{"x = 1.5e-3 + .5\n", Options{}, "n:x:1 o:=:1 d:1:1 o:.:1 d:5e:1 o:-:1 d:3:1 o:+:1 o:.:1 d:5:1 /"},
		{"x = 1.5e-3 + .5\n", all, "n:x:1 o:=:1 d:1.5e-3:1 o:+:1 d:.5:1 /"},
		{"0xE+1; 0XE-1\n", all, "d:0xE:1 o:+:1 d:1:1 o:;:1 d:0XE:1 o:-:1 d:1:1 /"},
		{"0xE+1\n", Options{Floats: true}, "d:0xE+1:1 /"},
		{"x[...]\n", Options{}, "n:x:1 o:[:1 o:.:1 o:.:1 o:.:1 o:]:1 /"},
		{"x[...]\n", all, "n:x:1 o:[:1 o:...:1 o:]:1 /"},
		{"a\rb # c\rd\n'e\rf'\n", Options{}, "n:a:1 / n:b:2 / n:d:3 / s:'e:4 / s:f':5 /"},
		{"a\rb # c\rd\n'e\rf'\n", all, "n:a:1 n:b:1 / s:'e\rf':2 /"},
		{"a = \\\r\n  1\v\n", all, "n:a:1 o:=:1 d:1:2 /"},
		{"a = \\\r\n  1\v \\ \\\rb\n\r# c\nd\n", Options{LFOnly: true, StrayOps: true}, "n:a:1 o:=:1 / d:1:2 o:\v:2 o:\\:2 n:b:2 / n:d:4 /"},
		{"a\n \rc = 1\nd\n", Options{LFOnly: true, SkipCRLines: true}, "n:a:1 / n:d:3 /"},
	} {
		var got []string
		l := NewLexerWith(tc.src, tc.o)
		for tok := l.Next(); tok.Kind != End; tok = l.Next() {
			if tok.Kind == Newline {
				got = append(got, "/")
				continue
			}
			got = append(got, string("?ndso/"[tok.Kind])+":"+tok.Text+":"+strconv.Itoa(tok.Line))
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%q %+v:\n got %s\nwant %s", tc.src, tc.o, g, tc.want)
		}
	}
}
