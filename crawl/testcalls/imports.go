package testcalls

import "strings"

// importStmt is one module an import statement names: `import a.b` gives {0, "a.b", nil},
// `from ..x import y, z` gives {2, "x", [y z]}, `from . import *` gives {1, "", [*]}.
type importStmt struct {
	// Level is the number of leading dots of a relative import (0 for an absolute one).
	Level int
	// Module is the dotted module name ("" for `from . import x`).
	Module string
	// Names are the names a from-import imports ("*" for a star import); nil for `import`.
	Names []string
}

// dynamicNames are the names whose use makes a module's imports or the files it reads impossible
// to know from its import statements: dynamic imports, code built at run time, the paths of
// modules and frames (from which a data file of the checkout is found), and the import path itself
// (sys.path and its hooks, after a "sys.").
// exec, eval and compile count only as bare names (not "re.compile").
var dynamicNames = map[string]bool{
	"__import__": true, "importlib": true, "import_module": true, "runpy": true, "pkgutil": true,
	"pkg_resources": true, "__path__": true, "__file__": true, "__loader__": true, "__spec__": true,
	"__builtins__": true, "builtins": true, "execfile": true,
	// the paths of modules and frames, from which a file beside them can be found
	"inspect": true, "co_filename": true, "_getframe": true,
}

// bareDynamicNames count only when not an attribute (not after a dot).
var bareDynamicNames = map[string]bool{"exec": true, "eval": true, "compile": true}

// sysPathNames are the attributes of sys that change where imports are found.
var sysPathNames = map[string]bool{"path": true, "meta_path": true, "path_hooks": true, "path_importer_cache": true}

// pyToken is one token of scanImports's lexer.
type pyToken struct {
	kind byte // 'n' a name or number, 's' a string, 'o' an operator character, '\n' the end of a logical line; 0 the end
	text string
}

// scanImports reads the import statements of Python source src, wherever they are (in function
// bodies, under if or try too), and reports whether src uses a name of dynamicNames (or
// bareDynamicNames bare, or sys.path and its kin), or imports a non-ASCII name: then its imports
// cannot be known statically. It is a lexer, not a parser: comments and string literals are
// skipped, a logical line ends at a newline outside brackets and not after a backslash, and a
// statement starts a logical line or follows ";" or ":" outside brackets. Malformed source gives
// what it can. It streams the tokens (no token list is kept): work and memory are linear in
// len(src), and memory only in what it returns.
func scanImports(src []byte) (imps []importStmt, dynamic bool) {
	l := &lexer{src: string(src)}
	start := true      // the next token starts a statement
	var p1, p2 pyToken // the two tokens before
	for {
		t := l.next()
		switch {
		case t.kind == 0:
			return imps, l.dynamic
		case t.kind == 'n':
			afterDot := p1.kind == 'o' && p1.text == "."
			switch {
			case dynamicNames[t.text], bareDynamicNames[t.text] && !afterDot:
				l.dynamic = true
			case afterDot && sysPathNames[t.text] && p2.kind == 'n' && p2.text == "sys":
				l.dynamic = true
			}
		}
		if start && t.kind == 'n' && (t.text == "import" || t.text == "from") {
			// The names of the statement are checked too (`import importlib`), and a non-ASCII
			// name is not resolved to a file (Python matches its NFKC form): not known statically.
			l.inStmt = true
			if t.text == "import" {
				imps = append(imps, parseImport(l)...)
			} else {
				imps = append(imps, parseFrom(l)...)
			}
			l.inStmt = false
			start, p1, p2 = false, pyToken{}, pyToken{}
			continue
		}
		start = t.kind == '\n' || t.kind == 'o' && (t.text == ";" || t.text == ":")
		p2, p1 = p1, t
	}
}

// is reports whether t is the operator op.
func (t pyToken) is(op string) bool { return t.kind == 'o' && t.text == op }

// dotted reads a dotted name (a.b.c) from l, "" if none. Linear in the tokens read.
func dotted(l *lexer) string {
	var b strings.Builder
	for isName(l.peek(0)) && l.peek(0).text != "import" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(l.next().text)
		if l.peek(0).is(".") && isName(l.peek(1)) {
			l.next()
			continue
		}
		break
	}
	return b.String()
}

// parseImport reads what follows `import`: dotted names, each with an optional `as name`, comma
// separated, up to the end of the statement.
func parseImport(l *lexer) []importStmt {
	var out []importStmt
	for {
		name := dotted(l)
		if name == "" {
			return out
		}
		out = append(out, importStmt{Module: name})
		if t := l.peek(0); t.kind == 'n' && t.text == "as" && l.peek(1).kind == 'n' {
			l.next()
			l.next()
		}
		if !l.peek(0).is(",") {
			return out
		}
		l.next()
	}
}

