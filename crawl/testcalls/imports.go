package testcalls

import (
	"strings"

	"github.com/ndtrace/ndtrace/internal/pylex"
)

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

// pyToken is one token of scanImports's lexer (the shared Python lexer's).
type pyToken = pylex.Token

// scanImports reads the import statements of Python source src, wherever they are (in function
// bodies, under if or try too), and reports whether src uses a name of dynamicNames (or
// bareDynamicNames bare, or sys.path and its kin), or imports a non-ASCII name: then its imports
// cannot be known statically. It is a lexer, not a parser: comments and string literals are
// skipped, a logical line ends at a newline outside brackets and not after a backslash, and a
// statement starts a logical line or follows ";" or ":" outside brackets. Malformed source gives
// what it can. It streams the tokens (no token list is kept): work and memory are linear in
// len(src), and memory only in what it returns.
func scanImports(src []byte) (imps []importStmt, dynamic bool) {
	l := &lexer{lx: pylex.NewLexer(string(src))}
	start := true      // the next token starts a statement
	var p1, p2 pyToken // the two tokens before
	for {
		t := l.next()
		switch {
		case t.Kind == pylex.End:
			return imps, l.dynamic
		case t.Kind == pylex.Name:
			afterDot := p1.Is(".")
			switch {
			case dynamicNames[t.Text], bareDynamicNames[t.Text] && !afterDot:
				l.dynamic = true
			case afterDot && sysPathNames[t.Text] && p2.IsName("sys"):
				l.dynamic = true
			}
		}
		if start && t.Kind == pylex.Name && (t.Text == "import" || t.Text == "from") {
			// The names of the statement are checked too (`import importlib`), and a non-ASCII
			// name is not resolved to a file (Python matches its NFKC form): not known statically.
			l.inStmt = true
			if t.Text == "import" {
				imps = append(imps, parseImport(l)...)
			} else {
				imps = append(imps, parseFrom(l)...)
			}
			l.inStmt = false
			start, p1, p2 = false, pyToken{}, pyToken{}
			continue
		}
		start = t.Kind == pylex.Newline || t.Is(";") || t.Is(":")
		p2, p1 = p1, t
	}
}

// dotted reads a dotted name (a.b.c) from l, "" if none. Linear in the tokens read.
func dotted(l *lexer) string {
	var b strings.Builder
	for isName(l.peek(0)) && l.peek(0).Text != "import" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(l.next().Text)
		if l.peek(0).Is(".") && isName(l.peek(1)) {
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
		if t := l.peek(0); t.Kind == pylex.Name && t.Text == "as" && l.peek(1).Kind == pylex.Name {
			l.next()
			l.next()
		}
		if !l.peek(0).Is(",") {
			return out
		}
		l.next()
	}
}

// parseFrom reads what follows `from`: dots, a dotted name, `import`, then names (each with an
// optional `as name`, in parentheses or not) or "*". It returns the statement (none if malformed).
func parseFrom(l *lexer) []importStmt {
	var st importStmt
	for l.peek(0).Is(".") {
		st.Level++
		l.next()
	}
	st.Module = dotted(l)
	if t := l.peek(0); st.Level == 0 && st.Module == "" || !t.IsName("import") {
		return nil
	}
	l.next()
	paren := l.peek(0).Is("(")
	if paren {
		l.next()
	}
	for {
		switch t := l.peek(0); {
		case t.Is("*"):
			st.Names = append(st.Names, "*")
			l.next()
		case isName(t):
			st.Names = append(st.Names, t.Text)
			l.next()
			if u := l.peek(0); u.Kind == pylex.Name && u.Text == "as" && l.peek(1).Kind == pylex.Name {
				l.next()
				l.next()
			}
		default:
			return []importStmt{st}
		}
		if l.peek(0).Is(",") {
			l.next()
			continue
		}
		if paren && l.peek(0).Is(")") {
			l.next()
		}
		return []importStmt{st}
	}
}

// lexer reads the tokens of pylex.Lexer with two of lookahead at most, and notes in dynamic a
// name of dynamicNames or a non-ASCII name read while inStmt (an import statement) is set.
type lexer struct {
	lx   *pylex.Lexer
	buf  [2]pyToken
	nbuf int
	// inStmt is set while an import statement is read; dynamic is set when one names a name of
	// dynamicNames or a non-ASCII name.
	inStmt, dynamic bool
}

// peek returns the token k (0 or 1) ahead without reading it.
func (l *lexer) peek(k int) pyToken {
	for l.nbuf <= k {
		l.buf[l.nbuf] = l.lx.Next()
		l.nbuf++
	}
	return l.buf[k]
}

// next reads the next token.
func (l *lexer) next() pyToken {
	t := l.peek(0)
	l.buf[0], l.buf[1] = l.buf[1], pyToken{}
	l.nbuf--
	if l.inStmt && t.Kind == pylex.Name && (dynamicNames[t.Text] || !isASCII(t.Text)) {
		l.dynamic = true
	}
	return t
}

// isName reports whether t is a name token (one that can name a module).
func isName(t pyToken) bool { return t.Kind == pylex.Name }

// isASCII reports whether s is all ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