// parseFrom reads what follows `from`: dots, a dotted name, `import`, then names (each with an
// optional `as name`, in parentheses or not) or "*". It returns the statement (none if malformed).
func parseFrom(l *lexer) []importStmt {
	var st importStmt
	for l.peek(0).is(".") {
		st.Level++
		l.next()
	}
	st.Module = dotted(l)
	if t := l.peek(0); st.Level == 0 && st.Module == "" || t.kind != 'n' || t.text != "import" {
		return nil
	}
	l.next()
	paren := l.peek(0).is("(")
	if paren {
		l.next()
	}
	for {
		switch t := l.peek(0); {
		case t.is("*"):
			st.Names = append(st.Names, "*")
			l.next()
		case isName(t):
			st.Names = append(st.Names, t.text)
			l.next()
			if u := l.peek(0); u.kind == 'n' && u.text == "as" && l.peek(1).kind == 'n' {
				l.next()
				l.next()
			}
		default:
			return []importStmt{st}
		}
		if l.peek(0).is(",") {
			l.next()
			continue
		}
		if paren && l.peek(0).is(")") {
			l.next()
		}
		return []importStmt{st}
	}
}

// lexer splits Python source into pyTokens, two of lookahead at most: names (identifier
// characters, bytes >= 0x80 and digits), strings (skipped whole, any prefix letters being a name
// token before them), operator characters one by one (the dot included), and '\n' at the end of
// each logical line. Comments, blank lines and whitespace give nothing. Linear in len(src).
type lexer struct {
	src   string
	i     int
	depth int  // open brackets
	nl    bool // the last token scanned ended a logical line
	buf   [2]pyToken
	nbuf  int
	// inStmt is set while an import statement is read; dynamic is set when one names a name of
	// dynamicNames or a non-ASCII name.
	inStmt, dynamic bool
}

// peek returns the token k (0 or 1) ahead without reading it.
func (l *lexer) peek(k int) pyToken {
	for l.nbuf <= k {
		l.buf[l.nbuf] = l.scan()
		l.nbuf++
	}
	return l.buf[k]
}

// next reads the next token.
func (l *lexer) next() pyToken {
	t := l.peek(0)
	l.buf[0], l.buf[1] = l.buf[1], pyToken{}
	l.nbuf--
	if l.inStmt && t.kind == 'n' && (dynamicNames[t.text] || !isASCII(t.text)) {
		l.dynamic = true
	}
	return t
}

// scan reads one token from src (kind 0 at its end).
func (l *lexer) scan() pyToken {
	src := l.src
	for l.i < len(src) {
		i := l.i
		c := src[i]
		switch {
		case c == '#':
			for l.i < len(src) && src[l.i] != '\n' {
				l.i++
			}
		case c == '\\' && i+1 < len(src) && (src[i+1] == '\n' || src[i+1] == '\r'):
			l.i += 2
			if src[i+1] == '\r' && l.i < len(src) && src[l.i] == '\n' {
				l.i++
			}
		case c == '\n' || c == '\r':
			l.i++
			if l.depth == 0 && !l.nl {
				l.nl = true
				return pyToken{kind: '\n'}
			}
		case c == ' ' || c == '\t' || c == '\f' || c == '\\':
			l.i++
		case c == '\'' || c == '"':
			l.i += stringEnd(src[i:])
			l.nl = false
			return pyToken{kind: 's'}
		case nameByte(c):
			j := i
			for j < len(src) && nameByte(src[j]) {
				j++
			}
			l.i, l.nl = j, false
			return pyToken{kind: 'n', text: src[i:j]}
		default:
			switch c {
			case '(', '[', '{':
				l.depth++
			case ')', ']', '}':
				if l.depth > 0 {
					l.depth--
				}
			}
			l.i, l.nl = i+1, false
			return pyToken{kind: 'o', text: src[i : i+1]}
		}
	}
	return pyToken{}
}

// nameByte reports whether c can be part of a name token.
func nameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// stringEnd returns the length of the string literal at the start of s (single, double or triple
// quoted, with backslash escapes); an unterminated literal runs to the end of s, or of the line
// for a single-quoted one. Linear in the length returned.
func stringEnd(s string) int {
	q := s[0]
	if len(s) >= 3 && s[1] == q && s[2] == q {
		for i := 3; i < len(s); i++ {
			switch {
			case s[i] == '\\':
				i++
			case s[i] == q && i+2 < len(s) && s[i+1] == q && s[i+2] == q:
				return i + 3
			}
		}
		return len(s)
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case q:
			return i + 1
		case '\n', '\r':
			return i
		}
	}
	return len(s)
}

// isName reports whether t is a name token that can name a module (not a number).
func isName(t pyToken) bool {
	return t.kind == 'n' && t.text != "" && !(t.text[0] >= '0' && t.text[0] <= '9')
}

// isASCII reports whether s is all ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
